//===- Simulator.cpp - Discrete-event run of a pipeline program -----------===//
//
// Layer "pipeline" (docs/schedule.md): uses OpGraph.h and the cost model;
// it knows neither how programs are built nor K-FAC.
//
//===----------------------------------------------------------------------===//

#include "OpGraph.h"
#include "pf/Schedule/Timeline.h"

#include <algorithm>
#include <deque>
#include <sstream>

namespace pf::sched {
namespace {

const char *passName(PassKind pass) {
  switch (pass) {
  case PassKind::Forward:
    return "forward";
  case PassKind::Backward:
    return "backward";
  case PassKind::BackwardInput:
    return "backward-input";
  case PassKind::BackwardWeight:
    return "backward-weight";
  }
  return "?";
}

ItemKind itemKindOf(PassKind pass) {
  switch (pass) {
  case PassKind::Forward:
    return ItemKind::Forward;
  case PassKind::Backward:
    return ItemKind::Backward;
  case PassKind::BackwardInput:
    return ItemKind::BackwardInput;
  case PassKind::BackwardWeight:
    return ItemKind::BackwardWeight;
  }
  return ItemKind::Forward;
}

std::string describe(const PipelineOp &op) {
  std::ostringstream os;
  os << passName(op.pass) << " of stage " << op.stage << ", micro-batch "
     << op.micro;
  return os.str();
}

/// Runs every device's program in order; a pass starts when its device is
/// free and all its inputs have arrived.
class Executor {
public:
  Executor(const PipelineProgram &program, const CostModel &costs)
      : program_(program), layout_(program.layout), costs_(costs),
        graph_(program.layout), end_(graph_.numIds(), -1.0) {}

  Status run(PipelineStep &out) {
    const int D = layout_.devices;
    std::vector<size_t> next(D, 0);
    std::vector<double> free(D, 0.0);
    std::deque<int> work;
    std::vector<char> queued(D, 1);
    for (int d = 0; d < D; ++d)
      work.push_back(d);
    std::vector<PipelineOp> deps, users;
    while (!work.empty()) {
      int d = work.front();
      work.pop_front();
      queued[d] = 0;
      const auto &order = program_.order[d];
      while (next[d] < order.size()) {
        const PipelineOp &op = order[next[d]];
        if (!isValidPass(op))
          return Status::error("device " + std::to_string(d) +
                               " runs an invalid pass: " + describe(op));
        if (graph_.device(op) != d)
          return Status::error("device " + std::to_string(d) + " runs " +
                               describe(op) + " which belongs to device " +
                               std::to_string(graph_.device(op)));
        // DualPipe's F&B pair starts once the inputs of both passes are
        // there, and both outputs leave when the pair ends.
        const PipelineOp *partner =
            next[d] + 1 < order.size() && order[next[d] + 1].overlapsPrevious
                ? &order[next[d] + 1]
                : nullptr;
        double ready = free[d];
        if (!inputsReady(op, nullptr, ready, deps) ||
            (partner && !inputsReady(*partner, &op, ready, deps)))
          break;
        if (end_[graph_.id(op)] >= 0)
          return Status::error("the program runs " + describe(op) + " twice");
        double dur = passDuration(layout_, costs_, op.pass, op.stage);
        double partnerDur =
            partner ? passDuration(layout_, costs_, partner->pass, partner->stage) : 0;
        end_[graph_.id(op)] = ready + dur + partnerDur;
        free[d] = ready + dur;
        emit(out, op, d, ready, ready + dur);
        ++next[d];
        graph_.consumers(op, users);
        for (const PipelineOp &u : users) {
          int ud = graph_.device(u);
          if (!queued[ud]) {
            queued[ud] = 1;
            work.push_back(ud);
          }
        }
      }
    }
    return checkComplete(next);
  }

private:
  /// Whether every input of `op` (but `besides`) has arrived; raises
  /// `ready` to the latest arrival.
  bool inputsReady(const PipelineOp &op, const PipelineOp *besides, double &ready,
                   std::vector<PipelineOp> &deps) const {
    graph_.producers(op, deps);
    for (const PipelineOp &p : deps) {
      if (besides && graph_.id(p) == graph_.id(*besides))
        continue;
      double e = end_[graph_.id(p)];
      if (e < 0)
        return false;
      ready = std::max(ready, e + graph_.latency(p, op, costs_.p2p));
    }
    return true;
  }

  /// In range, and whole or split as the layout says for its micro-batch.
  bool isValidPass(const PipelineOp &op) const {
    if (op.stage < 0 || op.stage >= layout_.stages || op.micro < 0 ||
        op.micro >= layout_.microbatches)
      return false;
    if (op.pass == PassKind::Forward)
      return true;
    bool split = layout_.splitsBackward(op.stage, op.micro);
    return split ? op.pass != PassKind::Backward : op.pass == PassKind::Backward;
  }

