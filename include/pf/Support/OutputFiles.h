//===- OutputFiles.h - check a tool's outputs before its work -*- C++ -*-===//
//
// Nothing the user made is lost: before long work, a tool checks that no
// output is one of its inputs or another output (the same file, also
// through links or another spelling) and that each output's directory takes
// a new file, so that a missing or read-only directory, or a path that is a
// directory, fails at once instead of after the work. The one copy of that
// rule for every tool (C++ standard library only: pf-sched and pf-aot-run
// link no LLVM; pf::driver::checkOutputs wraps it for the others).
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_OUTPUTFILES_H
#define PF_SUPPORT_OUTPUTFILES_H

#include <cstddef>
#include <string>
#include <vector>

namespace pf {

/// A file a tool reads or writes, with the option that names it.
struct NamedPath {
  std::string option; ///< e.g. "--checkpoint"
  std::string path;   ///< empty: not given; "-": stdout/stdin (never checked)
};

/// Every output against every input and every other output (refused when
/// they are the same file), then each output's destination (refused when it
/// is a directory, or when its directory cannot take a new file: a probe
/// file is created beside it and removed). Returns the error, naming the
/// options and the path; empty when every output may be written.
std::string checkOutputFiles(const std::vector<NamedPath> &outputs,
                             const std::vector<NamedPath> &inputs);

/// Writes `bytes` bytes at `data` to `path` so that a failure never replaces
/// a good file: into a new temporary file beside it (O_EXCL, the mode a plain
/// create would give), renamed over `path` once written and closed. A path
/// naming a device (/dev/null, /dev/stdout) is written directly: renaming
/// over it would replace the device. Returns the error, naming the path and
/// the reason; empty on success. The one atomic writer of the tools that
/// link no LLVM (pf-sched's reports and traces, pf-aot-run's weights and
/// JSON; pf::driver::OutputFileSet is the LLVM-stream one, for sets).
std::string writeFileAtomically(const std::string &path, const void *data, size_t bytes);

} // namespace pf

#endif // PF_SUPPORT_OUTPUTFILES_H
