//===- KfacProblem.h - K-FAC work items, their window and plan --*- C++ -*-===//
//
// The data of K-FAC placement, known to every layer of it: the options, the
// tasks of a refresh window (curvature A and B per micro-batch, inversion of A
// and B per refresh, preconditioning per step) with their releases,
// deadlines, dependencies and owners, and the placed plan. Building the tasks
// of a window (buildKfacProblem) needs only the simulated step and the costs.
//
// Layering of the K-FAC code (each layer uses only those below it):
//   1. KfacProblem.h / KfacProblem.cpp   tasks of a window, capacity
//   2. KfacPlacement.h / .cpp (private)  bubbles, sweep result, work after
//                                        the flush, finishing a plan
//   3. PolicyPipeFisher.cpp, PolicyPF.cpp (KfacPolicies.h, private); pf
//      compares itself with the reference, so PolicyPF uses PolicyPipeFisher
//   4. Kfac.h / Kfac.cpp                 facade: policy names, planKfac
//                                        dispatch, window timeline
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_KFACPROBLEM_H
#define PF_SCHEDULE_KFACPROBLEM_H

#include "pf/Schedule/Timeline.h"

#include <limits>
#include <vector>

namespace pf::sched {

enum class Policy { None, PipeFisher, PF };

/// How pf chooses the refresh when K is not fixed.
enum class RefreshChoice {
  /// The smallest K within the step budget (maxOverhead, or PipeFisher's own
  /// step model); one refresh of every layer per window of K steps.
  Interval,
  /// The highest utilization with K-FAC whose mean step exceeds the step
  /// that cannot be shorter (T_pipe + the unmovable preconditioning) by at
  /// most maxOverheadBeyond; integer K or a staggered refresh (RefreshShape).
  Throughput,
};

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
  /// pf without a fixed K: see RefreshChoice.
  RefreshChoice refresh = RefreshChoice::Interval;
  /// Throughput: allowed mean step beyond T_pipe + unmovable, as a fraction
  /// of T_pipe + unmovable.
  double maxOverheadBeyond = 0.01;
  /// Throughput: the longest period of a staggered refresh, in steps.
  int maxStaggerPeriod = 24;
};

/// The layout of a window's K-FAC work beyond its length K. Default: every
/// layer refreshes once, from the window's first step, and Chimera runs the
/// first half of a stage's layers' preconditioning on the down replica.
struct RefreshShape {
  /// Per layer, the window steps whose micro-batches feed a refresh of its
  /// inverses, ascending (a staggered refresh: each layer has its own steps,
  /// so every step carries a share of the refresh work). Empty: {0} for all.
  std::vector<std::vector<int>> refreshSteps;
  /// Chimera, per layer: the share of its preconditioning (0, 0.5 or 1) the
  /// down replica runs; the other replica runs the rest. Empty: default.
  std::vector<double> preconditionDownShare;

  bool staggered() const { return !refreshSteps.empty(); }
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
  /// Curvature and inversions: which of the layer's refreshes in the window.
  int refresh = 0;
  /// Inversions of a layer refreshed more than once per window: the same
  /// factor's inversion of the layer's first refresh (-1 otherwise).
  int firstRefresh = -1;
  bool lastRefresh = true;
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
  RefreshShape shape;
};

KfacProblem buildKfacProblem(const PipelineStep &step, const CostModel &costs, int steps,
                             const RefreshShape &shape = {});

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
  /// What no placement can move, per step (ms): how far the preconditioning
  /// that follows the stages' last backward and gradient all-reduce (and
  /// Chimera's exchange of it) must run past T_pipe, with the best split
  /// between Chimera's replicas (unmovablePerStep).
  double unmovable = 0;
  RefreshChoice refresh = RefreshChoice::Interval;
};

/// The unmovable step lengthening of `shape`'s preconditioning split: each
/// device runs its preconditioning as early as possible (its bubbles after
/// the gradient is final, then after T_pipe), nothing else; the step ends
/// when the last preconditioned gradient has reached the other replica.
double unmovablePerStep(const PipelineStep &step, const CostModel &costs,
                        const RefreshShape &shape = {});

/// Chimera: the per-layer preconditioning split (RefreshShape's
/// preconditionDownShare) with the least unmovable lengthening; empty when
/// the default split is as good or the schedule has one replica.
std::vector<double> bestPreconditionSplit(const PipelineStep &step, const CostModel &costs);

/// Per-device K-FAC work and bubble time of one bare step: the inputs of the
/// capacity bounds (the reference's bound on K, pf's bound on each K's step).
struct KfacCapacity {
  std::vector<double> refreshWork;         ///< curvature + inversion
  std::vector<double> preconditionPerStep;
  std::vector<double> bubblePerStep;
};

KfacCapacity kfacCapacity(const PipelineStep &step, const CostModel &costs);

} // namespace pf::sched

#endif // PF_SCHEDULE_KFACPROBLEM_H
