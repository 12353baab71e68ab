//===- Passes.h - pf lowering passes ----------------------------*- C++ -*-===//
#ifndef PF_CONVERSION_PASSES_H
#define PF_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Conversion/Passes.h.inc"

/// pf-lower-to-runtime followed by the standard lowering to the LLVM dialect.
void buildLowerToLLVMPipeline(OpPassManager &pm);

/// The standard MLIR passes from func/arith/cf/llvm to the LLVM dialect.
void buildStandardLLVMLoweringPipeline(OpPassManager &pm);

} // namespace mlir::pf

#endif // PF_CONVERSION_PASSES_H
