//===- PipelineTimeline.cpp - A pipelined run's measured timeline ---------===//
#include "PipelineTimeline.h"
#include "StepBuilding.h"

#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

llvm::Error train::gatherTimeline(const RankJob &job, drv::RankRunner &runner,
                                  std::vector<std::vector<drv::ExecutedOp>> &byRank) {
  const auto &ops = runner.executed();
  drv::NpyArray table;
  table.dtype = PFRT_F64;
  table.shape = {int64_t(ops.size()), 5};
  table.data.resize(ops.size() * 5 * sizeof(double));
  double *t = reinterpret_cast<double *>(table.data.data());
  for (auto [i, op] : llvm::enumerate(ops)) {
    t[5 * i] = double(op.step), t[5 * i + 1] = double(op.op);
    t[5 * i + 2] = double(op.windowStep);
    t[5 * i + 3] = op.start, t[5 * i + 4] = op.end;
  }
  if (job.rank != 0)
    return toError(drv::sendValues(job.ctx, job.world, {{"timeline", table}}, 0));
  byRank.assign(job.size, {});
  byRank[0] = ops;
  for (int32_t from = 1; from < job.size; ++from) {
    std::map<std::string, drv::NpyArray> theirs;
    if (auto err = toError(drv::receiveValues(job.ctx, job.world, from, theirs)))
      return err;
    const drv::NpyArray &rows = theirs["timeline"];
    const double *v = reinterpret_cast<const double *>(rows.data.data());
    for (int64_t i = 0; i + 1 <= (rows.shape.empty() ? 0 : rows.shape[0]); ++i)
      byRank[from].push_back({int64_t(v[5 * i]), int64_t(v[5 * i + 1]),
                              int64_t(v[5 * i + 2]), v[5 * i + 3], v[5 * i + 4]});
  }
  return llvm::Error::success();
}

/// What a measured op of a rank program was, for the timeline.
static drv::MeasuredEvent describeOp(Operation *op, ModuleOp module, int32_t rank,
                                     int64_t stage) {
  drv::MeasuredEvent event;
  event.rank = rank;
  event.stage = stage;
  if (auto run = dyn_cast<RunStageOp>(op)) {
    switch (run.getKind()) {
    case StageTaskKind::Forward: event.kind = drv::MeasuredKind::Forward; break;
    case StageTaskKind::Backward: event.kind = drv::MeasuredKind::Backward; break;
    case StageTaskKind::BackwardInput: event.kind = drv::MeasuredKind::BackwardInput; break;
    case StageTaskKind::BackwardWeight: event.kind = drv::MeasuredKind::BackwardWeight; break;
    case StageTaskKind::Update: event.kind = drv::MeasuredKind::Update; break;
    case StageTaskKind::Precondition: event.kind = drv::MeasuredKind::Precondition; break;
    case StageTaskKind::KfacInverse: event.kind = drv::MeasuredKind::KfacInverse; break;
    case StageTaskKind::KfacFactorA: event.kind = drv::MeasuredKind::KfacFactorA; break;
    case StageTaskKind::KfacFactorB: event.kind = drv::MeasuredKind::KfacFactorB; break;
    case StageTaskKind::Accumulate: event.kind = drv::MeasuredKind::Accumulate; break;
    default: event.kind = drv::MeasuredKind::Other; break;
    }
    if (run.getMicrobatch())
      event.microbatch = int64_t(*run.getMicrobatch());
    if (run.getLayer())
      event.layer = int64_t(*run.getLayer());
    if (auto func = module.lookupSymbol<func::FuncOp>(run.getStage()))
      if (auto attr = func->getAttrOfType<IntegerAttr>("pf.stage"))
        event.stage = attr.getInt();
  } else if (auto send = dyn_cast<SendActOp>(op)) {
    event.kind = drv::MeasuredKind::Send;
    event.microbatch = int64_t(send.getMicrobatch());
  } else if (auto recv = dyn_cast<RecvActOp>(op)) {
    event.kind = drv::MeasuredKind::Recv;
    event.microbatch = int64_t(recv.getMicrobatch());
  } else if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op)) {
    event.kind = drv::MeasuredKind::Reduce;
    event.microbatch = int64_t(reduce.getMicrobatch());
  } else if (isa<AllReduceOp>(op)) {
    event.kind = drv::MeasuredKind::AllReduce;
  } else if (isa<BroadcastOp>(op)) {
    event.kind = drv::MeasuredKind::Broadcast;
  } else if (isa<ClipGradientsOp, KfacKLClipOp>(op)) {
    event.kind = drv::MeasuredKind::Clip;
  } else {
    event.kind = drv::MeasuredKind::Other;
  }
  return event;
}

