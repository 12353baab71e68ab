//===- MeasuredTimeline.cpp - figures, pictures, simulation of a measured run -===//
//
// The measured events become a pf::sched::Timeline (every event an item with
// absolute times, so the writers' per-step replay is not used) and the
// scheduler's trace and SVG writers draw it; the simulation goes through
// schedulePipeline with a cost model built from the measured durations. See
// include/pf/PipelineRuntime/MeasuredTimeline.h.
//
//===----------------------------------------------------------------------===//

#include "pf/PipelineRuntime/MeasuredTimeline.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

namespace mlir::pf::driver {
namespace sched = ::pf::sched;

const char *measuredKindName(MeasuredKind kind) {
  switch (kind) {
  case MeasuredKind::Forward: return "forward";
  case MeasuredKind::Backward: return "backward";
  case MeasuredKind::BackwardInput: return "backward_input";
  case MeasuredKind::BackwardWeight: return "backward_weight";
  case MeasuredKind::KfacFactorA: return "kfac_factor_a";
  case MeasuredKind::KfacFactorB: return "kfac_factor_b";
  case MeasuredKind::KfacInverse: return "kfac_inverse";
  case MeasuredKind::Precondition: return "precondition";
  case MeasuredKind::Update: return "update";
  case MeasuredKind::Send: return "send";
  case MeasuredKind::Recv: return "recv";
  case MeasuredKind::AllReduce: return "all_reduce";
  case MeasuredKind::Accumulate: return "accumulate";
  case MeasuredKind::Broadcast: return "broadcast";
  case MeasuredKind::Reduce: return "reduce";
  case MeasuredKind::Clip: return "clip";
  case MeasuredKind::Other: return "other";
  }
  return "other";
}

bool isPipelinePass(MeasuredKind kind) {
  return kind == MeasuredKind::Forward || kind == MeasuredKind::Backward ||
         kind == MeasuredKind::BackwardInput ||
         kind == MeasuredKind::BackwardWeight;
}

bool isKfacWork(MeasuredKind kind) {
  return kind == MeasuredKind::KfacFactorA || kind == MeasuredKind::KfacFactorB ||
         kind == MeasuredKind::KfacInverse || kind == MeasuredKind::Precondition;
}

bool isCommunication(MeasuredKind kind) {
  return kind == MeasuredKind::Send || kind == MeasuredKind::Recv ||
         kind == MeasuredKind::AllReduce || kind == MeasuredKind::Broadcast ||
         kind == MeasuredKind::Reduce || kind == MeasuredKind::Clip;
}

namespace {

constexpr double kMs = 1e3; // events are in seconds, figures in ms

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string describe(const MeasuredEvent &e) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "%s on rank %d, step %lld, stage %lld, micro-batch %lld, layer "
                "%lld, [%.9g, %.9g] s",
                measuredKindName(e.kind), e.rank, static_cast<long long>(e.step),
                static_cast<long long>(e.stage),
                static_cast<long long>(e.microbatch),
                static_cast<long long>(e.layer), e.start, e.end);
  return buffer;
}

