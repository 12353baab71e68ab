//===- Pipelines.cpp - the pf-pipeline pipeline --------------------------------===//
#include "pf/Transforms/Pipeline/Passes.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<bool> graphOpt{*this, "graph-opt",
                        llvm::cl::desc("Run the graph passes first (pf-graph-opt with "
                                       "require-static); off when they already ran"),
                        llvm::cl::init(true)};
  Option<int64_t> stages{*this, "stages", llvm::cl::desc("Pipeline stages"), llvm::cl::init(2)};
  Option<int64_t> microbatches{*this, "microbatches", llvm::cl::desc("Micro-batches per step"),
                               llvm::cl::init(4)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("gpipe, 1f1b, interleaved, chimera, zb-h1"),
                               llvm::cl::init("1f1b")};
  Option<int64_t> chunks{*this, "chunks", llvm::cl::desc("Interleaved: chunks per device"),
                         llvm::cl::init(2)};
  Option<std::string> kfac{*this, "kfac", llvm::cl::desc("'bubbles' or 'none'"),
                           llvm::cl::init("bubbles")};
  Option<std::string> policy{*this, "policy", llvm::cl::desc("pf or pipefisher"),
                             llvm::cl::init("pf")};
  Option<int64_t> refreshSteps{*this, "refresh-steps",
                               llvm::cl::desc("Steps per K-FAC refresh (0: automatic)"),
                               llvm::cl::init(0)};
  Option<std::string> cost{*this, "cost", llvm::cl::desc("'analytic' or a profile JSON path"),
                           llvm::cl::init("analytic")};
  Option<std::string> device{*this, "device", llvm::cl::desc("Analytic cost model device"),
                             llvm::cl::init("a100")};
  Option<double> memoryCapMB{*this, "memory-cap-mb",
                             llvm::cl::desc("Per-stage memory cap in MB (0: none)"),
                             llvm::cl::init(0)};
  Option<std::string> report{*this, "report", llvm::cl::desc("Report JSON file"),
                             llvm::cl::init("")};
  Option<std::string> trace{*this, "trace", llvm::cl::desc("Chrome trace file"),
                            llvm::cl::init("")};
  Option<std::string> svg{*this, "svg", llvm::cl::desc("SVG timeline file"),
                          llvm::cl::init("")};
  Option<bool> printReport{*this, "print-report", llvm::cl::desc("Print the text report"),
                           llvm::cl::init(false)};
};
} // namespace

void mlir::pf::registerPipelinePipelines() {
  PassPipelineRegistration<PipelineOptions>(
      "pf-pipeline",
      "Graph passes, partition into stages, pipeline schedule with K-FAC work in "
      "the bubbles, e.g. --pf-pipeline=\"stages=8 microbatches=8 schedule=chimera "
      "kfac=bubbles policy=pf cost=analytic device=p100\"",
      [](OpPassManager &pm, const PipelineOptions &opts) {
        if (opts.graphOpt)
          buildGraphOptPipeline(pm, GraphOptOptions{true, true, true});
        PFPartitionOptions partition;
        partition.stages = opts.stages;
        partition.microbatches = opts.microbatches;
        partition.cost = opts.cost;
        partition.device = opts.device;
        partition.memoryCapMB = opts.memoryCapMB;
        int64_t pipelineStages = opts.stages;
        if (opts.schedule == "interleaved")
          partition.stages = pipelineStages * opts.chunks;
        pm.addPass(createPFPartition(partition));
        PFScheduleOptions schedule;
        schedule.schedule = opts.schedule;
        schedule.microbatches = opts.microbatches;
        schedule.chunks = opts.chunks;
        schedule.kfac = opts.kfac;
        schedule.policy = opts.policy;
        schedule.refreshSteps = opts.refreshSteps;
        schedule.cost = opts.cost;
        schedule.device = opts.device;
        schedule.reportFile = opts.report;
        schedule.traceFile = opts.trace;
        schedule.svgFile = opts.svg;
        schedule.printReport = opts.printReport;
        pm.addPass(createPFSchedule(schedule));
      });
}