llvm::Expected<drv::MeasuredRun>
train::measuredRunOf(ModuleOp module, const std::vector<std::vector<drv::ExecutedOp>> &byRank,
                     const PipelineRunOptions &pipeline, int64_t first) {
  drv::MeasuredRun run;
  run.ranks = int32_t(byRank.size());
  run.stages = 0; // distinct stages (Chimera holds each on two ranks)
  for (RankProgramOp program : module.getOps<RankProgramOp>())
    for (int64_t stage : program.getStages())
      run.stages = std::max(run.stages, stage + 1);
  run.microbatches = pipeline.microbatches;
  run.schedule = ::pf::sched::scheduleKindName(pipeline.schedule);
  // (rank, window step or -1) -> the program's ops.
  std::map<std::pair<int64_t, int64_t>, std::vector<Operation *>> programs;
  std::map<int64_t, int64_t> stageOf;
  for (RankProgramOp program : module.getOps<RankProgramOp>()) {
    auto &ops = programs[{program.getRankValue(),
                          program.getWindowStep() ? int64_t(*program.getWindowStep()) : -1}];
    for (Operation &op : program.getBody().front())
      ops.push_back(&op);
    stageOf[program.getRankValue()] =
        program.getStages().empty() ? -1 : program.getStages().front();
  }
  for (auto [rank, executedOps] : llvm::enumerate(byRank)) {
    int64_t stage = stageOf.count(int64_t(rank)) ? stageOf[int64_t(rank)] : -1;
    for (const drv::ExecutedOp &executed : executedOps) {
      const std::vector<Operation *> &ops = programs[{int64_t(rank), executed.windowStep}];
      if (executed.op < 0 || executed.op >= int64_t(ops.size()))
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "rank " + std::to_string(rank) +
                                           " recorded an op its program does not have");
      drv::MeasuredEvent event = describeOp(ops[executed.op], module, int32_t(rank), stage);
      event.step = executed.step - first;
      event.start = executed.start;
      event.end = executed.end;
      run.events.push_back(event);
    }
  }
  return run;
}

llvm::Error train::writeMeasuredTimeline(const TrainConfig &config, ModuleOp module,
                                         const std::vector<std::vector<drv::ExecutedOp>> &byRank,
                                         const PipelineRunOptions &pipeline, int64_t first,
                                         const KfacWindowRule &window) {
  auto measured = measuredRunOf(module, byRank, pipeline, first);
  if (!measured)
    return measured.takeError();
  drv::MeasuredRun &run = *measured;
  int64_t lastStep = 0;
  for (const drv::MeasuredEvent &event : run.events)
    lastStep = std::max(lastStep, event.step);
  // The first step compiles nothing but still warms caches and the
  // transport: leave it out of the figures when there are others. With
  // K-FAC in the bubbles the figures are the windows' (after the warm-up).
  int64_t from = lastStep > 0 ? 1 : 0;
  drv::SimulationOptions simulation;
  if (window.steps > 0 && window.warmup - first + 1 <= lastStep) {
    from = std::max<int64_t>(from, window.warmup - first + 1);
    simulation.kfac.refreshSteps = int(window.steps);
    simulation.kfac.splitPieces = 1;
    simulation.kfac.steadyState = false;
  }
  // The lines go out in one write: under mpirun the other ranks' lines
  // interleave with this rank's by write, even inside a line.
  std::string text;
  if (!config.traceFile.empty()) {
    if (auto err = drv::writeMeasuredTrace(run, config.traceFile, from))
      return err;
    text += "measured trace: " + config.traceFile + "\n";
  }
  if (!config.svgFile.empty()) {
    if (auto err = drv::writeMeasuredSvg(run, config.svgFile, from, simulation))
      return err;
    text += "measured timeline: " + config.svgFile + "\n";
  }
  auto comparison = drv::simulateFromMeasured(run, from, -1, simulation);
  if (comparison) {
    text += comparison->text();
  } else {
    // The measured figures alone (the simulation of several stages per rank
    // from measured durations is not built).
    std::string why = llvm::toString(comparison.takeError());
    auto report = drv::summarize(run, from, -1);
    if (!report)
      return report.takeError();
    text += report->text() + "(no simulated comparison: " + why + ")\n";
  }
  llvm::outs().flush();
  llvm::outs() << text;
  llvm::outs().flush();
  return llvm::Error::success();
}
