//===- PipelinedStep.cpp - The training step as one rank of a pipeline ----===//
//
// Each rank of an mpirun job runs its rank program (RankRunner) for the
// step; the loss, the stop requests and the K-FAC reports are summed over
// the ranks so that every rank stops after the same step, and checkpoints
// and evaluations gather every rank's state on rank 0.
//
//===----------------------------------------------------------------------===//
#include "pf/TrainCompile/PipelinedStep.h"

#include "PipelineTimeline.h"
#include "StepBuilding.h"

#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/ModuleFile.h"
#include "pf/Support/StopSignals.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/Train/KfacReports.h"
#include "pf/TrainCompile/Train.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Train/TrainingStep.h"
#include "pf/Transforms/OptionBinder.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <cstring>
#include <set>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

namespace {
/// FNV-1a over what must be the same on every rank: the model's and the
/// corpus' bytes, the command line and this build of pf-train (the bytes of
/// its executable: equal builds on several machines agree).
/// FNV-1a of byte strings, each followed by a separator.
struct Digest {
  uint64_t h = 1469598103934665603ULL;
  void add(llvm::StringRef bytes) {
    for (unsigned char c : bytes)
      h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL; // separator
  }
  void addFile(const std::string &file) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    add(buffer ? (*buffer)->getBuffer() : llvm::StringRef("<unreadable>"));
  }
};

uint64_t startupHash(const TrainConfig &config, int argc, char **argv) {
  Digest digest;
  for (const std::string &file :
       {config.modelFile, config.corpusFile, std::string("/proc/self/exe")})
    digest.addFile(file);
  for (int i = 1; i < argc; ++i)
    digest.add(argv[i]);
  return digest.h;
}

/// Every rank's hash of `what`; an error naming the ranks that differ from
/// rank 0 (`problem` says what differs, `fix` what to do). The slots are
/// exchanged as 32-bit halves in doubles (exact).
llvm::Error checkSameOnEveryRank(const RankJob &job, uint64_t hash, llvm::StringRef problem,
                                 llvm::StringRef fix) {
  std::vector<double> slots(2 * job.size, 0.0);
  slots[2 * job.rank] = double(hash >> 32);
  slots[2 * job.rank + 1] = double(hash & 0xffffffffULL);
  if (auto err = job.sum(slots))
    return err;
  auto hashOf = [&](int r) {
    return (uint64_t(slots[2 * r]) << 32) | uint64_t(slots[2 * r + 1]);
  };
  std::vector<std::string> differing;
  for (int r = 1; r < job.size; ++r)
    if (hashOf(r) != hashOf(0))
      differing.push_back(std::to_string(r));
  if (differing.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "rank(s) " + llvm::join(differing, ", ") + " " + problem +
                                     ": " + fix);
}

llvm::Error checkSameStart(const RankJob &job, uint64_t hash) {
  return checkSameOnEveryRank(job, hash,
                              "were started with another model, corpus, command line or "
                              "pf-train build than rank 0 (start-up hashes differ)",
                              "start every rank with the same command");
}

/// Every rank reads --resume on its own (on several hosts, each its own
/// copy): the ranks must resume one state, or their step numbers part and
/// their transfers never meet (a hang). The digest of the file's bytes
/// covers the step it holds and every array.
llvm::Error checkSameResume(const RankJob &job, const std::string &resumeFile) {
  Digest digest;
  digest.addFile(resumeFile);
  return checkSameOnEveryRank(
      job, digest.h,
      "resumed from another checkpoint than rank 0 (the digests of " + resumeFile + " differ)",
      "give every rank the same checkpoint");
}

/// Bytes of this rank's state by kind: parameters, optimizer state, K-FAC
/// factors and inverses.
struct StateBytes {
  int64_t parameters = 0, optimizer = 0, kfac = 0, parameterCount = 0;
};

bool isOptimizerState(llvm::StringRef name) {
  return name.ends_with(".exp_avg") || name.ends_with(".exp_avg_sq") ||
         name.ends_with(".momentum");
}

StateBytes stateBytes(const drv::CompiledProgram &program) {
  StateBytes bytes;
  for (const auto &p : program.parameters()) {
    if (isOptimizerState(p.name)) {
      bytes.optimizer += p.bytes;
    } else if (llvm::StringRef(p.name).contains(".kfac.")) {
      bytes.kfac += p.bytes;
    } else {
      bytes.parameters += p.bytes;
      ++bytes.parameterCount;
    }
  }
  return bytes;
}