std::string fmt(const char *format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

std::string percent(double fraction) { return fmt("%.2f%%", 100 * fraction); }

sched::ItemKind itemKindOf(MeasuredKind kind) {
  switch (kind) {
  case MeasuredKind::Forward: return sched::ItemKind::Forward;
  case MeasuredKind::Backward: return sched::ItemKind::Backward;
  case MeasuredKind::BackwardInput: return sched::ItemKind::BackwardInput;
  case MeasuredKind::BackwardWeight: return sched::ItemKind::BackwardWeight;
  case MeasuredKind::KfacFactorA: return sched::ItemKind::CurvatureA;
  case MeasuredKind::KfacFactorB: return sched::ItemKind::CurvatureB;
  case MeasuredKind::KfacInverse: return sched::ItemKind::Inversion;
  case MeasuredKind::Precondition: return sched::ItemKind::Precondition;
  case MeasuredKind::Update: return sched::ItemKind::Update;
  case MeasuredKind::Send: return sched::ItemKind::Send;
  case MeasuredKind::Recv: return sched::ItemKind::Recv;
  case MeasuredKind::AllReduce: return sched::ItemKind::AllReduce;
  case MeasuredKind::Accumulate: return sched::ItemKind::Accumulate;
  case MeasuredKind::Broadcast: return sched::ItemKind::Broadcast;
  case MeasuredKind::Reduce: return sched::ItemKind::Reduce;
  case MeasuredKind::Clip: return sched::ItemKind::Clip;
  case MeasuredKind::Other: return sched::ItemKind::Other;
  }
  return sched::ItemKind::Other;
}

struct Span {
  double start = std::numeric_limits<double>::infinity();
  double end = -std::numeric_limits<double>::infinity();
  bool empty() const { return start > end; }
  void add(double s, double e) {
    start = std::min(start, s);
    end = std::max(end, e);
  }
  double length() const { return empty() ? 0 : end - start; }
};

/// Sorted, disjoint union of intervals.
std::vector<sched::Interval> unite(std::vector<sched::Interval> v) {
  std::sort(v.begin(), v.end(), [](const sched::Interval &a, const sched::Interval &b) {
    return a.start < b.start;
  });
  std::vector<sched::Interval> out;
  for (const sched::Interval &i : v) {
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

/// Length of `i` ∩ the union `u`.
double overlap(const sched::Interval &i, const std::vector<sched::Interval> &u) {
  double total = 0;
  for (const sched::Interval &x : u)
    total += std::max(0.0, std::min(i.end, x.end) - std::max(i.start, x.start));
  return total;
}

int64_t lastStepOf(const MeasuredRun &run) {
  int64_t last = 0;
  for (const MeasuredEvent &e : run.events)
    last = std::max(last, e.step);
  return last;
}

/// The events of each step in [first, last], by step.
std::map<int64_t, std::vector<const MeasuredEvent *>>
eventsByStep(const MeasuredRun &run, int64_t first, int64_t last) {
  std::map<int64_t, std::vector<const MeasuredEvent *>> out;
  for (const MeasuredEvent &e : run.events)
    if (e.step >= first && e.step <= last)
      out[e.step].push_back(&e);
  return out;
}

/// Per-step sums, accumulated into the report's means.
struct RankStep {
  double pipeline = 0, kfac = 0, other = 0, comm = 0;
  std::vector<sched::Interval> passes, kfacWork;
};

void addStep(MeasuredReport &r, const std::vector<const MeasuredEvent *> &events) {
  Span step, pipe;
  std::vector<RankStep> ranks(r.ranks);
  for (const MeasuredEvent *e : events) {
    double s = e->start * kMs, t = e->end * kMs;
    step.add(s, t);
    RankStep &rs = ranks[e->rank];
    if (isPipelinePass(e->kind)) {
      pipe.add(s, t);
      rs.pipeline += t - s;
      rs.passes.push_back({s, t});
    } else if (isKfacWork(e->kind)) {
      rs.kfac += t - s;
      rs.kfacWork.push_back({s, t});
    } else if (isCommunication(e->kind)) {
      rs.comm += t - s;
    } else {
      rs.other += t - s;
    }
  }
  const double T = step.length();
  r.stepTimeMs += T;
  r.pipelineSpanMs += pipe.length();
  for (int32_t k = 0; k < r.ranks; ++k) {
    RankStep &rs = ranks[k];
    MeasuredRankFigures &f = r.perRank[k];
    f.pipelineMs += rs.pipeline;
    f.kfacMs += rs.kfac;
    f.otherMs += rs.other;
    f.commMs += rs.comm;
    f.idleMs += T - (rs.pipeline + rs.kfac + rs.other);
    // Bubbles: the pipeline span less this rank's passes.
    std::vector<sched::Interval> passes = unite(rs.passes), gaps;
    double cursor = pipe.start;
    for (const sched::Interval &p : passes) {
      if (p.start > cursor)
        gaps.push_back({cursor, p.start});
      cursor = std::max(cursor, p.end);
    }
    if (!pipe.empty() && pipe.end > cursor)
      gaps.push_back({cursor, pipe.end});
    for (const sched::Interval &g : gaps)
      r.bubbleMs += g.end - g.start;
    double inside = 0;
    for (const sched::Interval &w : rs.kfacWork)
      inside += overlap(w, gaps);
    r.kfacInBubblesMs += inside;
    r.kfacOutsideMs += rs.kfac - inside;
  }
}

/// Turns the sums of addStep into means and ratios.
void finish(MeasuredReport &r) {
  const double n = static_cast<double>(r.steps);
  for (double *x : {&r.stepTimeMs, &r.pipelineSpanMs, &r.bubbleMs,
                    &r.kfacInBubblesMs, &r.kfacOutsideMs})
    *x /= n;
  double pipeline = 0, withKfac = 0;
  for (MeasuredRankFigures &f : r.perRank) {
    for (double *x : {&f.pipelineMs, &f.kfacMs, &f.otherMs, &f.commMs, &f.idleMs})
      *x /= n;
    f.busyMs = f.pipelineMs + f.kfacMs + f.otherMs;
    const double T = r.stepTimeMs;
    f.utilizationWithoutKfac = T > 0 ? f.pipelineMs / T : 0;
    f.utilizationWithKfac = T > 0 ? (f.pipelineMs + f.kfacMs) / T : 0;
    pipeline += f.pipelineMs;
    withKfac += f.pipelineMs + f.kfacMs;
  }
  const double capacity = r.ranks * r.stepTimeMs;
  r.utilizationWithoutKfac = capacity > 0 ? pipeline / capacity : 0;
  r.utilizationWithKfac = capacity > 0 ? withKfac / capacity : 0;
  const double pipeCapacity = r.ranks * r.pipelineSpanMs;
  r.bubbleFraction = pipeCapacity > 0 ? r.bubbleMs / pipeCapacity : 0;
  r.bubbleFill = r.bubbleMs > 0 ? r.kfacInBubblesMs / r.bubbleMs : 0;
}

llvm::json::Object reportObject(const MeasuredReport &r) {
  llvm::json::Array ranks;
  for (const MeasuredRankFigures &f : r.perRank)
    ranks.push_back(llvm::json::Object{
        {"rank", f.rank},
        {"pipeline_ms", f.pipelineMs},
        {"kfac_ms", f.kfacMs},
        {"other_ms", f.otherMs},
        {"busy_ms", f.busyMs},
        {"idle_ms", f.idleMs},
        {"comm_ms", f.commMs},
        {"utilization_without_kfac", f.utilizationWithoutKfac},
        {"utilization_with_kfac", f.utilizationWithKfac}});
  return llvm::json::Object{
      {"schedule", r.schedule},
      {"ranks", r.ranks},
      {"stages", r.stages},
      {"microbatches", r.microbatches},
      {"first_step", r.firstStep},
      {"last_step", r.lastStep},
      {"steps", r.steps},
      {"step_time_ms", r.stepTimeMs},
      {"pipeline_span_ms", r.pipelineSpanMs},
      {"utilization",
       llvm::json::Object{{"without_kfac", r.utilizationWithoutKfac},
                          {"with_kfac", r.utilizationWithKfac}}},
      {"bubble_ms", r.bubbleMs},
      {"bubble_fraction", r.bubbleFraction},
      {"kfac_in_bubbles_ms", r.kfacInBubblesMs},
      {"kfac_outside_bubbles_ms", r.kfacOutsideMs},
      {"bubble_fill", r.bubbleFill},
      {"per_rank", std::move(ranks)}};
}

std::string dump(llvm::json::Value value) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", value) << "\n";
  return out;
}

} // namespace

llvm::Error checkMeasuredRun(const MeasuredRun &run) {
  if (run.ranks < 1 || run.stages < 1 || run.microbatches < 1)
    return error("measured run: ranks, stages and micro-batches must be >= 1 "
                 "(got " + llvm::Twine(run.ranks) + ", " + llvm::Twine(run.stages) +
                 ", " + llvm::Twine(run.microbatches) + ")");
  for (size_t i = 0; i < run.events.size(); ++i) {
    const MeasuredEvent &e = run.events[i];
    const char *problem = nullptr;
    if (e.rank < 0 || e.rank >= run.ranks)
      problem = "rank outside [0, ranks)";
    else if (e.step < 0)
      problem = "negative step";
    else if (e.stage < -1 || e.stage >= run.stages)
      problem = "stage outside [-1, stages)";
    else if (e.microbatch < -1 || e.microbatch >= run.microbatches)
      problem = "micro-batch outside [-1, microbatches)";
    else if (!std::isfinite(e.start) || !std::isfinite(e.end))
      problem = "time not finite";
    else if (e.end < e.start)
      problem = "ends before it starts";
    if (problem)
      return error("measured run: event " + llvm::Twine(i) + " (" + describe(e) +
                   "): " + problem);
  }
  return llvm::Error::success();
}

llvm::Expected<MeasuredReport> summarize(const MeasuredRun &run, int64_t firstStep,
                                         int64_t lastStep) {
  if (llvm::Error err = checkMeasuredRun(run))
    return std::move(err);
  if (lastStep < 0)
    lastStep = lastStepOf(run);
  auto steps = eventsByStep(run, firstStep, lastStep);
  if (steps.empty())
    return error("measured run: no events in steps " + llvm::Twine(firstStep) +
                 ".." + llvm::Twine(lastStep));
  MeasuredReport r;
  r.schedule = run.schedule;
  r.ranks = run.ranks;
  r.stages = run.stages;
  r.microbatches = run.microbatches;
  r.firstStep = firstStep;
  r.lastStep = lastStep;
  r.steps = static_cast<int64_t>(steps.size());
  r.perRank.resize(run.ranks);
  for (int32_t k = 0; k < run.ranks; ++k)
    r.perRank[k].rank = k;
  for (const auto &[step, events] : steps)
    addStep(r, events);
  finish(r);
  return r;
}

std::string MeasuredReport::text() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "measured " << schedule << ": " << ranks << " ranks, " << stages
     << " stages, " << microbatches << " micro-batches; steps " << firstStep
     << ".." << lastStep << " (" << steps << " with events), means per step\n";
  os << "step time (ms)              " << fmt("%12.3f", stepTimeMs) << "\n";
  os << "pipeline span T_pipe (ms)   " << fmt("%12.3f", pipelineSpanMs) << "\n";
  os << "utilization without K-FAC   " << fmt("%11.2f%%", 100 * utilizationWithoutKfac) << "\n";
  os << "utilization with K-FAC      " << fmt("%11.2f%%", 100 * utilizationWithKfac) << "\n";
  os << "bubble fraction             " << fmt("%11.2f%%", 100 * bubbleFraction)
     << "   (" << fmt("%.3f", bubbleMs) << " ms over all ranks)\n";
  os << "bubble fill by K-FAC        " << fmt("%11.2f%%", 100 * bubbleFill)
     << "   (K-FAC in bubbles " << fmt("%.3f", kfacInBubblesMs) << " ms, outside "
     << fmt("%.3f", kfacOutsideMs) << " ms)\n\n";
  os << "rank  pipeline     K-FAC     other      busy      idle      comm  util w/o  util with\n";
  for (const MeasuredRankFigures &f : perRank)
    os << fmt("%4.0f", f.rank) << fmt("%10.3f", f.pipelineMs) << fmt("%10.3f", f.kfacMs)
       << fmt("%10.3f", f.otherMs) << fmt("%10.3f", f.busyMs) << fmt("%10.3f", f.idleMs)
       << fmt("%10.3f", f.commMs) << fmt("%9.2f%%", 100 * f.utilizationWithoutKfac)
       << fmt("%10.2f%%", 100 * f.utilizationWithKfac) << "\n";
  return s;
}

