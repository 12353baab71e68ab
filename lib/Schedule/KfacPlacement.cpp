//===- KfacPlacement.cpp - Bubbles, sweep results, work after the flush ---===//
//
// Layer 2 of the K-FAC code (see pf/Schedule/KfacProblem.h): the pieces both
// policies build on. Uses only the problem layer; knows no policy.
//
//===----------------------------------------------------------------------===//

#include "KfacPlacement.h"

#include <algorithm>
#include <cmath>

namespace pf::sched::detail {

std::vector<std::vector<Gap>> windowGaps(const KfacProblem &problem,
                                         int firstStep, int steps,
                                         const std::vector<double> &minLength) {
  std::vector<std::vector<Gap>> gaps(problem.devices);
  const double T = problem.stepSpan;
  for (int d = 0; d < problem.devices; ++d) {
    const double shortest =
        std::max(kEps, minLength.empty() ? 0.0 : minLength[d]);
    std::vector<Interval> kept;
    for (const Interval &g : problem.stepGaps[d])
      if (g.end - g.start >= shortest)
        kept.push_back(g);
    gaps[d].reserve(kept.size() * steps);
    for (int k = firstStep; k < firstStep + steps; ++k)
      for (const Interval &g : kept)
        gaps[d].push_back({k * T + g.start, k * T + g.end, k});
  }
  return gaps;
}

SweepResult::SweepResult(const KfacProblem &problem)
    : remaining(problem.tasks.size()), lastStep(problem.tasks.size(), -1),
      lastEnd(problem.tasks.size(), 0) {
  for (size_t i = 0; i < problem.tasks.size(); ++i)
    remaining[i] = problem.tasks[i].duration;
}

void SweepResult::place(const KfacProblem &problem, int task, int step,
                        double t, double duration, int refreshLag) {
  PlacedPiece piece;
  piece.task = task;
  piece.step = step;
  piece.t = t;
  piece.duration = duration;
  piece.refreshLag = refreshLag;
  pieces.push_back(piece);
  remaining[task] = std::max(0.0, remaining[task] - duration);
  if (remaining[task] <= kEps * std::max(1.0, problem.tasks[task].duration))
    remaining[task] = 0;
  if (refreshLag == 0 &&
      (step > lastStep[task] ||
       (step == lastStep[task] && t + duration > lastEnd[task]))) {
    lastStep[task] = step;
    lastEnd[task] = t + duration;
  }
}

namespace {

/// Places leftover work after the flush of each step.
class TailPlanner {
public:
  TailPlanner(const KfacProblem &problem, const SweepResult &sweep, TailRule rule, bool overlap,
              KfacPlan &plan)
      : p_(problem), rule_(rule), overlap_(overlap), plan_(plan), endStep_(sweep.lastStep),
        endTime_(sweep.lastEnd), remaining_(sweep.remaining),
        load_(problem.devices, std::vector<double>(problem.steps, problem.stepSpan)),
        stepEnd_(problem.steps, problem.stepSpan), firstStep_(problem.tasks.size(), problem.steps) {
    for (const PlacedPiece &piece : sweep.pieces) {
      if (piece.refreshLag == 0)
        firstStep_[piece.task] = std::min(firstStep_[piece.task], piece.step);
      // A sweep may use the time after a flush that every device waits for
      // anyway (pf's throughput refresh): later work goes after it.
      if (piece.outsideBubble) {
        double &load = load_[problem.tasks[piece.task].device][piece.step];
        load = std::max(load, piece.t + piece.duration);
        stepEnd_[piece.step] = std::max(stepEnd_[piece.step], load);
      }
    }
  }

