//===- ModuleFile.h - write a module the tools built ------------*- C++ -*-===//
#ifndef PF_DRIVER_MODULEFILE_H
#define PF_DRIVER_MODULEFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::pf::driver {

/// Writes `module` as text IR to `path` ("-": stdout); an error names the
/// option (`what`, e.g. "--emit-step") and the file.
llvm::Error writeModuleFile(mlir::ModuleOp module, llvm::StringRef path, llvm::StringRef what);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_MODULEFILE_H
