//===- pf-opt.cpp - the pf optimizer driver -----------------------------===//
//
// mlir-opt with the pf dialect, the pf passes and pipelines, and the MLIR
// core passes the pipelines use (canonicalize, cse, symbol-dce, ...).
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Conversion/Passes.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::pf::registerPFPasses();
  mlir::pf::registerPFPipelines();
  mlir::pf::registerPFConversionPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pf optimizer driver\n", registry));
}