std::string MeasuredReport::json() const { return dump(reportObject(*this)); }

//===----------------------------------------------------------------------===//
// Simulation from the measured durations
//===----------------------------------------------------------------------===//

namespace {

struct Mean {
  double sum = 0;
  int64_t count = 0;
  void add(double x) {
    sum += x;
    ++count;
  }
  double value() const { return count ? sum / count : 0; }
};

/// Shortest run of back-to-back Recv events of a rank (no other op of the
/// rank between them): the receive of one dependency that found its data
/// (nearly) sent, i.e. the transfer without waiting.
double estimateP2pMs(const MeasuredRun &run, int64_t first, int64_t last) {
  std::vector<std::vector<const MeasuredEvent *>> byRank(run.ranks);
  for (const MeasuredEvent &e : run.events)
    if (e.step >= first && e.step <= last)
      byRank[e.rank].push_back(&e);
  double best = std::numeric_limits<double>::infinity();
  for (auto &events : byRank) {
    std::stable_sort(events.begin(), events.end(),
                     [](const MeasuredEvent *a, const MeasuredEvent *b) {
                       return a->start < b->start;
                     });
    for (size_t i = 0; i < events.size();) {
      if (events[i]->kind != MeasuredKind::Recv) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j + 1 < events.size() && events[j + 1]->kind == MeasuredKind::Recv)
        ++j;
      best = std::min(best, (events[j]->end - events[i]->start) * kMs);
      i = j + 1;
    }
  }
  return std::isfinite(best) ? best : 0;
}

struct StageMeans {
  Mean forward, backward, backwardInput, backwardWeight;
};

struct LayerMeans {
  Mean factorA, factorB, inverse, precondition;
};

/// The cost model of the run: per-stage pass durations, per-layer K-FAC.
struct MeasuredCosts {
  sched::CostModel costs;
  std::vector<std::vector<int>> stageLayers;
  bool hasKfac = false;
  int refreshSteps = 0; ///< from the inverses; 0 if none
  /// Per cost-model layer: its stage and the events' K-FAC layer (-1: none).
  std::vector<std::pair<int64_t, int64_t>> origin;
};

