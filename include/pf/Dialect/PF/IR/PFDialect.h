//===- PFDialect.h - the pf dialect -----------------------------*- C++ -*-===//
#ifndef PF_DIALECT_PF_IR_PFDIALECT_H
#define PF_DIALECT_PF_IR_PFDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "pf/Dialect/PF/IR/PFOpsDialect.h.inc"

#endif // PF_DIALECT_PF_IR_PFDIALECT_H
