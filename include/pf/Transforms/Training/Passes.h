//===- Passes.h - pf training passes ----------------------------*- C++ -*-===//
//
// From a forward graph to one training step: masked-LM loss, K-FAC factors,
// reverse-mode gradients, micro-batches, clipping, K-FAC preconditioning and
// the optimizer, and the `pf-training` pipeline that chains them.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_TRAINING_PASSES_H
#define PF_TRANSFORMS_TRAINING_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Training/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Training/Passes.h.inc"

/// Options of the training-step pipeline (`pf-training`): the passes'
/// own option structs, plus which optional passes run.
struct TrainingOptions {
  /// Micro-batches per step (pf-split-microbatches; 1: none).
  int64_t microbatches = 1;
  /// Clip the gradients to this global L2 norm before preconditioning (0:
  /// off).
  double clipNorm = 0;
  /// Precondition the encoder blocks' linears with K-FAC.
  bool kfac = false;
  PFAddMaskedLMLossOptions loss;
  PFInsertKFACOptions insertKFAC;
  PFKFACPreconditionOptions precondition;
  PFAddOptimizerOptions optimizer;
};

/// Masked-LM loss, K-FAC factors, gradients, micro-batches, clipping,
/// preconditioning and the optimizer: a forward graph becomes one training
/// step (pf-train, pf-run --training-step).
void buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// Registers `pf-training`.
void registerTrainingPipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_TRAINING_PASSES_H