/// Whether `rank` may run a pass of `stage` under `kind` (stage s on rank s;
/// interleaved: on rank s mod D; Chimera, DualPipe: on rank s or D-1-s; ZB-V,
/// DualPipeV: on rank s or 2D-1-s).
bool runsOn(sched::ScheduleKind kind, int64_t stage, int32_t rank, int32_t ranks) {
  if (kind == sched::ScheduleKind::Interleaved)
    return stage % ranks == rank;
  if (kind == sched::ScheduleKind::Chimera || kind == sched::ScheduleKind::DualPipe)
    return stage == rank || stage == ranks - 1 - rank;
  if (sched::placementOf(kind) == sched::Placement::VShape)
    return stage == rank || stage == 2 * ranks - 1 - rank;
  return stage == rank;
}

/// ZB-H2: the simulation replays the order that ran (pf-build-rank-programs
/// builds it with uniform passes, sched::buildUniformPipeline) rather than
/// the one the measured durations would give, as an imported order.
llvm::Error replayExecutedOrder(sched::ScheduleRequest &request,
                                std::optional<sched::PipelineProgram> &executed) {
  if (request.kind != sched::ScheduleKind::ZBH2)
    return llvm::Error::success();
  sched::PipelineConfig config;
  config.kind = request.kind;
  config.devices = request.devices;
  config.microbatches = request.microbatches;
  config.chunks = request.chunks;
  auto program = sched::buildUniformPipeline(config);
  if (!program)
    return error("the executed zb-h2 order: " + program.error());
  executed = std::move(*program);
  request.kind = sched::ScheduleKind::Imported;
  request.imported = &*executed;
  return llvm::Error::success();
}

llvm::Expected<MeasuredCosts> measureCosts(const MeasuredRun &run, int64_t first,
                                           int64_t last, sched::ScheduleKind kind,
                                           int64_t steps) {
  const bool splitBackward = sched::splitsBackward(kind);
  std::vector<StageMeans> stages(run.stages);
  // (stage, layer) -> K-FAC means; layer -1 when the event names none.
  std::map<std::pair<int64_t, int64_t>, LayerMeans> layers;
  int64_t inverses = 0;
  for (const MeasuredEvent &e : run.events) {
    if (e.step < first || e.step > last)
      continue;
    const double d = (e.end - e.start) * kMs;
    if (isPipelinePass(e.kind)) {
      if (e.stage < 0)
        return error("measured run: a pipeline pass without a stage: " + describe(e));
      if (e.stage >= run.stages || !runsOn(kind, e.stage, e.rank, run.ranks))
        return error("simulateFromMeasured: the " + run.schedule + " schedule runs stage " +
                     llvm::Twine(e.stage) +
                     " elsewhere (stage s on rank s; interleaved: "
                     "on rank s mod D; chimera, dualpipe: on rank s or D-1-s; zb-v, dualpipev: "
                     "on rank s or 2D-1-s): " +
                     describe(e));
      StageMeans &m = stages[e.stage];
      Mean &target = e.kind == MeasuredKind::Forward    ? m.forward
                     : e.kind == MeasuredKind::Backward ? m.backward
                     : e.kind == MeasuredKind::BackwardInput ? m.backwardInput
                                                             : m.backwardWeight;
      target.add(d);
    } else if (isKfacWork(e.kind)) {
      LayerMeans &m = layers[{e.stage >= 0 ? e.stage : e.rank, e.layer}];
      switch (e.kind) {
      case MeasuredKind::KfacFactorA: m.factorA.add(d); break;
      case MeasuredKind::KfacFactorB: m.factorB.add(d); break;
      case MeasuredKind::KfacInverse: m.inverse.add(d); ++inverses; break;
      default: m.precondition.add(d); break;
      }
    }
  }
  MeasuredCosts out;
  out.costs.name = "measured from " + run.schedule + " steps " + std::to_string(first) +
                   ".." + std::to_string(last);
  out.hasKfac = !layers.empty();
  for (int64_t s = 0; s < run.stages; ++s) {
    const StageMeans &m = stages[s];
    if (!m.forward.count)
      return error("measured run: no forward of stage " + llvm::Twine(s) +
                   " in steps " + llvm::Twine(first) + ".." + llvm::Twine(last));
    // A fused backward is all input-gradient work to the simulator unless the
    // schedule splits it; split halves add up for a schedule that does not.
    double input = m.backward.count ? m.backward.value()
                                    : m.backwardInput.value() + m.backwardWeight.value();
    double weight = 0;
    if (splitBackward && !m.backward.count) {
      input = m.backwardInput.value();
      weight = m.backwardWeight.value();
    }
    if (!m.backward.count && !m.backwardInput.count)
      return error("measured run: no backward of stage " + llvm::Twine(s) +
                   " in steps " + llvm::Twine(first) + ".." + llvm::Twine(last));
    std::vector<int> ids;
    auto addLayer = [&](std::string name, int64_t eventLayer = -1) -> sched::LayerCost & {
      out.origin.push_back({s, eventLayer});
      ids.push_back(static_cast<int>(out.costs.layers.size()));
      out.costs.layers.push_back({});
      out.costs.layers.back().name = std::move(name);
      return out.costs.layers.back();
    };
    for (auto it = layers.lower_bound({s, std::numeric_limits<int64_t>::min()});
         it != layers.end() && it->first.first == s; ++it) {
      sched::LayerCost &c = addLayer("stage " + std::to_string(s) + " layer " +
                                         std::to_string(it->first.second),
                                     it->first.second);
      c.curvatureA = it->second.factorA.value();
      c.curvatureB = it->second.factorB.value();
      // One measured call inverts both factors once both are complete: the
      // simulator's B item (B needs the backward, the later of the two)
      // carries the whole call, as the executor runs it.
      c.inversionA = 0;
      c.inversionB = it->second.inverse.value();
      c.precondition = it->second.precondition.value();
    }
    if (ids.empty())
      addLayer("stage " + std::to_string(s));
    sched::LayerCost &carrier = out.costs.layers[ids.front()]; // the stage's passes
    carrier.forward = m.forward.value();
    carrier.backwardInput = input;
    carrier.backwardWeight = weight;
    out.stageLayers.push_back(std::move(ids));
  }
  if (inverses > 0) {
    int64_t inverted = 0;
    for (const auto &[key, m] : layers)
      inverted += m.inverse.count > 0;
    out.refreshSteps = static_cast<int>(std::max<int64_t>(
        1, std::llround(static_cast<double>(steps * inverted) / inverses)));
  }
  return out;
}

