//===- PolicyPipeFisher.cpp - The reference greedy placement --------------===//
//
// shared/reference/pipefisher.md, after pipe-fisher's auto_schedule.py:
//  - every gap between pipeline passes of a device is a bubble, visited in
//    time order; in each bubble the device's work list is scanned repeatedly
//    until nothing more fits;
//  - the list is: curvature A queues of every layer, curvature B queues, then
//    inversions of A, then of B; a curvature queue holds one piece per
//    micro-batch and pops them in order;
//  - an item is placed back-to-back only when duration * 1.05 fits in what
//    is left of the bubble;
//  - curvature A piece i needs forward i done before the bubble, B piece i
//    backward i; an inversion waits until ALL curvature of ALL layers of the
//    device is placed (global, not per layer) and, on Chimera, until the other
//    replica's curvature of that factor is done and all-reduced;
//  - what does not fit spills into the next step's bubbles (K = number of
//    steps used); preconditioning runs after each flush, never in bubbles.
// Where the published script differs from that description (it checks the
// dependency counts against the down pipeline only, lets an inversion wait for
// one factor kind only, and in its final retry may place work before its
// inputs), we follow the description; docs/schedule.md lists the differences.
//
// Layer 3 of the K-FAC code (see pf/Schedule/KfacProblem.h): builds on the
// problem and placement layers only; the facade (Kfac.cpp) and pf's policy,
// which uses it as its reference, call it.
//
//===----------------------------------------------------------------------===//

#include "KfacPlacement.h"
#include "KfacPolicies.h"

#include <algorithm>
#include <tuple>

namespace pf::sched::detail {
namespace {

/// A device's work list in the reference's order.
struct WorkList {
  /// Curvature queues (one per layer, pipe and factor), A queues first.
  std::vector<std::vector<int>> queues;
  std::vector<size_t> head;
  std::vector<int> inversions; ///< A inversions first, then B
  int curvatureLeft = 0;
};

std::vector<WorkList> buildWorkLists(const KfacProblem &p) {
  std::vector<WorkList> lists(p.devices);
  // Queue key (factor, layer, pipe) orders A before B, then by layer.
  std::vector<std::vector<std::tuple<int, int, int>>> keys(p.devices);
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const KfacTask &t = p.tasks[i];
    bool isA = t.kind == ItemKind::CurvatureA;
    if (!isA && t.kind != ItemKind::CurvatureB)
      continue;
    auto key = std::make_tuple(isA ? 0 : 1, t.layer, t.pipe);
    WorkList &w = lists[t.device];
    auto &k = keys[t.device];
    auto pos = std::find(k.begin(), k.end(), key);
    if (pos == k.end()) {
      k.push_back(key);
      w.queues.emplace_back();
      pos = k.end() - 1;
    }
    w.queues[pos - k.begin()].push_back(static_cast<int>(i)); // micro order
    ++w.curvatureLeft;
  }
  for (int d = 0; d < p.devices; ++d) {
    WorkList &w = lists[d];
    std::vector<size_t> idx(w.queues.size());
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = i;
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return keys[d][a] < keys[d][b]; });
    std::vector<std::vector<int>> sorted;
    for (size_t i : idx)
      sorted.push_back(std::move(w.queues[i]));
    w.queues = std::move(sorted);
    w.head.assign(w.queues.size(), 0);
  }
  for (ItemKind kind : {ItemKind::InversionA, ItemKind::InversionB})
    for (size_t i = 0; i < p.tasks.size(); ++i)
      if (p.tasks[i].kind == kind)
        lists[p.tasks[i].device].inversions.push_back(static_cast<int>(i));
  return lists;
}

class PipeFisherGreedy {
public:
  PipeFisherGreedy(const KfacProblem &problem, const KfacOptions &options)
      : p_(problem), margin_(options.margin), lists_(buildWorkLists(problem)),
        sweep_(problem), finished_(problem.tasks.size(), -1),
        stepGaps_(gapsInTimeOrder()) {}

  /// Fills steps until all curvature and inversions are placed; returns K.
  int run(int maxSteps) {
    int steps = 0;
    while (!allPlaced() && steps < maxSteps) {
      bool placedAny = fillStep(steps);
      ++steps;
      // An item longer than every bubble would spill forever: stop and let
      // it run after the flush of the last step that used its bubbles.
      if (!placedAny && steps > 1) {
        --steps;
        break;
      }
    }
    return std::max(steps, 1);
  }

  SweepResult &result() { return sweep_; }

private:
  bool allPlaced() const {
    for (const WorkList &w : lists_) {
      if (w.curvatureLeft > 0)
        return false;
      for (int inv : w.inversions)
        if (sweep_.remaining[inv] > 0)
          return false;
    }
    return true;
  }

