//===- ModuleFile.cpp - write a module the tools built --------------------===//
#include "pf/Driver/ModuleFile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

llvm::Error mlir::pf::driver::writeModuleFile(ModuleOp module, llvm::StringRef path,
                                              llvm::StringRef what) {
  std::string error;
  auto file = mlir::openOutputFile(path, &error);
  if (!file)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what + ": " + error);
  module.print(file->os());
  file->os() << "\n";
  file->keep();
  return llvm::Error::success();
}
