//===- Schedule.cpp - pipeline schedule with K-FAC work in the bubbles ----===//
#include "PipelineModel.h"
#include "pf/Schedule/Scheduler.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"

#include <limits>

namespace mlir::pf {
#define GEN_PASS_DEF_PFSCHEDULE
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {

std::string taskKind(sched::ItemKind kind) {
  switch (kind) {
  case sched::ItemKind::Forward: return "forward";
  case sched::ItemKind::Backward: return "backward";
  case sched::ItemKind::BackwardInput: return "backward_input";
  case sched::ItemKind::BackwardWeight: return "backward_weight";
  case sched::ItemKind::CurvatureA: return "curvature_a";
  case sched::ItemKind::CurvatureB: return "curvature_b";
  case sched::ItemKind::InversionA: return "inversion_a";
  case sched::ItemKind::InversionB: return "inversion_b";
  case sched::ItemKind::Precondition: return "precondition";
  case sched::ItemKind::SendRecv: return "send_recv";
  case sched::ItemKind::AllReduce: return "allreduce";
  case sched::ItemKind::FactorSync: return "factor_sync";
  case sched::ItemKind::PrecondSync: return "precond_sync";
  // Measured timelines only; the scheduler does not produce them.
  case sched::ItemKind::Inversion: return "inversion";
  case sched::ItemKind::Update: return "update";
  case sched::ItemKind::Send: return "send";
  case sched::ItemKind::Recv: return "recv";
  case sched::ItemKind::Accumulate: return "accumulate";
  case sched::ItemKind::Broadcast: return "broadcast";
  case sched::ItemKind::Reduce: return "reduce";
  case sched::ItemKind::Clip: return "clip";
  case sched::ItemKind::Other: return "other";
  }
  return "forward";
}

struct SchedulePass : public mlir::pf::impl::PFScheduleBase<SchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    PipelineOp pipeline;
    if (func)
      for (auto op : func.getBody().front().getOps<PipelineOp>())
        pipeline = op;
    if (!pipeline)
      return module.emitError("pf-schedule: no pf.pipeline found; run pf-partition first");
    if (!pipeline.getBody().front().getOps<ProgramOp>().empty())
      return pipeline.emitError("pf-schedule: the pipeline is already scheduled");

    const sched::ScheduleKind kind = schedule;
    sched::KfacOptions kfacOptions;
    kfacOptions.policy = kfac == KfacMode::None ? sched::Policy::None : policy.getValue();
    if (failed(verifyCostOptions(pipeline, "pf-schedule", cost, profile)))
      return failure();
    if (refreshSteps < 0)
      return pipeline.emitError("pf-schedule: refresh-steps must be >= 0");
    int64_t numMicro = microbatches > 0 ? int64_t(microbatches)
                                        : int64_t(pipeline.getNumMicrobatches());
    // The scheduler takes int: a larger value is refused, not narrowed
    // (microbatches=4294967298 must not schedule 2).
    for (auto [name, value] : {std::pair<StringRef, int64_t>{"microbatches", numMicro},
                               {"chunks", chunks},
                               {"refresh-steps", refreshSteps}})
      if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min())
        return pipeline.emitError("pf-schedule: ")
               << name << " " << value << " is out of range (at most "
               << std::numeric_limits<int>::max() << ")";
    kfacOptions.refreshSteps = int(refreshSteps);
    auto stageLayers = readStages(pipeline);
    if (failed(stageLayers))
      return failure();

    // Costs are recomputed from the stage bodies: the ops of the blocks are
    // the same as before partitioning, now split across stages.
    auto costs = stageCosts(func, pipeline);
    if (failed(costs))
      return failure();

    sched::ScheduleRequest request;
    request.kind = kind;
    request.microbatches = int(numMicro);
    request.chunks = int(chunks);
    request.stageLayers = *stageLayers;
    request.kfac = kfacOptions;
    auto result = sched::schedulePipeline(*costs, request);
    if (!result)
      return pipeline.emitError("pf-schedule: ") << result.error();

