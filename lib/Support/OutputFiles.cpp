//===- OutputFiles.cpp - check a tool's outputs before its work -----------===//
#include "pf/Support/OutputFiles.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
bool given(const pf::NamedPath &file) { return !file.path.empty() && file.path != "-"; }

/// The file a path names: its real path where it exists (links resolved),
/// the rest appended as written (an output not written yet).
std::string canonical(const std::string &path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : real.lexically_normal().string();
}

/// A new file can be made beside `output` (created and removed at once).
std::string probe(const pf::NamedPath &output) {
  std::error_code ec;
  fs::file_status status = fs::status(output.path, ec);
  if (fs::is_directory(status))
    return output.option + " " + output.path + " is a directory, not a file to write";
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    // A device (/dev/null, a pipe) is written in place, not replaced.
    if (access(output.path.c_str(), W_OK) != 0)
      return output.option + " " + output.path + ": cannot write: " + std::strerror(errno);
    return "";
  }
  std::string parent = fs::path(output.path).parent_path().string();
  if (parent.empty())
    parent = ".";
  std::string model = parent + "/.pf-write-probe-XXXXXX";
  int fd = mkstemp(model.data());
  if (fd < 0)
    return output.option + " " + output.path + ": cannot write into " + parent + ": " +
           std::strerror(errno);
  close(fd);
  unlink(model.c_str());
  return "";
}
} // namespace

std::string pf::checkOutputFiles(const std::vector<NamedPath> &outputs,
                                 const std::vector<NamedPath> &inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath &output = outputs[i];
    if (!given(output))
      continue;
    std::string file = canonical(output.path);
    for (const NamedPath &input : inputs)
      if (given(input) && canonical(input.path) == file)
        return output.option + " " + output.path + " is the " + input.option +
               " file: an output never replaces an input (give another path)";
    for (size_t j = 0; j < i; ++j)
      if (given(outputs[j]) && canonical(outputs[j].path) == file)
        return output.option + " and " + outputs[j].option + " name one file (" + output.path +
               "): give each output its own path";
  }
  for (const NamedPath &output : outputs)
    if (given(output))
      if (std::string err = probe(output); !err.empty())
        return err;
  return "";
}
