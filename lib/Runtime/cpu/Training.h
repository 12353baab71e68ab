//===- Training.h - Helpers shared by the training kernels -------*- C++ -*-===//
//
// Deterministic parallel sums (a fixed partition of the index range, so a
// scalar result does not depend on the context's thread count) and small
// argument checks the backward, loss, optimizer and K-FAC entry points
// share.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_TRAINING_H
#define PF_RUNTIME_CPU_TRAINING_H

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Parallel.h"

#include <cstdint>

namespace pfrt::cpu {

/// Number of pieces a scalar reduction is cut into, whatever the thread
/// count; the partial sums are then added in piece order.
constexpr int kSumPieces = 64;

/// Sum over [0, n) of partial(begin, end) (each a double), computed over a
/// fixed partition in parallel and combined in order.
template <class Partial>
double deterministicSum(const pfrt_context *ctx, int64_t n, Partial &&partial) {
  if (n <= 0)
    return 0.0;
  const int64_t pieces = n < kSumPieces ? n : kSumPieces;
  const int64_t size = (n + pieces - 1) / pieces;
  double parts[kSumPieces] = {};
  parallelFor(ctx, pieces, size, [&](int64_t p) {
    const int64_t begin = p * size;
    const int64_t end = begin + size < n ? begin + size : n;
    parts[p] = begin < end ? partial(begin, end) : 0.0;
  });
  double total = 0;
  for (int64_t p = 0; p < pieces; ++p)
    total += parts[p];
  return total;
}

/// Sum of squares of a float array, in double.
template <class T>
double sumOfSquares(const pfrt_context *ctx, const T *x, int64_t n) {
  return deterministicSum(ctx, n, [&](int64_t begin, int64_t end) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = begin; i < end; ++i)
      s += double(x[i]) * double(x[i]);
    return s;
  });
}

/// A floating-point tensor (f32/f64) of `dtype` with exactly `shape`.
inline pfrt_status floatLike(const Call &call, const char *name,
                             const pfrt_tensor *t, int32_t dtype,
                             const Shape &shape) {
  PFRT_TRY(call.tensor(name, t));
  PFRT_TRY(call.dtypeIs(name, t, dtype));
  return call.shapeIs(name, t, shape);
}

/// Stores v into *dst, or adds it when accumulating.
template <class T> inline void put(T *dst, bool accumulate, T v) {
  *dst = accumulate ? *dst + v : v;
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_TRAINING_H