  void emit(PipelineStep &out, const PipelineOp &op, int device, double start,
            double end) {
    TimelineItem item;
    item.kind = itemKindOf(op.pass);
    item.device = device;
    item.pipe = layout_.pipeOf(op.micro);
    item.stage = op.stage;
    item.micro = op.micro;
    item.start = start;
    item.end = end;
    out.items.push_back(item);
  }

  Status checkComplete(const std::vector<size_t> &next) {
    for (int d = 0; d < layout_.devices; ++d)
      if (next[d] < program_.order[d].size())
        return Status::error("the pipeline program deadlocks: device " +
                             std::to_string(d) + " waits forever before " +
                             describe(program_.order[d][next[d]]));
    detail::OpGraph graph(layout_);
    for (const PipelineOp &op : graph.allOps())
      if (end_[graph.id(op)] < 0)
        return Status::error("the pipeline program never runs " + describe(op));
    return Status::success();
  }

  const PipelineProgram &program_;
  const PipelineLayout &layout_;
  const CostModel &costs_;
  detail::OpGraph graph_;
  std::vector<double> end_;
};

/// Sends between adjacent stages, drawn on the sender's communication lane.
void addTransfers(PipelineStep &step, double p2p) {
  if (p2p <= 0)
    return;
  const PipelineLayout &l = step.layout;
  detail::OpGraph graph(l);
  std::vector<TimelineItem> sends;
  std::vector<PipelineOp> users;
  for (const TimelineItem &it : step.items) {
    PassKind pass = it.kind == ItemKind::Forward ? PassKind::Forward
                    : it.kind == ItemKind::Backward ? PassKind::Backward
                                                    : PassKind::BackwardInput;
    if (it.kind == ItemKind::BackwardWeight)
      continue;
    PipelineOp op{pass, it.stage, it.micro};
    graph.consumers(op, users);
    for (const PipelineOp &u : users) {
      if (u.stage == op.stage || graph.device(u) == it.device)
        continue;
      TimelineItem send = it;
      send.kind = ItemKind::SendRecv;
      send.lane = Lane::Comm;
      send.start = it.end;
      send.end = it.end + p2p;
      sends.push_back(send);
    }
  }
  step.items.insert(step.items.end(), sends.begin(), sends.end());
}

/// Fills the lookup tables K-FAC work depends on, and Chimera's gradient
/// all-reduce between the two replicas of every stage.
void addGradientsAndLookups(PipelineStep &step, const CostModel &costs) {
  const PipelineLayout &l = step.layout;
  const int N = l.microbatches;
  step.forwardEnd.assign(l.stages * N, 0);
  step.backwardEnd.assign(l.stages * N, 0);
  // lastGradient[pipe][stage]: the stage's weight gradient of that pipe is
  // complete (last Backward or BackwardWeight).
  std::vector<std::vector<double>> lastGradient(l.pipes,
                                                std::vector<double>(l.stages, 0));
  for (const TimelineItem &it : step.items) {
    int idx = it.stage * N + it.micro;
    if (it.kind == ItemKind::Forward)
      step.forwardEnd[idx] = it.end;
    if (it.kind == ItemKind::Backward || it.kind == ItemKind::BackwardInput)
      step.backwardEnd[idx] = it.end;
    if (it.kind == ItemKind::Backward || it.kind == ItemKind::BackwardWeight)
      lastGradient[it.pipe][it.stage] =
          std::max(lastGradient[it.pipe][it.stage], it.end);
  }
  step.gradientReady.assign(costs.layers.size(), 0);
  for (int s = 0; s < l.stages; ++s) {
    double ready = lastGradient[0][s];
    if (l.pipes == 2) {
      double start = std::max(lastGradient[0][s], lastGradient[1][s]);
      double duration = 0;
      for (int layer : l.stageLayers[s])
        duration += costs.layers[layer].allreduce;
      ready = start + duration;
      if (duration > 0)
        for (int pipe = 0; pipe < 2; ++pipe) {
          TimelineItem ar;
          ar.kind = ItemKind::AllReduce;
          ar.lane = Lane::Comm;
          ar.device = l.deviceOf(pipe, s);
          ar.pipe = pipe;
          ar.stage = s;
          ar.start = start;
          ar.end = ready;
          step.items.push_back(ar);
        }
    }
    for (int layer : l.stageLayers[s])
      step.gradientReady[layer] = ready;
  }
}

void addIdleIntervals(PipelineStep &step) {
  const int D = step.layout.devices;
  step.makespan = 0;
  for (const TimelineItem &it : step.items)
    step.makespan = std::max(step.makespan, it.end);
  std::vector<std::vector<Interval>> busy(D);
  step.busy.assign(D, 0);
  step.steadyStep = 0;
  for (const TimelineItem &it : step.items)
    if (it.lane == Lane::Compute) {
      busy[it.device].push_back({it.start, it.end});
      step.busy[it.device] += it.end - it.start;
    }
  step.idle.assign(D, {});
  for (int d = 0; d < D; ++d) {
    auto &b = busy[d];
    std::sort(b.begin(), b.end(),
              [](const Interval &x, const Interval &y) { return x.start < y.start; });
    if (!b.empty()) {
      double last = 0;
      for (const Interval &i : b)
        last = std::max(last, i.end);
      step.steadyStep = std::max(step.steadyStep, last - b.front().start);
    }
    double cursor = 0;
    for (const Interval &i : b) {
      if (i.start > cursor + 1e-9)
        step.idle[d].push_back({cursor, i.start});
      cursor = std::max(cursor, i.end);
    }
    if (step.makespan > cursor + 1e-9)
      step.idle[d].push_back({cursor, step.makespan});
  }
}

} // namespace

double passDuration(const PipelineLayout &layout, const CostModel &costs,
                    PassKind pass, int stage) {
  double total = 0;
  for (int layer : layout.stageLayers[stage]) {
    const LayerCost &c = costs.layers[layer];
    switch (pass) {
    case PassKind::Forward:
      total += c.forward;
      break;
    case PassKind::Backward:
      total += c.backward();
      break;
    case PassKind::BackwardInput:
      total += c.backwardInput;
      break;
    case PassKind::BackwardWeight:
      total += c.backwardWeight;
      break;
    }
  }
  return total;
}

Expected<PipelineStep> simulatePipeline(const PipelineProgram &program,
                                        const CostModel &costs) {
  if (static_cast<int>(program.order.size()) != program.layout.devices)
    return Status::error("the program has " +
                         std::to_string(program.order.size()) +
                         " device lists for " +
                         std::to_string(program.layout.devices) + " devices");
  PipelineStep step;
  step.layout = program.layout;
  Executor executor(program, costs);
  Status ok = executor.run(step);
  if (!ok.ok())
    return ok;
  addTransfers(step, costs.p2p);
  addGradientsAndLookups(step, costs);
  addIdleIntervals(step);
  return step;
}

const char *itemKindName(ItemKind kind) {
  switch (kind) {
  case ItemKind::Forward:
    return "forward";
  case ItemKind::Backward:
    return "backward";
  case ItemKind::BackwardInput:
    return "backward-input";
  case ItemKind::BackwardWeight:
    return "backward-weight";
  case ItemKind::CurvatureA:
    return "curvature-A";
  case ItemKind::CurvatureB:
    return "curvature-B";
  case ItemKind::InversionA:
    return "inversion-A";
  case ItemKind::InversionB:
    return "inversion-B";
  case ItemKind::Precondition:
    return "precondition";
  case ItemKind::SendRecv:
    return "send-recv";
  case ItemKind::AllReduce:
    return "all-reduce";
  case ItemKind::FactorSync:
    return "factor-sync";
  case ItemKind::PrecondSync:
    return "precondition-sync";
  case ItemKind::Inversion:
    return "inversion";
  case ItemKind::Update:
    return "update";
  case ItemKind::Send:
    return "send";
  case ItemKind::Recv:
    return "recv";
  case ItemKind::Accumulate:
    return "accumulate";
  case ItemKind::Broadcast:
    return "broadcast";
  case ItemKind::Reduce:
    return "reduce";
  case ItemKind::Clip:
    return "clip";
  case ItemKind::Other:
    return "other";
  }
  return "?";
}

bool isPipelineCompute(ItemKind kind) {
  return kind == ItemKind::Forward || kind == ItemKind::Backward ||
         kind == ItemKind::BackwardInput || kind == ItemKind::BackwardWeight;
}

bool isKfac(ItemKind kind) {
  return kind == ItemKind::CurvatureA || kind == ItemKind::CurvatureB ||
         kind == ItemKind::InversionA || kind == ItemKind::InversionB ||
         kind == ItemKind::Inversion || kind == ItemKind::Precondition;
}

bool isCommunication(ItemKind kind) {
  return kind == ItemKind::SendRecv || kind == ItemKind::AllReduce ||
         kind == ItemKind::FactorSync || kind == ItemKind::PrecondSync ||
         kind == ItemKind::Send || kind == ItemKind::Recv || kind == ItemKind::Broadcast ||
         kind == ItemKind::Reduce || kind == ItemKind::Clip;
}

std::vector<TimelineItem> Timeline::allItems() const {
  std::vector<TimelineItem> out;
  out.reserve(numItems());
  forEachItem([&](const TimelineItem &it) { out.push_back(it); });
  return out;
}

double Timeline::windowTime() const {
  double total = 0;
  for (double t : stepTime)
    total += t;
  return total;
}

} // namespace pf::sched
