//===- PipelineSchedules.cpp - Per-device programs of each schedule -------===//
//
// GPipe, 1F1B, interleaved 1F1B and ZB-H1 have closed-form orders. Chimera's
// order comes from list scheduling (see chimeraProgram) because its two
// pipelines must be merged without conflicts on every device.
//
// Layer "pipeline" (docs/schedule.md): uses the simulator (to compare
// Chimera orders) and OpGraph.h; nothing of K-FAC.
//
//===----------------------------------------------------------------------===//

#include "OpGraph.h"
#include "ScheduleOrders.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Schedule/Limits.h"
#include "pf/Schedule/Timeline.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <limits>
#include <queue>

namespace pf::sched {
namespace {

using detail::Order;

PipelineOp fwd(int stage, int micro) { return {PassKind::Forward, stage, micro}; }
PipelineOp bwd(int stage, int micro) { return {PassKind::Backward, stage, micro}; }

/// GPipe: all forwards, then all backwards.
Order gpipeOrder(const PipelineLayout &l) {
  Order order(l.devices);
  for (int d = 0; d < l.devices; ++d) {
    for (int m = 0; m < l.microbatches; ++m)
      order[d].push_back(fwd(d, m));
    for (int m = 0; m < l.microbatches; ++m)
      order[d].push_back(bwd(d, m));
  }
  return order;
}

/// 1F1B (PipeDream-Flush): D-1-d warm-up forwards, then alternate, then drain.
Order oneFOneBOrder(const PipelineLayout &l) {
  Order order(l.devices);
  const int n = l.microbatches;
  for (int d = 0; d < l.devices; ++d) {
    const int warmup = std::min(l.devices - 1 - d, n);
    for (int m = 0; m < warmup; ++m)
      order[d].push_back(fwd(d, m));
    for (int i = 0; i < n - warmup; ++i) {
      order[d].push_back(fwd(d, warmup + i));
      order[d].push_back(bwd(d, i));
    }
    for (int m = n - warmup; m < n; ++m)
      order[d].push_back(bwd(d, m));
  }
  return order;
}

/// ZB-H1: 1F1B with the backward split into B (input gradient) and W (weight
/// gradient); device d postpones its W passes by d so that B passes reach the
/// earlier stages sooner while at most D micro-batches stay in flight (the
/// peak memory of 1F1B). Bubble: (D-1)(T_F + T_B - T_W).
Order zbH1Order(const PipelineLayout &l) {
  Order order(l.devices);
  const int n = l.microbatches;
  for (int d = 0; d < l.devices; ++d) {
    auto &o = order[d];
    const int warmup = std::min(l.devices - 1 - d, n);
    const int lag = d;
    int nextW = 0;
    auto maybeW = [&](int b) {
      if (b >= lag && nextW < n)
        o.push_back({PassKind::BackwardWeight, d, nextW++});
    };
    for (int m = 0; m < warmup; ++m)
      o.push_back(fwd(d, m));
    for (int i = 0; i < n - warmup; ++i) {
      o.push_back(fwd(d, warmup + i));
      o.push_back({PassKind::BackwardInput, d, i});
      maybeW(i);
    }
    for (int b = n - warmup; b < n; ++b) {
      o.push_back({PassKind::BackwardInput, d, b});
      maybeW(b);
    }
    while (nextW < n)
      o.push_back({PassKind::BackwardWeight, d, nextW++});
  }
  return order;
}

/// Interleaved 1F1B as in Megatron-LM: device d holds stages d, d+D, ...;
/// forwards walk chunks in groups of D micro-batches, backwards in reverse.
Order interleavedOrder(const PipelineLayout &l) {
  Order order(l.devices);
  const int D = l.devices, v = l.chunks, n = l.microbatches;
  const int total = n * v;
  auto op = [&](int k, bool forward, int d) {
    int group = k % (D * v);
    int chunk = group / D;
    if (!forward)
      chunk = v - 1 - chunk;
    int micro = (k / (D * v)) * D + k % D;
    return PipelineOp{forward ? PassKind::Forward : PassKind::Backward,
                      chunk * D + d, micro};
  };
  for (int d = 0; d < D; ++d) {
    int warmup = n == D ? total : std::min((D - d - 1) * 2 + (v - 1) * D, total);
    for (int k = 0; k < warmup; ++k)
      order[d].push_back(op(k, true, d));
    for (int i = 0; i < total - warmup; ++i) {
      order[d].push_back(op(warmup + i, true, d));
      order[d].push_back(op(i, false, d));
    }
    for (int k = total - warmup; k < total; ++k)
      order[d].push_back(op(k, false, d));
  }
  return order;
}

using Priority = std::array<long, 3>;
using PriorityFn = std::function<Priority(const PipelineOp &)>;
using DurationFn = std::function<double(const PipelineOp &)>;

/// Non-delay list scheduling: whenever a device is free it starts the ready
/// pass of smallest priority. A device d with maxInFlight[d] > 0 starts a
/// forward only while fewer micro-batches than that wait for their backward
/// (input gradient). Returns the resulting per-device order.
Order greedyOrder(const PipelineLayout &layout, const DurationFn &duration,
                  double p2p, const PriorityFn &priority,
                  const std::vector<int> &maxInFlight = {}) {
  detail::OpGraph graph(layout);
  std::vector<int> missing(graph.numIds(), 0);
  std::vector<double> readyAt(graph.numIds(), 0);
  std::vector<std::vector<PipelineOp>> candidates(layout.devices);
  std::vector<PipelineOp> tmp;
  for (const PipelineOp &op : graph.allOps()) {
    graph.producers(op, tmp);
    missing[graph.id(op)] = static_cast<int>(tmp.size());
    if (tmp.empty())
      candidates[graph.device(op)].push_back(op);
  }

  using Event = std::pair<double, int>; // (time, device)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::vector<double> busyUntil(layout.devices, 0);
  for (int d = 0; d < layout.devices; ++d)
    events.push({0.0, d});

  Order order(layout.devices);
  std::vector<int> inFlight(layout.devices, 0);
  auto admitted = [&](const PipelineOp &op, int d) {
    return op.pass != PassKind::Forward || maxInFlight.empty() ||
           inFlight[d] < maxInFlight[d];
  };
  while (!events.empty()) {
    auto [t, d] = events.top();
    events.pop();
    if (busyUntil[d] > t + 1e-12)
      continue;
    auto &cands = candidates[d];
    int best = -1;
    double nextReady = std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(cands.size()); ++i) {
      double r = readyAt[graph.id(cands[i])];
      if (r > t + 1e-12) {
        nextReady = std::min(nextReady, r);
        continue;
      }
      if (!admitted(cands[i], d))
        continue;
      if (best < 0 || priority(cands[i]) < priority(cands[best]))
        best = i;
    }
    if (best < 0) {
      if (nextReady < std::numeric_limits<double>::infinity())
        events.push({nextReady, d});
      continue;
    }
    PipelineOp op = cands[best];
    cands.erase(cands.begin() + best);
    order[d].push_back(op);
    inFlight[d] += op.pass == PassKind::Forward ? 1
                   : op.pass == PassKind::BackwardWeight ? 0
                                                         : -1;
    double end = t + duration(op);
    busyUntil[d] = end;
    events.push({end, d});
    graph.consumers(op, tmp);
    for (const PipelineOp &c : tmp) {
      int cid = graph.id(c);
      readyAt[cid] = std::max(readyAt[cid], end + graph.latency(op, c, p2p));
      if (--missing[cid] == 0) {
        int cd = graph.device(c);
        candidates[cd].push_back(c);
        events.push({std::max(readyAt[cid], busyUntil[cd]), cd});
      }
    }
  }
  return order;
}

/// Chimera (Li & Hoefler, SC'21). Device i runs stage i of the down pipeline
/// and stage D-1-i of the up pipeline. Two candidate orders are built and the
/// faster one under the real costs is kept:
///  - list scheduling in unit time slots (forward = backward = 1), backward
///    first, forwards of deeper stages first. For N = D this is the paper's
///    conflict-free merge of the two pipelines, with D-2 bubbles of backward
///    size and none of forward size (the PipeFisher model), and for uniform
///    costs its bubble share (D-2)/(2N+D-2) holds for every N = kD;
///  - the same list scheduling with the real durations, which packs better
///    when N > D and backward is slower than forward.
Expected<PipelineProgram> chimeraProgram(const PipelineLayout &layout,
                                         const CostModel &costs) {
  auto unitSlots = [](const PipelineOp &op) {
    bool f = op.pass == PassKind::Forward;
    return Priority{f ? 1 : 0, f ? -op.stage : 0, op.micro};
  };
  auto deepFirst = [](const PipelineOp &op) {
    bool f = op.pass == PassKind::Forward;
    return Priority{f ? 1 : 0, -op.stage, op.micro};
  };
  auto unit = [](const PipelineOp &) { return 1.0; };
  auto real = [&](const PipelineOp &op) {
    return passDuration(layout, costs, op.pass, op.stage);
  };

  PipelineProgram best{layout, greedyOrder(layout, unit, 0.0, unitSlots)};
  if (layout.microbatches <= layout.devices)
    return best;
  PipelineProgram alt{layout, greedyOrder(layout, real, costs.p2p, deepFirst)};
  auto a = simulatePipeline(best, costs);
  auto b = simulatePipeline(alt, costs);
  if (!a)
    return a.status();
  if (b && b->makespan < a->makespan - 1e-9)
    return alt;
  return best;
}

/// ZB-H2 (Qi et al.): list scheduling under the real costs with input
/// gradients first, then forwards, weight gradients only where nothing else
/// is ready. Device d may hold 2(D-1-d)+1 micro-batches awaiting their input
/// gradient (the paper's 2p-1 on the first device): the extra warm-up
/// forwards fill the bubble before the first backward, and the deferred W
/// passes fill the tail, so the step becomes a parallelogram.
Order zbH2Order(const PipelineLayout &layout, const CostModel &costs) {
  auto priority = [](const PipelineOp &op) {
    long rank = op.pass == PassKind::BackwardInput ? 0
                : op.pass == PassKind::Forward     ? 1
                                                   : 2;
    return Priority{rank, op.micro, op.stage};
  };
  auto real = [&](const PipelineOp &op) {
    return passDuration(layout, costs, op.pass, op.stage);
  };
  std::vector<int> cap(layout.devices);
  for (int d = 0; d < layout.devices; ++d)
    cap[d] = 2 * (layout.devices - 1 - d) + 1;
  return greedyOrder(layout, real, costs.p2p, priority, cap);
}

Status checkConfig(const PipelineConfig &c, const CostModel &costs) {
  Status shape = checkScheduleShape(c.kind, c.devices, c.microbatches, c.chunks);
  if (!shape.ok())
    return shape;
  const int stages = c.imported ? c.imported->layout.stages
                                : stagesFor(c.kind, c.devices, c.chunks);
  if (static_cast<int>(c.stageLayers.size()) != stages)
    return Status::error("expected layers for " + std::to_string(stages) +
                         " stages, got " +
                         std::to_string(c.stageLayers.size()));
  const int layers = static_cast<int>(costs.layers.size());
  for (int s = 0; s < stages; ++s) {
    if (c.stageLayers[s].empty())
      return Status::error("stage " + std::to_string(s) + " has no layers");
    for (int l : c.stageLayers[s])
      if (l < 0 || l >= layers)
        return Status::error("stage " + std::to_string(s) + " refers to layer " +
                             std::to_string(l) + " but the cost model has " +
                             std::to_string(layers) + " layers");
  }
  return Status::success();
}

} // namespace

