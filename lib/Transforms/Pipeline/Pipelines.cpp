//===- Pipelines.cpp - the pf-pipeline pipeline --------------------------------===//
#include "pf/Transforms/Pipeline/Passes.h"
#include "pf/Schedule/Limits.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/OptionBinder.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::pf;

void mlir::pf::buildPipelinePipeline(OpPassManager &pm, const PipelineOptions &options) {
  if (options.graphOpt)
    buildGraphOptPipeline(pm, GraphOptOptions{true, true, true});
  PFPartitionOptions partition;
  // Interleaved 1F1B cuts every device's share into `chunks` stages.
  partition.stages = ::pf::sched::stagesFor(options.schedule.schedule, int(options.stages),
                                            int(options.schedule.chunks));
  partition.microbatches = options.schedule.microbatches;
  partition.cost = options.schedule.cost;
  partition.profile = options.schedule.profile;
  partition.device = options.schedule.device;
  partition.memoryCapMB = options.memoryCapMB;
  pm.addPass(createPFPartition(partition));
  pm.addPass(createPFSchedule(options.schedule));
}

void mlir::pf::buildPipelinedTrainingPipeline(OpPassManager &pm, const TrainingOptions &training,
                                               const PipelineRunOptions &pipeline) {
  pm.addPass(createPFAddMaskedLMLoss(training.loss));
  if (training.kfac)
    pm.addPass(createPFInsertKFAC(training.insertKFAC));
  PFBuildGradientsOptions gradients;
  gradients.tagOrigin = true;
  pm.addPass(createPFBuildGradients(gradients));
  PFSplitStagesOptions split;
  // Interleaved cuts ranks × chunks stages, the V schedules (zb-v, dualpipev)
  // two per rank.
  split.stages =
      ::pf::sched::stagesFor(pipeline.schedule, int(pipeline.stages), int(pipeline.chunks));
  // Zero-bubble schedules and DualPipe(V) run the input and weight halves of
  // each backward.
  split.splitBackward = ::pf::sched::splitsBackward(pipeline.schedule);
  // K-FAC factor updates: one per call, 1/N of the step's running average each.
  split.microbatches = pipeline.microbatches;
  split.grain = pipeline.grain;
  pm.addPass(createPFSplitStages(split));
  // Per-stage inverses and preconditioning; the KL-clip across ranks is the
  // programs' pf.kfac_kl_clip.
  if (training.kfac) {
    PFKFACPreconditionOptions precondition = preconditionOptions(training);
    precondition.bubbles = pipeline.kfac == KfacWork::Bubbles;
    // The factor updates read kfac_curvature for F != 1 and under the host's
    // interval schedule (curvature-input set by pf-train).
    precondition.curvatureInput |= training.kfacFactorEvery != 1;
    pm.addPass(createPFKFACPrecondition(precondition));
    // In the bubbles: the factor updates become calls the programs place.
    if (precondition.bubbles)
      pm.addPass(createPFOutlineKfacFactors());
  }
  pm.addPass(createPFAddOptimizer(training.optimizer));
  PFBuildRankProgramsOptions programs;
  programs.schedule = pipeline.schedule;
  programs.microbatches = pipeline.microbatches;
  programs.chunks = pipeline.chunks;
  programs.clipNorm = training.clipNorm;
  programs.splitPrecondition = pipeline.splitPrecondition;
  programs.tiedPerMicrobatch = pipeline.tiedPerMicrobatch;
  programs.deterministic = pipeline.deterministic;
  programs.gradientResults = pipeline.gradientResults;
  pm.addPass(createPFBuildRankPrograms(programs));
}

