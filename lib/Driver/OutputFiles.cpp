//===- OutputFiles.cpp - check a tool's outputs before its work -----------===//
#include "pf/Driver/OutputFiles.h"

#include "pf/Support/OutputFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

llvm::Error mlir::pf::driver::checkOutputs(llvm::ArrayRef<NamedPath> outputs,
                                           llvm::ArrayRef<NamedPath> inputs) {
  std::string err = ::pf::checkOutputFiles(outputs.vec(), inputs.vec());
  if (err.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), err);
}

namespace {
llvm::Error writeError(llvm::StringRef what, llvm::StringRef path, std::error_code ec) {
  return llvm::createStringError(ec, (what.empty() ? "" : what + " ").str() + "cannot write '" +
                                         path + "': " + ec.message());
}

/// Closes `os` and returns (and clears, so that its destructor does not
/// abort the process) its write error, if any.
std::error_code closeAndTakeError(llvm::raw_fd_ostream &os) {
  os.close();
  std::error_code ec = os.error();
  os.clear_error();
  return ec;
}
} // namespace

llvm::Error mlir::pf::driver::writeOutputFile(
    llvm::StringRef path, llvm::StringRef what,
    llvm::function_ref<void(llvm::raw_pwrite_stream &)> write) {
  OutputFileSet set;
  if (auto err = set.add(path, what, write))
    return err;
  return set.commit();
}

using mlir::pf::driver::OutputFileSet;

llvm::Error OutputFileSet::add(llvm::StringRef path, llvm::StringRef what,
                               llvm::function_ref<void(llvm::raw_pwrite_stream &)> write) {
  namespace fs = llvm::sys::fs;
  if (path == "-") {
    write(llvm::outs());
    llvm::outs().flush();
    if (std::error_code ec = llvm::outs().error()) {
      llvm::outs().clear_error();
      return writeError(what, "stdout", ec);
    }
    return llvm::Error::success();
  }
  fs::file_status status;
  if (!fs::status(path, status) && fs::exists(status) && !fs::is_regular_file(status) &&
      !fs::is_directory(status)) {
    // A device: renaming a file over it would replace the device itself.
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return writeError(what, path, ec);
    write(os);
    if (std::error_code ec = closeAndTakeError(os))
      return writeError(what, path, ec);
    return llvm::Error::success();
  }
  int fd = -1;
  llvm::SmallString<256> temporary;
  if (std::error_code ec = fs::createUniqueFile(path + ".tmp-%%%%%%", fd, temporary))
    return writeError(what, path, ec);
  pending.push_back({std::string(temporary), path.str(), what.str()});
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  write(os);
  if (std::error_code ec = closeAndTakeError(os))
    return writeError(what, path, ec); // the destructor removes the temporary
  return llvm::Error::success();
}

llvm::Error OutputFileSet::commit() {
  for (size_t i = 0; i < pending.size(); ++i)
    if (std::error_code ec = llvm::sys::fs::rename(pending[i].temporary, pending[i].path)) {
      llvm::Error err = writeError(pending[i].what, pending[i].path, ec);
      pending.erase(pending.begin(), pending.begin() + i); // the renamed ones
      return err;
    }
  pending.clear();
  return llvm::Error::success();
}

OutputFileSet::~OutputFileSet() {
  for (const Pending &file : pending)
    llvm::sys::fs::remove(file.temporary);
}
