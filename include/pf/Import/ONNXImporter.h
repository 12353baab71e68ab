//===- ONNXImporter.h - ONNX model -> pf dialect ----------------*- C++ -*-===//
//
// The importer reads binary .onnx (with external data) and .onnxtext models and
// builds a module with one func.func holding pf ops, one pf.param per trainable
// initializer (data as dense_resource blobs) and pf.constant for small integer
// initializers. Shapes are made static from the model plus the overrides below;
// shape arithmetic folds to constants while the graph is built.
//
// This header stays free of protobuf/ONNX headers so tools can include it.
//
//===----------------------------------------------------------------------===//
#ifndef PF_IMPORT_ONNXIMPORTER_H
#define PF_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <string>

namespace mlir::pf {

struct ONNXImportOptions {
  /// Read initializer data; without it parameters carry shapes only.
  bool loadWeights = true;
  /// Full shapes of graph inputs by name (`--shape input_ids=8x128`).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Values of symbolic dimensions by name (`--dim batch=8`).
  llvm::StringMap<int64_t> dimValues;
  /// Accept inputs whose dimensions stay dynamic.
  bool allowDynamic = false;
  /// Name of the generated function.
  std::string entryName = "main";
};

/// Imports the model at `path` (.onnx, or .onnxtext / .txt for the ONNX text
/// format). Problems are reported as diagnostics on `context`; returns null
/// after an error.
OwningOpRef<ModuleOp> importONNXFile(llvm::StringRef path, MLIRContext *context,
                                     const ONNXImportOptions &options);

/// Parses "8x128" into {8, 128}; false on malformed text.
bool parseShapeText(llvm::StringRef text, llvm::SmallVectorImpl<int64_t> &shape);

/// Fills `options` from the tools' `--shape NAME=DxD` and `--dim NAME=N`
/// values; on a malformed one returns false and sets `error`.
bool parseDimensionOptions(llvm::ArrayRef<std::string> shapes,
                           llvm::ArrayRef<std::string> dims, ONNXImportOptions &options,
                           std::string &error);

} // namespace mlir::pf

#endif // PF_IMPORT_ONNXIMPORTER_H
