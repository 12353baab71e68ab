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
#include "../common/TensorChecks.h"
#include "Parallel.h"

#include <cstdint>

namespace pfrt::cpu {

/// Interleaved partial sums of laneSum: wide enough to fill a vector of
/// doubles, and fixed, so the summation order never depends on how the
/// compiler vectorizes a particular copy of the loop (an `omp simd
/// reduction` may differ between a kernel's serial and OpenMP-outlined
/// copies, and so between thread counts).
constexpr int kLanes = 8;

inline double combineLanes(const double (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// sum of term(i) over [begin, end) in a fixed order: kLanes strided
/// partial sums, combined pairwise, then the tail.
template <class Term> double laneSum(int64_t begin, int64_t end, Term &&term) {
  double acc[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      acc[j] += term(i + j);
  double tail = 0;
  for (; i < end; ++i)
    tail += term(i);
  return combineLanes(acc) + tail;
}

/// Two sums at once: term(i, s0, s1) adds its contributions to s0 and s1.
template <class Term>
void laneSum2(int64_t begin, int64_t end, Term &&term, double &sum0,
              double &sum1) {
  double a[kLanes] = {}, b[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      term(i + j, a[j], b[j]);
  double ta = 0, tb = 0;
  for (; i < end; ++i)
    term(i, ta, tb);
  sum0 = combineLanes(a) + ta;
  sum1 = combineLanes(b) + tb;
}

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
    return laneSum(begin, end, [&](int64_t i) {
      return double(x[i]) * double(x[i]);
    });
  });
}

/// Stores v into *dst, or adds it when accumulating.
template <class T> inline void put(T *dst, bool accumulate, T v) {
  *dst = accumulate ? *dst + v : v;
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_TRAINING_H
