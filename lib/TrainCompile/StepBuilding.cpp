//===- StepBuilding.cpp - What every compiled step of a run starts from --===//
//
// The model import, the evaluation model, the schedules' step inputs and the
// bridges to the loop's interfaces that the single-process and the
// pipelined step share.
//
//===----------------------------------------------------------------------===//
#include "StepBuilding.h"

#include "pf/Dialect/PF/IR/PFAttrNames.h"
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/ModuleFile.h"
#include "pf/TrainCompile/Train.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

OwningOpRef<ModuleOp>
train::importStepModel(const TrainConfig &config, int64_t rows, int64_t sequence,
                       std::unique_ptr<MLIRContext> &context,
                       std::unique_ptr<ScopedDiagnosticHandler> &diagnostics) {
  DialectRegistry registry;
  registry.insert<PFDialect, func::FuncDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect>();
  context = std::make_unique<MLIRContext>(registry);
  context->printOpOnDiagnostic(false);
  diagnostics = std::make_unique<ScopedDiagnosticHandler>(
      context.get(), [modelFile = config.modelFile](Diagnostic &diag) {
        return driver::printDiagnostic(diag, modelFile);
      });
  ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = rows;
  importOptions.dimValues["sequence"] = sequence;
  auto module = importONNXFile(config.modelFile, context.get(), importOptions);
  if (!module)
    explainSequenceLength(config.modelFile, sequence);
  return module;
}

/// After a failed import: when the corpus' sequences are longer than the
/// model's position table, the importer only sees shapes that do not
/// broadcast at some Add; say what is wrong. (The model again, without its
/// weights and with one token per sequence, shows the table's rows.)
void train::explainSequenceLength(llvm::StringRef modelFile, int64_t sequence) {
  MLIRContext context;
  context.loadDialect<PFDialect, func::FuncDialect>();
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  ONNXImportOptions options;
  options.loadWeights = false;
  options.dimValues["batch"] = 1;
  options.dimValues["sequence"] = 1;
  auto module = importONNXFile(modelFile, &context, options);
  if (!module)
    return;
  for (auto param : module->getOps<ParamOp>()) {
    auto type = dyn_cast<RankedTensorType>(param.getType());
    if (!type || type.getRank() != 2 || !param.getSymName().contains("position_embeddings"))
      continue;
    int64_t positions = type.getDimSize(0);
    if (positions >= 0 && sequence > positions)
      llvm::errs() << modelFile << ": error: the corpus' sequences have " << sequence
                   << " tokens but the model has " << positions << " positions ('"
                   << param.getSymName() << "' is " << positions << "x" << type.getDimSize(1)
                   << "): build the corpus with --seq-len " << positions << " or less\n";
  }
}

void train::useDevice(const TrainConfig &config, drv::CompiledModel::Options &options) {
  options.backend = config.device == "cuda" ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  options.deviceBuffers = config.deviceBuffers;
  options.gemmPrecision = int32_t(config.gemmPrecision);
}

OwningOpRef<ModuleOp>
train::buildTrainingStep(const TrainConfig &config, int64_t seqLen,
                         std::unique_ptr<MLIRContext> &context,
                         std::unique_ptr<ScopedDiagnosticHandler> &diagnostics) {
  OwningOpRef<ModuleOp> module = importStepModel(
      config, config.batch / config.training.microbatches, seqLen, context, diagnostics);
  if (!module)
    return nullptr; // the diagnostics said why
  PassManager pm(context.get());
  buildGraphOptPipeline(pm, graphOptions(config));
  buildTrainingPipeline(pm, config.training);
  if (failed(pm.run(*module))) {
    printError("building the training step failed");
    return nullptr;
  }
  if (!config.emitStepFile.empty())
    if (auto err = drv::writeModuleFile(*module, config.emitStepFile, "--emit-step")) {
      printError(llvm::toString(std::move(err)));
      return nullptr;
    }
  return module;
}

llvm::Expected<OwningOpRef<ModuleOp>>
train::buildEvaluation(MLIRContext &context, const TrainConfig &config, int64_t seqLen) {
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
  return std::move(module);
}

llvm::Expected<std::unique_ptr<drv::CompiledModel>>
train::compileEvaluation(MLIRContext &context, const TrainConfig &config, int64_t seqLen) {
  auto module = buildEvaluation(context, config, seqLen);
  if (!module)
    return module.takeError();
  drv::CompiledModel::Options options;
  options.threads = config.threads;
  options.ownParameters = true;
  useDevice(config, options);
  return drv::CompiledModel::compile(**module, options);
}

std::vector<KfacModelLayer> train::kfacModelLayers(ModuleOp module) {
  std::vector<KfacModelLayer> layers;
  for (auto param : module.getOps<ParamOp>()) {
    auto weight = param->getAttrOfType<StringAttr>(kKfacWeightAttrName);
    if (!weight)
      continue;
    auto bias = param->getAttrOfType<StringAttr>(kKfacBiasAttrName);
    StringRef name = param.getSymName();
    KfacModelLayer layer;
    layer.weight = weight.str();
    layer.bias = bias ? bias.str() : "";
    layer.weightInOut = param->hasAttr(kKfacWeightInOutAttrName);
    if (name.ends_with(".kfac.A")) {
      layer.factorA = name.str();
      layer.factorB = layer.weight + ".kfac.B";
    } else if (name.ends_with(".kfac.F")) {
      layer.kind = KfacModelLayer::Kind::LayerNorm;
      layer.factorA = name.str();
    } else {
      continue;
    }
    layers.push_back(std::move(layer));
  }
  return layers;
}

