//===- StepBuilding.cpp - What every compiled step of a run starts from --===//
//
// The model import the single-process and the pipelined step share.
//
//===----------------------------------------------------------------------===//
#include "StepBuilding.h"

#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Import/ONNXImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::pf;

OwningOpRef<ModuleOp>
train::importStepModel(const TrainConfig &config, int64_t rows, int64_t sequence,
                       std::unique_ptr<MLIRContext> &context,
                       std::unique_ptr<ScopedDiagnosticHandler> &diagnostics) {
  DialectRegistry registry;
  registry.insert<PFDialect, func::FuncDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect>();
  context = std::make_unique<MLIRContext>(registry);
  context->printOpOnDiagnostic(false);
  diagnostics = std::make_unique<ScopedDiagnosticHandler>(
      context.get(), [modelFile = config.modelFile](Diagnostic &diag) {
        return driver::printDiagnostic(diag, modelFile);
      });
  ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = rows;
  importOptions.dimValues["sequence"] = sequence;
  return importONNXFile(config.modelFile, context.get(), importOptions);
}