/// "rank 1: stage 1 (encoder blocks 1), 22 parameters 1.2 MB, optimizer state 2.4 MB".
std::string startupLine(const RankJob &job, drv::RankRunner &runner, ModuleOp module) {
  std::string blocks;
  for (int64_t stage : runner.program().getStages())
    if (auto forward =
            module.lookupSymbol<func::FuncOp>("stage" + std::to_string(stage) + "_forward"))
      if (auto attr = forward->getAttrOfType<DenseI64ArrayAttr>("pf.blocks"))
        for (int64_t b : attr.asArrayRef())
          blocks += (blocks.empty() ? "" : " ") + std::to_string(b);
  StateBytes bytes = stateBytes(runner.compiled());
  std::string stages;
  for (int64_t stage : runner.program().getStages())
    stages += (stages.empty() ? "" : " ") + std::to_string(stage);
  return llvm::formatv("rank {0}: stage {1} (encoder blocks {2}), {3} parameter tensors "
                       "({4} bytes), optimizer state {5} bytes, K-FAC state {6} bytes\n",
                       job.rank, stages, blocks, bytes.parameterCount, bytes.parameters,
                       bytes.optimizer, bytes.kfac)
      .str();
}

/// Every rank's state gathered on rank 0, in the single-process format
/// (`param/<name>`), so either kind of run can resume the other's
/// checkpoints; empty on the other ranks. A parameter held by two ranks
/// (the tied word embedding) must be equal on both.
llvm::Expected<Batch> gatherState(const RankJob &job, drv::CompiledProgram &program) {
  if (auto err = program.copyParametersToHost())
    return std::move(err);
  Batch mine = stateArrays(program.parameters());
  if (job.rank != 0) {
    if (auto err = drv::sendValues(job.ctx, job.world, mine, 0))
      return std::move(err);
    return Batch{};
  }
  for (int32_t from = 1; from < job.size; ++from) {
    Batch theirs;
    if (auto err = drv::receiveValues(job.ctx, job.world, from, theirs))
      return err;
    for (auto &[name, value] : theirs) {
      auto it = mine.find(name);
      if (it == mine.end()) {
        mine.emplace(name, std::move(value));
        continue;
      }
      if (it->second.shape != value.shape || it->second.data != value.data)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "'" + name + "' differs between rank " + std::to_string(from) +
                " and a lower rank holding it: the replicas diverged");
    }
  }
  return mine;
}

/// --device, --device-buffers and --comm for this rank: on CUDA, the i-th
/// rank of a host takes GPU i (modulo the host's GPUs); the stage values
/// travel on NCCL when every rank of the job has a GPU of its own (--comm
/// auto) or when asked (--comm nccl: the communicator refuses shared GPUs),
/// else on MPI staged through host memory. On the CPU with --device-buffers
/// they are staged too: the check of that path.
llvm::Error chooseRankDevice(const TrainConfig &config, RankJob &job) {
  const bool onCuda = config.device == "cuda";
  job.onBackendMemory = onCuda || config.deviceBuffers;
  if (!job.onBackendMemory)
    return llvm::Error::success();
  job.backend = onCuda ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  job.transferBackend = PFRT_COMM_MPI_STAGED;
  if (onCuda) {
    // Its place among the ranks of its host.
    int32_t localRank = 0, localSize = 0;
    if (pfrt_comm_local_rank(job.ctx, job.world, &localRank, &localSize) != PFRT_OK)
      return llvm::createStringError(llvm::Twine("--device cuda: ") + pfrt_last_error(job.ctx));
    int32_t gpus = pfrt_backend_device_count(PFRT_BACKEND_CUDA);
    if (gpus < 1)
      return llvm::createStringError("--device cuda: no CUDA device on this rank's host");
    job.device = localRank % gpus;
    std::vector<double> shared{localSize > gpus ? 1.0 : 0.0};
    if (auto err = job.sum(shared))
      return err;
    bool ownGpus = shared[0] == 0;
    job.transferBackend =
        config.comm == CommChoice::Nccl || (config.comm == CommChoice::Auto && ownGpus)
            ? PFRT_COMM_NCCL
            : PFRT_COMM_MPI;
  }
  std::string how = "NCCL";
  if (job.transferBackend != PFRT_COMM_NCCL)
    how = onCuda ? "MPI, staged through host memory"
                 : "MPI, staged through host buffers (the CPU check of that path)";
  std::string where = onCuda ? "GPU " + std::to_string(job.device) : "CPU backend memory";
  llvm::outs() << llvm::formatv("rank {0}: stage functions on {1}, stage values over {2}\n",
                                job.rank, where, how)
                      .str(); // one write: mpirun interleaves by write
  llvm::outs().flush();
  return llvm::Error::success();
}

