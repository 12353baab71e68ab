//===- ModuleFile.cpp - write a module the tools built --------------------===//
#include "pf/Driver/ModuleFile.h"

#include "pf/Driver/OutputFiles.h"

#include "mlir/IR/BuiltinOps.h"

llvm::Error mlir::pf::driver::writeModuleFile(ModuleOp module, llvm::StringRef path,
                                              llvm::StringRef what) {
  return writeOutputFile(path, what, [&](llvm::raw_pwrite_stream &os) {
    module.print(os);
    os << "\n";
  });
}
