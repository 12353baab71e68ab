//===- pf-translate.cpp - import models into the pf dialect ---------------===//
//
//   pf-translate --import-onnx model.onnx --dim batch=8 --dim sequence=128 -o model.mlir
//
// Imports the model, runs the graph passes (pf-graph-opt) unless --no-graph-opt,
// and prints the module (text or bytecode) and/or a summary.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/OutputFiles.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("pf-translate options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx | model.onnxtext>"),
                                      cl::Required, cl::cat(category));
static cl::opt<bool> importOnnx("import-onnx",
                                cl::desc("Import an ONNX model (binary .onnx with optional "
                                         "external data, or text .onnxtext)"),
                                cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                       cl::value_desc("file"), cl::init("-"), cl::cat(category));
static cl::list<std::string> shapes("shape",
                                    cl::desc("Fix a graph input's shape: NAME=DxDx... "
                                             "(repeatable)"),
                                    cl::value_desc("name=8x128"), cl::cat(category));
static cl::list<std::string> dims("dim",
                                  cl::desc("Fix a symbolic dimension everywhere: NAME=N "
                                           "(repeatable)"),
                                  cl::value_desc("batch=8"), cl::cat(category));
static cl::opt<bool> noWeights("no-weights",
                               cl::desc("Import shapes only; never read initializer data"),
                               cl::cat(category));
static cl::opt<bool> noGraphOpt("no-graph-opt",
                                cl::desc("Keep the raw imported ops (only shapes are inferred)"),
                                cl::cat(category));
static cl::opt<bool> noRetie("no-retie",
                             cl::desc("Keep an exporter's folded transposed copy of a "
                                      "parameter (the tied decoder) apart from it"),
                             cl::cat(category));
static cl::opt<bool> allowDynamic("allow-dynamic",
                                  cl::desc("Accept dynamic input dimensions (the result "
                                           "cannot be scheduled or run)"),
                                  cl::cat(category));
static cl::opt<std::string> entryName("entry", cl::desc("Name of the generated function"),
                                      cl::init("main"), cl::cat(category));
static cl::opt<bool> summary("summary",
                             cl::desc("Print a summary instead of the IR (the IR is still "
                                      "written when -o names a file)"),
                             cl::cat(category));
static cl::opt<bool> summaryJson("summary-json", cl::desc("Print the summary as JSON"),
                                 cl::cat(category));
static cl::opt<std::string> pipelineOptions(
    "pipeline",
    cl::desc("After import, partition and schedule in one go: the options of "
             "pf-pipeline, e.g. --pipeline=\"stages=8 microbatches=8 schedule=chimera "
             "kfac=bubbles policy=pf device=p100 svg=t.svg\""),
    cl::value_desc("options"), cl::cat(category));
static cl::opt<bool> emitBytecode("emit-bytecode",
                                  cl::desc("Write MLIR bytecode (weights stored in binary)"),
                                  cl::cat(category));

namespace {
LogicalResult parseOptions(mlir::pf::ONNXImportOptions &options) {
  std::string error;
  if (!mlir::pf::parseDimensionOptions(shapes, dims, options, error)) {
    llvm::errs() << "pf-translate: error: " << error << "\n";
    return failure();
  }
  options.loadWeights = !noWeights;
  options.allowDynamic = allowDynamic;
  options.entryName = entryName;
  return success();
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "pf-translate: import models into the pf dialect\n");

  if (!importOnnx) {
    llvm::errs() << "pf-translate: error: choose a translation (--import-onnx)\n";
    return 1;
  }
  mlir::pf::ONNXImportOptions options;
  if (failed(parseOptions(options)))
    return 1;

  DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    return mlir::pf::driver::printDiagnostic(diag, inputFile);
  });

  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();

  TimingScope importTimer = root.nest("ONNX import");
  OwningOpRef<ModuleOp> module = mlir::pf::importONNXFile(inputFile, &context, options);
  importTimer.stop();
  if (!module)
    return 1;

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  pm.enableTiming(root);
  bool requireStatic = !allowDynamic;
  mlir::pf::buildPostImportPipeline(pm, !noGraphOpt, requireStatic, !noRetie);
  if (summary || summaryJson)
    pm.addPass(mlir::pf::createPFPrintSummary(mlir::pf::PFPrintSummaryOptions{summaryJson.getValue()}));
  if (pipelineOptions.getNumOccurrences() > 0) {
    mlir::pf::registerPFPipelines();
    // The graph passes (with static shapes required) ran above already.
    bool graphOptDone = !noGraphOpt && requireStatic;
    std::string text = "pf-pipeline{" + std::string(graphOptDone ? "graph-opt=false " : "") +
                       pipelineOptions + "}";
    if (failed(parsePassPipeline(text, pm, llvm::errs()))) {
      llvm::errs() << "pf-translate: error: bad --pipeline options '" << pipelineOptions
                   << "'\n";
      return 1;
    }
  }
  if (failed(pm.run(*module)))
    return 1;

  bool writeIR = !(summary || summaryJson) || outputFile != "-";
  if (!writeIR)
    return 0;
  bool written = true;
  if (auto err = mlir::pf::driver::writeOutputFile(
          outputFile, "-o", [&](llvm::raw_pwrite_stream &os) {
            if (emitBytecode) {
              written = succeeded(writeBytecodeToFile(*module, os));
            } else {
              module->print(os);
              os << "\n";
            }
          })) {
    llvm::errs() << "pf-translate: error: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  return written ? 0 : 1;
}
