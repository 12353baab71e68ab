//===- OutputFiles.cpp - check a tool's outputs before its work -----------===//
#include "pf/Support/OutputFiles.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
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

namespace {
/// Writes all of [data, data + bytes) to fd (retrying short writes and
/// EINTR); empty or the reason.
std::string writeAll(int fd, const char *data, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? std::strerror(errno) : "no progress";
    data += n;
    bytes -= static_cast<size_t>(n);
  }
  return "";
}
} // namespace

std::string pf::writeFileAtomically(const std::string &path, const void *data, size_t bytes) {
  const char *begin = static_cast<const char *>(data);
  struct stat status;
  if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode) &&
      !S_ISDIR(status.st_mode)) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return path + ": cannot open for writing: " + std::strerror(errno);
    std::string why = writeAll(fd, begin, bytes);
    if (::close(fd) != 0 && why.empty())
      why = std::strerror(errno);
    return why.empty() ? "" : path + ": write failed: " + why;
  }
  // The temporary file is in the same directory so that rename() replaces
  // `path` in one step; O_EXCL keeps two writers from sharing it.
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) // with the reason: a missing folder reads otherwise like a read-only one
    return path + ": cannot open for writing: " + std::strerror(errno);
  std::string why = writeAll(fd, begin, bytes);
  if (::close(fd) != 0 && why.empty())
    why = std::strerror(errno);
  if (!why.empty()) {
    ::unlink(tmp.c_str());
    return path + ": write failed: " + why;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return path + ": cannot replace: " + why;
  }
  return "";
}