    writePrograms(pipeline, result->timeline, result->program.layout.devices);
    recordPlacement(pipeline, result->program.layout);
    const sched::Report &report = result->report;
    Builder b(pipeline.getContext());
    pipeline.setScheduleAttr(b.getStringAttr(sched::scheduleKindName(kind)));
    pipeline.setNumMicrobatches(numMicro);
    pipeline->setAttr(kRefreshStepsAttrName, b.getI64IntegerAttr(report.refreshSteps));
    pipeline->setAttr(kStepTimeMsAttrName, b.getF64FloatAttr(report.stepTimeMs));
    pipeline->setAttr(kUtilizationAttrName, b.getF64FloatAttr(report.utilizationWithKfac));
    pipeline->setAttr(kKfacPolicyAttrName, b.getStringAttr(sched::policyName(kfacOptions.policy)));
    return writeOutputs(pipeline, *result);
  }

  /// The encoder blocks each stage holds, as pf-partition recorded them.
  FailureOr<std::vector<std::vector<int>>> readStages(PipelineOp pipeline) {
    std::vector<std::vector<int>> layers(pipeline.getNumStages());
    for (auto stage : pipeline.getBody().front().getOps<StageOp>()) {
      auto blocks = stage->getAttrOfType<DenseI64ArrayAttr>("blocks");
      if (!blocks)
        return stage.emitError("pf-schedule: stage has no 'blocks' attribute (made by pf-partition)");
      for (int64_t b : blocks.asArrayRef())
        layers[stage.getIndex()].push_back(int(b));
    }
    for (auto [i, l] : llvm::enumerate(layers))
      if (l.empty())
        return pipeline.emitError("pf-schedule: stage ") << i << " holds no encoder block";
    return layers;
  }

  /// The cost model over the ops of the stage bodies (the same ops as before
  /// partitioning, now split across stages).
  FailureOr<sched::CostModel> stageCosts(func::FuncOp func, PipelineOp pipeline) {
    auto blocks = readStageBlocks(pipeline);
    if (failed(blocks))
      return failure();
    return buildCostModel(func, *blocks, cost, profile, device);
  }

  /// Which devices run each stage: Chimera places stage i of the down pipeline
  /// and stage D-1-i of the up pipeline on device i (so a stage has two
  /// replicas); interleaved puts stage s on device s mod D.
  void recordPlacement(PipelineOp pipeline, const sched::PipelineLayout &layout) {
    Builder b(pipeline.getContext());
    for (auto stage : pipeline.getBody().front().getOps<StageOp>()) {
      SmallVector<int64_t> devices;
      for (int pipe = 0; pipe < layout.pipes; ++pipe) {
        int64_t device = layout.deviceOf(pipe, int(stage.getIndex()));
        if (!llvm::is_contained(devices, device))
          devices.push_back(device);
      }
      stage->setAttr(kDevicesAttrName, b.getDenseI64ArrayAttr(devices));
    }
  }

  void writePrograms(PipelineOp pipeline, const sched::Timeline &timeline, int devices) {
    std::vector<sched::TimelineItem> items = timeline.allItems();
    std::vector<std::vector<const sched::TimelineItem *>> perDevice(devices);
    for (const auto &item : items)
      if (item.device >= 0 && item.device < devices)
        perDevice[item.device].push_back(&item);
    OpBuilder builder = OpBuilder::atBlockTerminator(&pipeline.getBody().front());
    Location loc = pipeline.getLoc();
    for (int d = 0; d < devices; ++d) {
      auto &ordered = perDevice[d];
      llvm::stable_sort(ordered, [](auto *a, auto *b) { return a->start < b->start; });
      auto program = ProgramOp::create(builder, loc, d);
      Block *body = new Block();
      program.getBody().push_back(body);
      OpBuilder inner = OpBuilder::atBlockEnd(body);
      for (const sched::TimelineItem *item : ordered) {
        IntegerAttr micro = item->micro >= 0 ? inner.getI64IntegerAttr(item->micro) : IntegerAttr();
        IntegerAttr layer = item->layer >= 0 ? inner.getI64IntegerAttr(item->layer) : IntegerAttr();
        TaskOp::create(inner, loc, inner.getStringAttr(taskKind(item->kind)),
                       inner.getI64IntegerAttr(item->step),
                       inner.getI64IntegerAttr(std::max(item->stage, 0)), micro, layer,
                       inner.getF64FloatAttr(item->start), inner.getF64FloatAttr(item->end),
                       item->outsideBubble ? inner.getUnitAttr() : UnitAttr());
      }
    }
  }

  LogicalResult writeOutputs(PipelineOp pipeline, const sched::ScheduleResult &result) {
    if (printReport)
      llvm::outs() << sched::reportToText(result.report);
    sched::ScheduleOutputs outputs;
    outputs.reportJson = reportFile;
    outputs.chromeTrace = traceFile;
    outputs.svg = svgFile;
    auto written = sched::writeScheduleOutputs(result, outputs);
    if (!written.ok())
      return pipeline.emitError("pf-schedule: ") << written.message();
    return success();
  }
};
} // namespace
