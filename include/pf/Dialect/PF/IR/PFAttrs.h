//===- PFAttrs.h - pf attributes (the runtime plan) -------------*- C++ -*-===//
#ifndef PF_DIALECT_PF_IR_PFATTRS_H
#define PF_DIALECT_PF_IR_PFATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "pf/Dialect/PF/IR/PFDialect.h"

#include <optional>

#include "pf/Dialect/PF/IR/PFEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pf/Dialect/PF/IR/PFAttrs.h.inc"

#endif // PF_DIALECT_PF_IR_PFATTRS_H
