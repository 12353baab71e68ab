//===- Utils.h - helpers every pf pass uses ---------------------*- C++ -*-===//
//
// Small queries on the module that passes of every phase share: the entry
// function, named scalar arguments, the encoder block a parameter name
// belongs to.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_UTILS_H
#define PF_TRANSFORMS_UTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <optional>

namespace mlir::pf {

/// The function the passes work on: the first function with a body.
func::FuncOp getEntryFunction(ModuleOp module);

/// The function returning each stage's gradients in a module split by
/// pf-split-stages, by stage: `stage<s>_backward`, or its weight half
/// `stage<s>_backward_weight`; empty for a module that is not split.
SmallVector<func::FuncOp> stageGradientFunctions(ModuleOp module);

/// The argument of `func` named `name` (pf.name), added as a 0-d tensor of
/// `element` when missing (step and learning-rate inputs of training steps).
Value getOrAddScalarArgument(func::FuncOp func, StringRef name, Type element);

/// Whether an initializer name is one an exporter made up rather than a
/// module path: `onnx::MatMul_311` (TorchScript exporter), `val_12` /
/// `_val_12` (dynamo exporter), a node-output path (`/bert/.../Constant_output_0`)
/// or a bare number (old exporters).
bool isExporterGeneratedName(StringRef name);

/// The encoder block named in a parameter name (`encoder.layer.N.`,
/// `layers.N.`, `h.N.`, `blocks.N.`), if any.
std::optional<int64_t> encoderBlockOfName(StringRef name);

/// The encoder block of the parameter `name`: its `pf.encoder_block`
/// (pf-find-encoder-blocks found it from the graph's structure), else the
/// block its name gives.
std::optional<int64_t> encoderBlockOfParam(SymbolTable &symbols, StringRef name);

} // namespace mlir::pf

#endif // PF_TRANSFORMS_UTILS_H
