//===- Passes.h - pf training passes ----------------------------*- C++ -*-===//
//
// From a forward graph to one training step: masked-LM loss, K-FAC factors,
// reverse-mode gradients, micro-batches, clipping, K-FAC preconditioning and
// the optimizer, and the `pf-training` pipeline that chains them.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_TRAINING_PASSES_H
#define PF_TRANSFORMS_TRAINING_PASSES_H

#include "pf/Transforms/OptionEnums.h"

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Training/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Training/Passes.h.inc"

/// The options of the training step, the one source for every surface:
/// `pf-opt --pf-training="..."`, `pf-run --training-step`, `pf-train` and
/// buildTrainingPipeline. The passes' own option structs hold most of them,
/// so their defaults are the passes' (Passes.td); bindOptions names them for
/// the surfaces (docs/design.md, "Where options come from").
struct TrainingOptions {
  /// Micro-batches per step (pf-split-microbatches; 1: none).
  int64_t microbatches = 1;
  /// Clip the gradients to this global L2 norm before preconditioning (0:
  /// off). 1, as BERT and the convergence benchmark train.
  double clipNorm = 1.0;
  /// Precondition the encoder blocks' linears with K-FAC.
  bool kfac = false;
  /// K-FAC with the arithmetic of the pipeline's bubbles (0: off): after the
  /// refresh warm-up, curvature every K steps and inverses one window late.
  int64_t kfacWindow = 0;
  /// K-FAC factor updates every F steps after the refresh warm-up (1: every
  /// step); the host feeds the step's `kfac_curvature` input.
  int64_t kfacFactorEvery = 1;
  PFAddMaskedLMLossOptions loss;
  PFInsertKFACOptions insertKFAC;
  PFKFACPreconditionOptions precondition;
  PFAddOptimizerOptions optimizer;

  /// Declares every option with its name and help to `binder` (see
  /// pf/Transforms/OptionBinder.h); the current values are the defaults.
  template <typename Binder>
  void bindOptions(Binder &binder) {
    binder.opt("micro-batches", microbatches,
               "Split each step's batch into this many micro-batches; gradients and K-FAC "
               "factors accumulate over them");
    binder.opt("optimizer", optimizer.optimizer, "Update rule", optimizerValues());
    binder.opt("weight-decay", optimizer.weightDecay,
               "Weight decay (not on biases and LayerNorm parameters)");
    binder.opt("momentum", optimizer.momentum, "SGD momentum");
    binder.opt("clip-norm", clipNorm,
               "Clip the gradients to this global L2 norm before preconditioning (0: off)");
    binder.opt("keep-gradients", optimizer.keepGradients,
               "Keep the grad/<parameter> results");
    binder.opt("kfac", kfac, "K-FAC-precondition the encoder blocks' linear layers");
    binder.opt("kfac-damping", precondition.damping, "K-FAC damping λ");
    binder.opt("kfac-decay", insertKFAC.decay, "Running-average decay of the K-FAC factors");
    binder.opt("kfac-refresh", precondition.refreshEvery,
               "Steps between K-FAC inverse refreshes");
    binder.opt("kfac-refresh-warmup", precondition.refreshWarmup,
               "Refresh the inverses at every one of the first N steps (early curvature "
               "changes fastest)");
    binder.opt("kfac-kl-clip", precondition.klClip, "K-FAC KL-clipping threshold κ (0: off)");
    binder.opt("kfac-graft", precondition.graft,
               "Length of each K-FAC layer's update before the optimizer: the layer "
               "gradient's L2 norm (gradient) or the preconditioned gradient's own (none); "
               "auto: gradient unless the K-FAC layers' optimizer is SGD",
               kfacGraftValues());
    binder.opt("kfac-basis", precondition.basis,
               "How K-FAC inverts each layer's Fisher block: inverse (π-damped inverses of "
               "the factors) or eigen (the factors' eigenbases, damping on the Kronecker "
               "product's eigenvalues)",
               kfacBasisValues());
    binder.opt("kfac-layers", insertKFAC.layers,
               "Which layers K-FAC preconditions: encoder (the encoder blocks' linears) or "
               "encoder-and-head (also the masked-LM head's transform, "
               "cls.predictions.transform.dense; never the tied decoder); single-process "
               "only",
               kfacLayersValues());
    binder.opt("kfac-layer-norm", insertKFAC.layerNorm,
               "K-FAC for the LayerNorms' scale and shift: none, blocks (each feature's 2x2 "
               "Fisher of (scale, shift), solved with the damping) or diagonal (the blocks' "
               "diagonal); single-process only",
               kfacLayerNormValues());
    binder.opt("kfac-embeddings", insertKFAC.embeddings,
               "K-FAC for the embedding tables: none, word (the word embedding; a tied "
               "decoder's share of its gradient is preconditioned with the embedding's "
               "factors) or word-and-position (also the position embedding); factor A is "
               "diagonal (token counts); single-process only",
               kfacEmbeddingsValues());
    binder.opt("kfac-optimizer", optimizer.kfacOptimizer,
               "Update rule of the K-FAC layers' parameters", kfacOptimizerValues());
    binder.opt("kfac-window", kfacWindow,
               "K-FAC as in a pipeline's bubbles (0: off): after --kfac-refresh-warmup steps, "
               "factors every K steps and each window's inverses used in the next window "
               "(docs/pipeline-execution.md, \"K-FAC in the bubbles\")");
    binder.opt("kfac-factor-every", kfacFactorEvery,
               "Update the K-FAC factors every F steps after the refresh warm-up (every step "
               "during it); the step then takes a kfac_curvature input (1: every step)");
    binder.opt("kfac-lr-scale", optimizer.kfacLRScale,
               "Learning rate of the K-FAC layers relative to lr");
    binder.opt("predictions", loss.predictions,
               "Apply the masked-LM decoder only at P positions per sequence, as NVIDIA's "
               "BERT pre-training does (inputs mlm_positions and labels [batch, P]; pf-train "
               "gathers each batch's masked tokens and masks at most P per sequence); 0: every "
               "position");
    binder.opt("export-factors", precondition.exportFactors,
               "Return each K-FAC layer's factors and inverses as results");
  }
};

/// pf-kfac-precondition's options as `options` sets them, with graft=auto
/// resolved from the K-FAC layers' optimizer (none for SGD, else gradient).
PFKFACPreconditionOptions preconditionOptions(const TrainingOptions &options);

/// Masked-LM loss, K-FAC factors, gradients, micro-batches, clipping,
/// preconditioning and the optimizer: a forward graph becomes one training
/// step (pf-train, pf-run --training-step).
void buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// Registers `pf-training`.
void registerTrainingPipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_TRAINING_PASSES_H
