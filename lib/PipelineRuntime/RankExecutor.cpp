//===- RankExecutor.cpp - JIT-compile and run a module's rank programs ----===//
#include "pf/PipelineRuntime/RankExecutor.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/PipelineRuntime/StageProgram.h"
#include "pf/Runtime/pfrt_rank.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace mlir::pf::driver;

// The lowered programs pass pf's StageTaskKind as the runner's StageCallKind.
#define PF_SAME_KIND(name)                                                                         \
  static_assert(int32_t(mlir::pf::StageTaskKind::name) == int32_t(StageCallKind::name),          \
                "StageCallKind::" #name " differs from pf's StageTaskKind");
PF_SAME_KIND(Forward)
PF_SAME_KIND(Backward)
PF_SAME_KIND(BackwardInput)
PF_SAME_KIND(BackwardWeight)
PF_SAME_KIND(KfacFactorA)
PF_SAME_KIND(KfacFactorB)
PF_SAME_KIND(KfacInverse)
PF_SAME_KIND(Precondition)
PF_SAME_KIND(Accumulate)
PF_SAME_KIND(Update)
#undef PF_SAME_KIND

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error toError(const ::pf::Status &status) {
  return status.ok() ? llvm::Error::success() : error(status.message());
}

::pf::Status toStatus(llvm::Error err) {
  return err ? ::pf::Status::error(llvm::toString(std::move(err))) : ::pf::Status::success();
}

/// A CompiledProgram as the runner's StagePrograms.
class JitStagePrograms final : public StagePrograms {
public:
  explicit JitStagePrograms(std::unique_ptr<CompiledProgram> program)
      : program(std::move(program)) {}
  bool hasEntry(const std::string &function) const override { return program->hasEntry(function); }
  const std::vector<TensorSpec> &inputs(const std::string &function) const override {
    return program->inputs(function);
  }
  const std::vector<TensorSpec> &outputs(const std::string &function) const override {
    return program->outputs(function);
  }
  ::pf::Status run(const std::string &function, const std::vector<StageView> &inputs,
                   const std::vector<StageView> &outputs) override {
    auto views = [](const std::vector<StageView> &from) {
      std::vector<TensorView> to;
      to.reserve(from.size());
      for (const StageView &v : from)
        to.push_back({v.name, v.dtype, v.shape, v.data, v.onBackend});
      return to;
    };
    return toStatus(program->run(function, views(inputs), views(outputs)));
  }
  ::pf::Status run(const std::string &function, const NamedArrays &inputs,
                   NamedArrays &outputs) override {
    return toStatus(program->run(function, inputs, outputs));
  }
  const std::vector<ModelParameter> &parameters() const override {
    return program->parameters();
  }
  ::pf::Status copyParametersToHost() override {
    return toStatus(program->copyParametersToHost());
  }
  ::pf::Status copyParametersToBackend() override {
    return toStatus(program->copyParametersToBackend());
  }
  bool onBackendMemory() const override { return program->onBackendMemory(); }
  pfrt_context *runtimeContext() const override { return program->runtimeContext(); }
  int64_t stageValueCopies() const override { return program->stageValueCopies(); }

private:
  std::unique_ptr<CompiledProgram> program;
};

std::vector<std::string> names(const std::set<std::string> &set) {
  return std::vector<std::string>(set.begin(), set.end());
}
/// This rank's program; every check a rank can make before compiling.
llvm::Expected<mlir::pf::RankProgramOp> programOf(ModuleOp module, int32_t rank, int32_t size) {
  std::vector<mlir::pf::RankProgramOp> programs;
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>())
    if (!program.getWindowStep())
      programs.push_back(program);
  if (programs.empty())
    return error("the module has no pf.rank_program: run pf-opt --pf-build-rank-programs first");
  if (int64_t(programs.size()) != size)
    return error(llvm::formatv("the module has {0} pf.rank_program ops but the job has {1} "
                               "ranks: start it with mpirun -np {0}",
                               programs.size(), size));
  if (failed(mlir::pf::verifyRankPrograms(module)))
    return error("the rank programs do not verify (see the diagnostics above)");
  for (mlir::pf::RankProgramOp program : programs)
    if (program.getRankValue() == rank)
      return program;
  return error(llvm::formatv("no pf.rank_program has rank({0})", rank));
}

