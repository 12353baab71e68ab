//===- IndexingMath.h - Per-element rules of scatter_nd and trilu -*- C++ -*-===//
//
// Shared by the CPU backend (cpu/Indexing.cpp) and the CUDA kernels
// (cuda/Indexing.cu); unittests/Runtime/CudaMathTest.cpp runs them on the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_INDEXINGMATH_H
#define PF_RUNTIME_CUDA_INDEXINGMATH_H

#include "HostDevice.h"
#include "pf/Runtime/pfrt.h"

namespace pfrt::cuda {

/// ScatterND's reduction of an element `a` of out with update `b`; MAX and
/// MIN take a NaN update (and keep a NaN element).
template <class T>
PFRT_HD T scatterCombine(int32_t reduction, T a, T b) {
  switch (reduction) {
  case PFRT_SCATTER_ADD:
    return a + b;
  case PFRT_SCATTER_MUL:
    return a * b;
  case PFRT_SCATTER_MAX:
    return (b > a || b != b) ? b : a;
  default: // PFRT_SCATTER_MIN
    return (b < a || b != b) ? b : a;
  }
}

/// Trilu: whether element (i, j) of a matrix stays (upper: j - i >= k;
/// lower: j - i <= k).
PFRT_HD bool triluKeeps(int64_t i, int64_t j, int64_t k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_INDEXINGMATH_H
