//===- Passes.h - pf graph passes -------------------------------*- C++ -*-===//
#ifndef PF_TRANSFORMS_PASSES_H
#define PF_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Passes.h.inc"

/// Options of the graph-optimization pipeline (`pf-graph-opt`).
struct GraphOptOptions {
  bool fuse = true;
  bool untie = true;
  bool requireStatic = false;
};

/// Shape inference, canonicalization, untying and the fusions, then DCE: what
/// the importer runs by default.
void buildGraphOptPipeline(OpPassManager &pm, const GraphOptOptions &options = {});

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
/// preconditioning and the optimizer: a forward graph becomes one training step (pf-train,
/// pf-run --training-step).
void buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// Registers `pf-graph-opt`, `pf-training` and `pf-pipeline` with the pass
/// registry.
void registerPFPipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_PASSES_H