/// The stage functions `program` calls, in order of first call.
std::vector<std::string> calledFunctions(mlir::pf::RankProgramOp program) {
  std::vector<std::string> names;
  for (mlir::pf::RunStageOp call : program.getBody().front().getOps<mlir::pf::RunStageOp>())
    if (!llvm::is_contained(names, call.getStage().str()))
      names.push_back(call.getStage().str());
  return names;
}

void printOutputs(const Values &outputs) {
  for (const auto &[name, array] : outputs)
    llvm::outs() << outputSummary(name, array);
}

/// Everything after the communicator exists; an error ends the job.
llvm::Error runRank(ModuleOp module, const RankRunOptions &options, pfrt_context *ctx,
                    pfrt_comm *world) {
  int32_t rank = pfrt_comm_rank(world), size = pfrt_comm_size(world);
  if (options.inputsFile.empty())
    return error("--run-ranks needs --inputs FILE.npz");
  JitRank::Options rankOptions;
  rankOptions.threads = options.threads;
  rankOptions.ignoreIndex = options.ignoreIndex;
  rankOptions.overlapTransfers = options.overlapTransfers;
  auto jit = JitRank::create(module, ctx, world, rankOptions);
  if (!jit)
    return jit.takeError();
  RankRunner *runner = &(*jit)->runner();
  int64_t M = runner->microbatches();
  if (options.microbatches > 0 && options.microbatches != M)
    return error(llvm::formatv("--micro-batches {0} but the rank programs have "
                               "microbatches({1})",
                               options.microbatches, M));
  auto inputs = readNpz(options.inputsFile);
  if (!inputs)
    return error(inputs.error());
  for (const auto &[name, array] : *inputs)
    if (isStageValue(name))
      return error("input '" + name + "' is a stage value, not a graph input");
  // One write per line: mpirun interleaves the ranks' output by write.
  llvm::outs() << runner->summary();
  llvm::outs().flush();

  Values results;
  if (::pf::Status s = runner->runStep(*inputs, results); !s.ok())
    return error(s.message());
  if (rank != 0)
    return toError(sendValues(ctx, world, results, 0));
  for (int32_t from = 1; from < size; ++from)
    if (auto err = toError(receiveValues(ctx, world, from, results)))
      return err;
  if (!results.count("loss"))
    return error("no rank reported 'loss'");
  llvm::outs() << llvm::formatv("ranks {0}, micro-batches {1}\n", size, M);
  printOutputs(results);
  llvm::outs().flush();
  if (!options.outputsFile.empty())
    if (::pf::Status written = writeNpz(options.outputsFile, results); !written.ok())
      return error(written.message());
  return llvm::Error::success();
}
} // namespace


