//===- StepBuilding.h - Options every compiled model of a run shares -*- C++ -*-===//
//
// Internal to lib/TrainCompile: the training step, the pipeline's stage
// programs and the evaluation model are built from the same graph passes and
// run on the same device; the loop (lib/Train) sees them through its
// LLVM-free interfaces (TrainingStep, driver::Model, pf::Status).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAINCOMPILE_STEPBUILDING_H
#define PF_TRAINCOMPILE_STEPBUILDING_H

#include "pf/Driver/Runner.h"
#include "pf/Support/Model.h"
#include "pf/Train/DampingAdaptation.h"
#include "pf/TrainCompile/TrainConfig.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <memory>
#include <string>

namespace mlir::pf::train {

/// The graph passes run on the imported model.
inline GraphOptOptions graphOptions(const TrainConfig &config) {
  return GraphOptOptions{true, true, true, !config.noRetie};
}

/// --device, --device-buffers and --gemm-precision into a model's options.
void useDevice(const TrainConfig &config, driver::CompiledModel::Options &options);

/// The model of config.modelFile imported for `rows` rows of `sequence`
/// tokens (one micro-batch), into a new `context` with the dialects a step
/// lowers through; `diagnostics` prints the context's diagnostics against
/// the model file. Null when the import failed (the diagnostics said why).
OwningOpRef<ModuleOp> importStepModel(const TrainConfig &config, int64_t rows, int64_t sequence,
                                      std::unique_ptr<MLIRContext> &context,
                                      std::unique_ptr<ScopedDiagnosticHandler> &diagnostics);

/// Parses and checks --pipeline and what it rules out, and prepares the
/// damping schedule of a pipelined run (its `stages` stays 0 unless given:
/// the job's size). std::nullopt after printing why.
std::optional<PipelineRunOptions> preparePipeline(TrainConfig &config);

/// The pipelined training step of `config.modelFile`: imported, the graph
/// optimized, the stages, K-FAC work and rank programs built for
/// `pipeline` (the step's gradients stay in the programs). Null after the
/// diagnostics.
OwningOpRef<ModuleOp>
buildPipelinedStepModule(const TrainConfig &config, const PipelineRunOptions &pipeline,
                         int64_t seqLen, std::unique_ptr<MLIRContext> &context,
                         std::unique_ptr<ScopedDiagnosticHandler> &diagnostics);

/// The training step of config.training for sequences of `seqLen` tokens
/// (pf IR after the pf-training pipeline; --emit-step writes it), in a new
/// `context` (importStepModel). Null after printing why.
OwningOpRef<ModuleOp> buildTrainingStep(const TrainConfig &config, int64_t seqLen,
                                        std::unique_ptr<MLIRContext> &context,
                                        std::unique_ptr<ScopedDiagnosticHandler> &diagnostics);

/// The evaluation model: the forward pass and masked-LM loss at batch
/// --batch over sequences of `seqLen`.
llvm::Expected<OwningOpRef<ModuleOp>> buildEvaluation(MLIRContext &context,
                                                      const TrainConfig &config, int64_t seqLen);

/// buildEvaluation JIT-compiled, with its own copy of the weights.
llvm::Expected<std::unique_ptr<driver::CompiledModel>>
compileEvaluation(MLIRContext &context, const TrainConfig &config, int64_t seqLen);

/// The K-FAC layers pf-insert-kfac prepared in `module` (its `.kfac.A` and
/// `.kfac.F` parameters), in module order: what the adaptive damping's
/// quadratic model reads.
std::vector<KfacModelLayer> kfacModelLayers(ModuleOp module);

/// The checkpoints' `meta/onnx_name/<param>` and
/// `meta/transposed_copy/<initializer>` entries of the step `module`
/// (Checkpoints::onnxNameEntries).
std::map<std::string, std::string> onnxNameEntries(ModuleOp module);

/// A JIT-compiled model as the loop runs it (driver::Model).
class JitModel final : public driver::Model {
public:
  explicit JitModel(std::unique_ptr<driver::CompiledModel> model) : model(std::move(model)) {}
  driver::CompiledModel &compiled() { return *model; }

  std::vector<driver::ModelParameter> parameters() const override { return model->parameters(); }
  ::pf::Status copyParametersToHost() override;
  ::pf::Status copyParametersToBackend() override;
  ::pf::Status run(const driver::NamedArrays &inputs, driver::NamedArrays &outputs) override;

private:
  std::unique_ptr<driver::CompiledModel> model;
};

/// The loop's error values from the compiler's and back.
::pf::Status toStatus(llvm::Error error);
llvm::Error toError(const ::pf::Status &status);

/// After a failed import of `modelFile` for sequences of `sequence` tokens:
/// an error line when the model's position table is shorter.
void explainSequenceLength(llvm::StringRef modelFile, int64_t sequence);

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_STEPBUILDING_H
