//===- Scheduler.cpp - Partition, pipeline, K-FAC placement, report -------===//
//
// The top of the library (see pf/Schedule/Scheduler.h): the one place that
// orders partition -> build -> simulate -> plan -> timeline -> report.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Scheduler.h"
#include "pf/Schedule/KfacOffload.h"
#include "pf/Schedule/Partition.h"
#include "pf/Schedule/Limits.h"

#include <algorithm>
#include <cmath>

#include <chrono>

namespace pf::sched {
namespace {

/// Balancing uses the pipeline work of a layer (forward + backward); K-FAC
/// work lands in the bubbles and does not set the pipeline's pace.
std::vector<double> pipelineCost(const CostModel &costs) {
  std::vector<double> cost;
  for (const LayerCost &l : costs.layers)
    cost.push_back(l.forward + l.backward());
  return cost;
}

Expected<std::vector<std::vector<int>>>
partitionFor(const CostModel &costs, const ScheduleRequest &request,
             int stages) {
  const int layers = static_cast<int>(costs.layers.size());
  if (stages > layers)
    return Status::error("more stages (" + std::to_string(stages) +
                         ") than layers (" + std::to_string(layers) + ")");
  if (request.layersPerStage < 0)
    return Status::error("layers per stage must be positive (got " +
                         std::to_string(request.layersPerStage) + ")");
  auto partition =
      request.layersPerStage > 0
          ? partitionUniform(pipelineCost(costs), stages, request.layersPerStage)
          : partitionMinMax(pipelineCost(costs), stages);
  if (!partition)
    return partition.status();
  return partition->stageLayers();
}

/// An imported order must come with kind Imported and agree with D and N.
Status checkImported(const ScheduleRequest &request) {
  if ((request.kind == ScheduleKind::Imported) != (request.imported != nullptr))
    return Status::error("an imported schedule needs kind 'imported' and its order");
  if (!request.imported)
    return Status::success();
  const PipelineLayout &l = request.imported->layout;
  if (request.devices != 0 && request.devices != l.devices)
    return Status::error("the imported schedule has " + std::to_string(l.devices) +
                         " ranks, not " + std::to_string(request.devices));
  if (request.microbatches != 0 && request.microbatches != l.microbatches)
    return Status::error("the imported schedule has " +
                         std::to_string(l.microbatches) + " micro-batches, not " +
                         std::to_string(request.microbatches));
  return Status::success();
}

/// Stages of the request's pipeline on `devices` devices.
int stagesOf(const ScheduleRequest &request, int devices) {
  return request.imported ? request.imported->layout.stages
                          : stagesFor(request.kind, devices, request.chunks);
}

/// D of a request: as given, or from the stages the caller partitioned.
Expected<int> devicesOf(const ScheduleRequest &request) {
  if (request.imported)
    return request.imported->layout.devices;
  if (request.stageLayers.empty())
    return request.devices;
  if (request.layersPerStage != 0)
    return Status::error("give either the layers per stage or the layers of "
                         "every stage, not both");
  const int stages = static_cast<int>(request.stageLayers.size());
  int devices = stages;
  if (request.kind == ScheduleKind::Interleaved) {
    if (request.chunks < 1 || stages % request.chunks != 0)
      return Status::error("interleaved needs the " + std::to_string(stages) +
                           " stages to be a multiple of chunks=" +
                           std::to_string(request.chunks));
    devices = stages / request.chunks;
  }
  if (placementOf(request.kind) == Placement::VShape) {
    if (stages % 2 != 0)
      return Status::error(std::string(scheduleKindName(request.kind)) +
                           " needs an even number of stages (two per device), got " +
                           std::to_string(stages));
    devices = stages / 2;
  }
  if (request.devices != 0 && request.devices != devices)
    return Status::error(std::to_string(stages) + " stages of " +
                         scheduleKindName(request.kind) + " run on " +
                         std::to_string(devices) + " devices, not " +
                         std::to_string(request.devices));
  return devices;
}

/// Layers of every stage such that each device's memory stays within the
/// cap, assuming the stages hold as many micro-batches as in `program` (the
/// min-max partition's order). Each of the c stage copies on a device gets
/// 1/c of the cap, and each copy's activations peak together: an upper bound,
/// checked again on the new order by the caller.
Expected<std::vector<std::vector<int>>>
partitionUnderCap(const CostModel &costs, const PipelineProgram &program,
                  const MemoryOptions &options) {
  const PipelineLayout &l = program.layout;
  const double copies = static_cast<double>(l.pipes) * l.stages / l.devices;
  StageMemoryModel model;
  model.cap = options.capBytes;
  for (const LayerCost &layer : costs.layers) {
    model.scaled.push_back(layer.memory.activationBytes);
    model.fixed.push_back(kBytesPerElement * layer.memory.parameters *
                              (2 + options.optimizerStates) +
                          (options.kfac ? kfacBytesOf(layer.memory) : 0));
  }
  for (int peak : stageInFlightPeaks(program)) {
    model.perStageScaled.push_back(copies * peak);
    model.perStageFixed.push_back(copies);
  }
  auto partition = partitionMinMax(pipelineCost(costs), l.stages, model);
  if (!partition)
    return partition.status();
  return partition->stageLayers();
}

/// The memory options in force: K-FAC memory only with a K-FAC policy.
Expected<MemoryOptions> memoryOptionsOf(const CostModel &costs,
                                        const ScheduleRequest &request) {
  MemoryOptions options = request.memory;
  options.kfac = request.kfac.policy != Policy::None;
  if (!(options.optimizerStates >= 0) || !std::isfinite(options.optimizerStates))
    return Status::error("the optimizer state must be a finite number of "
                         "parameter copies >= 0");
  if (!(options.capBytes > 0)) // NaN included
    return Status::error("the memory cap must be a positive number of bytes");
  if (!std::isinf(options.capBytes) && !costs.hasMemory)
    return Status::error("a memory cap needs the layers' memory, which the cost "
                         "model '" + costs.name + "' does not give (profile keys "
                         "activation_bytes, parameters, kfac_linears; "
                         "docs/profile-format.md)");
  return options;
}

} // namespace

Expected<ScheduleResult> schedulePipeline(const CostModel &costs,
                                          const ScheduleRequest &request) {
  auto started = std::chrono::steady_clock::now();
  if (costs.layers.empty())
    return Status::error("the cost model has no layers");
  if (Status s = checkLimit("the cost model's layers", costs.layers.size(), kMaxLayers,
                            "kMaxLayers");
      !s.ok())
    return s;
  if (Status s = checkImported(request); !s.ok())
    return s;
  auto devices = devicesOf(request);
  if (!devices)
    return devices.status();
  const int microbatches =
      request.imported ? request.imported->layout.microbatches : request.microbatches;
  Status shape = checkScheduleShape(request.kind, *devices, microbatches,
                                    request.chunks);
  if (!shape.ok())
    return shape;
  if (Status s = checkLimit("layers x micro-batches",
                            static_cast<long long>(costs.layers.size()) * microbatches,
                            kMaxLayerMicrobatches, "kMaxLayerMicrobatches");
      !s.ok())
    return s;

  PipelineConfig config;
  config.kind = request.kind;
  config.devices = *devices;
  config.microbatches = microbatches;
  config.chunks = request.chunks;
  config.imported = request.imported;
  if (request.stageLayers.empty()) {
    auto stageLayers = partitionFor(costs, request, stagesOf(request, *devices));
    if (!stageLayers)
      return stageLayers.status();
    config.stageLayers = stageLayers.take();
  } else {
    config.stageLayers = request.stageLayers;
  }

  auto memoryOptions = memoryOptionsOf(costs, request);
  if (!memoryOptions)
    return memoryOptions.status();

  ScheduleResult result;
  auto program = buildPipeline(config, costs);
  if (!program)
    return program.status();
  result.program = program.take();
  // Excluded before the simulation and the K-FAC placement: memory depends on
  // the order and the stages only.
  std::vector<DeviceMemory> memory =
      computeMemory(result.program, costs, *memoryOptions);
  const std::string scheduleName = scheduleKindName(result.program.layout.kind);
  std::string partitionNote;
  if (Status s = checkMemoryCap(memory, *memoryOptions, scheduleName); !s.ok()) {
    // Only a partition the library chose may be replaced; the caller's stays.
    const bool ownPartition = request.stageLayers.empty() &&
                              request.layersPerStage == 0 && !request.imported;
    if (!ownPartition)
      return s;
    auto capped = partitionUnderCap(costs, result.program, *memoryOptions);
    if (!capped)
      return Status::error(s.message() + "; a partition balanced under the cap "
                           "finds no stages that fit either");
    config.stageLayers = capped.take();
    auto again = buildPipeline(config, costs);
    if (!again)
      return again.status();
    std::vector<DeviceMemory> cappedMemory =
        computeMemory(*again, costs, *memoryOptions);
    if (Status t = checkMemoryCap(cappedMemory, *memoryOptions, scheduleName); !t.ok())
      return Status::error(s.message() + "; the partition balanced under the cap "
                           "exceeds it too: " + t.message());
    const DeviceMemory &worst = *std::max_element(
        memory.begin(), memory.end(), [](const DeviceMemory &a, const DeviceMemory &b) {
          return a.totalBytes() < b.totalBytes();
        });
    partitionNote = "min-max under the memory cap; the plain min-max partition "
                    "needed " + formatGigabytes(worst.totalBytes()) + " on device " +
                    std::to_string(worst.device);
    result.program = again.take();
    memory = std::move(cappedMemory);
  }

  auto step = simulatePipeline(result.program, costs);
  if (!step)
    return step.status();
  result.step = step.take();

  if (request.kfacOffload && request.kfac.policy != Policy::None)
    result.step.kfacMoves = planKfacOffload(result.step, costs);
  auto plan = planKfac(result.step, costs, request.kfac);
  if (!plan)
    return plan.status();
  result.plan = plan.take();
  result.timeline = assembleTimeline(result.step, result.plan);
  result.report = computeReport(result.step, result.timeline, result.plan,
                                costs, request.kfac);
  for (size_t d = 0; d < memory.size() && d < result.report.perDevice.size(); ++d)
    result.report.perDevice[d].memory = memory[d];
  result.report.memoryModelled = costs.hasMemory;
  result.report.optimizerStates = memoryOptions->optimizerStates;
  result.report.memoryCapBytes = memoryOptions->capBytes;
  result.report.partitionNote = partitionNote;
  // Finite inputs within the limits give finite times; anything else is a
  // bug or an input that slipped past them, never a report of "inf".
  if (!std::isfinite(result.report.stepTimeMs) || !std::isfinite(result.report.pipelineStepMs) ||
      !std::isfinite(result.report.utilizationWithKfac))
    return Status::error("the schedule's step time is not finite (are the profile's times "
                         "within kMaxProfileTimeMs?)");
  result.report.schedulerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();

  if (request.validate) {
    Status valid = validateTimeline(result.timeline, result.step, costs);
    if (!valid.ok())
      return Status::error("invalid timeline: " + valid.message());
  }
  return result;
}

Status writeScheduleOutputs(const ScheduleResult &result,
                            const ScheduleOutputs &outputs) {
  // Rendering a large window takes time: only what is asked for.
  auto write = [](const std::string &path, auto render) {
    return path.empty() ? Status::success() : writeTextFile(path, render());
  };
  Status s = write(outputs.reportJson,
                   [&] { return reportToJson(result.report); });
  if (s.ok())
    s = write(outputs.chromeTrace, [&] {
      return timelineToChromeTrace(result.timeline, result.report);
    });
  if (s.ok())
    s = write(outputs.svg,
              [&] { return timelineToSvg(result.timeline, result.report); });
  return s;
}

} // namespace pf::sched