RankProgramTable mlir::pf::driver::describeRankProgram(mlir::pf::RankProgramOp program,
                                                       bool overlapTransfers) {
  RankProgramTable table;
  table.name = program.getSymName().str();
  table.symbol = "pf_" + table.name;
  if (program.getWindowStep()) {
    table.windowStep = int64_t(*program.getWindowStep());
    table.windowSteps = int64_t(program.getWindowSteps().value_or(0));
  }
  mlir::pf::StageValuePlan plan = mlir::pf::planStageValues(program, overlapTransfers);
  table.slots = int64_t(plan.slot.size());
  table.arenaBytes = plan.arenaBytes;
  table.liveBytes = plan.liveBytes;
  table.savedMicrobatches = plan.savedMicrobatches;
  for (const auto &members : mlir::pf::programCommGroups(program))
    table.commGroups.emplace_back(members.begin(), members.end());
  // Which precondition calls report their refresh issues here: a layer both
  // replicas precondition (Chimera) on the lowest member of its gradient's
  // sum; one only its owner preconditions (and broadcasts), on the owner.
  const int64_t rank = program.getRankValue();
  auto lowest = [&](ArrayRef<int64_t> ranks) { return rank == *llvm::min_element(ranks); };
  std::set<std::string> summedElsewhere, broadcastHere;
  auto module = program->getParentOfType<ModuleOp>();
  for (Operation &op : program.getBody().front()) {
    if (auto sum = dyn_cast<mlir::pf::AllReduceOp>(op)) {
      table.allReduced.push_back(sum.getValue().str());
      if (module.lookupSymbol<mlir::pf::ParamOp>(sum.getValue()))
        table.parameterSums.push_back({sum.getValue().str(), sum.getRanks().vec()});
      if (sum.getSum() && StringRef(sum.getValue()).starts_with(mlir::pf::kGradientPrefix) &&
          !lowest(sum.getRanks()))
        summedElsewhere.insert(sum.getValue().str());
    }
    if (auto call = dyn_cast<mlir::pf::RunStageOp>(op);
        call && call.getKind() == mlir::pf::StageTaskKind::KfacInverse) {
      table.inverseCalls.push_back(call.getStage().str());
      for (llvm::StringRef inverse :
           mlir::pf::kfacInverseParameters(module.lookupSymbol(call.getStageAttr())).inverses)
        table.computedInverses.push_back(inverse.str());
    }
    auto broadcast = dyn_cast<mlir::pf::BroadcastOp>(op);
    if (!broadcast)
      continue;
    auto call = broadcast.getInput() ? broadcast.getInput().getDefiningOp<mlir::pf::RunStageOp>()
                                     : mlir::pf::RunStageOp();
    if (call && call.getKind() == mlir::pf::StageTaskKind::Precondition)
      broadcastHere.insert(broadcast.getValue().str());
    else if (!lowest(broadcast.getRanks())) // the tied gradient's sum
      summedElsewhere.insert(broadcast.getValue().str());
  }
  table.summedElsewhere = names(summedElsewhere);
  table.broadcastHere = names(broadcastHere);
  return table;
}

llvm::Expected<RankPlan> mlir::pf::driver::describeRank(ModuleOp module, int32_t rank,
                                                        int32_t ranks, bool overlapTransfers) {
  auto found = programOf(module, rank, ranks);
  if (!found)
    return found.takeError();
  mlir::pf::RankProgramOp program = *found;
  RankPlan plan;
  plan.rank = rank;
  plan.ranks = ranks;
  plan.microbatches = program.getNumMicrobatches();
  plan.stages = program.getStages().vec();
  for (int64_t stage : plan.stages)
    if (auto forward =
            module.lookupSymbol<func::FuncOp>("stage" + std::to_string(stage) + "_forward"))
      if (auto attr = forward->getAttrOfType<DenseI64ArrayAttr>("pf.blocks"))
        for (int64_t b : attr.asArrayRef())
          plan.blocks.push_back(b);
  plan.functions = calledFunctions(program);
  if (plan.functions.empty())
    return error("the program of rank " + std::to_string(rank) + " calls no stage function");
  for (mlir::pf::ParamOp param : module.getOps<mlir::pf::ParamOp>())
    if (param->hasAttr(mlir::pf::kKfacPendingAttrName))
      plan.pending.push_back(param.getSymName().str());
  plan.program = describeRankProgram(program, overlapTransfers);

  // Chimera with K-FAC: the factors the program all-reduces that this rank
  // updates without micro-batch 0's call (its copy starts each due step
  // from zero, so that the sum adds only this replica's curvature to the
  // other's, which decays the previous factor).
  std::set<std::string> reduced;
  for (const ParameterSum &sum : plan.program.parameterSums)
    reduced.insert(sum.name);
  if (!reduced.empty()) {
    std::map<std::string, int64_t> every;
    std::set<std::string> atMicrobatchZero, hostDecided;
    for (auto run : program.getBody().front().getOps<mlir::pf::RunStageOp>()) {
      auto function = module.lookupSymbol<func::FuncOp>(run.getStage());
      if (!function || !run.getMicrobatch())
        continue;
      function.walk([&](mlir::pf::KFACUpdateFactorOp update) {
        std::string factor = update.getFactor().str();
        every[factor] = int64_t(update.getEvery());
        if (update.getDue())
          hostDecided.insert(factor);
        if (*run.getMicrobatch() == 0)
          atMicrobatchZero.insert(factor);
      });
    }
    for (const std::string &factor : reduced) {
      auto it = every.find(factor);
      if (it == every.end())
        return error("the program all-reduces the parameter '" + factor +
                     "', but no call of this rank updates it as a K-FAC factor");
      if (!atMicrobatchZero.count(factor))
        plan.replicaFactors.push_back({factor, it->second, hostDecided.count(factor) > 0});
    }
    // The inverse calls a lower rank also makes in the warm-up step.
    std::set<std::string> unreported;
    for (mlir::pf::RankProgramOp other : module.getOps<mlir::pf::RankProgramOp>()) {
      if (other.getWindowStep() || other.getRankValue() >= int64_t(rank))
        continue;
      for (auto run : other.getBody().front().getOps<mlir::pf::RunStageOp>())
        if (run.getKind() == mlir::pf::StageTaskKind::KfacInverse)
          unreported.insert(run.getStage().str());
    }
    plan.unreportedInverses = names(unreported);
  }
  return plan;
}