class PipelinedStep final : public TrainingStep {
public:
  PipelinedStep(TrainConfig &config, TrainingRun &run, const RankJob &job,
                const PipelineRunOptions &pipeline)
      : trainingRun(run), config(config), training(config.training), job(job),
        pipeline(pipeline), bubbles(pipeline.kfac == KfacWork::Bubbles),
        window{bubbles ? training.precondition.refreshWarmup : 0, 0} {}

  /// Builds and compiles this rank's program and prints the start-up lines;
  /// false after failing the job.
  bool build(int argc, char **argv);

  bool reports() const override { return job.rank == 0; }
  int fail(const std::string &message) override { return job.fail(message); }

  Parameters stateParameters() override { return runner->compiled().parameters(); }
  ::pf::Status sumOverProcesses(std::vector<double> &values) override {
    return toStatus(job.sum(values));
  }
  ::pf::Status copyStateToBackend() override {
    return toStatus(runner->compiled().copyParametersToBackend());
  }
  ::pf::Status beforeFirstStep(int64_t firstStep, bool resumed) override {
    return toStatus(startAt(firstStep, resumed));
  }
  void printStart() override;

  bool addKfacWindowInputs(int64_t step, Batch &inputs) override {
    if (!bubbles)
      return false;
    inputs["kfac_curvature"] = scalar<int64_t>(7, window.gathersCurvature(step));
    return true;
  }
  ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) override {
    auto result = runStep(step, inputs);
    if (!result)
      return toStatus(result.takeError());
    return *result;
  }
  ::pf::Status reportStep(int64_t step, const StepResult &) override {
    if (job.rank == 0)
      printKfacIssues(step, std::vector<double>(figures.begin() + 3, figures.end()));
    return ::pf::Status::success();
  }
  ::pf::Status endStep(int64_t step, bool stopping) override {
    return toStatus(placeWindowAfter(step, stopping));
  }

  ::pf::Expected<drv::Model *> evaluationModel() override;
  ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) override;
  ::pf::Expected<std::optional<Batch>> checkpointState() override {
    auto state = gatherState(job, runner->compiled());
    if (!state)
      return toStatus(state.takeError());
    if (job.rank != 0)
      return std::optional<Batch>();
    return std::optional<Batch>(std::move(*state));
  }

  ::pf::Status finish(int64_t last, bool stopped, bool bySigterm) override {
    return toStatus(finishRun(last, stopped, bySigterm));
  }

private:
  // The steps of the TrainingStep interface, in the compiler's error values.
  llvm::Error startAt(int64_t firstStep, bool resumed);
  llvm::Expected<StepResult> runStep(int64_t step, Batch &inputs);
  llvm::Error placeWindowAfter(int64_t step, bool stopping);
  llvm::Error finishRun(int64_t last, bool stopped, bool bySigterm);

  /// K-FAC in the bubbles: the window programs of `window.steps` steps and
  /// their placement (KfacPlacementTable: the plan broadcast and
  /// meta/kfac_placement) added to the module and given to the runner.
  llvm::Error useKfacWindow(const std::vector<int64_t> &placement);
  /// After the warm-up steps: rank 0 places the inverses with the scheduler
  /// from every rank's measured warm-up (the steps after the first, when
  /// there are several) and sends the window and placement to every rank.
  llvm::Expected<std::vector<int64_t>> planKfacWindowOnRanks();

  TrainingRun &trainingRun;
  const TrainConfig &config;
  const TrainingOptions &training;
  const RankJob &job;
  const PipelineRunOptions pipeline;
  const bool bubbles;
  KfacWindowRule window;

  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ScopedDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<drv::RankRunner> runner;
  bool recordTimes = false;
  double buildSeconds = 0;
  int64_t first = 1;
  std::unique_ptr<JitModel> evalModel;

  /// The step's sums over the ranks: the loss, a stop request, by SIGTERM,
  /// then each rank's K-FAC refresh issues.
  std::vector<double> figures;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
};
} // namespace

