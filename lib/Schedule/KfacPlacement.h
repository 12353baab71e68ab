//===- KfacPlacement.h - Pieces both K-FAC policies build on (private) -*- C++ -*-===//
//
// Layer 2 of the K-FAC code (see pf/Schedule/KfacProblem.h): bubbles of a
// window, the result of a sweep through them, and finishing a plan with the
// work after the flushes. Knows no policy; the policies (layer 3) use it.
//
//===----------------------------------------------------------------------===//

#ifndef PF_LIB_SCHEDULE_KFACPLACEMENT_H
#define PF_LIB_SCHEDULE_KFACPLACEMENT_H

#include "pf/Schedule/KfacProblem.h"

#include <vector>

namespace pf::sched::detail {

constexpr double kEps = 1e-9;

/// A bubble of one device in window time, tagged with its step.
struct Gap {
  double start = 0, end = 0;
  int step = 0;
};

/// Bubbles of every device over `steps` steps, each step's bubbles shifted by
/// step * T_pipe. Bubbles never cross a step boundary. Bubbles of device d
/// shorter than minLength[d] (when given) are left out.
std::vector<std::vector<Gap>>
windowGaps(const KfacProblem &problem, int firstStep, int steps,
           const std::vector<double> &minLength = {});

/// What a policy placed inside the bubbles.
struct SweepResult {
  std::vector<PlacedPiece> pieces; ///< step-relative times
  std::vector<double> remaining;   ///< per task, work not placed yet
  /// Per task: step and step-relative end of its last placed piece
  /// (step -1 when nothing is placed).
  std::vector<int> lastStep;
  std::vector<double> lastEnd;

  explicit SweepResult(const KfacProblem &problem);
  void place(const KfacProblem &problem, int task, int step, double t,
             double duration, int refreshLag = 0);
};

/// Where work left over after the bubbles goes.
enum class TailRule {
  /// The reference: preconditioning after each flush, anything else that did
  /// not fit after the flush of the last step.
  LastStep,
  /// Each task goes after the flush of the step (at or after its inputs)
  /// where it lengthens the window least.
  Balanced,
};

/// Completes a plan: places the remaining work after the flushes, adds the
/// Chimera preconditioning exchange and computes every step's length. With
/// `overlapRefreshes`, an inversion may finish after an earlier flush of the
/// window as the previous refresh (steady state).
KfacPlan finishPlan(KfacProblem problem, const SweepResult &sweep,
                    TailRule rule, bool overlapRefreshes, Policy policy);

/// Mean step length of a plan.
double meanStepTime(const KfacPlan &plan);

} // namespace pf::sched::detail

#endif // PF_LIB_SCHEDULE_KFACPLACEMENT_H
