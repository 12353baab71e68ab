//===- RowMath.h - Per-row arithmetic of the CUDA row kernels -----*- C++ -*-===//
//
// Softmax, LayerNorm and masked-LM cross-entropy work on "rows": the
// elements along one axis (or one normalized block). A kernel reduces a
// row's statistics in parallel (in double, as the CPU backend does) and then
// applies the per-element formulas below; the host tests run the same
// formulas serially against the CPU backend.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_ROWMATH_H
#define PF_RUNTIME_CUDA_ROWMATH_H

#include "HostDevice.h"

namespace pfrt::cuda {

/// Rows along an axis of extent n with `inner` elements after it: row r
/// holds elements base(r) + j * inner, j in [0, n).
struct RowLayout {
  int64_t n = 1;
  int64_t inner = 1;
};

PFRT_HD int64_t rowBase(const RowLayout &l, int64_t row) {
  return (row / l.inner) * l.n * l.inner + row % l.inner;
}

PFRT_HD int64_t rowElement(const RowLayout &l, int64_t row, int64_t j) {
  return rowBase(l, row) + j * l.inner;
}

/// max(a, b) where a NaN wins (so a NaN row gives a NaN softmax).
PFRT_HD double maxNan(double a, double b) {
  return a != a ? a : b != b ? b : (b > a ? b : a);
}

/// softmax element from the row's max and sum of exp(x - max).
PFRT_HD double softmaxElement(double x, double rowMax, double sumExp) {
  return ::exp(x - rowMax) / sumExp;
}

/// grad_in element of softmax: y (dy - sum(dy * y)).
PFRT_HD double softmaxGradElement(double y, double dy, double dotYdy) {
  return y * (dy - dotYdy);
}

/// LayerNorm statistics from a block's sum and sum of squares (biased
/// variance, clamped at 0 against cancellation).
struct NormStats {
  double mean;
  double invStd;
};

PFRT_HD NormStats normStats(double sum, double sumSquares, int64_t n,
                            double epsilon) {
  const double mean = sum / double(n);
  double var = sumSquares / double(n) - mean * mean;
  var = var > 0 ? var : 0;
  return {mean, 1.0 / ::sqrt(var + epsilon)};
}

PFRT_HD double layerNormElement(double x, NormStats s, double scale,
                                double bias) {
  return (x - s.mean) * s.invStd * scale + bias;
}

/// grad_x of LayerNorm: invStd (g - mean(g) - xhat mean(g xhat)), with
/// g = dy * scale and the two block means given.
PFRT_HD double layerNormGradElement(double xhat, double g, double meanG,
                                    double meanGXhat, double invStd) {
  return invStd * (g - meanG - xhat * meanGXhat);
}

/// Cross-entropy of one counted row: lse - logit[label], with lse from the
/// row max and sum of exp(x - max).
PFRT_HD double crossEntropyRowLoss(double rowMax, double sumExp,
                                   double labelLogit) {
  return rowMax + ::log(sumExp) - labelLogit;
}

/// d loss / d logit[j] of a counted row: scale (softmax_j - [j == label]).
PFRT_HD double crossEntropyGradElement(double x, double rowMax, double sumExp,
                                       bool isLabel, double scale) {
  return scale * (softmaxElement(x, rowMax, sumExp) - (isLabel ? 1.0 : 0.0));
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_ROWMATH_H