/// Stages per rank: one, or for interleaved `chunks` >= 2 (stage s on rank
/// s mod D); Chimera's two replicas share each stage's means.
llvm::Error checkStagesFit(const MeasuredRun &run, sched::ScheduleKind kind, const char *who) {
  bool interleaved = kind == sched::ScheduleKind::Interleaved;
  bool vShape = sched::placementOf(kind) == sched::Placement::VShape;
  if (interleaved ? (run.ranks >= 1 && run.stages % run.ranks == 0 && run.stages / run.ranks >= 2)
      : vShape    ? run.stages == 2 * run.ranks
                  : run.stages == run.ranks)
    return llvm::Error::success();
  return error(llvm::Twine(who) + ": " + llvm::Twine(run.stages) + " stages on " +
               llvm::Twine(run.ranks) + " ranks do not fit the " + run.schedule +
               " schedule (one stage per rank; interleaved: chunks >= 2 per rank; zb-v, "
               "dualpipev: two per rank)");
}

/// The run's schedule kind, or an error naming the unknown one.
llvm::Expected<sched::ScheduleKind> scheduleOf(const MeasuredRun &run) {
  auto kind = sched::parseScheduleKind(run.schedule);
  if (!kind)
    return error("measured run: " + kind.error());
  return *kind;
}

} // namespace

llvm::Expected<MeasuredComparison>
simulateFromMeasured(const MeasuredRun &run, int64_t firstStep, int64_t lastStep,
                     const SimulationOptions &options) {
  auto measured = summarize(run, firstStep, lastStep);
  if (!measured)
    return measured.takeError();
  auto kind = scheduleOf(run);
  if (!kind)
    return kind.takeError();
  const bool interleaved = *kind == sched::ScheduleKind::Interleaved;
  if (auto err = checkStagesFit(run, *kind, "simulateFromMeasured"))
    return std::move(err);
  auto costs = measureCosts(run, measured->firstStep, measured->lastStep, *kind,
                            measured->steps);
  if (!costs)
    return costs.takeError();
  costs->costs.p2p = options.p2pMs >= 0
                         ? options.p2pMs
                         : estimateP2pMs(run, measured->firstStep, measured->lastStep);

  sched::ScheduleRequest request;
  request.kind = *kind;
  request.devices = run.ranks;
  request.chunks = interleaved ? static_cast<int>(run.stages / run.ranks) : 1;
  request.microbatches = static_cast<int>(run.microbatches);
  request.stageLayers = costs->stageLayers;
  std::optional<sched::PipelineProgram> executed;
  if (auto err = replayExecutedOrder(request, executed))
    return std::move(err);
  request.kfac = options.kfac;
  if (!costs->hasKfac)
    request.kfac.policy = sched::Policy::None;
  else if (request.kfac.refreshSteps == 0)
    request.kfac.refreshSteps = costs->refreshSteps;
  auto result = sched::schedulePipeline(costs->costs, request);
  if (!result)
    return error("simulating the measured durations: " + result.error());

  MeasuredComparison c;
  c.measured = std::move(*measured);
  c.costs = std::move(costs->costs);
  c.simulated = result->report;
  c.simulated.costModel = c.costs.name;
  c.simulatedTimeline = result->timeline;
  const double K = std::max(1, result->timeline.steps);
  for (const sched::DeviceReport &d : c.simulated.perDevice)
    c.simulatedBusyMs.push_back(d.pipelineBusyMs + d.kfacBusyMs / K);
  return c;
}

