//===- Kfac.h - K-FAC work items and their placement into bubbles -*- C++ -*-===//
//
// K-FAC adds, per layer: curvature A and B per micro-batch (A piece i needs
// forward i of the layer, B piece i needs its backward i), inversion of A and
// of B (each needs that layer's curvature of the refresh), and preconditioning
// once per step (needs the layer's gradient). The inverses refresh every K
// steps; the work of one refresh is spread over a window of K steps, the
// bubbles of the pipeline first, the rest after the pipeline flush where it
// lengthens the step.
//
// Policies:
//  - pipefisher: the reference greedy (shared/reference/pipefisher.md).
//  - pf: our list scheduler (per-layer dependencies, priorities, splitting,
//    preconditioning inside bubbles, steady-state overlap, automatic K).
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_KFAC_H
#define PF_SCHEDULE_KFAC_H

#include "pf/Schedule/Timeline.h"

#include <limits>
#include <string>
#include <vector>

namespace pf::sched {

enum class Policy { None, PipeFisher, PF };

Expected<Policy> parsePolicy(const std::string &name);
const char *policyName(Policy policy);

struct KfacOptions {
  Policy policy = Policy::PF;
  /// Steps per refresh; 0 chooses automatically (pipefisher: as many as its
  /// spilling needs; pf: see maxOverhead).
  int refreshSteps = 0;
  /// An item (or piece) is placed in a bubble only if duration*(1+margin) fits
  /// in what is left of it (the reference uses 5%).
  double margin = 0.05;
  /// pf: an item may be split into pieces no shorter than duration/splitPieces
  /// (1 disables splitting). Models blocked Cholesky / per-linear GEMMs.
  int splitPieces = 8;
  /// pf: allow an inversion that missed its refresh window to run in the next
  /// window's free bubble time (consecutive refreshes overlap).
  bool steadyState = true;
  /// pf automatic K: the smallest K whose mean step time stays within
  /// T_pipe * (1 + maxOverhead). Negative: within the step time of running
  /// preconditioning after the flush (T_pipe + the largest per-device
  /// preconditioning time), the budget PipeFisher's own step model spends.
  double maxOverhead = -1;
  /// Upper bound of the automatic search.
  int maxRefreshSteps = 512;
};

/// One unit of K-FAC work, owned by one device.
struct KfacTask {
  ItemKind kind;
  int device = 0;
  int layer = 0;
  int pipe = 0;
  int stage = 0;
  int micro = -1; ///< curvature: micro-batch whose activations it reads
  int step = 0;   ///< precondition: the step whose gradient it preconditions
  double duration = 0;
  /// Earliest start implied by the pipeline, in window time (step k starts
  /// at k * T_pipe before any step is lengthened).
  double release = 0;
  /// Precondition must finish inside its step: window-time deadline.
  double deadline = std::numeric_limits<double>::infinity();
  std::vector<int> deps; ///< K-FAC tasks that must finish first
  double depLatency = 0; ///< communication after the deps (factor all-reduce)
  /// Chimera: the preconditioned gradient goes to the other replica.
  double syncAfter = 0;
};

/// All K-FAC tasks of a window of K steps plus the bubbles they can use.
struct KfacProblem {
  int steps = 1;
  double stepSpan = 0; ///< T_pipe
  int devices = 0;
  std::vector<KfacTask> tasks;
  std::vector<std::vector<int>> dependents;
  /// Per device, the bubbles of one bare step (relative to its start).
  std::vector<std::vector<Interval>> stepGaps;
};

KfacProblem buildKfacProblem(const PipelineStep &step, const CostModel &costs,
                             int steps);

/// A placed piece of a task. Bubble pieces have `t` in window time; pieces
/// placed after the flush of step `step` have `t` relative to that step's
/// start (t >= T_pipe).
struct PlacedPiece {
  int task = 0;
  int step = 0;
  double t = 0;
  double duration = 0;
  bool outsideBubble = false;
  int refreshLag = 0;
};

struct KfacPlan {
  Policy policy = Policy::None;
  int steps = 1;
  KfacProblem problem; ///< the tasks of the chosen window
  std::vector<PlacedPiece> pieces;
  /// Length of each step after K-FAC work outside the bubbles.
  std::vector<double> stepTime;
  /// Chimera communication that K-FAC adds, step-relative: the factor
  /// all-reduce before an inversion (task = the inversion) and the exchange
  /// of a preconditioned gradient (task = the preconditioning).
  std::vector<PlacedPiece> syncs;
  /// Windows evaluated while choosing K automatically (for reports).
  int candidatesTried = 0;
  /// pf only: none of its own windows beat the reference greedy's at the
  /// reference's K, so the reference's window is used.
  bool usedReference = false;
};

/// Places the K-FAC work of `step` according to `options`.
Expected<KfacPlan> planKfac(const PipelineStep &step, const CostModel &costs,
                            const KfacOptions &options);

/// Builds the timeline of the whole refresh window.
Timeline assembleTimeline(const PipelineStep &step, const KfacPlan &plan);

/// Checks a window timeline: no two compute items overlap on a device, every
/// pipeline pass starts after its inputs, every K-FAC piece after its
/// dependencies, preconditioning inside its step, and all work is placed.
Status validateTimeline(const Timeline &timeline, const PipelineStep &step,
                        const CostModel &costs);

} // namespace pf::sched

#endif // PF_SCHEDULE_KFAC_H