int PipelineLayout::numLayers() const {
  int n = 0;
  for (const auto &s : stageLayers)
    n += static_cast<int>(s.size());
  return n;
}

int PipelineLayout::stageOfLayer(int layer) const {
  for (int s = 0; s < stages; ++s)
    for (int l : stageLayers[s])
      if (l == layer)
        return s;
  return -1;
}

Expected<ScheduleKind> parseScheduleKind(const std::string &name) {
  std::string key;
  for (char c : name)
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key == "gpipe")
    return ScheduleKind::GPipe;
  if (key == "1f1b" || key == "pipedream-flush")
    return ScheduleKind::OneFOneB;
  if (key == "interleaved" || key == "interleaved-1f1b")
    return ScheduleKind::Interleaved;
  if (key == "chimera")
    return ScheduleKind::Chimera;
  if (key == "zb-h1" || key == "zbh1" || key == "zb1p")
    return ScheduleKind::ZBH1;
  if (key == "zb-h2" || key == "zbh2" || key == "zb2p")
    return ScheduleKind::ZBH2;
  if (key == "zb-v" || key == "zbv")
    return ScheduleKind::ZBV;
  if (key == "dualpipe")
    return ScheduleKind::DualPipe;
  if (key == "dualpipev" || key == "dualpipe-v")
    return ScheduleKind::DualPipeV;
  return Status::error("unknown schedule '" + name + "' (known: " +
                       scheduleKindNames() + ")");
}