  void run() {
    // Preconditioning is bound to its step; place it first so flexible work
    // can use the time it forces every device to wait anyway.
    for (size_t i = 0; i < p_.tasks.size(); ++i)
      if (p_.tasks[i].kind == ItemKind::Precondition && remaining_[i] > 0)
        placeAt(static_cast<int>(i), p_.tasks[i].step, remaining_[i], 0);
    // Tasks are stored in dependency order (curvature before the inversion
    // that reads it), so one pass sees every input placed.
    for (size_t i = 0; i < p_.tasks.size(); ++i) {
      if (p_.tasks[i].kind == ItemKind::Precondition || remaining_[i] <= 0)
        continue;
      if (rule_ == TailRule::LastStep)
        placeAt(static_cast<int>(i), p_.steps - 1, remaining_[i], 0);
      else
        spread(static_cast<int>(i));
    }
    addPreconditionSyncs();
    addFactorSyncs();
    plan_.stepTime = stepEnd_;
  }

private:
  bool isInversion(int task) const {
    ItemKind k = p_.tasks[task].kind;
    return k == ItemKind::InversionA || k == ItemKind::InversionB;
  }

  /// First step the task may run in after its inputs and earlier pieces.
  /// A release exactly at a step's end belongs to that step (its flush).
  int minimumStep(int task) const {
    const KfacTask &t = p_.tasks[task];
    int step = std::max(0, endStep_[task]);
    int releaseStep =
        static_cast<int>(std::ceil(t.release / p_.stepSpan - kEps)) - 1;
    step = std::max(step, releaseStep);
    for (int d : t.deps)
      step = std::max(step, endStep_[d]);
    return std::min(step, p_.steps - 1);
  }

  /// Earliest step-relative start in the tail of `step`; steps before
  /// `minimumStep` only host pieces of the previous refresh (lag 1), which
  /// have no inputs left to wait for.
  double earliestStart(int task, int step, int lag) const {
    const KfacTask &t = p_.tasks[task];
    double start = load_[t.device][step];
    if (lag > 0)
      return start;
    for (int d : t.deps)
      if (endStep_[d] == step)
        start = std::max(start, endTime_[d] + t.depLatency);
    if (endStep_[task] == step)
      start = std::max(start, endTime_[task]);
    return start;
  }

  struct Slot {
    int step;
    int lag;
    double start;
  };

  /// Steps the rest of a task may use: from its inputs on; with refresh
  /// overlap, an inversion may also finish in earlier steps (of the next
  /// window, as the previous refresh).
  std::vector<Slot> slots(int task) const {
    const int first = minimumStep(task);
    std::vector<Slot> out;
    for (int k = first; k < p_.steps; ++k)
      out.push_back({k, 0, earliestStart(task, k, 0)});
    if (overlap_ && isInversion(task) && p_.tasks[task].lastRefresh) {
      // A layer refreshed several times per window: the previous window's
      // last refresh must end before this window's first one begins.
      int limit = first;
      if (int f = p_.tasks[task].firstRefresh; f >= 0)
        limit = std::min(limit, firstStep_[f]);
      for (int k = 0; k < limit; ++k)
        out.push_back({k, 1, earliestStart(task, k, 1)});
    }
    return out;
  }

  /// Balanced rule: first the time some other device already forces every
  /// device to wait after a flush, then water-filling: the rest raises the
  /// shortest allowed steps to a common level, so that the sum of the step
  /// lengths grows as little as possible and the room it creates is spread
  /// where other devices can use it.
  void spread(int task) {
    for (const Slot &s : slots(task)) {
      if (remaining_[task] <= kEps)
        return;
      double start = earliestStart(task, s.step, s.lag);
      double room = stepEnd_[s.step] - start;
      if (room > kEps)
        placeAt(task, s.step, std::min(room, remaining_[task]), s.lag);
    }
    if (remaining_[task] <= kEps)
      return;
    std::vector<Slot> open = slots(task);
    std::sort(open.begin(), open.end(),
              [](const Slot &a, const Slot &b) { return a.start < b.start; });
    // Level L with sum over slots of max(0, L - start) = rest.
    const double rest = remaining_[task];
    double level = open[0].start + rest, sum = 0;
    for (size_t n = 1; n <= open.size(); ++n) {
      sum += open[n - 1].start;
      double candidate = (rest + sum) / n;
      if (n == open.size() || candidate <= open[n].start) {
        level = candidate;
        break;
      }
    }
    // Previous-refresh pieces first, then in step order, so that the task's
    // pieces stay in time order within each refresh.
    std::sort(open.begin(), open.end(), [](const Slot &a, const Slot &b) {
      return std::make_pair(-a.lag, a.step) < std::make_pair(-b.lag, b.step);
    });
    for (const Slot &s : open) {
      double amount = std::min(remaining_[task], level - s.start);
      if (amount > kEps)
        placeAt(task, s.step, amount, s.lag);
    }
    if (remaining_[task] > kEps) // rounding: the last slot takes it
      placeAt(task, open.back().step, remaining_[task], open.back().lag);
  }

