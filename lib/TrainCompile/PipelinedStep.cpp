//===- PipelinedStep.cpp - The training step as one rank of a pipeline ----===//
//
// Each rank of an mpirun job runs its rank program (RankRunner) for the
// step; the loss, the stop requests and the K-FAC reports are summed over
// the ranks so that every rank stops after the same step, and checkpoints
// and evaluations gather every rank's state on rank 0.
//
//===----------------------------------------------------------------------===//
#include "pf/TrainCompile/PipelinedStep.h"
#include "pf/Train/RankStep.h"

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
/// printError for a function that returns no exit code.
std::nullopt_t printPipelineError(const llvm::Twine &message) {
  printError(message);
  return std::nullopt;
}

/// FNV-1a over what must be the same on every rank: the model's and the
/// corpus' bytes, the command line and this build of pf-train (the bytes of
/// its executable: equal builds on several machines agree).
uint64_t startupHash(const TrainConfig &config, int argc, char **argv) {
  Digest digest;
  for (const std::string &file :
       {config.modelFile, config.corpusFile, std::string("/proc/self/exe")})
    digest.addFile(file);
  for (int i = 1; i < argc; ++i)
    digest.add(argv[i]);
  return digest.h;
}

::pf::Status checkSameStart(const RankJob &job, uint64_t hash) {
  return checkSameOnEveryRank(job, hash,
                              "were started with another model, corpus, command line or "
                              "pf-train build than rank 0 (start-up hashes differ)",
                              "start every rank with the same command");
}

class PipelinedStep final : public RankStep {
public:
  PipelinedStep(TrainConfig &config, TrainingRun &run, const RankJob &job,
                const PipelineRunOptions &pipeline)
      : RankStep(run, job), config(config), training(config.training),
        pipeline(pipeline), bubbles(pipeline.kfac == KfacWork::Bubbles),
        window{bubbles ? training.precondition.refreshWarmup : 0, 0} {}

  /// Builds and compiles this rank's program and prints the start-up lines;
  /// false after failing the job.
  bool build(int argc, char **argv);

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
  ::pf::Status endStep(int64_t step, bool stopping) override {
    return toStatus(placeWindowAfter(step, stopping));
  }

  ::pf::Expected<drv::Model *> evaluationModel() override;

  ::pf::Status finish(int64_t last, bool stopped, bool bySigterm) override {
    return toStatus(finishRun(last, stopped, bySigterm));
  }

private:
  // The steps of the TrainingStep interface, in the compiler's error values.
  llvm::Error startAt(int64_t firstStep, bool resumed);
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

  const TrainConfig &config;
  const TrainingOptions &training;
  const PipelineRunOptions pipeline;
  const bool bubbles;
  KfacWindowRule window;

  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ScopedDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<drv::JitRank> jit;
  bool recordTimes = false;
  double buildSeconds = 0;
  int64_t first = 1;
  std::unique_ptr<JitModel> evalModel;
};
} // namespace

