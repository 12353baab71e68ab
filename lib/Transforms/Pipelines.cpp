//===- Pipelines.cpp - registered pass pipelines --------------------------===//
#include "pf/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

void mlir::pf::buildGraphOptPipeline(OpPassManager &pm, const GraphOptOptions &options) {
  // Untie first: shape folding would fold the Identity ops that carry the
  // de-duplicated names away.
  if (options.untie)
    pm.addPass(createPFUntieInitializers());
  pm.addPass(createPFInferShapes(PFInferShapesOptions{options.requireStatic}));
  pm.addPass(createCanonicalizerPass());
  if (options.fuse) {
    pm.addPass(createPFFuseLayerNorm());
    pm.addPass(createPFFuseGelu());
    pm.addPass(createPFFuseLinear());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createPFDeadCodeElimination());
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

struct GraphOptPipelineOptions : public PassPipelineOptions<GraphOptPipelineOptions> {
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run the fusion passes"),
                    llvm::cl::init(true)};
  Option<bool> untie{*this, "untie", llvm::cl::desc("Untie de-duplicated initializers"),
                     llvm::cl::init(true)};
  Option<bool> requireStatic{*this, "require-static",
                             llvm::cl::desc("Fail when shapes stay dynamic"),
                             llvm::cl::init(false)};
};
struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<int64_t> stages{*this, "stages", llvm::cl::desc("Pipeline stages"), llvm::cl::init(2)};
  Option<int64_t> microbatches{*this, "microbatches", llvm::cl::desc("Micro-batches per step"),
                               llvm::cl::init(4)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("gpipe, 1f1b, interleaved, chimera, zb-h1"),
                               llvm::cl::init("1f1b")};
  Option<int64_t> chunks{*this, "chunks", llvm::cl::desc("Interleaved: chunks per device"),
                         llvm::cl::init(2)};
  Option<std::string> kfac{*this, "kfac", llvm::cl::desc("'bubbles' or 'none'"),
                           llvm::cl::init("bubbles")};
  Option<std::string> policy{*this, "policy", llvm::cl::desc("pf or pipefisher"),
                             llvm::cl::init("pf")};
  Option<int64_t> refreshSteps{*this, "refresh-steps",
                               llvm::cl::desc("Steps per K-FAC refresh (0: automatic)"),
                               llvm::cl::init(0)};
  Option<std::string> cost{*this, "cost", llvm::cl::desc("'analytic' or a profile JSON path"),
                           llvm::cl::init("analytic")};
  Option<std::string> device{*this, "device", llvm::cl::desc("Analytic cost model device"),
                             llvm::cl::init("a100")};
  Option<double> memoryCapMB{*this, "memory-cap-mb",
                             llvm::cl::desc("Per-stage memory cap in MB (0: none)"),
                             llvm::cl::init(0)};
  Option<std::string> report{*this, "report", llvm::cl::desc("Report JSON file"),
                             llvm::cl::init("")};
  Option<std::string> trace{*this, "trace", llvm::cl::desc("Chrome trace file"),
                            llvm::cl::init("")};
  Option<std::string> svg{*this, "svg", llvm::cl::desc("SVG timeline file"),
                          llvm::cl::init("")};
  Option<bool> printReport{*this, "print-report", llvm::cl::desc("Print the text report"),
                           llvm::cl::init(false)};
};
} // namespace

void mlir::pf::registerPFPipelines() {
  PassPipelineRegistration<PipelineOptions>(
      "pf-pipeline",
      "Graph passes, partition into stages, pipeline schedule with K-FAC work in "
      "the bubbles, e.g. --pf-pipeline=\"stages=8 microbatches=8 schedule=chimera "
      "kfac=bubbles policy=pf cost=analytic device=p100\"",
      [](OpPassManager &pm, const PipelineOptions &opts) {
        buildGraphOptPipeline(pm, GraphOptOptions{true, true, true});
        PFPartitionOptions partition;
        partition.stages = opts.stages;
        partition.microbatches = opts.microbatches;
        partition.cost = opts.cost;
        partition.device = opts.device;
        partition.memoryCapMB = opts.memoryCapMB;
        int64_t pipelineStages = opts.stages;
        if (opts.schedule == "interleaved")
          partition.stages = pipelineStages * opts.chunks;
        pm.addPass(createPFPartition(partition));
        PFScheduleOptions schedule;
        schedule.schedule = opts.schedule;
        schedule.microbatches = opts.microbatches;
        schedule.chunks = opts.chunks;
        schedule.kfac = opts.kfac;
        schedule.policy = opts.policy;
        schedule.refreshSteps = opts.refreshSteps;
        schedule.cost = opts.cost;
        schedule.device = opts.device;
        schedule.reportFile = opts.report;
        schedule.traceFile = opts.trace;
        schedule.svgFile = opts.svg;
        schedule.printReport = opts.printReport;
        pm.addPass(createPFSchedule(schedule));
      });

  PassPipelineRegistration<TrainingPipelineOptions>(
      "pf-training",
      "Forward graph to one masked-LM training step: loss, micro-batches, K-FAC "
      "factors, gradients, preconditioning, optimizer, e.g. "
      "--pf-training=\"kfac=true microbatches=4 optimizer=adamw\"",
      [](OpPassManager &pm, const TrainingPipelineOptions &opts) {
        buildTrainingPipeline(pm, opts.get());
      });

  PassPipelineRegistration<GraphOptPipelineOptions>(
      "pf-graph-opt",
      "The ONNX Runtime-style graph passes the importer runs by default: shape "
      "inference and folding, untying, LayerNorm/GELU/linear fusion, DCE",
      [](OpPassManager &pm, const GraphOptPipelineOptions &opts) {
        buildGraphOptPipeline(pm, GraphOptOptions{opts.fuse, opts.untie, opts.requireStatic});
      });
}
