//===- Passes.h - pf pipeline passes ----------------------------*- C++ -*-===//
//
// Pipeline parallelism: partition into stages by a cost model, schedule the
// step with the K-FAC work in the bubbles, and the `pf-pipeline` pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_PIPELINE_PASSES_H
#define PF_TRANSFORMS_PIPELINE_PASSES_H

#include "pf/Transforms/OptionEnums.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include <memory>
#include <string>
#include <vector>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Pipeline/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Pipeline/Passes.h.inc"

/// Options of `pf-pipeline` (and pf-translate --pipeline): pf-schedule's, of
/// which pf-partition shares micro-batches and the cost model, plus the
/// stage count, the memory cap and whether the graph passes run first.
struct PipelineOptions {
  /// Run pf-graph-opt (require-static) first; off when it already ran.
  bool graphOpt = true;
  /// Pipeline stages (devices; interleaved: times `chunks` stages).
  int64_t stages = 2;
  /// Per-stage memory cap of pf-partition in MB (0: none).
  double memoryCapMB = 0;
  PFScheduleOptions schedule = defaultSchedule();

  static PFScheduleOptions defaultSchedule() {
    PFScheduleOptions options;
    options.microbatches = 4;
    return options;
  }

  /// Declares every option to `binder` (pf/Transforms/OptionBinder.h).
  template <typename Binder>
  void bindOptions(Binder &binder) {
    binder.opt("graph-opt", graphOpt,
               "Run the graph passes first (pf-graph-opt with require-static)");
    binder.opt("stages", stages, "Pipeline stages");
    binder.opt("microbatches", schedule.microbatches, "Micro-batches per step");
    binder.opt("schedule", schedule.schedule, "Pipeline schedule", scheduleKindValues());
    binder.opt("chunks", schedule.chunks, "Interleaved 1F1B: model chunks per device");
    binder.opt("kfac", schedule.kfac, "K-FAC work", kfacModeValues());
    binder.opt("policy", schedule.policy, "K-FAC placement policy", kfacPolicyValues());
    binder.opt("refresh-steps", schedule.refreshSteps, "Steps per K-FAC refresh (0: automatic)");
    binder.opt("cost", schedule.cost, "Where the per-block costs come from", costSourceValues());
    binder.opt("profile", schedule.profile, "With cost=profile: the profile JSON");
    binder.opt("device", schedule.device,
               "Device of the analytic cost model (p100, v100, a100, h100, h200)");
    binder.opt("memory-cap-mb", memoryCapMB, "Per-stage memory cap in MB (0: none)");
    binder.opt("report", schedule.reportFile, "Write the report as JSON to this file");
    binder.opt("trace", schedule.traceFile, "Write a Chrome/Perfetto trace to this file");
    binder.opt("svg", schedule.svgFile, "Write the SVG timeline to this file");
    binder.opt("print-report", schedule.printReport, "Print the text report");
  }
};

/// The help of the pipeline's `deterministic` option (pf-train --pipeline,
/// pf-pipelined-training).
inline constexpr const char *kDeterministicHelp =
    "gradients that several ranks return (chimera's and dualpipe's replicas) summed "
    "micro-batch by micro-batch in one process's order, bit for bit single-process training "
    "(false: each rank's weighted partial sum added by MPI's or NCCL's all-reduce, within "
    "rounding of it)";