const char *scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::Chimera:
    return "chimera";
  case ScheduleKind::ZBH1:
    return "zb-h1";
  case ScheduleKind::ZBH2:
    return "zb-h2";
  case ScheduleKind::ZBV:
    return "zb-v";
  case ScheduleKind::DualPipe:
    return "dualpipe";
  case ScheduleKind::DualPipeV:
    return "dualpipev";
  case ScheduleKind::Imported:
    return "imported";
  }
  return "?";
}

std::string scheduleKindNames() {
  return "gpipe, 1f1b, interleaved, chimera, zb-h1, zb-h2, zb-v, dualpipe, "
         "dualpipev";
}

namespace {
/// DualPipe: even D and N, N >= 2D; DualPipeV: N >= 2D (the steady phase of
/// the device nearest the ends would otherwise run a negative count).
Status checkDualPipeShape(ScheduleKind kind, int devices, int microbatches) {
  if (kind != ScheduleKind::DualPipe && kind != ScheduleKind::DualPipeV)
    return Status::success();
  const char *name = scheduleKindName(kind);
  if (kind == ScheduleKind::DualPipe && devices % 2 != 0)
    return Status::error("dualpipe needs an even number of stages (got " +
                         std::to_string(devices) + ")");
  if (kind == ScheduleKind::DualPipe && microbatches % 2 != 0)
    return Status::error("dualpipe needs an even number of micro-batches, half "
                         "per direction (got " + std::to_string(microbatches) + ")");
  if (microbatches < 2 * devices)
    return Status::error(std::string(name) + " needs at least 2 x " +
                         std::to_string(devices) + " = " +
                         std::to_string(2 * devices) + " micro-batches (got " +
                         std::to_string(microbatches) + ")");
  return Status::success();
}
} // namespace

