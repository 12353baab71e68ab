//===- Pipelines.cpp - lowering pipeline to the LLVM dialect ---------------===//
#include "pf/Conversion/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Pass/PassManager.h"

void mlir::pf::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createPFLowerToRuntime());
  buildStandardLLVMLoweringPipeline(pm);
}

void mlir::pf::buildStandardLLVMLoweringPipeline(OpPassManager &pm) {
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}
