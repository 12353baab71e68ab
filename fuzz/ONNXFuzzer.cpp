//===- ONNXFuzzer.cpp - bytes -> importONNXFile ----------------------------===//
//
// The bytes become a model file next to a fixed external-data file
// (weights.bin); the importer runs once with and once without weights, like
// pf-translate --import-onnx [--no-weights]. The symbolic dimensions the
// test models use (batch, sequence) get small values, so fuzzed graphs get
// past input resolution; a text model's `--dim NAME=N` and `--shape
// NAME=DxD` (the lit tests' RUN lines) are applied too. A module the
// importer returns must verify.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Import/ONNXImporter.h"

#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

namespace pf::fuzz {
namespace {
/// The values of the `--dim` and `--shape` flags in `text` (RUN lines).
void dimensionFlags(llvm::StringRef text, std::vector<std::string> &shapes,
                    std::vector<std::string> &dims) {
  for (auto [flag, values] : {std::pair{llvm::StringRef("--shape "), &shapes},
                              std::pair{llvm::StringRef("--dim "), &dims}})
    for (size_t at = text.find(flag); at != llvm::StringRef::npos;
         at = text.find(flag, at + flag.size()))
      values->push_back(text.drop_front(at + flag.size())
                            .take_until([](char c) { return c == ' ' || c == '\n'; })
                            .str());
}

void importBoth(const std::string &path, llvm::StringRef text = {}) {
  for (bool weights : {true, false}) {
    mlir::DialectRegistry registry;
    registry.insert<mlir::pf::PFDialect, mlir::func::FuncDialect>();
    mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
    // Errors are the expected outcome for most inputs; keep them quiet.
    mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &diag) {
      if (verbose())
        llvm::errs() << diag.getLocation() << ": " << diag << "\n";
    });
    mlir::pf::ONNXImportOptions options;
    options.loadWeights = weights;
    options.dimValues["batch"] = 2;
    options.dimValues["sequence"] = 8;
    options.dimValues["N"] = 2; // the text tests' names
    options.dimValues["seq"] = 8;
    std::vector<std::string> shapes, dims;
    dimensionFlags(text, shapes, dims);
    std::string error;
    if (!mlir::pf::parseDimensionOptions(shapes, dims, options, error))
      return; // as the tools refuse malformed flags
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::pf::importONNXFile(path, &context, options);
    if (module && mlir::failed(mlir::verify(*module)))
      __builtin_trap(); // the importer built IR that does not verify
  }
}
} // namespace

int fuzzONNX(const uint8_t *data, size_t size) {
  importBoth(writeScratchFile("model.onnx", data, size));
  return 0;
}

int fuzzONNXText(const uint8_t *data, size_t size) {
  importBoth(writeScratchFile("model.onnxtext", data, size),
             llvm::StringRef(reinterpret_cast<const char *>(data), size));
  return 0;
}

} // namespace pf::fuzz