/// The executable pipeline of `pf-train --pipeline` (and
/// `--pf-pipelined-training`): the training step cut into `stages` stage
/// functions, one per rank, run in `schedule` order over `microbatches`.
struct PipelineRunOptions {
  /// Stages = ranks of the job (pf-train: 0 takes the job's size).
  int64_t stages = 0;
  ::pf::sched::ScheduleKind schedule = ::pf::sched::ScheduleKind::OneFOneB;
  int64_t microbatches = 4;
  /// interleaved: stages per rank (the model is cut into stages × chunks).
  int64_t chunks = 2;
  /// Run the transfers non-blocking (recv posted at its op, waited for by
  /// its first reader; sends completed at the end of the step). Host-side
  /// only: the programs are the same.
  bool overlap = true;
  /// With --kfac: inverses at every step's end, or in the bubbles.
  KfacWork kfac = KfacWork::Step;
  /// kfac=bubbles: steps per refresh window; 0 takes the scheduler's K for
  /// the durations measured in the warm-up steps.
  int64_t refresh = 0;
  /// kfac=bubbles, refresh=0: the scheduler's K is the smallest window whose
  /// inverses lengthen the mean step by at most this share of T_pipe.
  double maxOverhead = 0.01;
  /// kfac=bubbles, refresh=0: the largest K the scheduler may choose (a
  /// window's curvature is used for its K steps and the next window's).
  int64_t maxRefresh = 10;
  /// chimera with K-FAC: each layer preconditioned on one replica and
  /// broadcast to the other (false: on both).
  bool splitPrecondition = true;
  /// The tied embedding's gradient summed per micro-batch on the last
  /// stage's rank (pf.reduce_microbatch) and accumulated there (false: every
  /// piece kept to a step-end pf.all_reduce).
  bool tiedPerMicrobatch = true;
  /// Gradients summed over ranks at the step end (pf.all_reduce) in
  /// micro-batch order, bit for bit one process's sum; false: the library's
  /// all-reduce of each member's weighted partial sum.
  bool deterministic = false;
  /// Each gradient of the step leaves the programs (pf.step_result) for the
  /// caller; false (pf-train): only the loss does.
  bool gradientResults = true;
  /// The units pf-split-stages cuts into stages (default: the embeddings,
  /// the blocks' attention and FFN halves and the head's parts, each costed).
  StageGrain grain = StageGrain::Half;

  template <typename Binder>
  void bindOptions(Binder &binder) {
    binder.opt("stages", stages, "Pipeline stages, one per rank (0: the job's ranks)");
    binder.opt("schedule", schedule,
               "Pipeline schedule (gpipe, 1f1b, zb-h1, zb-h2, interleaved, chimera, zb-v, "
               "dualpipe, dualpipev)",
               scheduleKindValues());
    binder.opt("microbatches", microbatches, "Micro-batches per step");
    binder.opt("chunks", chunks,
               "interleaved: model chunks per rank (stage s on rank s mod ranks)");
    binder.opt("overlap", overlap,
               "Non-blocking transfers that overlap the computation (false: blocking send "
               "and recv at their program ops)");
    binder.opt("kfac", kfac, "With --kfac: where the inverses run", kfacWorkValues());
    binder.opt("refresh", refresh,
               "kfac=bubbles: steps per refresh window (0: the scheduler's K for the "
               "durations measured in the warm-up steps)");
    binder.opt("max-overhead", maxOverhead,
               "kfac=bubbles, refresh=0: the scheduler's K is the smallest window whose inverses "
               "lengthen the mean step by at most this share of the pipeline span");
    binder.opt("max-refresh", maxRefresh,
               "kfac=bubbles, refresh=0: the largest K the scheduler may choose (staler "
               "curvature beyond it; the K-FAC work left over lengthens the step)");
    binder.opt(
        "split-precondition", splitPrecondition,
        "chimera and dualpipe with --kfac: each layer's preconditioning on one replica, its result "
        "broadcast to the other (false: both replicas precondition every layer)");
    binder.opt("grain", grain,
               "Units the stages are cut from (pf-split-stages grain=): half (the embeddings, "
               "each block's attention and FFN halves, the head's transform and decoder), ends "
               "(whole blocks, the embeddings and the head on their own) or block (whole "
               "blocks with the embeddings and the head folded in)",
               stageGrainValues());
    binder.opt("tied-per-microbatch", tiedPerMicrobatch,
               "the tied embedding's gradient handed to the last stage's rank and accumulated "
               "there per micro-batch (false: every micro-batch's piece kept on both ranks to "
               "one step-end all-reduce)");
    binder.opt("deterministic", deterministic, kDeterministicHelp);
  }
};

