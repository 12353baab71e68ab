//===- KfacProblem.cpp - The K-FAC tasks of a refresh window --------------===//
//
// Layer 1 of the K-FAC code (see pf/Schedule/KfacProblem.h): turns a
// simulated step and the costs into tasks with owners, releases, deadlines
// and dependencies. Knows no policy and no placement.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/KfacProblem.h"
#include "pf/Schedule/KfacOffload.h"

#include <algorithm>

namespace pf::sched {

namespace {

/// Chimera keeps two replicas of every stage. Their factors are all-reduced,
/// then one replica inverts A and the other B; preconditioning is split by
/// layer (first half of the stage on the down replica) and the result sent to
/// the other replica. This halves the per-device inversion and
/// preconditioning work, which is what the reference's analytic bound
/// (t_inv of one stage per device) assumes.
int inversionOwner(const PipelineLayout &l, int stage, bool factorA) {
  return l.deviceOf(l.pipes == 2 && !factorA ? 1 : 0, stage);
}

int preconditionOwner(const PipelineLayout &l, int stage, int indexInStage) {
  if (l.pipes != 2)
    return l.deviceOf(0, stage);
  int half = (static_cast<int>(l.stageLayers[stage].size()) + 1) / 2;
  return l.deviceOf(indexInStage < half ? 0 : 1, stage);
}

/// Curvature of refresh `refresh`, from the micro-batches of window step
/// `from`.
void addCurvature(KfacProblem &p, const PipelineStep &step, const LayerCost &c, int layer,
                  int stage, int refresh, int from, std::vector<int> &aTasks,
                  std::vector<int> &bTasks) {
  const PipelineLayout &l = step.layout;
  for (int m = 0; m < l.microbatches; ++m) {
    int pipe = l.pipeOf(m);
    int device = l.deviceOf(pipe, stage);
    int idx = stage * l.microbatches + m;
    // A reads the layer's input of forward m; B the output gradient of
    // backward m (for ZB the input-gradient pass, not the weight pass).
    for (bool isA : {true, false}) {
      double duration = isA ? c.curvatureA : c.curvatureB;
      if (duration <= 0)
        continue;
      KfacTask t;
      t.kind = isA ? ItemKind::CurvatureA : ItemKind::CurvatureB;
      t.device = device;
      t.layer = layer;
      t.pipe = pipe;
      t.stage = stage;
      t.micro = m;
      t.refresh = refresh;
      t.duration = duration;
      t.release = from * p.stepSpan + (isA ? step.forwardEnd[idx] : step.backwardEnd[idx]);
      (isA ? aTasks : bTasks).push_back(static_cast<int>(p.tasks.size()));
      p.tasks.push_back(t);
    }
  }
}

void addInversions(KfacProblem &p, const PipelineStep &step, const LayerCost &c, int layer,
                   int stage, int refresh, int from, const std::vector<int> &aTasks,
                   const std::vector<int> &bTasks, bool replicaFactorsAfterFlush) {
  const PipelineLayout &l = step.layout;
  for (bool isA : {true, false}) {
    double duration = isA ? c.inversionA : c.inversionB;
    if (duration <= 0)
      continue;
    KfacTask t;
    t.kind = isA ? ItemKind::InversionA : ItemKind::InversionB;
    t.device = inversionOwner(l, stage, isA);
    t.layer = layer;
    t.pipe = l.pipes == 2 && !isA ? 1 : 0;
    t.stage = stage;
    t.refresh = refresh;
    t.duration = duration;
    t.deps = isA ? aTasks : bTasks;
    // Without curvature pieces of its own (the factor updates run inside the
    // passes) the factor is complete after the step's last pass that feeds it.
    if (t.deps.empty())
      for (int m = 0; m < l.microbatches; ++m) {
        int idx = stage * l.microbatches + m;
        t.release = std::max(t.release, from * p.stepSpan +
                                            (isA ? step.forwardEnd[idx] : step.backwardEnd[idx]));
      }
    t.depLatency = l.pipes == 2 ? c.factorAllreduce : 0;
    // Factors summed after the flush of the curvature step.
    if (l.pipes == 2 && replicaFactorsAfterFlush)
      t.release = std::max(t.release, (from + 1) * p.stepSpan + c.factorAllreduce);
    p.tasks.push_back(t);
  }
}

/// The share of a layer's preconditioning on Chimera's down replica.
double downShare(const KfacProblem &p, const PipelineLayout &l, int layer, int stage,
                 int indexInStage) {
  if (static_cast<size_t>(layer) < p.shape.preconditionDownShare.size())
    return p.shape.preconditionDownShare[layer];
  return preconditionOwner(l, stage, indexInStage) == l.deviceOf(0, stage) ? 1 : 0;
}

void addPreconditioning(KfacProblem &p, const PipelineStep &step,
                        const LayerCost &c, int layer, int stage,
                        int indexInStage) {
  const PipelineLayout &l = step.layout;
  if (c.precondition <= 0)
    return;
  // Chimera may split a layer's preconditioning (its linears) between the
  // replicas; each part sends its share of the gradient to the other one.
  std::vector<std::pair<int, double>> parts; // (pipe, share)
  if (l.pipes != 2) {
    parts.push_back({0, 1.0});
  } else {
    double down = downShare(p, l, layer, stage, indexInStage);
    if (down > 0)
      parts.push_back({0, down});
    if (down < 1)
      parts.push_back({1, 1 - down});
  }
  for (int k = 0; k < p.steps; ++k)
    for (auto [pipe, share] : parts) {
      KfacTask t;
      t.kind = ItemKind::Precondition;
      t.device = l.deviceOf(pipe, stage);
      t.layer = layer;
      t.pipe = pipe;
      t.stage = stage;
      t.step = k;
      t.duration = c.precondition * share;
      t.release = k * p.stepSpan + step.gradientReady[layer];
      t.deadline = (k + 1) * p.stepSpan;
      t.syncAfter = l.pipes == 2 ? c.allreduce * share : 0;
      p.tasks.push_back(t);
    }
}

/// The steps from which a layer refreshes (RefreshShape::refreshSteps).
std::vector<int> refreshStepsOf(const KfacProblem &p, int layer) {
  if (static_cast<size_t>(layer) < p.shape.refreshSteps.size() &&
      !p.shape.refreshSteps[layer].empty())
    return p.shape.refreshSteps[layer];
  return {0};
}

/// Marks a layer's inversions with their first and last refresh, so that the
/// steady-state overlap keeps the layer's inverses in order.
void linkRefreshes(KfacProblem &p, size_t firstTask) {
  int first[2] = {-1, -1};
  int last[2] = {-1, -1};
  for (size_t i = firstTask; i < p.tasks.size(); ++i) {
    KfacTask &t = p.tasks[i];
    if (t.kind != ItemKind::InversionA && t.kind != ItemKind::InversionB)
      continue;
    int f = t.kind == ItemKind::InversionA ? 0 : 1;
    if (first[f] < 0)
      first[f] = static_cast<int>(i);
    else
      t.firstRefresh = first[f];
    if (last[f] >= 0)
      p.tasks[last[f]].lastRefresh = false;
    last[f] = static_cast<int>(i);
  }
}

} // namespace

KfacProblem buildKfacProblem(const PipelineStep &step, const CostModel &costs, int steps,
                             const RefreshShape &shape) {
  KfacProblem p;
  p.shape = shape;
  p.steps = steps;
  p.stepSpan = step.makespan;
  p.devices = step.layout.devices;
  const PipelineLayout &l = step.layout;
  for (int s = 0; s < l.stages; ++s) {
    for (size_t i = 0; i < l.stageLayers[s].size(); ++i) {
      int layer = l.stageLayers[s][i];
      const LayerCost &c = costs.layers[layer];
      const size_t firstTask = p.tasks.size();
      const std::vector<int> from = refreshStepsOf(p, layer);
      for (size_t r = 0; r < from.size(); ++r) {
        std::vector<int> aTasks, bTasks;
        const int refresh = static_cast<int>(r);
        addCurvature(p, step, c, layer, s, refresh, from[r], aTasks, bTasks);
        addInversions(p, step, c, layer, s, refresh, from[r], aTasks, bTasks,
                      costs.replicaFactorsAfterFlush);
      }
      linkRefreshes(p, firstTask);
      addPreconditioning(p, step, c, layer, s, static_cast<int>(i));
    }
  }
  // Inversions moved to devices that idle more (KfacOffload.h).
  applyKfacMoves(p, step.kfacMoves);
  p.dependents.assign(p.tasks.size(), {});
  for (size_t i = 0; i < p.tasks.size(); ++i)
    for (int d : p.tasks[i].deps)
      p.dependents[d].push_back(static_cast<int>(i));
  p.stepGaps = step.idle;
  return p;
}

KfacCapacity kfacCapacity(const PipelineStep &step, const CostModel &costs) {
  KfacProblem one = buildKfacProblem(step, costs, 1);
  KfacCapacity c;
  c.refreshWork.assign(one.devices, 0);
  c.preconditionPerStep.assign(one.devices, 0);
  c.bubblePerStep.assign(one.devices, 0);
  for (const KfacTask &t : one.tasks)
    (t.kind == ItemKind::Precondition ? c.preconditionPerStep
                                      : c.refreshWork)[t.device] += t.duration;
  for (int d = 0; d < one.devices; ++d)
    for (const Interval &g : step.idle[d])
      c.bubblePerStep[d] += g.end - g.start;
  return c;
}

namespace {

/// Earliest end of `work` on a device from `t` on, using its bubbles of the
/// step (sorted) and all time after T_pipe.
double runFrom(const std::vector<Interval> &idle, double T, double t, double work) {
  for (const Interval &g : idle) {
    if (work <= 0)
      return t;
    if (g.end <= t)
      continue;
    double start = std::max(t, g.start);
    double used = std::min(work, g.end - start);
    work -= used;
    t = start + used;
  }
  return work > 0 ? std::max(t, T) + work : t;
}

/// The preconditioning tasks of one step alone: what unmovablePerStep reads.
/// Without the curvature pieces (one per layer and micro-batch) it is cheap
/// enough for bestPreconditionSplit to build once per candidate.
KfacProblem preconditioningOnly(const PipelineStep &step, const CostModel &costs,
                                const RefreshShape &shape) {
  KfacProblem p;
  p.shape.preconditionDownShare = shape.preconditionDownShare;
  p.steps = 1;
  p.stepSpan = step.makespan;
  p.devices = step.layout.devices;
  const PipelineLayout &l = step.layout;
  for (int s = 0; s < l.stages; ++s)
    for (size_t i = 0; i < l.stageLayers[s].size(); ++i) {
      const int layer = l.stageLayers[s][i];
      addPreconditioning(p, step, costs.layers[layer], layer, s, static_cast<int>(i));
    }
  return p;
}

} // namespace

double unmovablePerStep(const PipelineStep &step, const CostModel &costs,
                        const RefreshShape &shape) {
  KfacProblem p = preconditioningOnly(step, costs, shape);
  const double T = step.makespan;
  // Preemptive, earliest release first: the shortest finish on one device.
  std::vector<std::vector<const KfacTask *>> mine(p.devices);
  for (const KfacTask &t : p.tasks)
    if (t.kind == ItemKind::Precondition)
      mine[t.device].push_back(&t);
  double end = T;
  for (int d = 0; d < p.devices; ++d) {
    auto &tasks = mine[d];
    std::stable_sort(tasks.begin(), tasks.end(),
                     [](const KfacTask *a, const KfacTask *b) { return a->release < b->release; });
    double cursor = 0;
    for (const KfacTask *t : tasks) {
      cursor = runFrom(step.idle[d], T, std::max(cursor, t->release), t->duration);
      end = std::max(end, cursor + t->syncAfter);
    }
  }
  return end - T;
}

std::vector<double> bestPreconditionSplit(const PipelineStep &step, const CostModel &costs) {
  const PipelineLayout &l = step.layout;
  if (l.pipes != 2)
    return {};
  // Start from the default split; coordinate descent over the layers, a
  // layer's linears all on one replica or half on each.
  RefreshShape shape;
  shape.preconditionDownShare.assign(costs.layers.size(), 0);
  for (int s = 0; s < l.stages; ++s) {
    const int half = (static_cast<int>(l.stageLayers[s].size()) + 1) / 2;
    for (size_t i = 0; i < l.stageLayers[s].size(); ++i)
      shape.preconditionDownShare[l.stageLayers[s][i]] = static_cast<int>(i) < half ? 1 : 0;
  }
  const double initial = unmovablePerStep(step, costs, shape);
  double best = initial;
  for (int pass = 0; pass < 2; ++pass)
    for (double &share : shape.preconditionDownShare) {
      const double kept = share;
      for (double candidate : {0.0, 0.5, 1.0}) {
        if (candidate == kept)
          continue;
        share = candidate;
        double u = unmovablePerStep(step, costs, shape);
        if (u < best - 1e-9)
          best = u;
        else
          share = kept;
        if (share == candidate)
          break;
      }
    }
  if (best >= initial - 1e-9)
    return {};
  return shape.preconditionDownShare;
}

} // namespace pf::sched
