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
#include "pf/Dialect/PF/IR/PFOps.h"
#include "llvm/Support/raw_ostream.h"

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
  auto module = importONNXFile(config.modelFile, context.get(), importOptions);
  if (!module)
    explainSequenceLength(config.modelFile, sequence);
  return module;
}

/// After a failed import: when the corpus' sequences are longer than the
/// model's position table, the importer only sees shapes that do not
/// broadcast at some Add; say what is wrong. (The model again, without its
/// weights and with one token per sequence, shows the table's rows.)
void train::explainSequenceLength(llvm::StringRef modelFile, int64_t sequence) {
  MLIRContext context;
  context.loadDialect<PFDialect, func::FuncDialect>();
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  ONNXImportOptions options;
  options.loadWeights = false;
  options.dimValues["batch"] = 1;
  options.dimValues["sequence"] = 1;
  auto module = importONNXFile(modelFile, &context, options);
  if (!module)
    return;
  for (auto param : module->getOps<ParamOp>()) {
    auto type = dyn_cast<RankedTensorType>(param.getType());
    if (!type || type.getRank() != 2 || !param.getSymName().contains("position_embeddings"))
      continue;
    int64_t positions = type.getDimSize(0);
    if (positions >= 0 && sequence > positions)
      llvm::errs() << modelFile << ": error: the corpus' sequences have " << sequence
                   << " tokens but the model has " << positions << " positions ('"
                   << param.getSymName() << "' is " << positions << "x" << type.getDimSize(1)
                   << "): build the corpus with --seq-len " << positions << " or less\n";
  }
}
