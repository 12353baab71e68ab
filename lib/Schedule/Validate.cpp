//===- Validate.cpp - Independent checks of a window timeline -------------===//
//
// Recomputes every constraint from the cost model instead of trusting the
// policy that produced the timeline: device exclusivity, pipeline data flow,
// K-FAC dependencies and deadlines, step bounds, and that each task's pieces
// add up to its duration.
//
// Layer "results" (docs/schedule.md): uses the K-FAC problem layer and
// OpGraph.h, never a policy, so a policy cannot validate its own mistakes.
//
//===----------------------------------------------------------------------===//

#include "OpGraph.h"
#include "pf/Schedule/Kfac.h"
#include "pf/Schedule/KfacOffload.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

namespace pf::sched {
namespace {

constexpr double kTol = 1e-6;

std::string describe(const TimelineItem &it) {
  std::ostringstream os;
  os << itemKindName(it.kind) << " (device " << it.device << ", step "
     << it.step;
  if (it.stage >= 0)
    os << ", stage " << it.stage;
  if (it.micro >= 0)
    os << ", micro-batch " << it.micro;
  if (it.layer >= 0)
    os << ", layer " << it.layer;
  os << ", " << it.start << "-" << it.end << " ms)";
  return os.str();
}

Status checkExclusive(const Timeline &tl, const std::vector<TimelineItem> &items) {
  std::vector<std::vector<const TimelineItem *>> perDevice(tl.devices);
  for (const TimelineItem &it : items) {
    if (it.device < 0 || it.device >= tl.devices)
      return Status::error("item on unknown device: " + describe(it));
    if (it.end < it.start - kTol)
      return Status::error("item ends before it starts: " + describe(it));
    if (it.lane == Lane::Compute)
      perDevice[it.device].push_back(&it);
  }
  for (auto &list : perDevice) {
    std::sort(list.begin(), list.end(),
              [](const TimelineItem *a, const TimelineItem *b) {
                return a->start < b->start;
              });
    for (size_t i = 1; i < list.size(); ++i)
      if (list[i]->start < list[i - 1]->end - kTol)
        return Status::error("overlap on a device: " + describe(*list[i - 1]) +
                             " and " + describe(*list[i]));
  }
  return Status::success();
}

Status checkStepBounds(const Timeline &tl,
                       const std::vector<TimelineItem> &items) {
  if (static_cast<int>(tl.stepStart.size()) != tl.steps ||
      static_cast<int>(tl.stepTime.size()) != tl.steps)
    return Status::error("the timeline's step table does not match its steps");
  for (const TimelineItem &it : items) {
    if (it.step < 0 || it.step >= tl.steps)
      return Status::error("item outside the window: " + describe(it));
    double begin = tl.stepStart[it.step];
    double end = begin + tl.stepTime[it.step];
    if (it.start < begin - kTol || it.end > end + kTol)
      return Status::error("item outside its step [" + std::to_string(begin) +
                           ", " + std::to_string(end) + "]: " + describe(it));
  }
  return Status::success();
}

Status checkPipeline(const Timeline &tl, const std::vector<TimelineItem> &items,
                     const PipelineStep &step, const CostModel &costs) {
  const PipelineLayout &l = step.layout;
  detail::OpGraph graph(l);
  // (step, op id) -> item
  std::map<std::pair<int, int>, const TimelineItem *> ops;
  auto passOf = [](ItemKind k) {
    switch (k) {
    case ItemKind::Forward:
      return PassKind::Forward;
    case ItemKind::Backward:
      return PassKind::Backward;
    case ItemKind::BackwardInput:
      return PassKind::BackwardInput;
    default:
      return PassKind::BackwardWeight;
    }
  };
  for (const TimelineItem &it : items)
    if (isPipelineCompute(it.kind))
      ops[{it.step, graph.id({passOf(it.kind), it.stage, it.micro})}] = &it;
  const size_t expected = graph.allOps().size() * tl.steps;
  if (ops.size() != expected)
    return Status::error("the timeline has " + std::to_string(ops.size()) +
                         " pipeline passes, expected " + std::to_string(expected));
  std::vector<PipelineOp> deps;
  for (const auto &[key, it] : ops) {
    PipelineOp op{passOf(it->kind), it->stage, it->micro};
    if (it->device != graph.device(op))
      return Status::error("pass on the wrong device: " + describe(*it));
    double dur = passDuration(l, costs, op.pass, op.stage);
    if (std::fabs(it->duration() - dur) > kTol * std::max(1.0, dur))
      return Status::error("pass has the wrong duration: " + describe(*it));
    graph.producers(op, deps);
    for (const PipelineOp &p : deps) {
      const TimelineItem *in = ops.at({key.first, graph.id(p)});
      if (it->start < in->end + graph.latency(p, op, costs.p2p) - kTol)
        return Status::error(describe(*it) + " starts before its input " +
                             describe(*in));
    }
  }
  return Status::success();
}

// kind, layer, pipe, micro, step (preconditioning) or refresh (the rest)
using TaskKey = std::tuple<int, int, int, int, int>;

TaskKey keyOf(ItemKind kind, int layer, int pipe, int micro, int step, int refresh) {
  return {static_cast<int>(kind), layer, pipe, micro,
          kind == ItemKind::Precondition ? step : refresh};
}

Status checkKfac(const Timeline &tl, const std::vector<TimelineItem> &items,
                 const PipelineStep &step, const CostModel &costs) {
  bool any = false;
  for (const TimelineItem &it : items)
    any |= isKfac(it.kind);
  if (!any)
    return Status::success();
  RefreshShape shape;
  shape.refreshSteps = tl.refreshSteps;
  shape.preconditionDownShare = tl.preconditionDownShare;
  KfacProblem p = buildKfacProblem(step, costs, tl.steps, shape);
  std::map<TaskKey, int> index;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const KfacTask &t = p.tasks[i];
    index[keyOf(t.kind, t.layer, t.pipe, t.micro, t.step, t.refresh)] = static_cast<int>(i);
  }
  std::vector<double> placed(p.tasks.size(), 0), end(p.tasks.size(), -1);
  std::vector<std::vector<const TimelineItem *>> pieces(p.tasks.size());
  for (const TimelineItem &it : items) {
    if (!isKfac(it.kind))
      continue;
    auto found = index.find(keyOf(it.kind, it.layer, it.pipe, it.micro, it.step, it.refresh));
    if (found == index.end())
      return Status::error("K-FAC item matches no task: " + describe(it));
    const KfacTask &t = p.tasks[found->second];
    if (it.device != t.device)
      return Status::error("K-FAC item on the wrong device: " + describe(it));
    placed[found->second] += it.duration();
    end[found->second] = std::max(end[found->second], it.end);
    pieces[found->second].push_back(&it);
  }
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const KfacTask &t = p.tasks[i];
    if (std::fabs(placed[i] - t.duration) > kTol * std::max(1.0, t.duration)) {
      std::ostringstream os;
      os << itemKindName(t.kind) << " of layer " << t.layer << " (micro-batch "
         << t.micro << ", step " << t.step << ") has " << placed[i]
         << " ms placed of " << t.duration;
      return Status::error(os.str());
    }
  }
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const KfacTask &t = p.tasks[i];
    // Window time of the bare steps -> absolute time of the timeline.
    // Curvature and inversions count from the step their refresh reads.
    int releaseStep = 0;
    if (t.kind == ItemKind::Precondition)
      releaseStep = t.step;
    else if (static_cast<size_t>(t.layer) < shape.refreshSteps.size() &&
             static_cast<size_t>(t.refresh) < shape.refreshSteps[t.layer].size())
      releaseStep = shape.refreshSteps[t.layer][t.refresh];
    if (releaseStep < 0 || releaseStep >= tl.steps)
      return Status::error("a refresh starts outside the window (layer " + std::to_string(t.layer) +
                           ")");
    double release = tl.stepStart[releaseStep] +
                     (t.release - releaseStep * p.stepSpan);
    for (int d : t.deps)
      release = std::max(release, end[d] + t.depLatency);
    for (const TimelineItem *it : pieces[i]) {
      if (it->refreshLag > 0)
        continue; // finishes the previous refresh: its inputs are older
      if (it->start < release - kTol)
        return Status::error(describe(*it) + " starts before its inputs are "
                             "ready (" + std::to_string(release) + " ms)");
      if (t.kind == ItemKind::Precondition && it->step != t.step)
        return Status::error(describe(*it) + " runs outside its step");
    }
  }
  return Status::success();
}

} // namespace

Status validateTimeline(const Timeline &timeline, const PipelineStep &step,
                        const CostModel &costs) {
  const std::vector<TimelineItem> items = timeline.allItems();
  for (Status s : {checkExclusive(timeline, items),
                   checkStepBounds(timeline, items),
                   checkPipeline(timeline, items, step, costs),
                   checkKfac(timeline, items, step, costs),
                   checkInverseReturns(timeline, items, step)})
    if (!s.ok())
      return s;
  return Status::success();
}

} // namespace pf::sched