llvm::Expected<KfacWindowPlan> planKfacWindow(const MeasuredRun &run, int64_t firstStep,
                                              int64_t lastStep, int64_t steps,
                                              double maxOverhead, int64_t maxRefresh) {
  auto measured = summarize(run, firstStep, lastStep);
  if (!measured)
    return measured.takeError();
  auto kind = scheduleOf(run);
  if (!kind)
    return kind.takeError();
  const bool interleaved = *kind == sched::ScheduleKind::Interleaved;
  // Two pipes (Chimera, DualPipe): replicas of every stage.
  const bool twoPipes =
      *kind == sched::ScheduleKind::Chimera || *kind == sched::ScheduleKind::DualPipe;
  if (*kind == sched::ScheduleKind::Imported)
    return error("K-FAC in the bubbles: an imported schedule is not supported");
  if (auto err = checkStagesFit(run, *kind, "K-FAC in the bubbles"))
    return std::move(err);
  auto costs = measureCosts(run, measured->firstStep, measured->lastStep, *kind,
                            measured->steps);
  if (!costs)
    return costs.takeError();
  costs->costs.p2p = estimateP2pMs(run, measured->firstStep, measured->lastStep);
  // The preconditioning runs after the flush in every step (it needs the
  // clipped gradients of every rank): a fixed cost, not work to place.
  sched::CostModel planning = costs->costs;
  for (sched::LayerCost &layer : planning.layers)
    layer.precondition = 0;
  // Chimera, DualPipe: the replicas sum their factors with the gradients, after the
  // curvature step's flush; an inversion runs on one replica in a later step.
  planning.replicaFactorsAfterFlush = twoPipes;
  sched::ScheduleRequest request;
  request.kind = *kind;
  request.devices = run.ranks;
  request.chunks = interleaved ? static_cast<int>(run.stages / run.ranks) : 1;
  request.microbatches = static_cast<int>(run.microbatches);
  request.stageLayers = costs->stageLayers;
  std::optional<sched::PipelineProgram> executed;
  if (auto err = replayExecutedOrder(request, executed))
    return std::move(err);
  request.kfac.policy = sched::Policy::PF;
  request.kfac.refreshSteps = static_cast<int>(steps);
  request.kfac.splitPieces = 1;      // one call inverts a layer's two factors
  request.kfac.steadyState = false;  // a window's inverses finish in it
  // The scheduler's K: the smallest window whose inverses lengthen the mean
  // step by at most this share of T_pipe.
  request.kfac.maxOverhead = maxOverhead;
  request.kfac.maxRefreshSteps = static_cast<int>(std::max<int64_t>(1, maxRefresh));
  auto result = sched::schedulePipeline(planning, request);
  if (!result)
    return error("placing the K-FAC inverses: " + result.error());
  KfacWindowPlan plan;
  plan.steps = std::max(1, result->timeline.steps);
  plan.pipelineMs = result->report.pipelineStepMs;
  plan.stepMs = result->report.stepTimeMs;
  plan.costs = costs->costs;
  // Per (device, window step): the end times of its passes, in order.
  std::map<std::pair<int, int>, std::vector<double>> passEnds;
  const std::vector<sched::TimelineItem> items = result->timeline.allItems();
  const bool halves = sched::splitsBackward(*kind);
  for (const sched::TimelineItem &item : items) {
    if (!sched::isPipelineCompute(item.kind))
      continue;
    // A backward a split schedule runs whole (DualPipe(V)) is two calls of
    // the rank program, backward_input and backward_weight back to back: two
    // passes, or every later placement would land that many calls early.
    if (halves && item.kind == sched::ItemKind::Backward)
      passEnds[{item.device, item.step}].push_back((item.start + item.end) / 2);
    passEnds[{item.device, item.step}].push_back(item.end);
  }
  for (auto &[key, ends] : passEnds)
    std::sort(ends.begin(), ends.end());
  // An item's layer (the call's; -1: a stage carrier without one), the
  // passes of its rank and window step that end before it starts, and all of
  // that step's passes.
  auto placeOf = [&](const sched::TimelineItem &item, const char *what)
      -> llvm::Expected<std::tuple<int64_t, int64_t, int64_t>> {
    if (item.layer < 0 || item.layer >= static_cast<int>(costs->origin.size()))
      return error(llvm::Twine("placing the K-FAC work: ") + what + " of an unknown layer");
    const std::vector<double> &ends = passEnds[{item.device, item.step}];
    int64_t after = std::upper_bound(ends.begin(), ends.end(), item.start + 1e-9) - ends.begin();
    return std::make_tuple(costs->origin[size_t(item.layer)].second, after,
                           int64_t(ends.size()));
  };
  std::map<std::pair<int32_t, int64_t>, KfacWindowPlacement> placed;
  for (const sched::TimelineItem &item : items) {
    if (item.kind != sched::ItemKind::InversionA && item.kind != sched::ItemKind::InversionB)
      continue;
    auto at = placeOf(item, "an inversion");
    if (!at)
      return at.takeError();
    auto [layer, after, passes] = *at;
    if (layer < 0)
      continue;
    // The curvature step's factors are complete only after its last pass.
    if (item.step == 0 || item.outsideBubble)
      after = std::max(after, passes);
    // The rank is the device the item runs on (interleaved: stage s on
    // rank s mod D).
    KfacWindowPlacement candidate{int32_t(item.device), layer, item.step, after};
    auto [it, inserted] = placed.insert({{candidate.rank, layer}, candidate});
    // Both halves of the layer: the call goes where the later one is.
    if (!inserted && std::make_pair(candidate.windowStep, candidate.afterPasses) >
                         std::make_pair(it->second.windowStep, it->second.afterPasses))
      it->second = candidate;
  }
  for (auto &[key, p] : placed)
    plan.inverses.push_back(p);
  // The factor calls: only in window step 0, whose passes produced their
  // inputs; a call placed later (or after the flush) stays after its pass.
  // Per factor the micro-batches keep their order (the first call decays
  // the running average), so a call never goes before the previous one's.
  std::map<std::tuple<int32_t, int64_t, bool>, std::map<int64_t, int64_t>> factorAfter;
  for (const sched::TimelineItem &item : items) {
    bool isA = item.kind == sched::ItemKind::CurvatureA;
    if ((!isA && item.kind != sched::ItemKind::CurvatureB) || item.step != 0 ||
        item.outsideBubble || item.micro < 0)
      continue;
    auto at = placeOf(item, "a curvature item");
    if (!at)
      return at.takeError();
    auto [layer, after, passes] = *at;
    if (layer < 0)
      continue;
    int64_t &slot = factorAfter[{int32_t(item.device), layer, !isA}][item.micro];
    slot = std::max(slot, after);
  }
  for (auto &[key, byMicro] : factorAfter) {
    int64_t latest = 0;
    for (auto &[micro, after] : byMicro) {
      latest = std::max(latest, after);
      auto [rank, layer, isB] = key;
      plan.factors.push_back({rank, layer, isB, micro, latest});
    }
  }
  return plan;
}

