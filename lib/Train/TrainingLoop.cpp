//===- TrainingLoop.cpp - The training loop -------------------------------===//
#include "pf/Train/TrainingLoop.h"

#include "pf/Runtime/pfrt.h"
#include "pf/Support/StopSignals.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/TrainingStep.h"

#include <chrono>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstdlib>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

TrainingStep::~TrainingStep() = default;

int train::printRunError(const std::string &message, const char *tool) {
  // One write: under mpirun every rank may print the same error, and the
  // job's output interleaves the ranks' writes.
  std::fflush(stdout);
  std::fputs((std::string(tool) + ": error: " + message + "\n").c_str(), stderr);
  return 1;
}

int train::launcherRanks() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char *value = std::getenv(name)) {
      char *end = nullptr;
      long ranks = std::strtol(value, &end, 10);
      while (end && (*end == ' ' || *end == '\t' || *end == '\n'))
        ++end;
      if (end != value && end && !*end && ranks > 1 && ranks <= INT32_MAX)
        return int(ranks);
    }
  return 1;
}

::pf::Status train::checkRunOptions(const RunConfig &config) {
  using ::pf::Status;
  if (config.batch < 1 || config.steps < 1 || config.lr <= 0 || config.warmup < 0 ||
      config.logEvery < 1 || config.checkpointEvery < 0 || config.maskProbability <= 0 ||
      config.maskProbability > 1)
    return Status::error("--batch, --steps, --lr, --log-every and --mask-prob must be positive "
                         "(--mask-prob at most 1); --warmup and --checkpoint-every must be "
                         "non-negative");
  if (config.batch > kMaxBatch)
    return Status::error(::pf::formatText("--batch %d exceeds the limit of %d sequences "
                                          "(kMaxBatch)",
                                          config.batch, kMaxBatch));
  if (config.evalEvery < 0 || config.evalSequences < 1)
    return Status::error("--eval-every must be >= 0 and --eval-sequences >= 1");
  if (config.threads < 0 || config.threads > PFRT_MAX_THREADS)
    return Status::error(::pf::formatText("--num-threads %d must be in [0, %d] "
                                          "(PFRT_MAX_THREADS)",
                                          config.threads, PFRT_MAX_THREADS));
  return Status::success();
}

::pf::Status train::holdOutEvaluationRows(const RunConfig &config, Corpus &corpus) {
  if (config.evalEvery <= 0)
    return ::pf::Status::success();
  if (config.evalSequences < config.batch || config.evalSequences + config.batch > corpus.rows)
    return ::pf::Status::error(::pf::formatText(
        "--eval-sequences %d must hold at least one batch (%d) and leave at least one batch of "
        "the corpus' %lld sequences to train on",
        config.evalSequences, config.batch, (long long)corpus.rows));
  corpus.trainRows = corpus.rows - config.evalSequences;
  return ::pf::Status::success();
}

