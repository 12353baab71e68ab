//===- TrainingLoop.cpp - The training loop -------------------------------===//
#include "pf/Train/TrainingLoop.h"

#include "pf/Driver/StopSignals.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/Train.h"
#include "pf/Train/TrainingStep.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

TrainingStep::~TrainingStep() = default;

int train::runTrainingLoop(TrainingRun &run, TrainingStep &step) {
  const TrainConfig &config = run.config;
  const TrainingOptions &training = config.training;
  auto failAt = [&](int64_t at, llvm::Error err) {
    return step.fail(llvm::formatv("step {0}: {1}", at, llvm::toString(std::move(err))));
  };

  int64_t first = 1;
  const bool resuming = !config.resumeFile.empty();
  if (resuming) {
    Checkpoints::Coverage coverage;
    auto resumed = run.checkpoints.load(step.stateParameters(), coverage);
    if (!resumed)
      return step.fail(llvm::toString(resumed.takeError()));
    if (auto err = step.sumOverProcesses(coverage.loaded))
      return step.fail(llvm::toString(std::move(err)));
    if (auto err = run.checkpoints.checkCovered(coverage))
      return step.fail(llvm::toString(std::move(err)));
    if (auto err = step.copyStateToBackend())
      return step.fail(llvm::toString(std::move(err)));
    first = *resumed + 1;
    if (step.reports()) {
      // One write per line: mpirun interleaves the ranks' output by write.
      llvm::outs() << ("resumed from " + config.resumeFile + " after step " +
                       std::to_string(*resumed) + "\n");
      llvm::outs().flush();
    }
  }
  if (auto err = step.beforeFirstStep(first, resuming))
    return step.fail(llvm::toString(std::move(err)));
  step.printStart();
  drv::catchStopSignals();

  drv::CompiledModel *evalModel = nullptr;
  if (config.evalEvery > 0) {
    auto model = step.evaluationModel();
    if (!model)
      return step.fail(llvm::toString(model.takeError()));
    evalModel = *model;
  }
  auto evaluateAt = [&](int64_t at) -> llvm::Error {
    return step.withCurrentWeights([&](const WeightLookup &weights) -> llvm::Error {
      auto loss = evaluateHeldOut(run.batches, weights, *evalModel);
      if (!loss)
        return loss.takeError();
      llvm::outs() << llvm::formatv("eval  {0,5}  loss {1,8:F4}  ({2} held-out sequences)\n", at,
                                    *loss, run.batches.heldOutBatches() * config.batch)
                          .str(); // one write per line (mpirun interleaves by write)
      llvm::outs().flush();
      return llvm::Error::success();
    });
  };
  if (config.evalEvery > 0)
    if (auto err = evaluateAt(first - 1))
      return step.fail(llvm::toString(std::move(err)));

  // The checkpoint of the state after `at`, written by the reporting process.
  auto saveCheckpoint = [&](int64_t at, const std::string &path) -> llvm::Error {
    auto state = step.checkpointState();
    if (!state)
      return state.takeError();
    if (!*state)
      return llvm::Error::success();
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
    if (training.precondition.dampingInput)
      inputs["kfac_damping"] = scalar<double>(11, run.damping.at(at));
    run.damping.stepDamping = run.damping.at(at);
    inputs["step"] = scalar<int64_t>(7, at);
    if (!step.addKfacWindowInputs(at, inputs) &&
        (training.kfacFactorEvery > 1 || training.precondition.curvatureInput))
      inputs["kfac_curvature"] = scalar<int64_t>(7, run.intervals.updatesFactors(at));
    if (training.precondition.refreshInput)
      inputs["kfac_refresh_due"] = scalar<int64_t>(7, run.intervals.refreshesInverses(at));
    auto result = step.run(at, inputs);
    if (!result)
      return failAt(at, result.takeError());
    stopped = result->stop;
    stoppedBySigterm = result->stopBySigterm;
    last = at;
    windowTokens += int64_t(config.batch) * run.corpus.seqLen;
    ++windowSteps;
    if (!std::isfinite(result->loss)) {
      // Every process saw the loss: one reports it.
      if (step.reports())
        printError(llvm::formatv("step {0}: the loss is {1}; lower --lr", at, result->loss));
      return 1;
    }
    if (auto err = step.reportStep(at, *result))
      return step.fail(llvm::toString(std::move(err)));
    if (step.reports() && (at % config.logEvery == 0 || at == config.steps || at == first)) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      llvm::outs() << llvm::formatv("step {0,5}  loss {1,8:F4}  lr {2:E2}  tokens/s {3,8:F0}  "
                                    "ms/step {4,7:F1}{5}\n",
                                    at, float(result->loss), learningRate(config, at),
                                    windowTokens / seconds, 1e3 * seconds / windowSteps,
                                    run.damping.column(at) + run.intervals.column(at))
                          .str(); // one write: other ranks' lines interleave by write
      llvm::outs().flush();
      windowStart = std::chrono::steady_clock::now();
      windowTokens = windowSteps = 0;
    }
    if (config.evalEvery > 0 && (at % config.evalEvery == 0 || at == config.steps)) {
      auto evalStart = std::chrono::steady_clock::now();
      if (auto err = evaluateAt(at))
        return failAt(at, std::move(err));
      windowStart += std::chrono::steady_clock::now() - evalStart; // ms/step: training only
    }
    if (auto err = step.endStep(at, stopped))
      return step.fail(llvm::toString(std::move(err)));
    if (!config.checkpointFile.empty() && config.checkpointEvery > 0 &&
        at % config.checkpointEvery == 0)
      if (auto err = saveCheckpoint(at, config.checkpointFile))
        return step.fail(llvm::toString(std::move(err)));
  }

  const KfacDampingSchedule &damping = run.damping;
  if (damping.adaptations > 0)
    llvm::outs() << llvm::formatv(
        "K-FAC adaptive damping: {0} adaptation(s), {1:F1} ms each "
        "({2:F1} ms the forward pass on the step's batch, {3:F1} ms "
        "weight copies and the quadratic model); damping now {4:E3}\n",
        damping.adaptations,
        1e3 * (damping.forwardSeconds + damping.modelSeconds) / double(damping.adaptations),
        1e3 * damping.forwardSeconds / double(damping.adaptations),
        1e3 * damping.modelSeconds / double(damping.adaptations), damping.damping);
  std::string checkpointFile = config.checkpointFile;
  if (stopped && checkpointFile.empty())
    checkpointFile = "pf-train.checkpoint.npz";
  if (!checkpointFile.empty()) {
    if (auto err = saveCheckpoint(last, checkpointFile))
      return step.fail(llvm::toString(std::move(err)));
    if (step.reports()) // one write: mpirun interleaves the ranks' output by write
      llvm::outs() << ("checkpoint after step " + std::to_string(last) + ": " + checkpointFile +
                       "\n");
  }
  if (auto err = step.finish(last, stopped, stoppedBySigterm))
    return step.fail(llvm::toString(std::move(err)));
  llvm::outs().flush();
  return stopped ? 130 : 0;
}