std::string MeasuredComparison::text() const {
  const sched::Report &s = simulated;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "measured vs simulated: " << measured.schedule << ", " << measured.ranks
     << " ranks, " << measured.microbatches << " micro-batches, steps "
     << measured.firstStep << ".." << measured.lastStep << "\n";
  os << "simulated with the measured durations (ms):";
  for (size_t st = 0; st < s.layersPerStage.size(); ++st) {
    double f = 0, b = 0, k = 0;
    // The layers of stage st are consecutive in `costs` (measureCosts).
    size_t begin = 0;
    for (size_t i = 0; i < st; ++i)
      begin += s.layersPerStage[i];
    for (size_t l = begin; l < begin + s.layersPerStage[st]; ++l) {
      const sched::LayerCost &c = costs.layers[l];
      f += c.forward;
      b += c.backward();
      k += c.curvature() + c.inversion() + c.precondition;
    }
    os << (st ? ";" : "") << " stage " << st << " F " << fmt("%.3f", f) << " B "
       << fmt("%.3f", b);
    if (k > 0)
      os << " K-FAC " << fmt("%.3f", k);
  }
  os << "; p2p " << fmt("%.3f", costs.p2p) << "\n";
  os << "                              measured   simulated\n";
  auto row = [&](const char *name, const std::string &m, const std::string &v) {
    os << name << llvm::right_justify(m, 12) << llvm::right_justify(v, 12)
       << "\n";
  };
  row("pipeline span T_pipe (ms)  ", fmt("%.3f", measured.pipelineSpanMs),
      fmt("%.3f", s.pipelineStepMs));
  row("step time (ms)             ", fmt("%.3f", measured.stepTimeMs),
      fmt("%.3f", s.stepTimeMs));
  row("utilization without K-FAC  ", percent(measured.utilizationWithoutKfac),
      percent(s.utilizationWithoutKfac));
  row("utilization with K-FAC     ", percent(measured.utilizationWithKfac),
      percent(s.utilizationWithKfac));
  row("bubble fraction            ", percent(measured.bubbleFraction),
      percent(s.bubbleFraction));
  if (s.kfacWorkMs > 0 || measured.kfacInBubblesMs > 0) {
    // Simulated: K-FAC time in the window's bubbles over the window's bubble
    // time (K bare steps); measured: the same per step over the steps.
    const double bubbles = std::max(1, s.refreshSteps) * s.devices * s.pipelineStepMs *
                           s.bubbleFraction;
    row("bubble fill (K-FAC)        ", percent(measured.bubbleFill),
        percent(bubbles > 0 ? s.kfacInBubblesMs / bubbles : 0.0));
  }
  os << "rank  busy measured  busy simulated   (ms per step; measured includes "
        "update/other)\n";
  for (size_t r = 0; r < measured.perRank.size(); ++r)
    os << fmt("%4.0f", static_cast<double>(r))
       << fmt("%15.3f", measured.perRank[r].busyMs)
       << fmt("%16.3f", r < simulatedBusyMs.size() ? simulatedBusyMs[r] : 0.0)
       << "\n";
  os << "(the simulation has no optimizer update or all-reduce, and sends run "
        "beside the compute; the measured step holds them)\n";
  return out;
}

std::string MeasuredComparison::json() const {
  llvm::json::Array busy;
  for (double b : simulatedBusyMs)
    busy.push_back(b);
  llvm::json::Object sim{
      {"cost_model", simulated.costModel},
      {"policy", simulated.policy},
      {"refresh_steps", simulated.refreshSteps},
      {"p2p_ms", costs.p2p},
      {"pipeline_span_ms", simulated.pipelineStepMs},
      {"step_time_ms", simulated.stepTimeMs},
      {"utilization",
       llvm::json::Object{{"without_kfac", simulated.utilizationWithoutKfac},
                          {"with_kfac", simulated.utilizationWithKfac}}},
      {"bubble_fraction", simulated.bubbleFraction},
      {"busy_ms_per_rank", std::move(busy)}};
  return dump(llvm::json::Object{{"measured", reportObject(measured)},
                                 {"simulated", std::move(sim)}});
}

//===----------------------------------------------------------------------===//
// Pictures
//===----------------------------------------------------------------------===//

llvm::Expected<MeasuredPicture> measuredPicture(const MeasuredRun &run,
                                                int64_t firstStep) {
  if (llvm::Error err = checkMeasuredRun(run))
    return std::move(err);
  if (run.events.empty())
    return error("measured run: no events to draw");
  auto report = summarize(run, firstStep, -1);
  if (!report)
    return report.takeError();
  double t0 = std::numeric_limits<double>::infinity(), tEnd = t0 * -1;
  for (const MeasuredEvent &e : run.events) {
    t0 = std::min(t0, e.start);
    tEnd = std::max(tEnd, e.end);
  }
  const int steps = static_cast<int>(lastStepOf(run)) + 1;
  std::vector<Span> stepSpan(steps);
  MeasuredPicture p;
  sched::Timeline &tl = p.timeline;
  tl.devices = run.ranks;
  tl.steps = steps;
  // Every event is an item with absolute times (kfacItems); stepItems, the
  // writers' per-step replay of a simulated step, stays empty.
  for (const MeasuredEvent &e : run.events) {
    sched::TimelineItem it;
    it.kind = itemKindOf(e.kind);
    it.lane = isCommunication(e.kind) ? sched::Lane::Comm : sched::Lane::Compute;
    it.device = e.rank;
    it.step = static_cast<int>(e.step);
    it.stage = static_cast<int>(e.stage);
    it.micro = static_cast<int>(e.microbatch);
    it.layer = static_cast<int>(e.layer);
    it.start = (e.start - t0) * kMs;
    it.end = (e.end - t0) * kMs;
    stepSpan[e.step].add(it.start, it.end);
    tl.kfacItems.push_back(it);
  }
  // A step begins at its first event (never before the previous step's
  // start); a step without events has length 0.
  tl.stepStart.assign(steps, 0);
  for (int k = 0; k < steps; ++k) {
    double start = stepSpan[k].empty() ? (k ? tl.stepStart[k - 1] : 0)
                                       : stepSpan[k].start;
    tl.stepStart[k] = k ? std::max(start, tl.stepStart[k - 1]) : start;
  }
  const double end = (tEnd - t0) * kMs;
  tl.stepTime.assign(steps, 0);
  for (int k = 0; k < steps; ++k)
    tl.stepTime[k] = (k + 1 < steps ? tl.stepStart[k + 1] : end) - tl.stepStart[k];
  tl.pipelineStep = report->pipelineSpanMs;

  sched::Report &r = p.report;
  r.schedule = run.schedule;
  r.policy = "measured";
  r.costModel = "measured";
  r.devices = run.ranks;
  r.stages = static_cast<int>(run.stages);
  r.microbatches = static_cast<int>(run.microbatches);
  r.pipelineStepMs = report->pipelineSpanMs;
  r.stepTimeMs = report->stepTimeMs;
  r.utilizationWithoutKfac = report->utilizationWithoutKfac;
  r.utilizationWithKfac = report->utilizationWithKfac;
  r.bubbleFraction = report->bubbleFraction;
  char title[256];
  std::snprintf(title, sizeof title,
                "measured %s, D=%d, N=%lld, %d steps: step %.3f ms (mean of "
                "steps %lld..%lld), utilization %.1f%% -> %.1f%% with K-FAC",
                run.schedule.c_str(), run.ranks,
                static_cast<long long>(run.microbatches), steps, r.stepTimeMs,
                static_cast<long long>(report->firstStep),
                static_cast<long long>(report->lastStep),
                100 * r.utilizationWithoutKfac, 100 * r.utilizationWithKfac);
  r.title = title;
  return p;
}

