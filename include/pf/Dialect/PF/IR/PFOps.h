//===- PFOps.h - pf operations ----------------------------------*- C++ -*-===//
#ifndef PF_DIALECT_PF_IR_PFOPS_H
#define PF_DIALECT_PF_IR_PFOPS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pf/Dialect/PF/IR/PFAttrNames.h"
#include "pf/Dialect/PF/IR/PFDialect.h"

namespace mlir::pf {
/// True when each pair of types has the same element type and compatible
/// shapes (one may be less refined than the other).
bool areCompatibleTensorTypes(TypeRange lhs, TypeRange rhs);
/// Size in bytes of a statically shaped tensor type, 0 otherwise.
double tensorBytes(Type type);
/// pf.gelu and pf.gelu_grad: `approximate` is "none" or "tanh".
LogicalResult verifyGeluApproximation(Operation *op, StringRef approximate);
} // namespace mlir::pf

#include "pf/Dialect/PF/IR/PFInterfaces.h.inc"
#include "pf/Dialect/PF/IR/PFProgramEnums.h.inc"
#include "pf/Dialect/PF/IR/PFTensorEnums.h.inc"

#define GET_OP_CLASSES
#include "pf/Dialect/PF/IR/PFOps.h.inc"

#endif // PF_DIALECT_PF_IR_PFOPS_H
