//===- Diagnostics.cpp - diagnostics handed to a C API caller -------------===//
#include "Diagnostics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/SymbolTable.h"

bool mlir::pf::capi::checkSharedTypeIDs(MLIRContext *context, DiagnosticCapture &diagnostics) {
  // Asked through the Operation (not ModuleOp's compile-time trait list),
  // libMLIR.so answers against its TypeID of OpTrait::SymbolTable; the
  // question carries pf's.
  OwningOpRef<ModuleOp> probe = ModuleOp::create(UnknownLoc::get(context));
  if (probe->getOperation()->hasTrait<OpTrait::SymbolTable>())
    return true;
  diagnostics.error("libPFCAPI.so and libMLIR.so disagree on MLIR's TypeIDs: libMLIR.so was "
                    "loaded into another local symbol scope (dlopen RTLD_LOCAL) before "
                    "libPFCAPI.so; load libPFCAPI.so first or libMLIR.so globally "
                    "(docs/embedding.md)");
  return false;
}
