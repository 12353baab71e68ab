//===- MeasuredTimeline.h - timelines and figures of a measured run -*- C++ -*-===//
//
// A pipelined training run records, on every rank, each executed op of its
// per-rank program (stage calls, transfers, all-reduces) with start and end
// on one clock aligned across ranks (pfrt_comm_wall_time); rank 0 gathers
// them into a MeasuredRun. This library turns that run into
//  - the figures of the run (step time, per-rank busy and idle time,
//    utilization without and with K-FAC, bubble fraction and fill),
//  - a Chrome / Perfetto trace and an SVG in the picture style of the
//    simulated timeline (the scheduler's writers, pf/Schedule/Report.h),
//  - the simulation of the same schedule fed with the per-stage durations
//    measured in the run, to set next to the measured figures.
// It does not depend on how the events were recorded (pf-train, pf-run or a
// test); docs/pipeline-execution.md, "Measured timelines".
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_MEASUREDTIMELINE_H
#define PF_DRIVER_MEASUREDTIMELINE_H

#include "pf/Schedule/Scheduler.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::pf::driver {

/// What an event executed: the pf.run_stage kinds, and the communication ops.
enum class MeasuredKind : uint8_t {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  KfacFactorA,
  KfacFactorB,
  KfacInverse,
  Precondition,
  Update,
  Send,
  Recv,
  AllReduce,
  Accumulate,
  Broadcast,
  Reduce,
  Clip,
  Other,
};

const char *measuredKindName(MeasuredKind kind);
/// Forward, Backward, BackwardInput, BackwardWeight.
bool isPipelinePass(MeasuredKind kind);
/// KfacFactorA/B, KfacInverse, Precondition.
bool isKfacWork(MeasuredKind kind);
/// Send, Recv, AllReduce: drawn on the communication lane, not busy time.
bool isCommunication(MeasuredKind kind);

/// One executed op. `stage`, `microbatch`, `layer` are -1 where the op has
/// none. Times in seconds on the clock shared by all ranks.
struct MeasuredEvent {
  int32_t rank = 0;
  int64_t step = 0; ///< training step, numbered from 0
  MeasuredKind kind = MeasuredKind::Other;
  int64_t stage = -1;
  int64_t microbatch = -1;
  int64_t layer = -1;
  double start = 0, end = 0;
};

struct MeasuredRun {
  int32_t ranks = 0;
  int64_t stages = 0, microbatches = 0;
  std::string schedule; ///< a pf-sched name: gpipe, 1f1b, zb-h1, ...
  std::vector<MeasuredEvent> events; ///< any order
};

/// Checks what every function below relies on: ranks, stages and
/// micro-batches >= 1, each event's rank in [0, ranks), step >= 0,
/// stage / micro-batch in [-1, stages / microbatches), finite times with
/// end >= start. The message names the first bad event.
llvm::Error checkMeasuredRun(const MeasuredRun &run);

/// Per-rank means over the steps summarized, in ms per step.
struct MeasuredRankFigures {
  int32_t rank = 0;
  double pipelineMs = 0; ///< forward and backward passes
  double kfacMs = 0;     ///< K-FAC factors, inverses, preconditioning
  double otherMs = 0;    ///< update and other compute
  double busyMs = 0;     ///< all compute: pipeline + K-FAC + other
  double idleMs = 0;     ///< step time - busy
  double commMs = 0;     ///< send, recv, all-reduce (blocking: waits included)
  double utilizationWithoutKfac = 0; ///< pipelineMs / step time
  double utilizationWithKfac = 0;    ///< (pipelineMs + kfacMs) / step time
};