std::map<std::string, std::string> train::onnxNameEntries(ModuleOp module) {
  std::map<std::string, std::string> entries;
  for (auto param : module.getOps<ParamOp>()) {
    std::string name = param.getSymName().str();
    if (auto onnxName = param->getAttrOfType<StringAttr>(kOnnxNameAttrName))
      entries["meta/onnx_name/" + name] = onnxName.str();
    if (auto copies = param->getAttrOfType<ArrayAttr>(kOnnxTransposedCopiesAttrName))
      for (auto copy : copies.getAsValueRange<StringAttr>())
        entries["meta/transposed_copy/" + copy.str()] = name;
  }
  return entries;
}

llvm::Error train::prepareDampingSchedule(TrainConfig &config, bool inBubbles) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  TrainingOptions &training = config.training;
  const DampingSchedule dampingSchedule = config.dampingSchedule;
  if (dampingSchedule == DampingSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-damping-schedule schedules K-FAC's damping: it needs --kfac");
  if (inBubbles)
    return error("--kfac-damping-schedule with K-FAC in the bubbles (--kfac-window, "
                 "kfac=bubbles) is not supported yet: a window's inverses are computed over "
                 "several steps");
  if (!(training.precondition.damping > 0))
    return error("--kfac-damping-schedule needs --kfac-damping > 0 (the final λ)");
  if (dampingSchedule == DampingSchedule::Warmup &&
      !(config.dampingStart > 0 && config.dampingWarmup >= 1))
    return error(llvm::formatv("--kfac-damping-schedule warmup needs --kfac-damping-start > 0 "
                               "and --kfac-damping-warmup >= 1 (got {0} and {1})",
                               config.dampingStart, config.dampingWarmup));
  if (dampingSchedule == DampingSchedule::Step &&
      !(config.dampingDecay > 0 && config.dampingDecay <= 1 && config.dampingEvery >= 1))
    return error(llvm::formatv("--kfac-damping-schedule step needs --kfac-damping-decay in "
                               "(0, 1] and --kfac-damping-every >= 1 (got {0} and {1})",
                               config.dampingDecay, config.dampingEvery));
  if (dampingSchedule == DampingSchedule::Adaptive) {
    const DampingAdaptation &rule = config.dampingAdaptation;
    if (!(rule.interval >= 1 && rule.decay > 0 && rule.decay < 1))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs "
                                 "--kfac-damping-interval >= 1 and "
                                 "--kfac-damping-adaptation-decay in (0, 1) (got {0} and {1})",
                                 rule.interval, rule.decay));
    const double initial = training.precondition.damping;
    if (!(rule.min > 0 && rule.min <= initial && initial <= rule.max && std::isfinite(rule.max)))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs 0 < --kfac-damping-min "
                                 "<= --kfac-damping <= --kfac-damping-max < inf (got {0}, {1} "
                                 "and {2})",
                                 rule.min, initial, rule.max));
    // The gradient term of the quadratic model: each K-FAC layer's raw gradient.
    training.precondition.rawGradients = true;
  }
  training.precondition.dampingInput = true;
  return llvm::Error::success();
}

llvm::Error train::prepareIntervalSchedule(TrainConfig &config) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  TrainingOptions &training = config.training;
  if (config.intervalSchedule == IntervalSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-interval-schedule schedules K-FAC's intervals: it needs --kfac");
  // K-FAC in the bubbles (--kfac-window, --pipeline "kfac=bubbles", checked
  // with the pipeline's options) decides its steps by its windows.
  if (training.kfacWindow > 0)
    return error("--kfac-interval-schedule: not with --kfac-window, whose windows decide the "
                 "steps");
  if (config.intervalGrowth < 1 || config.intervalEvery < 1 || config.intervalMax < 1)
    return error(llvm::formatv("--kfac-interval-growth, --kfac-interval-every and "
                               "--kfac-interval-max must be >= 1 (got {0}, {1} and {2})",
                               config.intervalGrowth, config.intervalEvery,
                               config.intervalMax));
  training.precondition.refreshInput = true;
  // The pipeline builder gates the factor updates on kfac_curvature when F
  // is not 1; a schedule needs the gate whatever F is.
  training.precondition.curvatureInput = true;
  return llvm::Error::success();
}

void TrainConfig::fixStepFacts() {
  step.microbatches = training.microbatches;
  step.predictions = training.loss.predictions;
  step.kfac = training.kfac;
  step.kfacWindow = training.kfacWindow;
  step.kfacFactorEvery = training.kfacFactorEvery;
  step.refreshWarmup = training.precondition.refreshWarmup;
  step.refreshEvery = training.precondition.refreshEvery;
  step.damping = training.precondition.damping;
  step.dampingInput = training.precondition.dampingInput;
  step.curvatureInput = training.precondition.curvatureInput;
  step.refreshInput = training.precondition.refreshInput;
}

::pf::Status train::toStatus(llvm::Error error) {
  if (!error)
    return ::pf::Status::success();
  return ::pf::Status::error(llvm::toString(std::move(error)));
}

llvm::Error train::toError(const ::pf::Status &status) {
  if (status.ok())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), status.message());
}

::pf::Status JitModel::copyParametersToHost() { return toStatus(model->copyParametersToHost()); }

::pf::Status JitModel::copyParametersToBackend() {
  return toStatus(model->copyParametersToBackend());
}

::pf::Status JitModel::run(const drv::NamedArrays &inputs, drv::NamedArrays &outputs) {
  return toStatus(model->run(inputs, outputs));
}
