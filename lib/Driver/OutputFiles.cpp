//===- OutputFiles.cpp - check a tool's outputs before its work -----------===//
#include "pf/Driver/OutputFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir::pf::driver;

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

bool given(const NamedPath &file) { return !file.path.empty() && file.path != "-"; }

/// The file a path names: its real path when it exists, else its
/// directory's real path and its name (an output not written yet).
std::string canonical(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(path, real))
    return std::string(real);
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  llvm::SmallString<256> directory;
  if (llvm::sys::fs::real_path(parent.empty() ? "." : parent, directory))
    directory = parent;
  llvm::sys::path::append(directory, llvm::sys::path::filename(path));
  return std::string(directory);
}

/// A new file can be made beside `path` (created and removed at once).
llvm::Error probe(const NamedPath &output) {
  if (llvm::sys::fs::is_directory(output.path))
    return error(output.option + " " + output.path + " is a directory, not a file to write");
  llvm::StringRef parent = llvm::sys::path::parent_path(output.path);
  llvm::SmallString<256> model(parent.empty() ? "." : parent);
  llvm::sys::path::append(model, ".pf-write-probe-%%%%%%%%");
  int fd = -1;
  llvm::SmallString<256> made;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, made))
    return error(output.option + " " + output.path + ": cannot write into " +
                 (parent.empty() ? llvm::StringRef(".") : parent) + ": " + ec.message());
  llvm::sys::fs::closeFile(fd);
  llvm::sys::fs::remove(made);
  return llvm::Error::success();
}
} // namespace

llvm::Error mlir::pf::driver::checkOutputs(llvm::ArrayRef<NamedPath> outputs,
                                           llvm::ArrayRef<NamedPath> inputs) {
  for (auto [i, output] : llvm::enumerate(outputs)) {
    if (!given(output))
      continue;
    std::string file = canonical(output.path);
    for (const NamedPath &input : inputs)
      if (given(input) && canonical(input.path) == file)
        return error(output.option + " " + output.path + " is the " + input.option +
                     " file: an output never replaces an input (give another path)");
    for (const NamedPath &other : outputs.take_front(i))
      if (given(other) && canonical(other.path) == file)
        return error(output.option + " and " + other.option + " name one file (" + output.path +
                     "): give each output its own path");
  }
  for (const NamedPath &output : outputs)
    if (given(output))
      if (auto err = probe(output))
        return err;
  return llvm::Error::success();
}