Status checkScheduleShape(ScheduleKind kind, int devices, int microbatches,
                          int chunks) {
  if (devices < 1)
    return Status::error("the number of stages/devices must be positive (got " +
                         std::to_string(devices) + ")");
  if (microbatches < 1)
    return Status::error("the number of micro-batches must be positive (got " +
                         std::to_string(microbatches) + ")");
  if (Status s = checkLimit("the number of stages/devices", devices, kMaxStages, "kMaxStages");
      !s.ok())
    return s;
  if (Status s = checkLimit("the number of micro-batches", microbatches, kMaxMicrobatches,
                            "kMaxMicrobatches");
      !s.ok())
    return s;
  if (kind == ScheduleKind::Chimera) {
    if (devices % 2 != 0)
      return Status::error("chimera needs an even number of stages (got " +
                           std::to_string(devices) + ")");
    if (microbatches % 2 != 0)
      return Status::error(
          "chimera needs an even number of micro-batches, half per direction "
          "(got " + std::to_string(microbatches) + ")");
  }
  if (Status s = checkDualPipeShape(kind, devices, microbatches); !s.ok())
    return s;
  if (kind == ScheduleKind::Interleaved) {
    if (chunks < 1)
      return Status::error("interleaved needs at least one chunk per device");
    if (Status s = checkLimit("interleaved: the number of stages (devices x chunks)",
                              static_cast<long long>(devices) * chunks, kMaxStages,
                              "kMaxStages");
        !s.ok())
      return s;
    if (microbatches % devices != 0)
      return Status::error("interleaved 1F1B needs the micro-batches (" +
                           std::to_string(microbatches) +
                           ") to be a multiple of the stages (" +
                           std::to_string(devices) + ")");
  }
  return Status::success();
}

