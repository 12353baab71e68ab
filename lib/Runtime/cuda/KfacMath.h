//===- KfacMath.h - K-FAC scalar formulas of the CUDA backend -----*- C++ -*-===//
//
// The pieces of cpu/Kfac.cpp's arithmetic that are not a cuBLAS/cuSOLVER
// call: the factor's ones-column entries, the pi damping balance and the
// damped diagonal, for host and device (HostDevice.h).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_KFACMATH_H
#define PF_RUNTIME_CUDA_KFACMATH_H

#include "HostDevice.h"

namespace pfrt::cuda {

/// A factor entry after combining: beta * old + alpha * value, where a zero
/// beta ignores old (it may be uninitialized memory, even NaN).
PFRT_HD double combineFactor(double beta, double old, double alpha,
                             double value) {
  return (beta == 0 ? 0.0 : beta * old) + alpha * value;
}

/// pi = sqrt((tr a / dim a) / (tr b / dim b)), 1 when a trace is not
/// positive or a dimension is 0. The caller rejects non-finite traces.
PFRT_HD double kfacPi(double traceA, int64_t dimA, double traceB,
                      int64_t dimB) {
  if (!(traceA > 0) || !(traceB > 0) || dimA == 0 || dimB == 0)
    return 1.0;
  return ::sqrt((traceA / double(dimA)) / (traceB / double(dimB)));
}

/// The diagonal entry of factor + damping I.
PFRT_HD double dampedDiagonal(double diagonal, double damping) {
  return diagonal + damping;
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_KFACMATH_H
