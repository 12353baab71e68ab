//===- Pipelines.cpp - the pf-training pipeline --------------------------------===//
#include "pf/Transforms/Training/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

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
  if (options.kfac)
    pm.addPass(createPFKFACPrecondition(options.precondition));
  pm.addPass(createPFAddOptimizer(options.optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

namespace {
struct TrainingPipelineOptions : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("Micro-batches per step"), llvm::cl::init(1)};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd, adamw or lamb"),
                                llvm::cl::init("adamw")};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("Weight decay"),
                             llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.9)};
  Option<double> clipNorm{*this, "clip-norm",
                          llvm::cl::desc("Clip gradients to this global L2 norm (0: off)"),
                          llvm::cl::init(0)};
  Option<bool> keepGradients{*this, "keep-gradients",
                             llvm::cl::desc("Keep the grad/ results"), llvm::cl::init(false)};
  Option<bool> kfac{*this, "kfac", llvm::cl::desc("K-FAC-precondition the encoder linears"),
                    llvm::cl::init(false)};
  Option<double> kfacDamping{*this, "kfac-damping", llvm::cl::desc("K-FAC damping λ"),
                             llvm::cl::init(1e-3)};
  Option<double> kfacDecay{*this, "kfac-decay",
                           llvm::cl::desc("Running-average decay of the factors"),
                           llvm::cl::init(0.95)};
  Option<int64_t> kfacRefresh{*this, "kfac-refresh",
                              llvm::cl::desc("Steps between inverse refreshes"),
                              llvm::cl::init(1)};
  Option<int64_t> kfacRefreshWarmup{
      *this, "kfac-refresh-warmup",
      llvm::cl::desc("Refresh the inverses at every one of the first N steps"),
      llvm::cl::init(0)};
  Option<double> kfacKLClip{*this, "kfac-kl-clip",
                            llvm::cl::desc("KL-clipping threshold (0: off)"), llvm::cl::init(0)};
  Option<std::string> kfacOptimizer{*this, "kfac-optimizer",
                                    llvm::cl::desc("Optimizer of the K-FAC layers"),
                                    llvm::cl::init("")};
  Option<double> kfacLRScale{*this, "kfac-lr-scale",
                             llvm::cl::desc("Learning rate of the K-FAC layers relative to lr"),
                             llvm::cl::init(1)};
  Option<bool> exportFactors{*this, "export-factors",
                             llvm::cl::desc("Return the factors and inverses as results"),
                             llvm::cl::init(false)};

  TrainingOptions get() const {
    TrainingOptions options;
    options.microbatches = microbatches;
    options.kfac = kfac;
    options.optimizer.optimizer = optimizer;
    options.optimizer.weightDecay = weightDecay;
    options.optimizer.momentum = momentum;
    options.clipNorm = clipNorm;
    options.optimizer.keepGradients = keepGradients;
    options.optimizer.kfacOptimizer = kfacOptimizer;
    options.optimizer.kfacLRScale = kfacLRScale;
    options.insertKFAC.decay = kfacDecay;
    options.precondition.damping = kfacDamping;
    options.precondition.refreshEvery = kfacRefresh;
    options.precondition.refreshWarmup = kfacRefreshWarmup;
    options.precondition.klClip = kfacKLClip;
    options.precondition.exportFactors = exportFactors;
    return options;
  }
};

} // namespace

void mlir::pf::registerTrainingPipelines() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "pf-training",
      "Forward graph to one masked-LM training step: loss, micro-batches, K-FAC "
      "factors, gradients, preconditioning, optimizer, e.g. "
      "--pf-training=\"kfac=true microbatches=4 optimizer=adamw\"",
      [](OpPassManager &pm, const TrainingPipelineOptions &opts) {
        buildTrainingPipeline(pm, opts.get());
      });
}