  void placeAt(int task, int step, double amount, int lag) {
    const KfacTask &t = p_.tasks[task];
    double start = earliestStart(task, step, lag);
    PlacedPiece piece;
    piece.task = task;
    piece.step = step;
    piece.t = start;
    piece.duration = amount;
    piece.outsideBubble = true;
    piece.refreshLag = lag;
    plan_.pieces.push_back(piece);
    double end = start + amount;
    load_[t.device][step] = end;
    stepEnd_[step] = std::max(stepEnd_[step], end);
    if (lag == 0) {
      endStep_[task] = step;
      endTime_[task] = end;
      firstStep_[task] = std::min(firstStep_[task], step);
    }
    remaining_[task] = std::max(0.0, remaining_[task] - amount);
  }

  /// Chimera: a preconditioned gradient must reach the other replica before
  /// the next step, so the exchange may lengthen the step too.
  void addPreconditionSyncs() {
    for (size_t i = 0; i < p_.tasks.size(); ++i) {
      const KfacTask &t = p_.tasks[i];
      if (t.kind != ItemKind::Precondition || t.syncAfter <= 0 ||
          endStep_[i] < 0)
        continue;
      PlacedPiece sync;
      sync.task = static_cast<int>(i);
      sync.step = endStep_[i];
      sync.t = endTime_[i];
      sync.duration = t.syncAfter;
      plan_.syncs.push_back(sync);
      stepEnd_[sync.step] =
          std::max(stepEnd_[sync.step], sync.t + sync.duration);
    }
  }

  /// Chimera: the replicas all-reduce a factor once all its curvature is
  /// done; like any work of the window it must end inside it.
  void addFactorSyncs() {
    for (size_t i = 0; i < p_.tasks.size(); ++i) {
      const KfacTask &t = p_.tasks[i];
      if (t.depLatency <= 0 || t.deps.empty())
        continue;
      int step = -1;
      double t0 = 0;
      for (int d : t.deps)
        if (endStep_[d] > step || (endStep_[d] == step && endTime_[d] > t0)) {
          step = endStep_[d];
          t0 = endTime_[d];
        }
      if (step < 0)
        continue;
      PlacedPiece sync;
      sync.task = static_cast<int>(i);
      sync.step = step;
      sync.t = t0;
      sync.duration = t.depLatency;
      plan_.syncs.push_back(sync);
      stepEnd_[step] = std::max(stepEnd_[step], t0 + t.depLatency);
    }
  }

  const KfacProblem &p_;
  TailRule rule_;
  bool overlap_;
  KfacPlan &plan_;
  std::vector<int> endStep_;
  std::vector<double> endTime_;
  std::vector<double> remaining_;
  std::vector<std::vector<double>> load_;
  std::vector<double> stepEnd_;
  /// Per task, the step of its first piece of this refresh (steps if none).
  std::vector<int> firstStep_;
};

} // namespace

KfacPlan finishPlan(KfacProblem problem, const SweepResult &sweep,
                    TailRule rule, bool overlapRefreshes, Policy policy) {
  KfacPlan plan;
  plan.policy = policy;
  plan.steps = problem.steps;
  plan.pieces = sweep.pieces;
  TailPlanner(problem, sweep, rule, overlapRefreshes, plan).run();
  plan.problem = std::move(problem);
  return plan;
}

double meanStepTime(const KfacPlan &plan) {
  double total = 0;
  for (double t : plan.stepTime)
    total += t;
  return plan.stepTime.empty() ? 0 : total / plan.stepTime.size();
}

} // namespace pf::sched::detail
