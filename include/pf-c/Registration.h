/*===- pf-c/Registration.h - dialects, passes and pipelines -------*- C -*-===*\
|*                                                                            *|
|* What pf-opt registers, for programs that build their own pass pipelines    *|
|* with MLIR's C API (mlirParsePassPipeline, mlirOpPassManagerAddPipeline).   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_C_REGISTRATION_H
#define PF_C_REGISTRATION_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Adds the pf dialect and the dialects pf IR and its lowering use (func,
 *  arith, cf, llvm) to `registry`. */
MLIR_CAPI_EXPORTED void pfRegisterAllDialects(MlirDialectRegistry registry);

/** Registers, with MLIR's global pass registry, every pf pass (pf-infer-shapes,
 *  pf-fuse-gelu, ..., pf-lower-to-runtime), the pf pipelines (pf-graph-opt,
 *  pf-training, pf-pipeline, pf-pipelined-training) and MLIR's core
 *  transformation passes (canonicalize, cse, ...), as pf-opt does. Safe to
 *  call more than once. */
MLIR_CAPI_EXPORTED void pfRegisterAllPasses(void);

#ifdef __cplusplus
}
#endif

#endif /* PF_C_REGISTRATION_H */
