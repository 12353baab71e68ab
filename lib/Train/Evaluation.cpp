//===- Evaluation.cpp - Held-out evaluation -------------------------------===//
#include "pf/Train/Evaluation.h"

#include "StepBuilding.h"

#include "pf/Import/ONNXImporter.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

void train::useDevice(const TrainConfig &config, drv::CompiledModel::Options &options) {
  options.backend = config.device == "cuda" ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  options.deviceBuffers = config.deviceBuffers;
  options.gemmPrecision = int32_t(config.gemmPrecision);
}

llvm::Expected<std::unique_ptr<drv::CompiledModel>>
train::compileEvaluation(MLIRContext &context, const TrainConfig &config, int64_t seqLen) {
  ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = config.batch;
  importOptions.dimValues["sequence"] = seqLen;
  OwningOpRef<ModuleOp> module = importONNXFile(config.modelFile, &context, importOptions);
  PassManager pm(&context);
  buildGraphOptPipeline(pm, graphOptions(config));
  pm.addPass(createPFAddMaskedLMLoss());
  if (!module || failed(pm.run(*module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "building the evaluation step failed");
  drv::CompiledModel::Options options;
  options.threads = config.threads;
  options.ownParameters = true;
  useDevice(config, options);
  return drv::CompiledModel::compile(*module, options);
}

llvm::Error train::loadEvaluationWeights(const WeightLookup &current, drv::CompiledModel &eval) {
  for (auto &p : eval.parameters()) {
    auto [data, bytes] = current(p.name);
    if (!data || bytes != p.bytes)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "evaluation: the training step has no parameter '" +
                                         p.name + "' of the same size");
    std::memcpy(p.data, data, p.bytes);
  }
  return eval.copyParametersToBackend();
}

llvm::Expected<double> train::evaluateHeldOut(const BatchMaker &batches,
                                              const WeightLookup &current,
                                              drv::CompiledModel &eval) {
  if (auto err = loadEvaluationWeights(current, eval))
    return std::move(err);
  double weighted = 0;
  int64_t counted = 0;
  Batch outputs;
  for (int64_t index = 0; index < batches.heldOutBatches(); ++index) {
    Batch inputs = batches.heldOut(index);
    if (auto err = eval.run(inputs, outputs))
      return std::move(err);
    const auto *labels = reinterpret_cast<const int64_t *>(inputs["labels"].data.data());
    int64_t count = std::count_if(labels, labels + inputs["labels"].numElements(),
                                  [](int64_t l) { return l != -100; });
    float loss;
    std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
    weighted += double(loss) * double(count);
    counted += count;
  }
  return counted ? weighted / double(counted) : 0.0;
}
