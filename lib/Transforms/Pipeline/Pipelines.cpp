//===- Pipelines.cpp - the pf-pipeline pipeline --------------------------------===//
#include "pf/Transforms/Pipeline/Passes.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/OptionBinder.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

void mlir::pf::buildPipelinePipeline(OpPassManager &pm, const PipelineOptions &options) {
  if (options.graphOpt)
    buildGraphOptPipeline(pm, GraphOptOptions{true, true, true});
  PFPartitionOptions partition;
  // Interleaved 1F1B cuts every device's share into `chunks` stages.
  partition.stages = ::pf::sched::stagesFor(options.schedule.schedule, int(options.stages),
                                            int(options.schedule.chunks));
  partition.microbatches = options.schedule.microbatches;
  partition.cost = options.schedule.cost;
  partition.profile = options.schedule.profile;
  partition.device = options.schedule.device;
  partition.memoryCapMB = options.memoryCapMB;
  pm.addPass(createPFPartition(partition));
  pm.addPass(createPFSchedule(options.schedule));
}

void mlir::pf::registerPipelinePipelines() {
  PassPipelineRegistration<BoundPipelineOptions<PipelineOptions>>(
      "pf-pipeline",
      "Graph passes, partition into stages, pipeline schedule with K-FAC work in "
      "the bubbles, e.g. --pf-pipeline=\"stages=8 microbatches=8 schedule=chimera "
      "kfac=bubbles policy=pf cost=analytic device=p100\" (pf-translate --pipeline "
      "takes the same options)",
      [](OpPassManager &pm, const BoundPipelineOptions<PipelineOptions> &opts) {
        buildPipelinePipeline(pm, opts.get());
      });
}
