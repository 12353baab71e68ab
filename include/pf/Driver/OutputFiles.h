//===- OutputFiles.h - check a tool's outputs before its work -*- C++ -*-===//
//
// Nothing the user made is lost: before long work, a tool checks that no
// output is one of its inputs or another output (the same file, also
// through links or another spelling) and that each output's directory takes
// a new file, so that a missing or read-only directory, or a path that is a
// directory, fails at once instead of after the last step.
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_OUTPUTFILES_H
#define PF_DRIVER_OUTPUTFILES_H

#include "pf/Support/OutputFiles.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::pf::driver {

/// A file a tool reads or writes, with the option that names it.
using NamedPath = ::pf::NamedPath;

/// ::pf::checkOutputFiles as an llvm::Error.
llvm::Error checkOutputs(llvm::ArrayRef<NamedPath> outputs, llvm::ArrayRef<NamedPath> inputs);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_OUTPUTFILES_H
