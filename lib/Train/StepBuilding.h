//===- StepBuilding.h - Options every compiled model of a run shares -*- C++ -*-===//
//
// Internal to lib/Train: the training step, the pipeline's stage programs
// and the evaluation model are built from the same graph passes and run on
// the same device.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_STEPBUILDING_H
#define PF_TRAIN_STEPBUILDING_H

#include "pf/Driver/Runner.h"
#include "pf/Train/TrainConfig.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>

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

/// After a failed import of `modelFile` for sequences of `sequence` tokens:
/// an error line when the model's position table is shorter.
void explainSequenceLength(llvm::StringRef modelFile, int64_t sequence);

} // namespace mlir::pf::train

#endif // PF_TRAIN_STEPBUILDING_H
