//===- KfacProblem.cpp - The K-FAC tasks of a refresh window --------------===//
//
// Layer 1 of the K-FAC code (see pf/Schedule/KfacProblem.h): turns a
// simulated step and the costs into tasks with owners, releases, deadlines
// and dependencies. Knows no policy and no placement.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/KfacProblem.h"

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

void addCurvature(KfacProblem &p, const PipelineStep &step, const LayerCost &c,
                  int layer, int stage, std::vector<int> &aTasks,
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
      t.duration = duration;
      t.release = isA ? step.forwardEnd[idx] : step.backwardEnd[idx];
      (isA ? aTasks : bTasks).push_back(static_cast<int>(p.tasks.size()));
      p.tasks.push_back(t);
    }
  }
}

void addInversions(KfacProblem &p, const PipelineStep &step, const LayerCost &c,
                   int layer, int stage, const std::vector<int> &aTasks,
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
    t.duration = duration;
    t.deps = isA ? aTasks : bTasks;
    // Without curvature pieces of its own (the factor updates run inside the
    // passes) the factor is complete after the step's last pass that feeds it.
    if (t.deps.empty())
      for (int m = 0; m < l.microbatches; ++m) {
        int idx = stage * l.microbatches + m;
        t.release = std::max(t.release, isA ? step.forwardEnd[idx] : step.backwardEnd[idx]);
      }
    t.depLatency = l.pipes == 2 ? c.factorAllreduce : 0;
    // Factors summed after the flush of the curvature step (window step 0).
    if (l.pipes == 2 && replicaFactorsAfterFlush)
      t.release = std::max(t.release, step.makespan + c.factorAllreduce);
    p.tasks.push_back(t);
  }
}

void addPreconditioning(KfacProblem &p, const PipelineStep &step,
                        const LayerCost &c, int layer, int stage,
                        int indexInStage) {
  const PipelineLayout &l = step.layout;
  if (c.precondition <= 0)
    return;
  for (int k = 0; k < p.steps; ++k) {
    KfacTask t;
    t.kind = ItemKind::Precondition;
    t.device = preconditionOwner(l, stage, indexInStage);
    t.layer = layer;
    t.pipe = l.pipes == 2 && t.device != l.deviceOf(0, stage) ? 1 : 0;
    t.stage = stage;
    t.step = k;
    t.duration = c.precondition;
    t.release = k * p.stepSpan + step.gradientReady[layer];
    t.deadline = (k + 1) * p.stepSpan;
    t.syncAfter = l.pipes == 2 ? c.allreduce : 0;
    p.tasks.push_back(t);
  }
}

} // namespace

KfacProblem buildKfacProblem(const PipelineStep &step, const CostModel &costs,
                             int steps) {
  KfacProblem p;
  p.steps = steps;
  p.stepSpan = step.makespan;
  p.devices = step.layout.devices;
  const PipelineLayout &l = step.layout;
  for (int s = 0; s < l.stages; ++s) {
    for (size_t i = 0; i < l.stageLayers[s].size(); ++i) {
      int layer = l.stageLayers[s][i];
      const LayerCost &c = costs.layers[layer];
      std::vector<int> aTasks, bTasks;
      addCurvature(p, step, c, layer, s, aTasks, bTasks);
      addInversions(p, step, c, layer, s, aTasks, bTasks, costs.replicaFactorsAfterFlush);
      addPreconditioning(p, step, c, layer, s, static_cast<int>(i));
    }
  }
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

} // namespace pf::sched