bool PipelinedStep::build(int argc, char **argv) {
  if (auto err = checkSameStart(job, startupHash(config, argc, argv)))
    return job.fail(llvm::toString(std::move(err))), false;
  if (!config.resumeFile.empty())
    if (auto err = checkSameResume(job, config.resumeFile))
      return job.fail(llvm::toString(std::move(err))), false;

  auto start = std::chrono::steady_clock::now();
  module = importStepModel(config, config.batch / pipeline.microbatches,
                           trainingRun.corpus.seqLen, context, diagnostics);
  if (!module)
    return job.fail("importing " + config.modelFile + " failed"), false;
  PassManager pm(context.get());
  buildGraphOptPipeline(pm, graphOptions(config));
  // The step's gradients stay in the programs: the loop reads the loss.
  PipelineRunOptions programs = pipeline;
  programs.gradientResults = false;
  buildPipelinedTrainingPipeline(pm, training, programs);
  if (failed(pm.run(*module)))
    return job.fail("building the pipelined training step failed"), false;
  trainingRun.checkpoints.onnxNameEntries = onnxNameEntries(*module);
  if (!config.emitStepFile.empty() && job.rank == 0)
    if (auto err = drv::writeModuleFile(*module, config.emitStepFile, "--emit-step"))
      return job.fail(llvm::toString(std::move(err))), false;

  drv::RankRunner::Options runnerOptions;
  runnerOptions.threads = config.threads;
  runnerOptions.ignoreIndex = training.loss.ignoreIndex;
  // K-FAC in the bubbles measures the warm-up steps to place the inverses.
  recordTimes = !config.traceFile.empty() || !config.svgFile.empty() || bubbles;
  runnerOptions.recordTimes = recordTimes;
  runnerOptions.overlapTransfers = pipeline.overlap;
  runnerOptions.backend = job.backend;
  runnerOptions.device = job.device;
  runnerOptions.deviceBuffers = job.onBackendMemory;
  runnerOptions.gemmPrecision = int32_t(config.gemmPrecision);
  runnerOptions.transferBackend = job.transferBackend;
  auto created = drv::RankRunner::create(*module, job.ctx, job.world, runnerOptions);
  if (!created)
    return job.fail(llvm::toString(created.takeError())), false;
  runner = std::move(*created);
  buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // One write per line: mpirun interleaves the ranks' output by write.
  llvm::outs() << startupLine(job, *runner, *module);
  drv::RankRunner::ActivationFigures planned = runner->plannedActivations();
  llvm::outs() << llvm::formatv("rank {0}: activations: up to {1} micro-batches' saved "
                                "activations in flight, at most {2} bytes live (the step's "
                                "received, computed and in-flight values), laid out in an "
                                "arena of {3} bytes\n",
                                job.rank, planned.slots, planned.bytes, planned.arenaBytes)
                      .str();
  llvm::outs().flush();
  // The checkpoint's window is checked in beforeFirstStep (refresh=0 takes it).
  trainingRun.checkpoints.kfacWindow = bubbles ? -1 : 0;
  return true;
}

llvm::Error PipelinedStep::startAt(int64_t firstStep, bool resumed) {
  first = firstStep;
  if (resumed && bubbles && first > window.warmup) {
    auto placement = trainingRun.checkpoints.savedKfacPlacement(window.steps);
    if (!placement)
      return toError(placement.status());
    if (pipeline.refresh > 0 && pipeline.refresh != window.steps)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: its K-FAC windows have {1} step(s), this run refresh={2}",
                        config.resumeFile, window.steps, pipeline.refresh));
    if (auto err = useKfacWindow(*placement))
      return err;
    // The window's pending inverses of the steps before the checkpoint.
    Batch stepInput{{"step", scalar<int64_t>(7, first)}};
    if (auto err = runner->recomputePendingInverses(stepInput, first))
      return err;
  }
  if (trainingRun.checkpoints.kfacWindow < 0)
    trainingRun.checkpoints.kfacWindow = 0; // until the window is placed
  return llvm::Error::success();
}

void PipelinedStep::printStart() {
  if (job.rank != 0)
    return;
  llvm::outs() << llvm::formatv("training {0}: pipeline of {1} ranks, {2} schedule, {3} "
                                "micro-batches, batch {4} x {5}, optimizer {6}{7}, step "
                                "built in {8:F2} s\n",
                                config.modelFile, job.size,
                                ::pf::sched::scheduleKindName(pipeline.schedule),
                                pipeline.microbatches, config.batch, trainingRun.corpus.seqLen,
                                config.optimizerName, training.kfac ? " + K-FAC" : "",
                                buildSeconds)
                      .str(); // one write per line (mpirun interleaves by write)
  llvm::outs().flush();
}

