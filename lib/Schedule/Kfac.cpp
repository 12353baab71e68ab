//===- Kfac.cpp - K-FAC facade: policy names, dispatch, window timeline ---===//
//
// Layer 4, the top of the K-FAC code (see pf/Schedule/KfacProblem.h): the
// only file that knows every policy. It dispatches planKfac to them and
// assembles the timeline of the plan they return; nothing below calls it.
//
//===----------------------------------------------------------------------===//

#include "KfacPolicies.h"
#include "pf/Schedule/Kfac.h"
#include "pf/Schedule/KfacOffload.h"
#include "pf/Schedule/Limits.h"

#include <algorithm>
#include <cmath>
#include <cctype>

namespace pf::sched {

Expected<Policy> parsePolicy(const std::string &name) {
  std::string key;
  for (char c : name)
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key == "none")
    return Policy::None;
  if (key == "pipefisher")
    return Policy::PipeFisher;
  if (key == "pf")
    return Policy::PF;
  return Status::error("unknown policy '" + name +
                       "' (known: pf, pipefisher, none)");
}

const char *policyName(Policy policy) {
  switch (policy) {
  case Policy::None:
    return "none";
  case Policy::PipeFisher:
    return "pipefisher";
  case Policy::PF:
    return "pf";
  }
  return "?";
}

Expected<KfacPlan> planKfac(const PipelineStep &step, const CostModel &costs,
                            const KfacOptions &options) {
  if (options.refreshSteps < 0)
    return Status::error("the refresh interval must be positive");
  if (Status s = checkLimit("the refresh interval", options.refreshSteps, kMaxRefreshSteps,
                            "kMaxRefreshSteps");
      !s.ok())
    return s;
  if (!std::isfinite(options.margin))
    return Status::error("the bubble margin must be a finite number");
  if (options.margin < 0)
    return Status::error("the bubble margin must not be negative");
  // Negative (the default) means automatic; NaN or infinity means nothing.
  if (!std::isfinite(options.maxOverhead))
    return Status::error("the allowed overhead must be a finite number");
  if (!std::isfinite(options.maxOverheadBeyond) || options.maxOverheadBeyond < 0)
    return Status::error("the allowed overhead beyond the unmovable must be a finite "
                         "number >= 0");
  if (options.maxStaggerPeriod < 1)
    return Status::error("the longest staggered refresh period must be positive");
  if (options.splitPieces < 1)
    return Status::error("split pieces must be at least 1");
  if (Status s = checkLimit("split pieces", options.splitPieces, kMaxSplitPieces,
                            "kMaxSplitPieces");
      !s.ok())
    return s;
  switch (options.policy) {
  case Policy::None: {
    KfacPlan plan;
    plan.policy = Policy::None;
    plan.steps = 1;
    plan.problem.steps = 1;
    plan.problem.stepSpan = step.makespan;
    plan.problem.devices = step.layout.devices;
    plan.stepTime = {step.makespan};
    return plan;
  }
  case Policy::PipeFisher:
  case Policy::PF: {
    KfacPlan plan = options.policy == Policy::PF ? detail::planPF(step, costs, options)
                                                 : detail::planPipeFisher(step, costs, options);
    // Reported for every K-FAC plan: the split is the best one whatever
    // split the plan used, so the figure is the configuration's own.
    RefreshShape best;
    best.preconditionDownShare = bestPreconditionSplit(step, costs);
    plan.unmovable = unmovablePerStep(step, costs, best);
    return plan;
  }
  }
  return Status::error("unhandled policy");
}

Timeline assembleTimeline(const PipelineStep &step, const KfacPlan &plan) {
  const KfacProblem &problem = plan.problem;
  Timeline tl;
  tl.devices = step.layout.devices;
  tl.steps = plan.steps;
  tl.pipelineStep = step.makespan;
  tl.stepTime = plan.stepTime;
  tl.stepItems = step.items;
  tl.refreshSteps = problem.shape.refreshSteps;
  tl.preconditionDownShare = problem.shape.preconditionDownShare;
  double start = 0;
  for (int k = 0; k < plan.steps; ++k) {
    tl.stepStart.push_back(start);
    start += plan.stepTime[k];
  }
  auto itemFor = [&](const PlacedPiece &piece, ItemKind kind, Lane lane) {
    const KfacTask &t = problem.tasks[piece.task];
    TimelineItem it;
    it.kind = kind;
    it.lane = lane;
    it.device = t.device;
    it.step = piece.step;
    it.pipe = t.pipe;
    it.stage = t.stage;
    it.micro = t.micro;
    it.layer = t.layer;
    it.start = tl.stepStart[piece.step] + piece.t;
    it.end = it.start + piece.duration;
    it.outsideBubble = piece.outsideBubble;
    it.refreshLag = piece.refreshLag;
    it.refresh = t.refresh;
    return it;
  };
  std::vector<int> pieceCount(problem.tasks.size(), 0);
  for (const PlacedPiece &piece : plan.pieces) {
    TimelineItem it = itemFor(piece, problem.tasks[piece.task].kind, Lane::Compute);
    it.piece = pieceCount[piece.task]++;
    tl.kfacItems.push_back(it);
  }
  for (const PlacedPiece &sync : plan.syncs) {
    const KfacTask &t = problem.tasks[sync.task];
    if (t.kind == ItemKind::Precondition) {
      tl.kfacItems.push_back(itemFor(sync, ItemKind::PrecondSync, Lane::Comm));
      continue;
    }
    // A factor all-reduce involves every replica that computed a part.
    std::vector<int> devices;
    for (int d : t.deps)
      if (std::find(devices.begin(), devices.end(), problem.tasks[d].device) ==
          devices.end())
        devices.push_back(problem.tasks[d].device);
    for (int device : devices) {
      TimelineItem it = itemFor(sync, ItemKind::FactorSync, Lane::Comm);
      it.device = device;
      it.micro = -1;
      tl.kfacItems.push_back(it);
    }
  }
  appendInverseReturns(tl, step); // K-FAC offload (KfacOffload.h)
  return tl;
}

} // namespace pf::sched