llvm::Expected<std::vector<mlir::pf::RankProgramOp>>
mlir::pf::driver::windowPrograms(ModuleOp module, int32_t rank, int64_t steps,
                                 const std::vector<std::string> &functions) {
  if (steps < 1)
    return error(llvm::formatv("K-FAC window: window steps must be >= 1, got {0}", steps));
  std::vector<mlir::pf::RankProgramOp> found(static_cast<size_t>(steps));
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>()) {
    if (program.getRankValue() != rank || !program.getWindowStep())
      continue;
    int64_t k = int64_t(*program.getWindowStep());
    if (int64_t(program.getWindowSteps().value_or(0)) != steps || k >= steps)
      return error(llvm::formatv("K-FAC window: @{0} is not window step k < {1}",
                                 program.getSymName(), steps));
    for (mlir::pf::RunStageOp call : program.getBody().front().getOps<mlir::pf::RunStageOp>())
      if (!llvm::is_contained(functions, call.getStage().str()))
        return error("K-FAC window: @" + program.getSymName() + " calls @" + call.getStage() +
                     ", which the rank's program does not");
    found[size_t(k)] = program;
  }
  for (auto [k, program] : llvm::enumerate(found))
    if (!program)
      return error(llvm::formatv("K-FAC window: rank {0} has no program of window step {1}",
                                 rank, k));
  return found;
}

std::unique_ptr<StagePrograms>
mlir::pf::driver::jitStagePrograms(std::unique_ptr<CompiledProgram> program) {
  return std::make_unique<JitStagePrograms>(std::move(program));
}

llvm::Expected<std::unique_ptr<JitRank>>
JitRank::create(ModuleOp module, pfrt_context *ctx, pfrt_comm *world, const Options &options) {
  int32_t rank = pfrt_comm_rank(world), size = pfrt_comm_size(world);
  auto plan = describeRank(module, rank, size, options.overlapTransfers);
  if (!plan)
    return plan.takeError();
  std::unique_ptr<JitRank> jit(new JitRank());
  jit->options = options;
  jit->programOp = module.lookupSymbol(plan->program.name); // checked by describeRank
  // Only this rank's stage functions: the program holds their parameters only.
  CompiledProgram::Options compileOptions;
  compileOptions.threads = options.threads;
  compileOptions.functions = plan->functions;
  compileOptions.backend = options.backend;
  compileOptions.device = options.device;
  compileOptions.gemmPrecision = options.gemmPrecision;
  compileOptions.deviceBuffers = options.deviceBuffers;
  auto stages = CompiledProgram::compile(module, compileOptions);
  if (!stages)
    return stages.takeError();
  auto compiled = jit->compilePrograms({jit->program()});
  if (!compiled)
    return compiled.takeError();
  RankRunner::Options runnerOptions;
  runnerOptions.ignoreIndex = options.ignoreIndex;
  runnerOptions.recordTimes = options.recordTimes;
  runnerOptions.transferBackend = options.transferBackend;
  auto runner = RankRunner::create(std::move(*plan), compiled->front().function,
                                   jitStagePrograms(std::move(*stages)), ctx, world,
                                   runnerOptions);
  if (!runner)
    return error(runner.error());
  jit->rankRunner = runner.take();
  return jit;
}