bool PipelinedStep::build(int argc, char **argv) {
  if (::pf::Status s = checkSameStart(job, startupHash(config, argc, argv)); !s.ok())
    return job.fail(s.message()), false;
  if (!config.resumeFile.empty())
    if (::pf::Status s = checkSameResume(job, config.resumeFile); !s.ok())
      return job.fail(s.message()), false;

  auto start = std::chrono::steady_clock::now();
  module = buildPipelinedStepModule(config, pipeline, trainingRun.corpus.seqLen, context,
                                    diagnostics);
  if (!module)
    return job.fail("building the pipelined training step of " + config.modelFile +
                    " failed (see the messages above)"),
           false;
  trainingRun.checkpoints.onnxNameEntries = onnxNameEntries(*module);
  if (!config.emitStepFile.empty() && job.rank == 0)
    if (auto err = drv::writeModuleFile(*module, config.emitStepFile, "--emit-step"))
      return job.fail(llvm::toString(std::move(err))), false;

  drv::JitRank::Options runnerOptions;
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
  auto created = drv::JitRank::create(*module, job.ctx, job.world, runnerOptions);
  if (!created)
    return job.fail(llvm::toString(created.takeError())), false;
  jit = std::move(*created);
  buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs().flush();
  adoptRunner(jit->runner());
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
    if (auto err = toError(runner->recomputePendingInverses(stepInput, first)))
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

llvm::Error PipelinedStep::useKfacWindow(const std::vector<int64_t> &placement) {
  std::string error;
  auto table = decodeKfacPlacementTable(placement, error);
  if (failed(table))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC placement: " + error);
  if (failed(addKfacWindowPrograms(*module, window.steps, table->inverses, table->factors)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC window programs do not verify (see above)");
  if (auto err = jit->useKfacWindow(window.warmup, window.steps))
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
      if (auto err = toError(drv::sendValues(job.ctx, job.world, {{"kfac/plan", table}}, to)))
        return std::move(err);
  } else {
    Batch received;
    if (auto err = toError(drv::receiveValues(job.ctx, job.world, 0, received)))
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
  return toError(RankStep::finish(last, stopped, bySigterm));
}

OwningOpRef<ModuleOp> train::buildPipelinedStepModule(const TrainConfig &config,
                                                      const PipelineRunOptions &pipeline,
                                                      int64_t seqLen,
                                                      std::unique_ptr<MLIRContext> &context,
                                                      std::unique_ptr<ScopedDiagnosticHandler> &diagnostics) {
  OwningOpRef<ModuleOp> module = importStepModel(config, config.batch / pipeline.microbatches,
                                                 seqLen, context, diagnostics);
  if (!module)
    return nullptr;
  PassManager pm(context.get());
  buildGraphOptPipeline(pm, graphOptions(config));
  // The step's gradients stay in the programs: the loop reads the loss.
  PipelineRunOptions programs = pipeline;
  programs.gradientResults = false;
  buildPipelinedTrainingPipeline(pm, config.training, programs);
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

std::optional<PipelineRunOptions> train::preparePipeline(TrainConfig &config) {
  TrainingOptions &training = config.training;
  BoundPipelineOptions<PipelineRunOptions> parsed;
  if (failed(parsed.parseOnce(config.pipelineSpec)))
    return printPipelineError(
        "--pipeline \"" + config.pipelineSpec +
        "\": see the messages above; it takes "
        "stages=D schedule=gpipe|1f1b|zb-h1|zb-h2|interleaved|chimera|zb-v|dualpipe|dualpipev "
        "microbatches=N chunks=C "
        "overlap=true|false kfac=step|bubbles refresh=K max-overhead=X max-refresh=K");
  PipelineRunOptions pipeline = parsed.get();
  if (std::string err = checkPipelineRunOptions(pipeline, parsed.given()); !err.empty())
    return printPipelineError("--pipeline: " + err);
  if (pipeline.microbatches < 1 || config.batch % pipeline.microbatches != 0)
    return printPipelineError(llvm::formatv("--pipeline: microbatches must be >= 1 and divide --batch "
                                    "({0}), got {1}",
                                    config.batch, pipeline.microbatches));
  if (training.microbatches != 1 && training.microbatches != pipeline.microbatches)
    return printPipelineError(llvm::formatv("--micro-batches {0} but --pipeline has microbatches={1} "
                                    "(give only --pipeline's)",
                                    training.microbatches, pipeline.microbatches));
  const bool bubbles = pipeline.kfac == KfacWork::Bubbles;
  if (auto err = prepareDampingSchedule(config, bubbles))
    return printPipelineError(llvm::toString(std::move(err)));
  config.fixStepFacts(); // the damping schedule's input, known only now
  if (training.kfacFactorEvery > 1 && bubbles)
    return printPipelineError("--kfac-factor-every with --pipeline \"kfac=bubbles\": the windows decide "
                      "the factor steps (refresh=K)");
  if (config.intervalSchedule != IntervalSchedule::Constant && bubbles)
    return printPipelineError("--kfac-interval-schedule with --pipeline \"kfac=bubbles\": the windows "
                      "decide the factor and refresh steps (refresh=K)");
  if (bubbles) {
    if (!training.kfac)
      return printPipelineError("--pipeline \"kfac=bubbles\" places K-FAC work: it needs --kfac");
    if (training.precondition.refreshWarmup < 1)
      return printPipelineError("--pipeline \"kfac=bubbles\" needs --kfac-refresh-warmup >= 1: the "
                        "warm-up steps invert every step and measure the durations the "
                        "placement uses");
  }
  return pipeline;
}

int train::trainPipelined(TrainConfig &config, PipelineRunOptions pipeline, TrainingRun &run,
                          int argc, char **argv) {
  RankJob job;
  if (::pf::Status s = job.start(); !s.ok())
    return printError(s.message());
  if (::pf::Status s = chooseRankDevice(config, job); !s.ok())
    return job.fail(s.message());
  if (pipeline.stages == 0)
    pipeline.stages = job.size;
  if (pipeline.stages != job.size)
    return job.fail(llvm::formatv("--pipeline has stages={0} but the job has {1} rank(s): start "
                                  "it with mpirun -np {0}",
                                  pipeline.stages, job.size)
                        .str());
  int code = 1;
  {
    PipelinedStep step(config, run, job, pipeline);
    if (!step.build(argc, argv))
      return 1; // failed the job already
    code = runTrainingLoop(run, step);
  }
  if (code != 0 && code != 130)
    return code; // aborted the job already
  return job.end(code);
}
