//===- SingleProcessStep.cpp - The training step in one process -----------===//
//
// One JIT-compiled function runs the whole step (forward, loss, backward,
// K-FAC, optimizer) on the batch and updates the parameters it owns.
//
//===----------------------------------------------------------------------===//
#include "pf/TrainCompile/SingleProcessStep.h"

#include "StepBuilding.h"

#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/ModuleFile.h"
#include "pf/Support/StopSignals.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/TrainCompile/AdaptiveDamping.h"
#include "pf/Train/KfacReports.h"
#include "pf/TrainCompile/Train.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstring>
#include <set>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

namespace {
class SingleProcessStep final : public TrainingStep {
public:
  SingleProcessStep(TrainConfig &config, TrainingRun &run)
      : trainingRun(run), config(config), training(config.training),
        window{training.precondition.refreshWarmup, training.kfacWindow} {}

  /// See createSingleProcessStep; false after printing the error.
  bool build();

  bool reports() const override { return true; }
  int fail(const std::string &message) override { return printError(message); }

  Parameters stateParameters() override { return model->parameters(); }
  ::pf::Status copyStateToBackend() override { return model->copyParametersToBackend(); }
  void printStart() override {
    llvm::outs() << llvm::formatv("training {0}: {1} parameters tensors, batch {2} x {3}, "
                                  "optimizer {4}{5}, step built in {6:F2} s\n",
                                  config.modelFile, model->parameters().size(), config.batch,
                                  trainingRun.corpus.seqLen, config.optimizerName,
                                  training.kfac ? " + K-FAC" : "", buildSeconds)
                        .str();
    llvm::outs().flush(); // before the loop's lines
  }

  bool stopsBefore(int64_t) override { return drv::stopRequested(); }
  bool addKfacWindowInputs(int64_t step, Batch &inputs) override {
    return window.addSingleProcessInputs(step, inputs);
  }
  ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) override;
  ::pf::Status reportStep(int64_t step, const StepResult &result) override;

  ::pf::Expected<drv::Model *> evaluationModel() override {
    return static_cast<drv::Model *>(evalModel.get());
  }
  ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) override {
    if (auto status = model->copyParametersToHost(); !status.ok())
      return status;
    return use(fromModel);
  }
  ::pf::Expected<std::optional<Batch>> checkpointState() override {
    if (auto status = model->copyParametersToHost(); !status.ok())
      return status;
    return std::optional<Batch>(stateArrays(model->parameters()));
  }

private:
  TrainingRun &trainingRun;
  const TrainConfig &config;
  const TrainingOptions &training;
  const KfacWindowRule window;

  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ScopedDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<JitModel> model;
  std::unique_ptr<JitModel> evalModel;
  double buildSeconds = 0;
  TrainedWeights trainedWeights;
  WeightLookup fromModel;

  /// The adaptive damping schedule: the K-FAC layers whose update it
  /// measures, and for an adapting step the weights before it.
  bool adaptiveDamping = false;
  std::vector<KfacModelLayer> modelLayers;
  bool adapts = false;
  WeightCopies before;

  Batch outputs;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
};
} // namespace

bool SingleProcessStep::build() {
  auto start = std::chrono::steady_clock::now();
  module = buildTrainingStep(config, trainingRun.corpus.seqLen, context, diagnostics);
  if (!module)
    return false; // printed why
  trainingRun.checkpoints.onnxNameEntries = onnxNameEntries(*module);
  // The K-FAC layers whose update the adaptive damping schedule measures
  // (read before compiling, which lowers the parameters away).
  adaptiveDamping = training.kfac && trainingRun.damping.adaptive();
  if (adaptiveDamping) {
    modelLayers = kfacModelLayers(*module);
    if (modelLayers.empty())
      return fail("--kfac-damping-schedule adaptive: the training step has no K-FAC layer"),
             false;
  }
  drv::CompiledModel::Options options;
  options.threads = config.threads;
  options.ownParameters = true;
  useDevice(config, options);
  auto compiled = drv::CompiledModel::compile(*module, options);
  if (!compiled)
    return fail(llvm::toString(compiled.takeError())), false;
  model = std::make_unique<JitModel>(std::move(*compiled));
  if (config.evalEvery > 0 || adaptiveDamping) {
    auto built = compileEvaluation(*context, config, trainingRun.corpus.seqLen);
    if (!built)
      return fail(llvm::toString(built.takeError())), false;
    evalModel = std::make_unique<JitModel>(std::move(*built));
  }
  buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto &p : model->parameters())
    trainedWeights[p.name] = p;
  fromModel = [this](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = trainedWeights.find(name);
    if (it == trainedWeights.end())
      return {nullptr, 0};
    return {it->second.data, it->second.bytes};
  };
  trainingRun.checkpoints.kfacWindow = training.kfacWindow;
  return true;
}

::pf::Expected<StepResult> SingleProcessStep::run(int64_t step, Batch &inputs) {
  // Adaptive damping: the weights before an adapting step's update.
  adapts = adaptiveDamping && step % config.dampingAdaptation.interval == 0;
  if (adapts) {
    auto start = std::chrono::steady_clock::now();
    auto copies = copyEvaluationWeights(model->compiled(), trainedWeights, *evalModel);
    if (!copies)
      return toStatus(copies.takeError());
    before = std::move(*copies);
    trainingRun.damping.modelSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (auto err = model->compiled().run(inputs, outputs))
    return toStatus(std::move(err));
  float loss;
  std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
  StepResult result;
  result.loss = loss;
  return result;
}

::pf::Status SingleProcessStep::reportStep(int64_t step, const StepResult &result) {
  if (adapts)
    if (auto err = adaptDamping(step, result.loss, trainingRun.batches.masked(step), model->compiled(),
                                trainedWeights, *evalModel, modelLayers, before, outputs,
                                config.dampingAdaptation, trainingRun.damping,
                                step % config.logEvery == 0))
      return ::pf::Status::error("step " + std::to_string(step) + ": " +
                                 llvm::toString(std::move(err)));
  return reportStepKfacIssues(step, outputs, *model, nonFiniteFactors);
}

std::unique_ptr<TrainingStep> train::createSingleProcessStep(TrainConfig &config,
                                                             TrainingRun &run) {
  auto step = std::make_unique<SingleProcessStep>(config, run);
  if (!step->build())
    return nullptr;
  return step;
}
