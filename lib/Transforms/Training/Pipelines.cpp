//===- Pipelines.cpp - the pf-training pipeline --------------------------------===//
#include "pf/Transforms/Training/Passes.h"
#include "pf/Transforms/OptionBinder.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

PFKFACPreconditionOptions mlir::pf::preconditionOptions(const TrainingOptions &options) {
  PFKFACPreconditionOptions precondition = options.precondition;
  if (precondition.graft != KfacGraft::Auto)
    return precondition;
  const PFAddOptimizerOptions &optimizer = options.optimizer;
  bool sgd = optimizer.kfacOptimizer == KfacOptimizer::SGD ||
             (optimizer.kfacOptimizer == KfacOptimizer::Same &&
              optimizer.optimizer == Optimizer::SGD);
  // SGD's step is the update's length times lr, which KL-clipping bounds;
  // AdamW and LAMB renormalise it, so they get the gradient's length.
  precondition.graft = sgd ? KfacGraft::None : KfacGraft::Gradient;
  return precondition;
}

void mlir::pf::buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options) {
  pm.addPass(createPFAddMaskedLMLoss(options.loss));
  if (options.kfac)
    pm.addPass(createPFInsertKFAC(options.insertKFAC));
  pm.addPass(createPFBuildGradients());
  // After the gradients: each micro-batch's forward and backward run back to
  // back, so only one micro-batch's activations are live at a time.
  if (options.microbatches != 1)
    pm.addPass(createPFSplitMicrobatches(PFSplitMicrobatchesOptions{options.microbatches}));
  // Clip the true gradients; preconditioned ones live on another scale.
  if (options.clipNorm > 0)
    pm.addPass(createPFClipGradients(PFClipGradientsOptions{options.clipNorm}));
  if (options.kfac) {
    PFKFACPreconditionOptions precondition = preconditionOptions(options);
    precondition.bubbles = options.kfacWindow > 0;
    precondition.curvatureInput |= options.kfacFactorEvery != 1;
    pm.addPass(createPFKFACPrecondition(precondition));
  }
  pm.addPass(createPFAddOptimizer(options.optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::pf::registerTrainingPipelines() {
  PassPipelineRegistration<BoundPipelineOptions<TrainingOptions>>(
      "pf-training",
      "Forward graph to one masked-LM training step: loss, micro-batches, K-FAC "
      "factors, gradients, preconditioning, optimizer, e.g. "
      "--pf-training=\"kfac=true micro-batches=4 optimizer=adamw\" (the options of "
      "pf-train and pf-run --training-step)",
      [](OpPassManager &pm, const BoundPipelineOptions<TrainingOptions> &opts) {
        buildTrainingPipeline(pm, opts.get());
      });
}
