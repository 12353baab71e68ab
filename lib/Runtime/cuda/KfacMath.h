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
#include "pf/Runtime/pfrt.h"

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

/// The LayerNorm factor's per-feature sums over tokens t of the per-token
/// gradients g_γ = dy·x̂, g_β = dy: (Σ g_γ², Σ g_γ g_β, Σ g_β²).
struct LayerNormFisherSums {
  double scaleScale = 0, scaleBias = 0, biasBias = 0;
};

/// x̂ of one element from its row's mean and 1/sqrt(var + epsilon).
PFRT_HD double layerNormHat(double x, double mean, double rstd) { return (x - mean) * rstd; }

/// Adds one token's terms of a feature (its dy and x̂) to the sums.
PFRT_HD void addLayerNormFisher(LayerNormFisherSums &sums, double dy, double hat) {
  const double g = dy * hat;
  sums.scaleScale += g * g;
  sums.scaleBias += g * dy;
  sums.biasBias += dy * dy;
}

/// Column `c` of a feature's row of the [h, columns] factor before
/// combining: (γγ, γβ, ββ) with 3 columns, (γγ, ββ) with 2.
PFRT_HD double layerNormFactorColumn(const LayerNormFisherSums &sums, int64_t columns, int64_t c) {
  if (c == 0)
    return sums.scaleScale;
  if (columns == 3 && c == 1)
    return sums.scaleBias;
  return sums.biasBias;
}

/// Solves (F_j + damping·I) u = g for one feature's 2x2 block F_j = [[ss,
/// sb], [sb, bb]] (sb ignored when `diagonal`). A block whose determinant
/// (or diagonal entry) is not positive, possible only without damping,
/// leaves its gradient as it is.
PFRT_HD void solveLayerNormBlock(double ss, double sb, double bb, double damping, bool diagonal,
                                 double gradScale, double gradBias, double &outScale,
                                 double &outBias) {
  const double a = ss + damping, c = bb + damping;
  if (diagonal) {
    outScale = a > 0 ? gradScale / a : gradScale;
    outBias = c > 0 ? gradBias / c : gradBias;
    return;
  }
  const double det = a * c - sb * sb;
  if (!(det > 0)) {
    outScale = gradScale;
    outBias = gradBias;
    return;
  }
  outScale = (c * gradScale - sb * gradBias) / det;
  outBias = (a * gradBias - sb * gradScale) / det;
}

/// The row an embedding id picks in a table of `vocab` rows (an id in
/// [-vocab, 0) counts from the end), or -1 outside [-vocab, vocab): the CPU
/// backend's pfrt::embeddingRow, for the device.
PFRT_HD int64_t embeddingIdRow(int64_t id, int64_t vocab) {
  const int64_t row = id < 0 ? id + vocab : id;
  return row >= 0 && row < vocab ? row : -1;
}

/// The damping of an embedding's diagonal factor A after raising it tenfold
/// (from 1e-6 when 0) until `smallest` + damping > 0, at most `retries`
/// times; `outcome` says which PFRT_KFAC_* refresh outcome that was (kept:
/// the inverse is not written).
PFRT_HD double embeddingDiagonalDamping(double smallest, double damping, int32_t retries,
                                        int32_t &outcome) {
  for (int32_t attempt = 0; attempt <= retries; ++attempt) {
    if (smallest + damping > 0) {
      outcome = attempt == 0 ? PFRT_KFAC_INVERTED : PFRT_KFAC_MORE_DAMPING;
      return damping;
    }
    damping = damping > 0 ? damping * 10 : 1e-6;
  }
  outcome = PFRT_KFAC_KEPT_PREVIOUS;
  return damping;
}

/// An entry of the embedding's A⁻¹: 1 / (a + damping).
PFRT_HD double embeddingInverseEntry(double a, double damping) { return 1.0 / (a + damping); }

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_KFACMATH_H