llvm::Expected<StepResult> PipelinedStep::runStep(int64_t step, Batch &inputs) {
  Batch outputs;
  if (auto err = runner->runStep(inputs, outputs, step))
    return std::move(err);
  // The loss (from the last stage), whether any rank was asked to stop and
  // whether by SIGTERM: every rank learns them, so all stop after the same
  // step and rank 0 names the signal another rank received.
  // Then one slot per rank: its K-FAC refreshes that needed more damping
  // or kept the previous inverse (kfac/issues), so rank 0 can name it.
  figures = {0.0, drv::stopRequested() ? 1.0 : 0.0, drv::stopSignal() == SIGTERM ? 1.0 : 0.0};
  figures.resize(3 + job.size, 0.0);
  figures[3 + job.rank] = double(runner->lastKfacIssues());
  // Exactly one rank reports the loss (the last stage's; Chimera: the
  // lowest holding it).
  if (auto reported = outputs.find("loss"); reported != outputs.end()) {
    float loss;
    std::memcpy(&loss, reported->second.data.data(), sizeof(float));
    figures[0] = double(loss);
  }
  if (auto err = job.sum(figures))
    return std::move(err);
  if (runner->lastKfacIssues() != 0) {
    if (auto err = runner->compiled().copyParametersToHost())
      return std::move(err);
    reportNonFiniteFactors(step, runner->compiled().parameters(), nonFiniteFactors,
                           llvm::formatv("rank {0}: ", job.rank).str());
  }
  StepResult result;
  result.loss = figures[0];
  result.stop = figures[1] > 0;
  result.stopBySigterm = figures[2] > 0;
  return result;
}

llvm::Error PipelinedStep::placeWindowAfter(int64_t step, bool stopping) {
  if (!bubbles || step != window.warmup || stopping)
    return llvm::Error::success();
  auto placement = planKfacWindowOnRanks();
  if (!placement)
    return placement.takeError();
  if (auto err = useKfacWindow(*placement))
    return err;
  // --emit-step again, now with the window programs.
  if (!config.emitStepFile.empty() && job.rank == 0)
    return drv::writeModuleFile(*module, config.emitStepFile, "--emit-step");
  return llvm::Error::success();
}

::pf::Expected<drv::Model *> PipelinedStep::evaluationModel() {
  // Rank 0 evaluates with its own single-process model.
  if (job.rank != 0)
    return static_cast<drv::Model *>(nullptr);
  if (!evalModel) {
    auto built = compileEvaluation(*context, config, trainingRun.corpus.seqLen);
    if (!built)
      return toStatus(built.takeError());
    evalModel = std::make_unique<JitModel>(std::move(*built));
  }
  return static_cast<drv::Model *>(evalModel.get());
}

::pf::Status PipelinedStep::withCurrentWeights(
    const std::function<::pf::Status(const WeightLookup &)> &use) {
  auto state = gatherState(job, runner->compiled());
  if (!state)
    return toStatus(state.takeError());
  if (job.rank != 0)
    return ::pf::Status::success();
  WeightLookup fromRanks = [&](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = state->find("param/" + name);
    if (it == state->end())
      return {nullptr, 0};
    return {it->second.data.data(), int64_t(it->second.data.size())};
  };
  return use(fromRanks);
}