int stagesFor(ScheduleKind kind, int devices, int chunks) {
  if (kind == ScheduleKind::Interleaved)
    return devices * chunks;
  if (kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipeV)
    return 2 * devices;
  return devices;
}

Placement placementOf(ScheduleKind kind) {
  if (kind == ScheduleKind::Interleaved)
    return Placement::Looped;
  if (kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipeV)
    return Placement::VShape;
  return Placement::Linear;
}

bool splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZBH1 || kind == ScheduleKind::ZBH2 ||
         kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipe ||
         kind == ScheduleKind::DualPipeV;
}

namespace {

Order orderOf(const PipelineLayout &layout, const CostModel &costs) {
  switch (layout.kind) {
  case ScheduleKind::GPipe:
    return gpipeOrder(layout);
  case ScheduleKind::OneFOneB:
    return oneFOneBOrder(layout);
  case ScheduleKind::ZBH1:
    return zbH1Order(layout);
  case ScheduleKind::ZBH2:
    return zbH2Order(layout, costs);
  case ScheduleKind::ZBV:
    return detail::zbVOrder(layout);
  case ScheduleKind::DualPipe:
    return detail::dualPipeOrder(layout);
  case ScheduleKind::DualPipeV:
    return detail::dualPipeVOrder(layout);
  case ScheduleKind::Interleaved:
    return interleavedOrder(layout);
  case ScheduleKind::Chimera:
  case ScheduleKind::Imported:
    break;
  }
  return {};
}
} // namespace

Expected<PipelineProgram> buildUniformPipeline(PipelineConfig config) {
  const int stages = stagesFor(config.kind, config.devices, config.chunks);
  CostModel costs;
  config.stageLayers.clear();
  for (int s = 0; s < stages; ++s) {
    config.stageLayers.push_back({s});
    LayerCost unit;
    unit.name = "stage" + std::to_string(s);
    unit.forward = unit.backwardInput = unit.backwardWeight = 1;
    costs.layers.push_back(unit);
  }
  return buildPipeline(config, costs);
}

Expected<PipelineProgram> buildPipeline(const PipelineConfig &config,
                                        const CostModel &costs) {
  Status ok = checkConfig(config, costs);
  if (!ok.ok())
    return ok;
  if (config.imported) {
    PipelineProgram program = *config.imported;
    program.layout.stageLayers = config.stageLayers;
    return program;
  }
  if (config.kind == ScheduleKind::Imported)
    return Status::error("an imported schedule needs its program");
  PipelineLayout layout;
  layout.kind = config.kind;
  layout.devices = config.devices;
  layout.microbatches = config.microbatches;
  layout.chunks = config.kind == ScheduleKind::Interleaved ? config.chunks
                  : placementOf(config.kind) == Placement::VShape ? 2
                                                                  : 1;
  layout.stages = stagesFor(config.kind, config.devices, layout.chunks);
  layout.pipes =
      config.kind == ScheduleKind::Chimera || config.kind == ScheduleKind::DualPipe
          ? 2
          : 1;
  layout.placement = placementOf(config.kind);
  layout.splitBackward = splitsBackward(config.kind);
  layout.stageLayers = config.stageLayers;

  if (config.kind == ScheduleKind::Chimera)
    return chimeraProgram(layout, costs);
  Order order = orderOf(layout, costs);
  detail::markFullBackwards(layout, order);
  return PipelineProgram{layout, std::move(order)};
}

} // namespace pf::sched
