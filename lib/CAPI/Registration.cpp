//===- Registration.cpp - pf's dialects, passes and pipelines -------------===//
#include "pf-c/Registration.h"

#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/Passes.h"

void pfRegisterAllDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<mlir::pf::PFDialect, mlir::func::FuncDialect,
                           mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect,
                           mlir::LLVM::LLVMDialect>();
}

void pfRegisterAllPasses(void) {
  // A pipeline may be registered once only.
  static const bool registered = [] {
    mlir::registerTransformsPasses();
    mlir::pf::registerPFPasses();
    mlir::pf::registerPFPipelines();
    mlir::pf::registerPFConversionPasses();
    return true;
  }();
  (void)registered;
}