namespace {

llvm::Error writeRendered(const MeasuredRun &run, const std::string &path,
                          int64_t firstStep,
                          std::string (*render)(const sched::Timeline &,
                                                const sched::Report &)) {
  auto picture = measuredPicture(run, firstStep);
  if (!picture)
    return picture.takeError();
  ::pf::Status written =
      sched::writeTextFile(path, render(picture->timeline, picture->report));
  if (!written.ok())
    return error(written.message());
  return llvm::Error::success();
}

} // namespace

llvm::Error writeMeasuredTrace(const MeasuredRun &run, const std::string &path,
                               int64_t firstStep) {
  return writeRendered(run, path, firstStep, &sched::timelineToChromeTrace);
}

llvm::Expected<SteadyStepPicture> steadyStepPicture(const MeasuredRun &run, int64_t firstStep,
                                                    const SimulationOptions &simulation) {
  auto all = measuredPicture(run, firstStep);
  if (!all)
    return all.takeError();
  const sched::Timeline &measured = all->timeline;
  // The steps summarized (firstStep.., those with events), by length; the
  // median one is drawn.
  std::vector<std::pair<double, int>> lengths;
  std::vector<bool> hasEvents(measured.stepStart.size(), false);
  for (const sched::TimelineItem &it : measured.kfacItems)
    hasEvents[size_t(it.step)] = true;
  for (size_t k = 0; k < measured.stepStart.size(); ++k)
    if (int64_t(k) >= firstStep && hasEvents[k])
      lengths.push_back({measured.stepTime[k], int(k)});
  if (lengths.empty())
    for (size_t k = 0; k < measured.stepStart.size(); ++k)
      if (hasEvents[k])
        lengths.push_back({measured.stepTime[k], int(k)});
  llvm::sort(lengths);
  SteadyStepPicture p;
  const auto [stepMs, step] = lengths[lengths.size() / 2];
  p.step = step;
  p.measuredStepMs = stepMs;
  const int ranks = run.ranks;
  sched::Timeline &tl = p.timeline;
  tl.steps = 1;
  tl.stepStart = {0};
  for (sched::TimelineItem it : measured.kfacItems) {
    if (it.step != step)
      continue;
    it.start -= measured.stepStart[size_t(step)];
    it.end -= measured.stepStart[size_t(step)];
    it.step = 0;
    tl.kfacItems.push_back(it);
  }
  auto comparison = simulateFromMeasured(run, firstStep, -1, simulation);
  std::string simulatedText;
  if (comparison) {
    // The simulation's first step: its bare pipeline and the K-FAC work of
    // window step 0, on the rows below the measured ones.
    const sched::Timeline &sim = comparison->simulatedTimeline;
    const double start = sim.stepStart.empty() ? 0 : sim.stepStart[0];
    p.simulatedStepMs = sim.stepTime.empty() ? 0 : sim.stepTime[0];
    auto add = [&](sched::TimelineItem it, double shift) {
      it.device += ranks;
      it.start += shift;
      it.end += shift;
      it.step = 0;
      tl.kfacItems.push_back(it);
    };
    for (const sched::TimelineItem &it : sim.stepItems)
      add(it, 0);
    for (const sched::TimelineItem &it : sim.kfacItems)
      if (it.step == 0)
        add(it, -start);
    char text[192];
    std::snprintf(text, sizeof text,
                  "; below, simulated with the measured durations: step %.1f ms, "
                  "T_pipe %.1f ms, utilization %.1f%%",
                  p.simulatedStepMs, comparison->simulated.pipelineStepMs,
                  100 * comparison->simulated.utilizationWithKfac);
    simulatedText = text;
  } else {
    simulatedText = "; no simulation: " + llvm::toString(comparison.takeError());
  }
  tl.devices = comparison ? 2 * ranks : ranks;
  for (int r = 0; r < tl.devices; ++r)
    tl.rowLabels.push_back("rank " + std::to_string(r % ranks) +
                           (r < ranks ? " measured" : " simulated"));
  tl.stepTime = {std::max(p.measuredStepMs, p.simulatedStepMs)};
  tl.pipelineStep = measured.pipelineStep;
  p.report = all->report;
  char title[256];
  std::snprintf(title, sizeof title,
                "measured %s, D=%d, N=%lld: step %d (median of %zu steps) %.1f ms, "
                "utilization %.1f%% with K-FAC over the run",
                run.schedule.c_str(), ranks, static_cast<long long>(run.microbatches), step,
                lengths.size(), p.measuredStepMs, 100 * all->report.utilizationWithKfac);
  p.report.title = std::string(title) + simulatedText;
  return p;
}

llvm::Error writeMeasuredSvg(const MeasuredRun &run, const std::string &path,
                             int64_t firstStep, const SimulationOptions &simulation) {
  auto picture = steadyStepPicture(run, firstStep, simulation);
  if (!picture)
    return picture.takeError();
  ::pf::Status written =
      sched::writeTextFile(path, sched::timelineToSvg(picture->timeline, picture->report));
  if (!written.ok())
    return error(written.message());
  return llvm::Error::success();
}

} // namespace mlir::pf::driver
