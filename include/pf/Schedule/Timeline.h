//===- Timeline.h - Discrete-event simulation and timelines -----*- C++ -*-===//
//
// simulatePipeline runs a PipelineProgram as a discrete-event model: each
// device executes its passes in program order, a pass starts once the device
// is free and its inputs have arrived (point-to-point sends add latency), and
// Chimera's replicas all-reduce each stage's gradient. The result is the
// timeline of one training step, the times K-FAC work depends on, and the
// idle intervals ("bubbles") of every device.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_TIMELINE_H
#define PF_SCHEDULE_TIMELINE_H

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Support/Status.h"

#include <string>
#include <vector>

namespace pf::sched {

enum class ItemKind : unsigned char {
  Forward,
  Backward,
  BackwardInput,
  BackwardWeight,
  CurvatureA,
  CurvatureB,
  InversionA,
  InversionB,
  Precondition,
  SendRecv,      ///< activation / gradient between adjacent stages
  AllReduce,     ///< gradient all-reduce between Chimera replicas
  FactorSync,    ///< K-FAC factor all-reduce between Chimera replicas
  PrecondSync,   ///< preconditioned gradient sent to the other replica
  // Kinds only measured timelines have (lib/PipelineRuntime/MeasuredTimeline.cpp); the
  // scheduler never produces them.
  Inversion,     ///< damped inverses of both factors of a layer (one call)
  Update,        ///< optimizer update of a stage
  Send,          ///< one blocking send (the simulator's SendRecv is a transfer)
  Recv,          ///< one blocking receive, waiting included
  Accumulate,    ///< a micro-batch's gradients added to their running sums
  Broadcast,     ///< a value sent from its root to the other members
  Reduce,        ///< a micro-batch's tied-gradient piece summed on its root
  Clip,          ///< the global-norm or KL clipping's exchange and scaling
  Other,         ///< recorded work of no other kind
};

const char *itemKindName(ItemKind kind);
bool isPipelineCompute(ItemKind kind);
bool isKfac(ItemKind kind);
bool isCommunication(ItemKind kind);

/// Compute items occupy a device; communication runs beside it.
enum class Lane : unsigned char { Compute, Comm };

struct TimelineItem {
  ItemKind kind;
  Lane lane = Lane::Compute;
  int device = 0;
  int step = 0;   ///< step of the refresh window the item runs in
  int pipe = 0;
  int stage = -1;
  int micro = -1;
  int layer = -1; ///< K-FAC items
  int piece = 0;  ///< index of the piece when a K-FAC item was split
  double start = 0, end = 0;
  /// K-FAC: placed after the pipeline finished (extends the step) instead of
  /// inside a bubble.
  bool outsideBubble = false;
  /// K-FAC inversions: 1 when this piece belongs to the previous refresh
  /// (steady-state overlap of consecutive refreshes), else 0.
  int refreshLag = 0;
  /// K-FAC curvature and inversions: which of the layer's refreshes in the
  /// window (staggered refreshes run several per window).
  int refresh = 0;

  double duration() const { return end - start; }
};

struct Interval {
  double start = 0, end = 0;
};

/// K-FAC work of one factor of a layer run by another device than the
/// layer's stage (KfacOffload.h): its inversion, and with `curvature` also
/// its curvature pieces. The factor goes there after its curvature (sendMs;
/// 0 when the curvature moved too: it accumulates there), each curvature
/// piece waits for its micro-batch's input or output gradient
/// (activationMs), the inverse comes back before the owner preconditions
/// with it (returnMs).
struct KfacMove {
  int layer = 0;
  bool factorA = true;
  bool curvature = false;
  int from = 0, to = 0;
  double sendMs = 0, returnMs = 0, activationMs = 0;
};

/// One training step of the bare pipeline.
struct PipelineStep {
  PipelineLayout layout;
  std::vector<TimelineItem> items; ///< pipeline passes and communication
  double makespan = 0;             ///< T_pipe: end of the last item
  /// The step when consecutive steps overlap (no flush between them, as the
  /// zero-bubble schedules count with a post-validated optimizer step): the
  /// longest busy span of a device, first pass start to last pass end.
  double steadyStep = 0;
  /// End of each pass, indexed [stage * microbatches + micro].
  std::vector<double> forwardEnd;
  /// When the output gradient of the stage is known (Backward or BackwardInput).
  std::vector<double> backwardEnd;
  /// When the gradient of each layer is final (after the all-reduce).
  std::vector<double> gradientReady;
  /// Idle intervals of every device's compute lane within [0, makespan].
  std::vector<std::vector<Interval>> idle;
  /// Busy time of every device's compute lane.
  std::vector<double> busy;
  /// Inversions moved to other devices; the K-FAC tasks follow them
  /// (buildKfacProblem). Empty unless K-FAC offload was asked for.
  std::vector<KfacMove> kfacMoves;
};

Expected<PipelineStep> simulatePipeline(const PipelineProgram &program,
                                        const CostModel &costs);

/// Duration of a pass of `stage` (sum over its layers).
double passDuration(const PipelineLayout &layout, const CostModel &costs,
                    PassKind pass, int stage);

/// A refresh window: K consecutive steps with the K-FAC work placed.
///
/// Every step runs the same pipeline passes, so they are stored once
/// (`stepItems`, relative to the step start) and replayed at each step's
/// start; a window of a large pipeline would otherwise hold millions of
/// copies. `forEachItem` / `allItems` give the expanded view.
struct Timeline {
  int devices = 0;
  int steps = 1;                 ///< K
  double pipelineStep = 0;       ///< T_pipe of the bare pipeline
  std::vector<double> stepStart; ///< absolute start of each step
  std::vector<double> stepTime;  ///< length of each step (>= T_pipe)
  std::vector<TimelineItem> stepItems; ///< one bare step, relative times
  std::vector<TimelineItem> kfacItems; ///< K-FAC work and its communication
  /// The window's RefreshShape (KfacProblem.h), so that a check can rebuild
  /// its tasks: per layer the steps that start a refresh (empty: {0}), and
  /// Chimera's preconditioning split (empty: default).
  std::vector<std::vector<int>> refreshSteps;
  std::vector<double> preconditionDownShare;
  /// The SVG's row labels by device (empty: "GPU <d>"); a measured step
  /// drawn above its simulation labels its rows "rank r measured" / "... simulated".
  std::vector<std::string> rowLabels;

  double windowTime() const;
  size_t numItems() const { return steps * stepItems.size() + kfacItems.size(); }
  /// Visits every item of the window with absolute times, step by step.
  template <typename Fn> void forEachItem(Fn &&fn) const {
    for (int k = 0; k < steps; ++k)
      for (TimelineItem it : stepItems) {
        it.step = k;
        it.start += stepStart[k];
        it.end += stepStart[k];
        fn(static_cast<const TimelineItem &>(it));
      }
    for (const TimelineItem &it : kfacItems)
      fn(it);
  }
  std::vector<TimelineItem> allItems() const;
};

} // namespace pf::sched

#endif // PF_SCHEDULE_TIMELINE_H
