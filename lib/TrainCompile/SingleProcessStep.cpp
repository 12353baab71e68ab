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
#include "pf/Train/KfacReports.h"
#include "pf/TrainCompile/Train.h"
#include "pf/Train/SingleModelStep.h"
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
/// The single-process step over MLIR's JIT (SingleModelStep).
class SingleProcessStep final : public SingleModelStep {
public:
  SingleProcessStep(TrainConfig &config, TrainingRun &run)
      : SingleModelStep(run), config(config), training(config.training) {}

  /// See createSingleProcessStep; false after printing the error.
  bool build();

  int fail(const std::string &message) override { return printError(message); }
  void printStart() override {
    llvm::outs() << llvm::formatv("training {0}: {1} parameters tensors, batch {2} x {3}, "
                                  "optimizer {4}{5}, step built in {6:F2} s\n",
                                  config.modelFile, model->parameters().size(), config.batch,
                                  trainingRun.corpus.seqLen, config.optimizerName,
                                  training.kfac ? " + K-FAC" : "", buildSeconds)
                        .str();
    llvm::outs().flush(); // before the loop's lines
  }

private:
  const TrainConfig &config;
  const TrainingOptions &training;

  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ScopedDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<JitModel> stepModel, evalModel;
  double buildSeconds = 0;
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
  const bool adaptiveDamping = training.kfac && trainingRun.damping.adaptive();
  std::vector<KfacModelLayer> layers;
  if (adaptiveDamping) {
    layers = kfacModelLayers(*module);
    if (layers.empty())
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
  stepModel = std::make_unique<JitModel>(std::move(*compiled));
  if (config.evalEvery > 0 || adaptiveDamping) {
    auto built = compileEvaluation(*context, config, trainingRun.corpus.seqLen);
    if (!built)
      return fail(llvm::toString(built.takeError())), false;
    evalModel = std::make_unique<JitModel>(std::move(*built));
  }
  buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  useModels(*stepModel, evalModel.get());
  if (adaptiveDamping)
    if (auto status = useAdaptiveDamping(std::move(layers)); !status.ok())
      return fail(status.message()), false;
  return true;
}

std::unique_ptr<TrainingStep> train::createSingleProcessStep(TrainConfig &config,
                                                             TrainingRun &run) {
  auto step = std::make_unique<SingleProcessStep>(config, run);
  if (!step->build())
    return nullptr;
  return step;
}