  /// The bubbles of one step of all devices, in time order (so that a
  /// Chimera inversion sees its other replica's curvature already placed).
  std::vector<std::pair<Gap, int>> gapsInTimeOrder() const {
    std::vector<std::pair<Gap, int>> gaps;
    auto perDevice = windowGaps(p_, 0, 1);
    for (int d = 0; d < p_.devices; ++d)
      for (const Gap &g : perDevice[d])
        gaps.push_back({g, d});
    std::stable_sort(gaps.begin(), gaps.end(), [](const auto &a, const auto &b) {
      return a.first.start < b.first.start;
    });
    return gaps;
  }

  /// Visits the bubbles of step k.
  bool fillStep(int k) {
    bool placed = false;
    for (auto [gap, device] : stepGaps_) {
      gap.start += k * p_.stepSpan;
      gap.end += k * p_.stepSpan;
      gap.step = k;
      placed |= fillGap(device, gap);
    }
    return placed;
  }

  bool fits(double pos, double duration, const Gap &gap) const {
    return pos + duration * (1 + margin_) < gap.end;
  }

  bool fillGap(int device, const Gap &gap) {
    WorkList &w = lists_[device];
    double pos = gap.start;
    bool any = false;
    for (bool again = true; again;) {
      again = false;
      for (size_t q = 0; q < w.queues.size(); ++q)
        while (w.head[q] < w.queues[q].size()) {
          int task = w.queues[q][w.head[q]];
          const KfacTask &t = p_.tasks[task];
          // "forward i done before this bubble": its end precedes the gap.
          if (!fits(pos, t.duration, gap) || t.release > gap.start + kEps)
            break;
          pos = put(task, gap, pos);
          ++w.head[q];
          --w.curvatureLeft;
          again = any = true;
        }
      for (int task : w.inversions) {
        const KfacTask &t = p_.tasks[task];
        if (sweep_.remaining[task] <= 0 || !fits(pos, t.duration, gap) ||
            !inversionReady(w, t, pos))
          continue;
        pos = put(task, gap, pos);
        again = any = true;
      }
    }
    return any;
  }

  bool inversionReady(const WorkList &w, const KfacTask &t, double pos) const {
    if (w.curvatureLeft > 0)
      return false;
    for (int d : t.deps)
      if (finished_[d] < 0 || finished_[d] + t.depLatency > pos + kEps)
        return false;
    return true;
  }

  double put(int task, const Gap &gap, double pos) {
    double duration = p_.tasks[task].duration;
    sweep_.place(p_, task, gap.step, pos - gap.step * p_.stepSpan, duration);
    finished_[task] = pos + duration;
    return pos + duration;
  }

  const KfacProblem &p_;
  double margin_;
  std::vector<WorkList> lists_;
  SweepResult sweep_;
  std::vector<double> finished_; ///< window-time end of placed tasks
  std::vector<std::pair<Gap, int>> stepGaps_;
};

} // namespace

KfacPlan planPipeFisher(const PipelineStep &step, const CostModel &costs,
                        const KfacOptions &options) {
  // The number of steps is only known after spilling; build the problem for
  // one step to get the curvature and inversion tasks (they do not depend on
  // K), then rebuild it for the K found so that preconditioning covers it.
  const int limit = options.refreshSteps > 0 ? options.refreshSteps : 1 << 20;
  KfacProblem probe = buildKfacProblem(step, costs, 1);
  PipeFisherGreedy greedy(probe, options);
  int steps = greedy.run(limit);
  // An explicit interval is the window even when the work fits in fewer
  // steps: the inverses still refresh only every K steps.
  if (options.refreshSteps > 0)
    steps = options.refreshSteps;

  KfacProblem problem = buildKfacProblem(step, costs, steps);
  // Tasks are built in the same order for any K except that preconditioning
  // adds one task per step; map the probe's placements by identity.
  SweepResult sweep(problem);
  std::vector<int> map(probe.tasks.size(), -1);
  for (size_t i = 0, j = 0; i < probe.tasks.size(); ++i) {
    while (j < problem.tasks.size() &&
           !(problem.tasks[j].kind == probe.tasks[i].kind &&
             problem.tasks[j].layer == probe.tasks[i].layer &&
             problem.tasks[j].micro == probe.tasks[i].micro &&
             problem.tasks[j].pipe == probe.tasks[i].pipe))
      ++j;
    map[i] = static_cast<int>(j++);
  }
  for (const PlacedPiece &piece : greedy.result().pieces)
    sweep.place(problem, map[piece.task], piece.step, piece.t, piece.duration);
  KfacPlan plan = finishPlan(std::move(problem), sweep, TailRule::LastStep,
                             /*overlapRefreshes=*/false, Policy::PipeFisher);
  plan.candidatesTried = 1;
  return plan;
}

} // namespace pf::sched::detail
