//===- SingleModelStep.cpp - A step that is one compiled function ---------===//
#include "pf/Train/SingleModelStep.h"

#include "pf/Support/StopSignals.h"
#include "pf/Train/KfacReports.h"

#include <chrono>
#include <cstring>

using namespace mlir::pf;
using namespace mlir::pf::train;

SingleModelStep::SingleModelStep(TrainingRun &run)
    : trainingRun(run), window{run.config.step.refreshWarmup, run.config.step.kfacWindow} {}

void SingleModelStep::useModels(driver::Model &step, driver::Model *evaluationModel) {
  model = &step;
  evaluation = evaluationModel;
  for (const driver::ModelParameter &p : model->parameters())
    weights[p.name] = p;
  trainingRun.checkpoints.kfacWindow = trainingRun.config.step.kfacWindow;
}

::pf::Status SingleModelStep::useAdaptiveDamping(std::vector<KfacModelLayer> layers) {
  if (layers.empty())
    return ::pf::Status::error(
        "--kfac-damping-schedule adaptive: the training step has no K-FAC layer");
  if (!evaluation)
    return ::pf::Status::error("--kfac-damping-schedule adaptive needs the evaluation model");
  adaptiveLayers = std::move(layers);
  return ::pf::Status::success();
}

bool SingleModelStep::stopsBefore(int64_t) { return driver::stopRequested(); }

::pf::Expected<StepResult> SingleModelStep::run(int64_t step, Batch &inputs) {
  const RunConfig &config = trainingRun.config;
  adapts = !adaptiveLayers.empty() && step % config.dampingAdaptation.interval == 0;
  if (adapts) {
    auto start = std::chrono::steady_clock::now();
    auto copies = copyEvaluationWeights(*model, weights, *evaluation);
    if (!copies)
      return copies.status();
    before = copies.take();
    trainingRun.damping.modelSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (auto status = model->run(inputs, outputs); !status.ok())
    return status;
  float loss;
  std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
  StepResult result;
  result.loss = loss;
  return result;
}

::pf::Status SingleModelStep::reportStep(int64_t step, const StepResult &result) {
  const RunConfig &config = trainingRun.config;
  if (adapts)
    if (auto status = adaptDamping(step, result.loss, trainingRun.batches.masked(step), *model,
                                   weights, *evaluation, adaptiveLayers, before, outputs,
                                   config.dampingAdaptation, trainingRun.damping,
                                   step % config.logEvery == 0);
        !status.ok())
      return ::pf::Status::error("step " + std::to_string(step) + ": " + status.message());
  return reportStepKfacIssues(step, outputs, *model, nonFiniteFactors);
}

::pf::Status
SingleModelStep::withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) {
  if (auto status = model->copyParametersToHost(); !status.ok())
    return status;
  return use([this](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = weights.find(name);
    if (it == weights.end())
      return {nullptr, 0};
    return {it->second.data, it->second.bytes};
  });
}

::pf::Expected<std::optional<Batch>> SingleModelStep::checkpointState() {
  if (auto status = model->copyParametersToHost(); !status.ok())
    return status;
  return std::optional<Batch>(stateArrays(model->parameters()));
}