/// The checks of a pipeline's run options that every surface shares
/// (pf-train --pipeline, pf-run --pipeline): each count within the
/// scheduler's limits (before any narrowing to int), and no option `given`
/// (BoundPipelineOptions::given) that the chosen schedule or K-FAC placement
/// ignores. Returns the error ("" when none), which names the option.
std::string checkPipelineRunOptions(const PipelineRunOptions &options,
                                    llvm::ArrayRef<std::string> given);

/// The per-rank training step: masked-LM loss, gradients (tagged), the
/// stage split, one update function per stage (pf-add-optimizer) and the
/// rank programs with clipping over all ranks (`training.clipNorm`). The
/// micro-batches are `pipeline.microbatches`; `training.microbatches` is not
/// used (the programs run the micro-batches). With `training.kfac`, K-FAC
/// per stage: at every step's end or, with `pipeline.kfac` = bubbles, as
/// calls the window programs place.
void buildPipelinedTrainingPipeline(OpPassManager &pm, const TrainingOptions &training,
                                    const PipelineRunOptions &pipeline);

/// Where a K-FAC layer's inverse call runs in a refresh window: in window
/// step `windowStep` of rank `rank`, right before the rank's pass after
/// `afterPasses` of its passes (where it waits for that pass's inputs), or
/// with afterPasses >= the step's passes, in the rank's tail bubble: before
/// the first collective after its last pass (after the sums of the factors,
/// Chimera's replicas), or the step end.
struct KfacInversePlacement {
  int64_t rank = 0, layer = 0, windowStep = 0, afterPasses = 0;
};

/// Adds, for every rank, the `steps` programs of a K-FAC refresh window
/// (`@rank<r>_window<k>`, window_step k) to a module whose programs invert at
/// the step end (pf-kfac-precondition{bubbles}); every inverse call of a
/// program needs a placement. Verifies the result (verifyRankPrograms).
/// A K-FAC factor call of window step 0 (pf-outline-kfac-factors): factor A
/// or B (`isB`) of `layer` for `microbatch`, on `rank`, moved to right
/// before the pass after `afterPasses` passes (never before its own pass),
/// or with every pass done, before the first collective after the last pass.
struct KfacFactorCallPlacement {
  int64_t rank = 0, layer = 0;
  bool isB = false;
  int64_t microbatch = 0, afterPasses = 0;
};

/// `factors` may leave calls out: those stay right after their passes.
LogicalResult addKfacWindowPrograms(ModuleOp module, int64_t steps,
                                    ArrayRef<KfacInversePlacement> placements,
                                    ArrayRef<KfacFactorCallPlacement> factors = {});

/// The placement table of pf-train's plan, of a checkpoint's
/// `meta/kfac_placement` and of pf-kfac-window-programs' `placement`: 4
/// numbers per row, (rank, layer, window step, passes before it) for an
/// inverse call; a factor call of window step 0 has, in place of the window
/// step, kfacFactorRowCode(micro-batch, isB) < 0.
struct KfacPlacementTable {
  std::vector<KfacInversePlacement> inverses;
  std::vector<KfacFactorCallPlacement> factors;
};

/// -(1 + 2·micro-batch + (1 for factor B)).
inline int64_t kfacFactorRowCode(int64_t microbatch, bool isB) {
  return -(1 + 2 * microbatch + (isB ? 1 : 0));
}

/// Splits a flat table into its rows. Fails (the message names the row and
/// the value) on a size that is not a multiple of 4 or a negative rank,
/// layer or pass count.
FailureOr<KfacPlacementTable> decodeKfacPlacementTable(ArrayRef<int64_t> table,
                                                       std::string &error);

/// Graph passes (optional), pf-partition and pf-schedule.
void buildPipelinePipeline(OpPassManager &pm, const PipelineOptions &options);

/// Registers `pf-pipeline` and `pf-pipelined-training`.
void registerPipelinePipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_PIPELINE_PASSES_H
