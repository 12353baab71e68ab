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
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::pf::driver {

/// A file a tool reads or writes, with the option that names it.
using NamedPath = ::pf::NamedPath;

/// ::pf::checkOutputFiles as an llvm::Error.
llvm::Error checkOutputs(llvm::ArrayRef<NamedPath> outputs, llvm::ArrayRef<NamedPath> inputs);

/// Writes `path` whole or not at all: `write` fills a temporary file beside
/// it, which replaces `path` only once every byte was written; a failed
/// write (a full disk) removes it and is returned as an error naming `what`
/// (an option, e.g. "--emit-step") and `path` — never LLVM's fatal "IO
/// failure on output stream". "-" is stdout; a path that is a device (not a
/// regular file, e.g. /dev/null) is written in place.
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef what,
                            llvm::function_ref<void(llvm::raw_pwrite_stream &)> write);

/// Files that belong together (pf-run --aot's model.o, model.weights and
/// model_plan.h), written as one set: add() writes each to a temporary file
/// beside its target (as writeOutputFile), commit() renames them into
/// place in the order added, after all were written. Destroyed without a
/// commit (a failed write of a later file), the temporaries are removed and
/// no target is touched, so the previous set stays whole. (A crash between
/// two renames of commit() leaves a mixed set: renames are atomic one file
/// at a time.)
class OutputFileSet {
public:
  OutputFileSet() = default;
  OutputFileSet(const OutputFileSet &) = delete;
  OutputFileSet &operator=(const OutputFileSet &) = delete;
  ~OutputFileSet();

  llvm::Error add(llvm::StringRef path, llvm::StringRef what,
                  llvm::function_ref<void(llvm::raw_pwrite_stream &)> write);
  llvm::Error commit();

private:
  struct Pending {
    std::string temporary, path, what;
  };
  std::vector<Pending> pending;
};

} // namespace mlir::pf::driver

#endif // PF_DRIVER_OUTPUTFILES_H
