/*===- pf-c/Dialects.h - the pf dialect in MLIR's C API -----------*- C -*-===*\
|*                                                                            *|
|* The dialect handle of pf, as MLIR's own dialects have theirs:              *|
|*                                                                            *|
|*   mlirDialectHandleRegisterDialect(mlirGetDialectHandle__pf__(), ctx);     *|
|*                                                                            *|
|* pf modules hold func.func too: register func as well                       *|
|* (mlirGetDialectHandle__func__, which libPFCAPI also exports), or use       *|
|* pfRegisterAllDialects of pf-c/Registration.h.                              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_C_DIALECTS_H
#define PF_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(PF, pf);

#ifdef __cplusplus
}
#endif

#endif /* PF_C_DIALECTS_H */