JitRank::~JitRank() {
  rankRunner.reset(); // before the engines holding its programs' code
}

mlir::pf::RankProgramOp JitRank::program() const {
  return cast<mlir::pf::RankProgramOp>(programOp);
}

llvm::Expected<std::vector<CompiledRankProgram>>
JitRank::compilePrograms(const std::vector<mlir::pf::RankProgramOp> &programs) {
  MLIRContext *ctx = programOp->getContext();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(ctx));
  std::vector<CompiledRankProgram> compiled;
  std::vector<Operation *> ops;
  for (mlir::pf::RankProgramOp program : programs) {
    compiled.push_back({describeRankProgram(program, options.overlapTransfers), nullptr});
    ops.push_back(program);
  }
  if (auto err = detail::lowerRankPrograms(*module, ops, options.overlapTransfers))
    return std::move(err);
  detail::initializeJit(ctx);
  auto engine = ExecutionEngine::create(*module);
  if (!engine)
    return engine.takeError();
  detail::registerRuntimeKernels(**engine);
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    auto add = [&](const char *name, auto *function) {
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                             llvm::JITSymbolFlags::Exported};
    };
    // Every function of the table the lowering calls, so none can be left out.
#define PFRT_RANK_CALL(name, ...) add(#name, &name);
#include "pf/Runtime/pfrt_rank_abi.def"
    return map;
  });
  for (CompiledRankProgram &program : compiled) {
    auto symbol = (*engine)->lookup(program.table.symbol);
    if (!symbol)
      return symbol.takeError();
    program.function = reinterpret_cast<LoweredRankProgram>(*symbol);
  }
  engines.push_back(std::move(*engine));
  return compiled;
}

llvm::Error JitRank::useKfacWindow(int64_t warmup, int64_t steps) {
  auto module = programOp->getParentOfType<ModuleOp>();
  auto found = windowPrograms(module, rankRunner->rank(), steps, rankRunner->functions());
  if (!found)
    return found.takeError();
  auto compiled = compilePrograms(*found);
  if (!compiled)
    return compiled.takeError();
  return toError(rankRunner->useKfacWindow(warmup, std::move(*compiled)));
}

int mlir::pf::driver::runRanksTool(ModuleOp module, const RankRunOptions &options) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  if (!ctx) {
    llvm::errs() << "pf-run: error: cannot create a runtime context\n";
    return 1;
  }
  pfrt_comm *world = nullptr;
  if (pfrt_comm_create(ctx, nullptr, &world) != PFRT_OK) {
    llvm::errs() << "pf-run: error: --run-ranks: " << pfrt_last_error(ctx) << "\n";
    pfrt_context_destroy(ctx);
    return 1;
  }
  int32_t rank = pfrt_comm_rank(world);
  if (auto err = runRank(module, options, ctx, world)) {
    llvm::outs().flush();
    // One write: mpirun interleaves the ranks' output by write.
    llvm::errs() << ("rank " + std::to_string(rank) + ": " + llvm::toString(std::move(err)) +
                     "\n");
    // Returning would wait for the other ranks in MPI_Finalize.
    pfrt_comm_abort(ctx, world, 1);
    return 1;
  }
  pfrt_comm_destroy(world);
  pfrt_status finalized = pfrt_comm_finalize(ctx);
  if (finalized != PFRT_OK)
    llvm::errs() << ("rank " + std::to_string(rank) + ": " + pfrt_last_error(ctx) + "\n");
  pfrt_context_destroy(ctx);
  return finalized == PFRT_OK ? 0 : 1;
}