/// One line on stdout, in one write: mpirun interleaves the ranks' output by
/// write.
static void printLine(const std::string &line) {
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

int train::runTrainingLoop(TrainingRun &run, TrainingStep &step) {
  const RunConfig &config = run.config;
  const StepFacts &training = config.step;
  auto failAt = [&](int64_t at, const ::pf::Status &status) {
    return step.fail("step " + std::to_string(at) + ": " + status.message());
  };

  int64_t first = 1;
  const bool resuming = !config.resumeFile.empty();
  if (resuming) {
    Checkpoints::Coverage coverage;
    auto resumed = run.checkpoints.load(step.stateParameters(), coverage);
    if (!resumed)
      return step.fail(resumed.error());
    if (auto status = step.sumOverProcesses(coverage.loaded); !status.ok())
      return step.fail(status.message());
    if (auto status = run.checkpoints.checkCovered(coverage); !status.ok())
      return step.fail(status.message());
    if (auto status = step.copyStateToBackend(); !status.ok())
      return step.fail(status.message());
    first = *resumed + 1;
    if (step.reports())
      printLine("resumed from " + config.resumeFile + " after step " +
                std::to_string(*resumed) + "\n");
  }
  if (auto status = step.beforeFirstStep(first, resuming); !status.ok())
    return step.fail(status.message());
  step.printStart();
  drv::catchStopSignals();

  drv::Model *evalModel = nullptr;
  if (config.evalEvery > 0) {
    auto model = step.evaluationModel();
    if (!model)
      return step.fail(model.error());
    evalModel = *model;
  }
  auto evaluateAt = [&](int64_t at) -> ::pf::Status {
    return step.withCurrentWeights([&](const WeightLookup &weights) -> ::pf::Status {
      auto loss = evaluateHeldOut(run.batches, weights, *evalModel);
      if (!loss)
        return loss.status();
      printLine(::pf::formatText("eval  %5lld  loss %8.4f  (%lld held-out sequences)\n",
                                 (long long)at, *loss,
                                 (long long)(run.batches.heldOutBatches() * config.batch)));
      return ::pf::Status::success();
    });
  };
  if (config.evalEvery > 0)
    if (auto status = evaluateAt(first - 1); !status.ok())
      return step.fail(status.message());

  // The checkpoint of the state after `at`, written by the reporting process.
  auto saveCheckpoint = [&](int64_t at, const std::string &path) -> ::pf::Status {
    auto state = step.checkpointState();
    if (!state)
      return state.status();
    if (!*state)
      return ::pf::Status::success();
    return run.checkpoints.write(std::move(**state), at, path);
  };

  auto windowStart = std::chrono::steady_clock::now();
  int64_t windowTokens = 0, windowSteps = 0, last = first - 1;
  bool stopped = false, stoppedBySigterm = false;
  for (int64_t at = first; at <= config.steps && !stopped; ++at) {
    if (step.stopsBefore(at)) {
      stopped = true;
      break;
    }
    Batch inputs = run.batches.training(at);
    inputs["lr"] = scalar<double>(11, learningRate(config, at));
    if (training.dampingInput)
      inputs["kfac_damping"] = scalar<double>(11, run.damping.at(at));
    run.damping.stepDamping = run.damping.at(at);
    inputs["step"] = scalar<int64_t>(7, at);
    if (!step.addKfacWindowInputs(at, inputs) &&
        (training.kfacFactorEvery > 1 || training.curvatureInput))
      inputs["kfac_curvature"] = scalar<int64_t>(7, run.intervals.updatesFactors(at));
    if (training.refreshInput)
      inputs["kfac_refresh_due"] = scalar<int64_t>(7, run.intervals.refreshesInverses(at));
    auto result = step.run(at, inputs);
    if (!result)
      return failAt(at, result.status());
    stopped = result->stop;
    stoppedBySigterm = result->stopBySigterm;
    last = at;
    windowTokens += int64_t(config.batch) * run.corpus.seqLen;
    ++windowSteps;
    if (!std::isfinite(result->loss)) {
      // Every process saw the loss: one reports it.
      if (step.reports())
        printRunError(::pf::formatText("step %lld: the loss is %.2f; lower --lr", (long long)at,
                                    result->loss));
      return 1;
    }
    if (auto status = step.reportStep(at, *result); !status.ok())
      return step.fail(status.message());
    if (step.reports() && (at % config.logEvery == 0 || at == config.steps || at == first)) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      printLine(::pf::formatText("step %5lld  loss %8.4f  lr %.2E  tokens/s %8.0f  ms/step "
                                 "%7.1f%s\n",
                                 (long long)at, double(float(result->loss)),
                                 learningRate(config, at), windowTokens / seconds,
                                 1e3 * seconds / windowSteps,
                                 (run.damping.column(at) + run.intervals.column(at)).c_str()));
      windowStart = std::chrono::steady_clock::now();
      windowTokens = windowSteps = 0;
    }
    if (config.evalEvery > 0 && (at % config.evalEvery == 0 || at == config.steps)) {
      auto evalStart = std::chrono::steady_clock::now();
      if (auto status = evaluateAt(at); !status.ok())
        return failAt(at, status);
      windowStart += std::chrono::steady_clock::now() - evalStart; // ms/step: training only
    }
    if (auto status = step.endStep(at, stopped); !status.ok())
      return step.fail(status.message());
    if (!config.checkpointFile.empty() && config.checkpointEvery > 0 &&
        at % config.checkpointEvery == 0)
      if (auto status = saveCheckpoint(at, config.checkpointFile); !status.ok())
        return step.fail(status.message());
  }

  const KfacDampingSchedule &damping = run.damping;
  if (damping.adaptations > 0)
    printLine(::pf::formatText(
        "K-FAC adaptive damping: %lld adaptation(s), %.1f ms each (%.1f ms the forward pass on "
        "the step's batch, %.1f ms weight copies and the quadratic model); damping now %.3E\n",
        (long long)damping.adaptations,
        1e3 * (damping.forwardSeconds + damping.modelSeconds) / double(damping.adaptations),
        1e3 * damping.forwardSeconds / double(damping.adaptations),
        1e3 * damping.modelSeconds / double(damping.adaptations), damping.damping));
  std::string checkpointFile = config.checkpointFile;
  if (stopped && checkpointFile.empty())
    checkpointFile = "pf-train.checkpoint.npz";
  if (!checkpointFile.empty()) {
    if (auto status = saveCheckpoint(last, checkpointFile); !status.ok())
      return step.fail(status.message());
    if (step.reports())
      printLine("checkpoint after step " + std::to_string(last) + ": " + checkpointFile + "\n");
  }
  if (auto status = step.finish(last, stopped, stoppedBySigterm); !status.ok())
    return step.fail(status.message());
  return stopped ? 130 : 0;
}
