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

/// CumSum of line `line` of x viewed as [outer, len, inner] along len,
/// accumulated in Acc (double for floats, as the CPU backend sums); out may
/// be x (each element is read before it is written).
template <class T, class Acc>
PFRT_HD void cumsumLine(int64_t line, int64_t len, int64_t inner, bool exclusive, bool reverse,
                        const T *x, T *out) {
  const int64_t base = (line / inner) * len * inner + line % inner;
  Acc acc = 0;
  for (int64_t s = 0; s < len; ++s) {
    const int64_t at = base + (reverse ? len - 1 - s : s) * inner;
    const Acc v = x[at];
    out[at] = static_cast<T>(exclusive ? acc : acc + v);
    acc += v;
  }
}

/// Trilu: whether element (i, j) of a matrix stays (upper: j - i >= k;
/// lower: j - i <= k).
PFRT_HD bool triluKeeps(int64_t i, int64_t j, int64_t k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_INDEXINGMATH_H
