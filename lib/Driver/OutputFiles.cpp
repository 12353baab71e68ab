//===- OutputFiles.cpp - check a tool's outputs before its work -----------===//
#include "pf/Driver/OutputFiles.h"

#include "pf/Support/OutputFiles.h"

llvm::Error mlir::pf::driver::checkOutputs(llvm::ArrayRef<NamedPath> outputs,
                                           llvm::ArrayRef<NamedPath> inputs) {
  std::string err = ::pf::checkOutputFiles(outputs.vec(), inputs.vec());
  if (err.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), err);
}