/// Figures of the steps [firstStep, lastStep] (steps without events are not
/// counted). Time figures are means per step in ms.
struct MeasuredReport {
  std::string schedule;
  int32_t ranks = 0;
  int64_t stages = 0, microbatches = 0;
  int64_t firstStep = 0, lastStep = 0;
  int64_t steps = 0; ///< steps in the range that have events
  /// Step: first start to last end of its events over all ranks.
  double stepTimeMs = 0;
  /// Measured T_pipe: first start to last end of the step's pipeline passes.
  double pipelineSpanMs = 0;
  double utilizationWithoutKfac = 0; ///< Σ pipeline / (ranks · step)
  double utilizationWithKfac = 0;    ///< Σ (pipeline + K-FAC) / (ranks · step)
  /// Bubbles: per rank, the time of the pipeline span not covered by its own
  /// pipeline passes, summed over ranks.
  double bubbleMs = 0;
  double bubbleFraction = 0; ///< bubbleMs / (ranks · pipelineSpanMs)
  double kfacInBubblesMs = 0; ///< K-FAC time inside the bubbles, all ranks
  double kfacOutsideMs = 0;   ///< the rest of the K-FAC time
  double bubbleFill = 0;      ///< kfacInBubblesMs / bubbleMs (0 if no bubbles)
  std::vector<MeasuredRankFigures> perRank;

  std::string text() const;
  std::string json() const;
};

/// Figures over steps [firstStep, lastStep]; lastStep < 0 means the last
/// step of the run (e.g. summarize(run, 1, -1) skips a warm-up step 0).
/// Errors: checkMeasuredRun's, and no events in the range.
llvm::Expected<MeasuredReport> summarize(const MeasuredRun &run,
                                         int64_t firstStep, int64_t lastStep);

struct SimulationOptions {
  /// K-FAC placement of the simulation when the run has K-FAC events (none
  /// otherwise). refreshSteps = 0: the run's own refresh interval, steps per
  /// KfacInverse of a layer, when it has inverses; else the policy's choice.
  ::pf::sched::KfacOptions kfac;
  /// Transfer latency between adjacent stages; negative: estimated from the
  /// run as the shortest run of back-to-back Recv events on a rank (a receive
  /// that did not wait for its sender).
  double p2pMs = -1;
};

/// The measured run next to the simulation of its schedule.
struct MeasuredComparison {
  MeasuredReport measured;
  /// The profile measured from the events (means over the steps, ms): one
  /// cost-model layer per stage, or one per K-FAC layer of the stage with
  /// the stage's forward/backward on the first; ::pf::sched::profileToJson
  /// writes it in the profile format.
  ::pf::sched::CostModel costs;
  ::pf::sched::Report simulated;
  /// The simulated refresh window (its steps' items for a picture).
  ::pf::sched::Timeline simulatedTimeline;
  /// Per rank, simulated busy ms per step: pipeline + K-FAC work / K.
  std::vector<double> simulatedBusyMs;

  /// "measured vs simulated": T_pipe, step time, utilization, bubble
  /// fraction and per-rank busy time side by side.
  std::string text() const;
  std::string json() const;
};

/// Simulates run.schedule (gpipe, 1f1b, zb-h1: stage s on rank s) with the
/// per-stage durations measured over steps [firstStep, lastStep], through
/// the scheduler (schedulePipeline: buildPipeline + simulatePipeline +
/// K-FAC placement + computeReport). Errors: summarize's, an unknown or
/// unsupported schedule, stages != ranks, a pipeline pass on a rank other
/// than its stage, a stage without measured forward or backward.
llvm::Expected<MeasuredComparison>
simulateFromMeasured(const MeasuredRun &run, int64_t firstStep, int64_t lastStep,
                     const SimulationOptions &options = {});

/// Where one K-FAC layer's inverse call runs in a refresh window: window
/// step `windowStep` on rank `rank`, before its pass after `afterPasses` of
/// its passes (>= the step's passes: before the step end).
struct KfacWindowPlacement {
  int32_t rank = 0;
  int64_t layer = 0, windowStep = 0, afterPasses = 0;
};

