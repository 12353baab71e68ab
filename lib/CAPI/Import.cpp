//===- Import.cpp - ONNX models into pf IR through the C API --------------===//
#include "pf-c/Import.h"

#include "Diagnostics.h"

#include "pf/Import/ONNXImporter.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <vector>

using namespace mlir;

PfImportOptions pfImportOptionsGetDefault(void) {
  PfImportOptions options;
  options.dims = nullptr;
  options.numDims = 0;
  options.shapes = nullptr;
  options.numShapes = 0;
  options.loadWeights = true;
  options.graphPasses = true;
  options.allowDynamic = false;
  options.entryName = nullptr;
  return options;
}

namespace {
/// The C strings `values[0..count)`; false (and `error`) on a null entry.
bool readStrings(const char *const *values, intptr_t count, const char *what,
                 std::vector<std::string> &strings, std::string &error) {
  if (count < 0 || (count > 0 && !values)) {
    error = std::string("the import options' ") + what + " list is null or negative";
    return false;
  }
  for (intptr_t i = 0; i < count; ++i) {
    if (!values[i]) {
      error = std::string("the import options' ") + what + " entry " + std::to_string(i) +
              " is null";
      return false;
    }
    strings.emplace_back(values[i]);
  }
  return true;
}

/// The importer's options from the C ones; false (and `error`) when one is
/// malformed.
bool convertOptions(const PfImportOptions &from, pf::ONNXImportOptions &to,
                    std::string &error) {
  std::vector<std::string> dims, shapes;
  if (!readStrings(from.dims, from.numDims, "dims", dims, error) ||
      !readStrings(from.shapes, from.numShapes, "shapes", shapes, error) ||
      !pf::parseDimensionOptions(shapes, dims, to, error))
    return false;
  to.loadWeights = from.loadWeights;
  to.allowDynamic = from.allowDynamic;
  if (from.entryName)
    to.entryName = from.entryName;
  if (to.entryName.empty()) {
    error = "the import options' entry name is empty";
    return false;
  }
  return true;
}
} // namespace

MlirModule pfImportONNXFile(MlirContext context, MlirStringRef path,
                            const PfImportOptions *options, MlirStringCallback onError,
                            void *userData) {
  MLIRContext *ctx = unwrap(context);
  std::string file = unwrap(path).str();
  pf::capi::DiagnosticCapture diagnostics(ctx, file);
  if (!pf::capi::checkSharedTypeIDs(ctx, diagnostics)) {
    diagnostics.report(onError, userData);
    return MlirModule{nullptr};
  }
  const PfImportOptions given = options ? *options : pfImportOptionsGetDefault();
  pf::ONNXImportOptions importOptions;
  std::string error;
  if (!convertOptions(given, importOptions, error)) {
    diagnostics.error(error);
    diagnostics.report(onError, userData);
    return MlirModule{nullptr};
  }
  OwningOpRef<ModuleOp> module = pf::importONNXFile(file, ctx, importOptions);
  if (!module) {
    diagnostics.fail("cannot import '" + file + "'", onError, userData);
    return MlirModule{nullptr};
  }
  PassManager pm(ctx);
  pf::buildPostImportPipeline(pm, given.graphPasses, /*requireStatic=*/!given.allowDynamic);
  if (failed(pm.run(*module))) {
    diagnostics.fail("the graph passes failed on '" + file + "'", onError, userData);
    return MlirModule{nullptr};
  }
  diagnostics.report(onError, userData);
  return wrap(module.release());
}
