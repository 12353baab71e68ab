//===- DampingAdaptation.h - Levenberg-Marquardt K-FAC damping --*- C++ -*-===//
//
// Adaptive (Levenberg-Marquardt) damping for K-FAC, as in Martens & Grosse
// (2015, section 6.5) and kfac-jax: every T steps the host compares the loss
// change that the K-FAC layers' update made on the step's own batch with the
// change that K-FAC's quadratic model of the loss predicts,
//
//   M(Δ) = gᵀΔ + ½ Σ_l Δ_lᵀ F_l Δ_l + ½ λ ‖Δ‖²,   ρ = (L(θ + Δ) − L(θ)) / M(Δ),
//
// with Δ the parameter change the step made on the K-FAC layers (whatever
// optimizer, grafting and KL-clipping made it), g their gradient before
// clipping and preconditioning (pf-kfac-precondition raw-gradients), and
// F_l = A_l ⊗ B_l the layer's Kronecker factors after the step
// (Δ_lᵀ F_l Δ_l = tr(Δ_lᵀ B_l Δ_l A_l)); a LayerNorm layer's F_l is its
// per-feature 2x2 blocks, an embedding table's diag(A_l) ⊗ B_l. λ then grows by 1/ω when ρ < 1/4
// and shrinks by ω when ρ > 3/4, with ω = decay^T, clamped to [min, max].
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_DAMPINGADAPTATION_H
#define PF_TRAIN_DAMPINGADAPTATION_H

#include "pf/Support/Status.h"
#include "pf/Train/RunConfig.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mlir::pf::train {

/// One K-FAC layer of a training step, as the quadratic model reads it.
struct KfacModelLayer {
  enum class Kind { Linear, LayerNorm };
  Kind kind = Kind::Linear;
  /// Linear: the weight and (maybe empty) bias; LayerNorm: the scale and shift.
  std::string weight, bias;
  /// Linear: `<w>.kfac.A` and `.B`; LayerNorm: `<γ>.kfac.F` in `factorA`.
  std::string factorA, factorB;
  /// The weight is [in, out] (PyTorch's exporter) rather than [out, in].
  bool weightInOut = false;
};

/// An f32 tensor: its values and shape (data null when there is none).
struct FloatTensor {
  const float *data = nullptr;
  std::vector<int64_t> shape;
};
using FloatTensorLookup = std::function<FloatTensor(const std::string &name)>;

/// The three terms of M(Δ), summed over the layers.
struct QuadraticModel {
  double gradient = 0;    ///< gᵀΔ
  double curvature = 0;   ///< Σ_l Δ_lᵀ F_l Δ_l
  double squaredNorm = 0; ///< ‖Δ‖²

  /// M(Δ) at damping λ.
  double change(double damping) const {
    return gradient + 0.5 * (curvature + damping * squaredNorm);
  }
};

/// M(Δ)'s terms from each layer's parameters before and after the step
/// (`before`, `after`), its raw gradients by parameter name (`gradients`)
/// and its factors after the step (`state`); an error names a tensor that
/// is missing or whose shape does not fit its layer.
::pf::Expected<QuadraticModel> evaluateQuadraticModel(const std::vector<KfacModelLayer> &layers,
                                                      const FloatTensorLookup &before,
                                                      const FloatTensorLookup &after,
                                                      const FloatTensorLookup &gradients,
                                                      const FloatTensorLookup &state);

} // namespace mlir::pf::train

#endif // PF_TRAIN_DAMPINGADAPTATION_H
