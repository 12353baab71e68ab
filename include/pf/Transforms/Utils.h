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

#include <optional>

namespace mlir::pf {

/// The function the passes work on: the first function with a body.
func::FuncOp getEntryFunction(ModuleOp module);

/// The argument of `func` named `name` (pf.name), added as a 0-d tensor of
/// `element` when missing (step and learning-rate inputs of training steps).
Value getOrAddScalarArgument(func::FuncOp func, StringRef name, Type element);

/// The encoder block named in a parameter name (`encoder.layer.N.`,
/// `layers.N.`, `h.N.`, `blocks.N.`), if any.
std::optional<int64_t> encoderBlockOfName(StringRef name);

/// Tags of pf-build-gradients{tag-origin=true}, read by pf-split-stages: the id
/// of a differentiated forward op, the id on each op of its gradient rule, and
/// the mark of a sum of partial gradients of one value.
inline constexpr llvm::StringLiteral kGradIdAttrName = "pf.grad_id";
inline constexpr llvm::StringLiteral kGradOfAttrName = "pf.grad_of";
inline constexpr llvm::StringLiteral kGradSumAttrName = "pf.grad_sum";

} // namespace mlir::pf

#endif // PF_TRANSFORMS_UTILS_H