/// A K-FAC factor call of window step 0 (the curvature step): factor A
/// (`isB` false) or B of `layer` for `microbatch`, moved to right before
/// the rank's pass after `afterPasses` passes.
struct KfacFactorPlacement {
  int32_t rank = 0;
  int64_t layer = 0;
  bool isB = false;
  int64_t microbatch = 0, afterPasses = 0;
};

struct KfacWindowPlan {
  int64_t steps = 1; ///< K: steps per refresh window
  std::vector<KfacWindowPlacement> inverses;
  /// The factor calls the scheduler placed in bubbles of window step 0
  /// (pf-outline-kfac-factors' functions; none when the passes hold them).
  std::vector<KfacFactorPlacement> factors;
  double pipelineMs = 0, stepMs = 0; ///< simulated T_pipe and mean step time
  ::pf::sched::CostModel costs;      ///< the measured profile it used
};

/// K-FAC in the bubbles: the scheduler's placement (policy pf, one piece
/// per inversion, no overlap of windows) of every K-FAC layer's inverse
/// call, from the durations measured over steps [firstStep, lastStep] (the
/// warm-up steps, which invert every layer at their end). `steps` = 0
/// takes the scheduler's K: the smallest whose inverses lengthen the mean
/// step by at most `maxOverhead` × T_pipe (the preconditioning, after the
/// flush in every step, is not placed). Every schedule the rank programs run
/// (not an imported order); chimera and dualpipe, whose replicas sum the
/// factors after the curvature step's flush, run their inversions in later
/// steps, each on the replica the scheduler gives it.
llvm::Expected<KfacWindowPlan> planKfacWindow(const MeasuredRun &run, int64_t firstStep,
                                              int64_t lastStep, int64_t steps = 0,
                                              double maxOverhead = 0.01,
                                              int64_t maxRefresh = 10);

/// The run as a scheduler timeline (ms; time 0 = the first event's start;
/// each step from the first start of its events) and the report its writers
/// title the picture with ("measured <schedule>, ..."). Every step is drawn;
/// the title's figures are summarize(run, firstStep, -1)'s (firstStep = 1
/// leaves a warm-up step out of them).
struct MeasuredPicture {
  ::pf::sched::Timeline timeline;
  ::pf::sched::Report report;
};
llvm::Expected<MeasuredPicture> measuredPicture(const MeasuredRun &run,
                                                int64_t firstStep = 0);

/// Chrome trace JSON (::pf::sched::timelineToChromeTrace): one "X" event per
/// measured event, compute on the rank's thread, communication on its comm
/// thread. Written atomically (a failure leaves an existing file intact).
llvm::Error writeMeasuredTrace(const MeasuredRun &run, const std::string &path,
                               int64_t firstStep = 0);
/// One steady-state step for people to look at: the step of median length
/// among steps firstStep.. (one row per rank, one rect per event, times from
/// the step's start) above the simulation of the same schedule fed with the
/// durations measured in the run (simulateFromMeasured with `simulation`;
/// its first window step), on one time axis. A schedule the simulator cannot
/// replay draws the measured step alone and says so in the title.
struct SteadyStepPicture {
  ::pf::sched::Timeline timeline;
  ::pf::sched::Report report;
  int64_t step = 0;           ///< the measured step drawn
  double measuredStepMs = 0;  ///< its length
  double simulatedStepMs = 0; ///< the simulated step drawn (0: none)
};
llvm::Expected<SteadyStepPicture> steadyStepPicture(const MeasuredRun &run, int64_t firstStep,
                                                    const SimulationOptions &simulation = {});
/// SVG (::pf::sched::timelineToSvg) of steadyStepPicture. Written atomically.
llvm::Error writeMeasuredSvg(const MeasuredRun &run, const std::string &path,
                             int64_t firstStep = 0, const SimulationOptions &simulation = {});

} // namespace mlir::pf::driver

#endif // PF_DRIVER_MEASUREDTIMELINE_H