llvm::Error PipelinedStep::useKfacWindow(const std::vector<int64_t> &placement) {
  std::string error;
  auto table = decodeKfacPlacementTable(placement, error);
  if (failed(table))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC placement: " + error);
  if (failed(addKfacWindowPrograms(*module, window.steps, table->inverses, table->factors)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC window programs do not verify (see above)");
  if (auto err = runner->useKfacWindow(window.warmup, window.steps))
    return err;
  trainingRun.checkpoints.kfacWindow = window.steps;
  trainingRun.checkpoints.kfacPlacement = placement;
  return llvm::Error::success();
}

llvm::Expected<std::vector<int64_t>> PipelinedStep::planKfacWindowOnRanks() {
  std::vector<std::vector<drv::ExecutedOp>> byRank;
  if (auto err = gatherTimeline(job, *runner, byRank))
    return std::move(err);
  std::vector<int64_t> plan; // K, then the placement
  if (job.rank == 0) {
    auto measured = measuredRunOf(*module, byRank, pipeline, first);
    if (!measured)
      return measured.takeError();
    int64_t last = window.warmup - first;
    int64_t from = last >= 1 ? 1 : 0;
    auto placed = drv::planKfacWindow(*measured, from, last, pipeline.refresh,
                                      pipeline.maxOverhead, pipeline.maxRefresh);
    if (!placed)
      return placed.takeError();
    plan.push_back(placed->steps);
    std::map<int64_t, std::vector<int64_t>> perStep;
    for (const drv::KfacWindowPlacement &p : placed->inverses) {
      plan.insert(plan.end(), {int64_t(p.rank), p.layer, p.windowStep, p.afterPasses});
      perStep[p.windowStep].push_back(p.layer);
    }
    for (const drv::KfacFactorPlacement &f : placed->factors)
      plan.insert(plan.end(), {int64_t(f.rank), f.layer, kfacFactorRowCode(f.microbatch, f.isB),
                               f.afterPasses});
    std::string where;
    for (auto &[k, layers] : perStep)
      where += llvm::formatv("{0}step {1}: {2}", where.empty() ? "" : "; ", k, layers.size());
    llvm::outs() << llvm::formatv(
        "K-FAC in the bubbles: windows of {0} step(s) from step {1} ({2}; measured warm-up "
        "steps {3}..{4}, simulated T_pipe {5:F1} ms, step {6:F1} ms); inverse calls per window "
        "step: {7}; factor calls placed in step 0: {8}\n",
        placed->steps, window.warmup + 1,
        pipeline.refresh > 0 ? "refresh=" + std::to_string(pipeline.refresh)
                             : std::string("the scheduler's K"),
        first + from, window.warmup, placed->pipelineMs, placed->stepMs, where,
        placed->factors.size())
                        .str(); // one write per line (mpirun interleaves by write)
    llvm::outs().flush();
    drv::NpyArray table;
    table.dtype = 7;
    table.shape = {int64_t(plan.size())};
    table.data.resize(plan.size() * sizeof(int64_t));
    std::memcpy(table.data.data(), plan.data(), table.data.size());
    for (int32_t to = 1; to < job.size; ++to)
      if (auto err = drv::sendValues(job.ctx, job.world, {{"kfac/plan", table}}, to))
        return std::move(err);
  } else {
    Batch received;
    if (auto err = drv::receiveValues(job.ctx, job.world, 0, received))
      return std::move(err);
    const drv::NpyArray &table = received["kfac/plan"];
    plan.resize(size_t(table.numElements()));
    std::memcpy(plan.data(), table.data.data(), plan.size() * sizeof(int64_t));
  }
  if (plan.empty() || plan.front() < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no K-FAC window was placed");
  window.steps = plan.front();
  return std::vector<int64_t>(plan.begin() + 1, plan.end());
}

llvm::Error PipelinedStep::finishRun(int64_t last, bool stopped, bool bySigterm) {
  if (recordTimes) {
    std::vector<std::vector<drv::ExecutedOp>> byRank;
    if (auto err = gatherTimeline(job, *runner, byRank))
      return err;
    if (job.rank == 0)
      if (auto err = writeMeasuredTimeline(config, *module, byRank, pipeline, first, window))
        return err;
  }
  drv::RankRunner::ActivationFigures planned = runner->plannedActivations(); // with the windows
  // One write (see the start-up lines).
  llvm::outs().flush();
  llvm::outs() << llvm::formatv("rank {0}: activations of every program run: up to {1} "
                                "micro-batches' saved activations in flight, at most {2} bytes "
                                "live, in one arena of {3} bytes\n",
                                job.rank, planned.slots, planned.bytes, planned.arenaBytes)
                      .str()
               << llvm::formatv("rank {0}: gradients held at most: {1} bytes (by the host: "
                                "the step's results it reads out; the gradients are values of "
                                "the program, in its arena)\n",
                                job.rank, runner->measuredGradientBytes())
                      .str();
  llvm::outs() << llvm::formatv("rank {0}: stage-value bytes read by host code in the steps: "
                                "{1}, of them the step's results: {2}\n",
                                job.rank, runner->hostStageValueBytes(), runner->resultBytes())
                      .str();
  if (runner->onBackendMemory())
    llvm::outs() << llvm::formatv("rank {0}: stage values copied between host and backend "
                                  "memory by the stage calls: {1}\n",
                                  job.rank, runner->stageValueCopies())
                        .str();
  llvm::outs().flush();
  if (job.rank == 0 && stopped)
    llvm::outs() << "stopped by " << (bySigterm ? "SIGTERM" : "SIGINT")
                 << " on a rank after step " << last << "\n";
  llvm::outs().flush();
  return llvm::Error::success();
}

int train::trainPipelined(TrainConfig &config, TrainingRun &run, int argc, char **argv) {
  TrainingOptions &training = config.training;
  BoundPipelineOptions<PipelineRunOptions> parsed;
  if (failed(parsed.parseOnce(config.pipelineSpec)))
    return printError(
        "--pipeline \"" + config.pipelineSpec +
        "\": see the messages above; it takes "
        "stages=D schedule=gpipe|1f1b|zb-h1|zb-h2|interleaved|chimera|zb-v|dualpipe|dualpipev "
        "microbatches=N chunks=C "
        "overlap=true|false kfac=step|bubbles refresh=K max-overhead=X max-refresh=K");
  PipelineRunOptions pipeline = parsed.get();
  if (std::string err = checkPipelineRunOptions(pipeline, parsed.given()); !err.empty())
    return printError("--pipeline: " + err);
  if (pipeline.microbatches < 1 || config.batch % pipeline.microbatches != 0)
    return printError(llvm::formatv("--pipeline: microbatches must be >= 1 and divide --batch "
                                    "({0}), got {1}",
                                    config.batch, pipeline.microbatches));
  if (training.microbatches != 1 && training.microbatches != pipeline.microbatches)
    return printError(llvm::formatv("--micro-batches {0} but --pipeline has microbatches={1} "
                                    "(give only --pipeline's)",
                                    training.microbatches, pipeline.microbatches));
  const bool bubbles = pipeline.kfac == KfacWork::Bubbles;
  if (auto err = prepareDampingSchedule(config, bubbles))
    return printError(llvm::toString(std::move(err)));
  config.fixStepFacts(); // the damping schedule's input, known only now
  if (training.kfacFactorEvery > 1 && bubbles)
    return printError("--kfac-factor-every with --pipeline \"kfac=bubbles\": the windows decide "
                      "the factor steps (refresh=K)");
  if (config.intervalSchedule != IntervalSchedule::Constant && bubbles)
    return printError("--kfac-interval-schedule with --pipeline \"kfac=bubbles\": the windows "
                      "decide the factor and refresh steps (refresh=K)");
  if (bubbles) {
    if (!training.kfac)
      return printError("--pipeline \"kfac=bubbles\" places K-FAC work: it needs --kfac");
    if (training.precondition.refreshWarmup < 1)
      return printError("--pipeline \"kfac=bubbles\" needs --kfac-refresh-warmup >= 1: the "
                        "warm-up steps invert every step and measure the durations the "
                        "placement uses");
  }

  RankJob job;
  job.ctx = pfrt_context_create(nullptr);
  if (!job.ctx)
    return printError("cannot create a runtime context");
  if (pfrt_comm_create(job.ctx, nullptr, &job.world) != PFRT_OK)
    return printError(llvm::Twine("--pipeline: ") + pfrt_last_error(job.ctx));
  job.rank = pfrt_comm_rank(job.world);
  job.size = pfrt_comm_size(job.world);
  if (auto err = chooseRankDevice(config, job))
    return job.fail(llvm::toString(std::move(err)));
  if (pipeline.stages == 0)
    pipeline.stages = job.size;
  if (pipeline.stages != job.size)
    return job.fail(llvm::formatv("--pipeline has stages={0} but the job has {1} rank(s): start "
                                  "it with mpirun -np {0}",
                                  pipeline.stages, job.size));
  int code = 1;
  {
    PipelinedStep step(config, run, job, pipeline);
    if (!step.build(argc, argv))
      return 1; // failed the job already
    code = runTrainingLoop(run, step);
  }
  if (code != 0 && code != 130)
    return code; // aborted the job already
  pfrt_comm_destroy(job.world);
  if (pfrt_comm_finalize(job.ctx) != PFRT_OK) {
    llvm::errs() << ("pf-train: rank " + std::to_string(job.rank) + ": " +
                     pfrt_last_error(job.ctx) + "\n");
    code = 1;
  }
  pfrt_context_destroy(job.ctx);
  return code;
}
