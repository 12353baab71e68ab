//===- Report.cpp - Figures of a scheduled window: text and JSON ----------===//
//
// Layer "results" (docs/schedule.md): reads a result; uses the K-FAC
// problem layer (capacity bound) and the facade's policy names.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Report.h"

#include "pf/Support/OutputFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace pf::sched {
namespace {

/// K-FAC capacity bound of the reference: refresh work over bubble time,
/// for the device where that ratio is largest.
double refreshBound(const PipelineStep &step, const CostModel &costs) {
  KfacCapacity c = kfacCapacity(step, costs);
  double bound = 0;
  for (size_t d = 0; d < c.refreshWork.size(); ++d)
    if (c.refreshWork[d] > 0)
      bound = std::max(bound, c.bubblePerStep[d] > 0
                                  ? c.refreshWork[d] / c.bubblePerStep[d]
                                  : std::numeric_limits<double>::infinity());
  return bound;
}

/// The refresh rate (refreshes per step) every layer can reach at the step
/// T_pipe + unmovable, bounded on each device twice: all its refresh work
/// in the bubbles a piece of it fits into (a piece is at least 1/splitPieces
/// of its task, with the margin) plus the unmovable time, less its
/// preconditioning; and its inversions alone in the bubbles an inversion
/// piece fits into plus the unmovable time, less the preconditioning that
/// cannot run in the bubbles after the device's first gradient is final
/// (it must take that much of the time after T_pipe).
double refreshRateLimit(const PipelineStep &step, const CostModel &costs,
                        const KfacOptions &options, double unmovable) {
  const KfacProblem one = buildKfacProblem(step, costs, 1);
  const int devices = step.layout.devices;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> all(devices, 0), inversion(devices, 0), precondition(devices, 0);
  std::vector<double> anyPiece(devices, inf), inversionPiece(devices, inf);
  std::vector<double> firstGradient(devices, inf);
  const double scale = (1 + options.margin) / std::max(1, options.splitPieces);
  for (const KfacTask &t : one.tasks) {
    anyPiece[t.device] = std::min(anyPiece[t.device], t.duration * scale);
    if (t.kind == ItemKind::Precondition) {
      precondition[t.device] += t.duration;
      firstGradient[t.device] = std::min(firstGradient[t.device], t.release);
      continue;
    }
    all[t.device] += t.duration;
    if (t.kind == ItemKind::InversionA || t.kind == ItemKind::InversionB) {
      inversion[t.device] += t.duration;
      inversionPiece[t.device] = std::min(inversionPiece[t.device], t.duration * scale);
    }
  }
  double rate = 1;
  for (int d = 0; d < devices; ++d) {
    double room = 0, inversionRoom = 0, afterGradient = 0;
    for (const Interval &g : step.idle[d]) {
      const double length = g.end - g.start;
      room += length >= anyPiece[d] ? length : 0;
      inversionRoom += length >= inversionPiece[d] ? length : 0;
      afterGradient += std::max(0.0, g.end - std::max(g.start, firstGradient[d]));
    }
    const double flushPreconditioning = std::max(0.0, precondition[d] - afterGradient);
    if (all[d] > 0)
      rate = std::min(rate, std::max(0.0, room + unmovable - precondition[d]) / all[d]);
    if (inversion[d] > 0)
      rate = std::min(rate, std::max(0.0, inversionRoom + unmovable - flushPreconditioning) /
                                inversion[d]);
  }
  return rate;
}

/// The unmovable time, the overhead beyond it, the bubbles' limit and the
/// refresh's shape (Report's fields).
void refreshFigures(const PipelineStep &step, const CostModel &costs, const KfacOptions &options,
                    const KfacPlan &plan, Report &r) {
  const double T = step.makespan;
  r.unmovableMs = plan.unmovable;
  const double floor = T + plan.unmovable;
  r.overheadBeyondMs = r.stepTimeMs - floor;
  r.overheadBeyondFraction = floor > 0 ? r.overheadBeyondMs / floor : 0;
  r.refreshChoice = plan.refresh == RefreshChoice::Throughput ? "throughput" : "interval";
  const RefreshShape &shape = plan.problem.shape;
  r.preconditionDownShare = shape.preconditionDownShare;
  r.staggered = shape.staggered();
  r.layerRefreshSteps = shape.refreshSteps;
  double refreshes = 0;
  for (const auto &steps : shape.refreshSteps)
    refreshes += steps.size();
  r.meanRefreshInterval =
      r.staggered && refreshes > 0 ? r.layers * r.refreshSteps / refreshes : r.refreshSteps;
  // Utilization at a mean step S: the time after T_pipe is flush time for
  // every device. Within the budget S runs from T_pipe + unmovable to
  // (T_pipe + unmovable)(1 + maxOverheadBeyond); the larger end value is
  // the limit (work and time both grow with S).
  const KfacCapacity c = kfacCapacity(step, costs);
  auto utilizationAt = [&](double S) {
    const double rate = refreshRateLimit(step, costs, options, S - T);
    double work = 0;
    for (size_t d = 0; d < c.refreshWork.size(); ++d)
      work += std::min(S, step.busy[d] + c.preconditionPerStep[d] + rate * c.refreshWork[d]);
    return S > 0 ? work / (r.devices * S) : 0;
  };
  r.maxOverheadBeyond = options.maxOverheadBeyond;
  r.utilizationLimit =
      std::max(utilizationAt(floor), utilizationAt(floor * (1 + options.maxOverheadBeyond)));
  const double rate = refreshRateLimit(step, costs, options, plan.unmovable);
  r.refreshIntervalLimit = rate > 0 ? 1 / rate : std::numeric_limits<double>::infinity();
}

std::string fmt(const char *format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

} // namespace

Report computeReport(const PipelineStep &step, const Timeline &timeline,
                     const KfacPlan &plan, const CostModel &costs,
                     const KfacOptions &options) {
  const PipelineLayout &l = step.layout;
  Report r;
  r.schedule = scheduleKindName(l.kind);
  r.policy = policyName(options.policy);
  r.costModel = costs.name;
  r.devices = l.devices;
  r.stages = l.stages;
  r.microbatches = l.microbatches;
  r.layers = l.numLayers();
  r.chunks = l.chunks;
  for (const auto &s : l.stageLayers)
    r.layersPerStage.push_back(static_cast<int>(s.size()));

  const double T = step.makespan;
  const int K = timeline.steps;
  const double window = timeline.windowTime();
  r.pipelineStepMs = T;
  r.pipelineSteadyStepMs = step.steadyStep;
  r.refreshSteps = options.policy == Policy::None ? 0 : K;
  r.stepTimeMs = window / K;
  r.overheadMs = r.stepTimeMs - T;
  r.overheadFraction = T > 0 ? r.overheadMs / T : 0;

  r.perDevice.assign(l.devices, {});
  for (int d = 0; d < l.devices; ++d) {
    r.perDevice[d].device = d;
    r.perDevice[d].pipelineBusyMs = step.busy[d];
  }
  for (const TimelineItem &it : timeline.kfacItems) {
    if (it.lane != Lane::Compute || !isKfac(it.kind))
      continue;
    DeviceReport &dr = r.perDevice[it.device];
    dr.kfacBusyMs += it.duration();
    if (it.outsideBubble)
      dr.kfacOutsideMs += it.duration();
    if (it.refreshLag > 0)
      r.steadyStateMs += it.duration();
  }
  double busyStep = 0, busyWindow = 0;
  for (DeviceReport &dr : r.perDevice) {
    dr.utilizationWithoutKfac = T > 0 ? dr.pipelineBusyMs / T : 0;
    double work = K * dr.pipelineBusyMs + dr.kfacBusyMs;
    dr.utilizationWithKfac = window > 0 ? work / window : 0;
    busyStep += dr.pipelineBusyMs;
    busyWindow += work;
    r.kfacWorkMs += dr.kfacBusyMs;
    r.kfacOutsideMs += dr.kfacOutsideMs;
  }
  r.kfacInBubblesMs = r.kfacWorkMs - r.kfacOutsideMs;
  r.utilizationWithoutKfac = T > 0 ? busyStep / (l.devices * T) : 0;
  r.bubbleFraction = 1 - r.utilizationWithoutKfac;
  r.utilizationWithKfac =
      window > 0 ? busyWindow / (l.devices * window) : r.utilizationWithoutKfac;
  r.refreshLowerBound = refreshBound(step, costs);
  if (options.policy != Policy::None)
    refreshFigures(step, costs, options, plan, r);
  r.windowsTried = plan.candidatesTried;
  r.usedReference = plan.usedReference;
  return r;
}

namespace {
/// Mean pipeline work of a device per step.
double averageBusy(const Report &r) {
  double total = 0;
  for (const DeviceReport &d : r.perDevice)
    total += d.pipelineBusyMs;
  return r.perDevice.empty() ? 0 : total / r.perDevice.size();
}
/// The device with the largest total memory (the first of equals).
const DeviceReport *peakMemoryDevice(const Report &r) {
  const DeviceReport *peak = nullptr;
  for (const DeviceReport &d : r.perDevice)
    if (!peak || d.memory.totalBytes() > peak->memory.totalBytes())
      peak = &d;
  return peak;
}

/// One line per device: in-flight micro-batches and, where the cost model
/// gives bytes, the breakdown in GB.
void memoryToText(const Report &r, std::ostream &os) {
  os << "\nmemory per device, peak of a step (GB; optimizer state "
     << fmt("%g", r.optimizerStates) << " x parameters";
  if (!std::isinf(r.memoryCapBytes))
    os << "; cap " << formatGigabytes(r.memoryCapBytes);
  os << "):\n";
  os << "device  in flight  activations  parameters  gradients  optimizer"
        "     K-FAC     total\n";
  for (const DeviceReport &d : r.perDevice) {
    const DeviceMemory &m = d.memory;
    os << fmt("%6.0f", d.device) << fmt("%11.4g", m.inFlightMicrobatches);
    if (r.memoryModelled)
      os << fmt("%13.2f", m.activationBytes / 1e9)
         << fmt("%12.2f", m.parameterBytes / 1e9)
         << fmt("%11.2f", m.gradientBytes / 1e9)
         << fmt("%11.2f", m.optimizerBytes / 1e9)
         << fmt("%10.2f", m.kfacBytes / 1e9) << fmt("%10.2f", m.totalBytes() / 1e9);
    os << "\n";
  }
  if (!r.memoryModelled) {
    os << "(bytes not modelled: the cost model gives no activation_bytes, "
          "parameters, kfac_linears)\n";
    return;
  }
  if (const DeviceReport *peak = peakMemoryDevice(r))
    os << "peak memory " << formatGigabytes(peak->memory.totalBytes())
       << " on device " << peak->device
       << (std::isinf(r.memoryCapBytes) ? "" : ", within the cap") << "\n";
  if (!r.partitionNote.empty())
    os << "partition: " << r.partitionNote << "\n";
}

/// The unmovable time, the overhead beyond it and the refresh's shape.
void refreshToText(const Report &r, std::ostream &os) {
  os << "unmovable per step (ms) " << fmt("%27.2f", r.unmovableMs)
     << "  (preconditioning after the last backward and gradient all-reduce)\n";
  os << "overhead beyond it (ms) " << fmt("%27.2f", r.overheadBeyondMs) << "  ("
     << fmt("%.2f%%", 100 * r.overheadBeyondFraction) << " of T_pipe + unmovable)\n";
  os << "bubble limit            " << fmt("%27.2f%%", 100 * r.utilizationLimit) << " (within "
     << fmt("%g%%", 100 * r.maxOverheadBeyond)
     << " beyond; mean K >= " << fmt("%.2f", r.refreshIntervalLimit) << " at T_pipe + unmovable)\n";
  os << "refresh (" << r.refreshChoice << "): ";
  if (!r.staggered) {
    os << "every layer every " << r.refreshSteps << " steps\n";
  } else {
    os << "staggered, period " << r.refreshSteps << " steps, mean K "
       << fmt("%.2f", r.meanRefreshInterval) << "; steps per layer:";
    for (size_t l = 0; l < r.layerRefreshSteps.size(); ++l) {
      os << (l % 6 == 0 ? "\n  " : "  ") << "L" << l << " {";
      for (size_t j = 0; j < r.layerRefreshSteps[l].size(); ++j)
        os << (j ? "," : "") << r.layerRefreshSteps[l][j];
      os << "}";
    }
    os << "\n";
  }
  if (!r.preconditionDownShare.empty()) {
    int split = 0, up = 0;
    for (double share : r.preconditionDownShare) {
      split += share > 0 && share < 1;
      up += share == 0;
    }
    os << "preconditioning split (chimera): " << split << " layers half on each replica, " << up
       << " on the up replica, " << r.preconditionDownShare.size() - split - up
       << " on the down replica\n";
  }
}

} // namespace

std::string reportToText(const Report &r) {
  std::ostringstream os;
  os << "schedule " << r.schedule << ", " << r.devices << " devices, "
     << r.stages << " stages";
  if (r.chunks > 1)
    os << " (" << r.chunks << " chunks per device)";
  os << ", " << r.microbatches << " micro-batches, " << r.layers
     << " layers, policy " << r.policy << "\n";
  os << "cost model: " << r.costModel << "\n";
  os << "layers per stage:";
  for (int n : r.layersPerStage)
    os << " " << n;
  os << "\n\n";
  os << "                          without K-FAC    with K-FAC\n";
  os << "step time (ms)         " << fmt("%14.2f", r.pipelineStepMs)
     << fmt("%14.2f", r.stepTimeMs) << "\n";
  os << "utilization            " << fmt("%13.2f%%", 100 * r.utilizationWithoutKfac)
     << fmt("%13.2f%%", 100 * r.utilizationWithKfac) << "\n";
  os << "bubble fraction        " << fmt("%13.2f%%", 100 * r.bubbleFraction)
     << "\n";
  os << "refresh interval K     " << "             -"
     << fmt("%14.0f", r.refreshSteps) << "   (capacity bound "
     << fmt("%.2f", r.refreshLowerBound) << ")\n";
  os << "overhead per step (ms) " << fmt("%28.2f", r.overheadMs) << "  ("
     << fmt("%.2f%%", 100 * r.overheadFraction) << ")\n";
  os << "K-FAC per window (ms):   in bubbles " << fmt("%.2f", r.kfacInBubblesMs)
     << ", after a flush " << fmt("%.2f", r.kfacOutsideMs)
     << ", overlapping the next refresh " << fmt("%.2f", r.steadyStateMs)
     << "\n";
  // Below the lines other tests pin down one after another.
  if (r.pipelineSteadyStepMs > 0)
    os << "steady-state step (ms) " << fmt("%14.2f", r.pipelineSteadyStepMs)
       << "   (no flush: steps overlap; utilization "
       << fmt("%.2f%%", 100 * averageBusy(r) / r.pipelineSteadyStepMs) << ")\n";
  if (r.refreshSteps > 0)
    refreshToText(r, os);
  os << "\n";
  os << "device  pipeline/step  K-FAC/window  outside  util w/o  util with\n";
  for (const DeviceReport &d : r.perDevice)
    os << fmt("%6.0f", d.device) << fmt("%15.2f", d.pipelineBusyMs)
       << fmt("%14.2f", d.kfacBusyMs) << fmt("%9.2f", d.kfacOutsideMs)
       << fmt("%9.2f%%", 100 * d.utilizationWithoutKfac)
       << fmt("%10.2f%%", 100 * d.utilizationWithKfac) << "\n";
  memoryToText(r, os);
  os << "\nscheduler time: " << fmt("%.3f", r.schedulerSeconds) << " s ("
     << r.windowsTried << " windows evaluated"
     << (r.usedReference ? ", the reference greedy's window kept" : "") << ")\n";
  return os.str();
}

namespace {
nlohmann::json memoryToJson(const DeviceMemory &m, bool modelled) {
  nlohmann::json j = {{"in_flight_microbatches", m.inFlightMicrobatches},
                      {"in_flight_passes", m.inFlightPasses}};
  if (!modelled)
    return j;
  j["activation_bytes"] = m.activationBytes;
  j["parameter_bytes"] = m.parameterBytes;
  j["gradient_bytes"] = m.gradientBytes;
  j["optimizer_bytes"] = m.optimizerBytes;
  j["kfac_bytes"] = m.kfacBytes;
  j["total_bytes"] = m.totalBytes();
  return j;
}
} // namespace

std::string reportToJson(const Report &r) {
  try {
    nlohmann::json j;
    j["schedule"] = r.schedule;
    j["policy"] = r.policy;
    j["cost_model"] = r.costModel;
    j["devices"] = r.devices;
    j["stages"] = r.stages;
    j["chunks"] = r.chunks;
    j["microbatches"] = r.microbatches;
    j["layers"] = r.layers;
    j["layers_per_stage"] = r.layersPerStage;
    j["pipeline_step_ms"] = r.pipelineStepMs;
    if (r.pipelineSteadyStepMs > 0)
      j["pipeline_steady_step_ms"] = r.pipelineSteadyStepMs;
    j["step_time_ms"] = r.stepTimeMs;
    j["utilization"] = {{"without_kfac", r.utilizationWithoutKfac},
                        {"with_kfac", r.utilizationWithKfac}};
    j["bubble_fraction"] = r.bubbleFraction;
    j["refresh_steps"] = r.refreshSteps;
    j["refresh_steps_lower_bound"] = r.refreshLowerBound;
    j["overhead"] = {{"ms_per_step", r.overheadMs},
                     {"fraction", r.overheadFraction},
                     {"kfac_outside_bubbles_ms", r.kfacOutsideMs}};
    j["kfac_work_ms"] = r.kfacWorkMs;
    j["kfac_in_bubbles_ms"] = r.kfacInBubblesMs;
    j["kfac_next_refresh_overlap_ms"] = r.steadyStateMs;
    if (r.refreshSteps > 0) {
      j["unmovable_ms_per_step"] = r.unmovableMs;
      j["overhead"]["beyond_unmovable_ms"] = r.overheadBeyondMs;
      j["overhead"]["beyond_unmovable_fraction"] = r.overheadBeyondFraction;
      j["utilization"]["limit"] = r.utilizationLimit;
      j["overhead"]["max_beyond_unmovable_fraction"] = r.maxOverheadBeyond;
      nlohmann::json refresh = {{"choice", r.refreshChoice},
                                {"staggered", r.staggered},
                                {"period_steps", r.refreshSteps},
                                {"mean_interval", r.meanRefreshInterval},
                                {"interval_limit", r.refreshIntervalLimit}};
      if (r.staggered)
        refresh["layer_refresh_steps"] = r.layerRefreshSteps;
      if (!r.preconditionDownShare.empty())
        refresh["precondition_down_share"] = r.preconditionDownShare;
      j["refresh"] = std::move(refresh);
    }
    j["scheduler_seconds"] = r.schedulerSeconds;
    j["windows_tried"] = r.windowsTried;
    j["used_reference_window"] = r.usedReference;
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceReport &d : r.perDevice)
      devices.push_back({{"device", d.device},
                         {"pipeline_busy_ms_per_step", d.pipelineBusyMs},
                         {"kfac_busy_ms_per_window", d.kfacBusyMs},
                         {"kfac_outside_bubbles_ms", d.kfacOutsideMs},
                         {"utilization_without_kfac", d.utilizationWithoutKfac},
                         {"utilization_with_kfac", d.utilizationWithKfac},
                         {"memory", memoryToJson(d.memory, r.memoryModelled)}});
    j["per_device"] = std::move(devices);
    nlohmann::json memory = {{"modelled", r.memoryModelled},
                             {"optimizer_states", r.optimizerStates},
                             {"cap_bytes", nullptr}};
    if (!std::isinf(r.memoryCapBytes))
      memory["cap_bytes"] = r.memoryCapBytes;
    if (const DeviceReport *peak = peakMemoryDevice(r); peak && r.memoryModelled) {
      memory["peak_device"] = peak->device;
      memory["peak_total_bytes"] = peak->memory.totalBytes();
    }
    if (!r.partitionNote.empty())
      memory["partition_note"] = r.partitionNote;
    j["memory"] = std::move(memory);
    // Replacing invalid UTF-8 (a cost model name from a file) cannot throw.
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } catch (const std::exception &e) {
    return std::string("{\"error\": \"report: ") + e.what() + "\"}\n";
  }
}

Status writeTextFile(const std::string &path, const std::string &text) {
  std::string why = ::pf::writeFileAtomically(path, text.data(), text.size());
  return why.empty() ? Status::success() : Status::error(why);
}

} // namespace pf::sched
