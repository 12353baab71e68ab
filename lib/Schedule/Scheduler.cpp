//===- Scheduler.cpp - Partition, pipeline, K-FAC placement, report -------===//

#include "pf/Schedule/Scheduler.h"

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

Expected<Partition> partitionFor(const CostModel &costs,
                                 const ScheduleRequest &request, int stages) {
  const int layers = static_cast<int>(costs.layers.size());
  if (stages > layers)
    return Status::error("more stages (" + std::to_string(stages) +
                         ") than layers (" + std::to_string(layers) + ")");
  if (request.layersPerStage > 0)
    return partitionUniform(pipelineCost(costs), stages, request.layersPerStage);
  if (request.layersPerStage < 0)
    return Status::error("layers per stage must be positive (got " +
                         std::to_string(request.layersPerStage) + ")");
  return partitionMinMax(pipelineCost(costs), stages);
}

} // namespace

Expected<ScheduleResult> runSchedule(const CostModel &costs,
                                     const ScheduleRequest &request) {
  auto started = std::chrono::steady_clock::now();
  if (costs.layers.empty())
    return Status::error("the cost model has no layers");
  Status shape = checkScheduleShape(request.kind, request.devices,
                                    request.microbatches, request.chunks);
  if (!shape.ok())
    return shape;

  ScheduleResult result;
  const int stages = stagesFor(request.kind, request.devices, request.chunks);
  auto partition = partitionFor(costs, request, stages);
  if (!partition)
    return partition.status();
  result.partition = partition.take();

  PipelineConfig config;
  config.kind = request.kind;
  config.devices = request.devices;
  config.microbatches = request.microbatches;
  config.chunks = request.chunks;
  config.stageLayers = result.partition.stageLayers();
  auto program = buildPipeline(config, costs);
  if (!program)
    return program.status();
  result.program = program.take();

  auto step = simulatePipeline(result.program, costs);
  if (!step)
    return step.status();
  result.step = step.take();

  auto plan = planKfac(result.step, costs, request.kfac);
  if (!plan)
    return plan.status();
  result.plan = plan.take();
  result.timeline = assembleTimeline(result.step, result.plan);
  result.report = computeReport(result.step, result.timeline, result.plan,
                                costs, request.kfac);
  result.report.schedulerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  return result;
}

} // namespace pf::sched