std::string mlir::pf::checkPipelineRunOptions(const PipelineRunOptions &options,
                                              llvm::ArrayRef<std::string> given) {
  using ::pf::sched::ScheduleKind;
  auto isGiven = [&](llvm::StringRef key) { return llvm::is_contained(given, key); };
  auto limit = [](const char *what, int64_t value, int64_t max, const char *name) {
    ::pf::Status s = ::pf::sched::checkLimit(what, value, max, name);
    return s.ok() ? std::string() : s.message();
  };
  // The counts, checked on their 64-bit values (the scheduler narrows them
  // to int: 2^32 + 2 chunks would be 2).
  if (options.stages < 0)
    return "stages must be >= 0";
  for (const std::string &err :
       {limit("stages", options.stages, ::pf::sched::kMaxStages, "kMaxStages"),
        limit("microbatches", options.microbatches, ::pf::sched::kMaxMicrobatches,
              "kMaxMicrobatches"),
        limit("chunks", options.chunks, ::pf::sched::kMaxStages, "kMaxStages"),
        limit("refresh", options.refresh, ::pf::sched::kMaxRefreshSteps, "kMaxRefreshSteps")})
    if (!err.empty())
      return err;
  const bool interleaved = options.schedule == ScheduleKind::Interleaved;
  if (interleaved && options.chunks < 2)
    return llvm::formatv("interleaved needs chunks >= 2, got {0}", options.chunks).str();
  const std::string schedule = ::pf::sched::scheduleKindName(options.schedule);
  // An option the run would ignore is refused, so that a user who gives it
  // learns that it does nothing here.
  if (!interleaved && isGiven("chunks"))
    return "chunks= applies to schedule=interleaved, not " + schedule;
  const bool twoPipes =
      options.schedule == ScheduleKind::Chimera || options.schedule == ScheduleKind::DualPipe;
  if (!twoPipes && isGiven("split-precondition"))
    return "split-precondition= applies to schedule=chimera and dualpipe, not " + schedule;
  if (twoPipes && isGiven("tied-per-microbatch"))
    return "tied-per-microbatch= does not apply to " + schedule +
           " (its replicas sum the tied gradient at the step end)";
  if (options.kfac != KfacWork::Bubbles) {
    for (const char *key : {"refresh", "max-overhead", "max-refresh"})
      if (isGiven(key))
        return std::string(key) + "= applies to kfac=bubbles";
    return "";
  }
  if (options.refresh < 0)
    return llvm::formatv("refresh must be >= 0 (0: the scheduler's K), got {0}", options.refresh)
        .str();
  if (options.maxRefresh < 1 || options.maxRefresh > 512)
    return llvm::formatv("max-refresh must be in [1, 512], got {0}", options.maxRefresh).str();
  if (!(options.maxOverhead >= 0 && options.maxOverhead <= 10))
    return llvm::formatv("max-overhead must be in [0, 10], got {0}", options.maxOverhead).str();
  return "";
}

namespace {

/// `pf-pipelined-training`: pf-training's options (its micro-batches are the
/// pipeline's) plus the stage count and the schedule.
struct PipelinedTrainingOptions {
  TrainingOptions training;
  PipelineRunOptions pipeline;
  PipelinedTrainingOptions() {
    training.microbatches = pipeline.microbatches;
    pipeline.stages = 2;
  }
  template <typename Binder>
  void bindOptions(Binder &binder) {
    training.bindOptions(binder);
    binder.opt("stages", pipeline.stages, "Pipeline stages, one per rank");
    binder.opt("schedule", pipeline.schedule,
               "Pipeline schedule (gpipe, 1f1b, zb-h1, zb-h2, interleaved, chimera, zb-v, "
               "dualpipe, dualpipev)",
               scheduleKindValues());
    binder.opt("chunks", pipeline.chunks, "interleaved: model chunks per rank");
    binder.opt("kfac-work", pipeline.kfac,
               "With kfac=true: inverses at every step's end, or per-layer inverse functions "
               "for the bubbles (the window programs are added after a measured warm-up)",
               kfacWorkValues());
    binder.opt(
        "split-precondition", pipeline.splitPrecondition,
        "chimera and dualpipe with kfac=true: each layer's preconditioning on one replica, its "
        "result broadcast to the other (false: both replicas precondition every layer)");
    binder.opt("grain", pipeline.grain,
               "Units the stages are cut from: half (default), ends or block "
               "(pf-split-stages grain=)",
               stageGrainValues());
    binder.opt("tied-per-microbatch", pipeline.tiedPerMicrobatch,
               "the tied embedding's gradient handed to the last stage's rank and accumulated "
               "there per micro-batch (false: one step-end all-reduce of every piece)");
    binder.opt("deterministic", pipeline.deterministic, kDeterministicHelp);
  }
};
} // namespace

void mlir::pf::registerPipelinePipelines() {
  PassPipelineRegistration<BoundPipelineOptions<PipelinedTrainingOptions>>(
      "pf-pipelined-training",
      "Forward graph to the per-rank programs of one pipelined training step: loss, "
      "K-FAC factors (kfac=true), gradients, stage functions, per-stage preconditioning "
      "and updates, rank programs with clipping, e.g. "
      "--pf-pipelined-training=\"stages=2 schedule=1f1b micro-batches=4 optimizer=adamw\" "
      "(what every rank of mpirun pf-train --pipeline runs)",
      [](OpPassManager &pm, const BoundPipelineOptions<PipelinedTrainingOptions> &opts) {
        PipelinedTrainingOptions options = opts.get();
        options.pipeline.microbatches = options.training.microbatches;
        buildPipelinedTrainingPipeline(pm, options.training, options.pipeline);
      });

  PassPipelineRegistration<BoundPipelineOptions<PipelineOptions>>(
      "pf-pipeline",
      "Graph passes, partition into stages, pipeline schedule with K-FAC work in "
      "the bubbles, e.g. --pf-pipeline=\"stages=8 microbatches=8 schedule=chimera "
      "kfac=bubbles policy=pf cost=analytic device=p100\" (pf-translate --pipeline "
      "takes the same options)",
      [](OpPassManager &pm, const BoundPipelineOptions<PipelineOptions> &opts) {
        buildPipelinePipeline(pm, opts.get());
      });
}
