/*===- pf-c/Import.h - ONNX models into pf IR ---------------------*- C -*-===*\
|*                                                                            *|
|* pfImportONNXFile is what `pf-translate --import-onnx` does: it reads a     *|
|* binary .onnx (with external data) or text .onnxtext model, fixes its       *|
|* symbolic dimensions, and runs the graph passes (pf-graph-opt) or only      *|
|* shape inference.                                                           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_C_IMPORT_H
#define PF_C_IMPORT_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct PfImportOptions {
  /** Values of symbolic dimensions, "NAME=N" each (pf-translate --dim). */
  const char *const *dims;
  intptr_t numDims;
  /** Full shapes of graph inputs, "NAME=DxD..." each (pf-translate --shape);
   *  they win over dims for the input they name. */
  const char *const *shapes;
  intptr_t numShapes;
  /** Read the initializers' data; false imports shapes only (--no-weights),
   *  enough to schedule a model but not to run it. */
  bool loadWeights;
  /** Run pf-graph-opt after the import; false runs shape inference only
   *  (--no-graph-opt). */
  bool graphPasses;
  /** Accept inputs whose dimensions stay dynamic (--allow-dynamic); such a
   *  module cannot be compiled. */
  bool allowDynamic;
  /** Name of the generated function; NULL: "main". */
  const char *entryName;
} PfImportOptions;

/** The defaults: no dims or shapes, weights loaded, graph passes run,
 *  static shapes required, entry "main". */
MLIR_CAPI_EXPORTED PfImportOptions pfImportOptionsGetDefault(void);

/** Imports the model at `path` into a new module of `context` (the pf and
 *  func dialects are loaded into it). `options` NULL means the defaults.
 *  On failure returns a null module (mlirModuleIsNull) and hands the
 *  diagnostics, "FILE: error: MESSAGE" lines as pf-translate prints them, to
 *  `onError` (which may be NULL; the text may come in several pieces).
 *  Diagnostics of a successful import (warnings) go there too. The module's
 *  weights live in the context: destroy modules and executables before it. */
MLIR_CAPI_EXPORTED MlirModule pfImportONNXFile(MlirContext context, MlirStringRef path,
                                               const PfImportOptions *options,
                                               MlirStringCallback onError, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* PF_C_IMPORT_H */
