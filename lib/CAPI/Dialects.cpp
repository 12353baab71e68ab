//===- Dialects.cpp - the pf dialect handle -------------------------------===//
#include "pf-c/Dialects.h"

#include "pf/Dialect/PF/IR/PFDialect.h"

#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(PF, pf, mlir::pf::PFDialect)
