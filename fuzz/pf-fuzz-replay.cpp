//===- pf-fuzz-replay.cpp - run fuzz inputs through their targets ---------===//
//
//   pf-fuzz-replay TARGET PATH...
//
// Runs each file (or each file in each directory, sorted) through the fuzz
// target TARGET once, in this process, printing its name first: an input
// that crashes ends the process with its signal (and the name of the input
// it was running). The test suite replays test/Fuzz/Regressions with it in
// the normal build; no libFuzzer needed.
//
// Like a libFuzzer worker (scripts/fuzz.sh's -rss_limit_mb), the process may
// use at most kReplayMemoryBytes: an input that makes a target allocate more
// (a size read from the file and trusted) ends in std::bad_alloc, so an OOM
// regression input fails here too. Under AddressSanitizer, whose shadow
// memory needs terabytes of address space, the limit is left off.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/resource.h>

#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {
/// scripts/fuzz.sh's default -rss_limit_mb (PF_FUZZ_RSS_MB).
constexpr rlim_t kReplayMemoryBytes = rlim_t(2048) << 20;

/// Caps the data segment and private mappings (RLIMIT_DATA, where malloc
/// gets its memory) unless an AddressSanitizer runtime is loaded, found by
/// its entry point: a symbol, so GCC and clang builds alike are seen.
void limitMemory() {
  if (dlsym(RTLD_DEFAULT, "__asan_init"))
    return;
  rlimit limit;
  if (getrlimit(RLIMIT_DATA, &limit) == 0 && limit.rlim_cur <= kReplayMemoryBytes)
    return; // already as tight
  limit.rlim_cur = kReplayMemoryBytes;
  if (setrlimit(RLIMIT_DATA, &limit) != 0)
    llvm::errs() << "pf-fuzz-replay: cannot limit memory; OOM inputs will not fail\n";
}

/// The files `path` names: itself, or the regular files in it (not below).
bool collect(const std::string &path, std::vector<std::string> &files) {
  if (!llvm::sys::fs::is_directory(path)) {
    if (!llvm::sys::fs::exists(path)) {
      llvm::errs() << "pf-fuzz-replay: no such file or directory: " << path << "\n";
      return false;
    }
    files.push_back(path);
    return true;
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::fs::is_regular_file(it->path()))
      found.push_back(it->path());
  if (ec) {
    llvm::errs() << "pf-fuzz-replay: cannot list " << path << ": " << ec.message() << "\n";
    return false;
  }
  std::sort(found.begin(), found.end());
  files.insert(files.end(), found.begin(), found.end());
  return true;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    llvm::errs() << "usage: pf-fuzz-replay TARGET PATH...\n  targets: "
                 << pf::fuzz::targetNames() << "\n";
    return 2;
  }
  pf::fuzz::Target target = pf::fuzz::findTarget(argv[1]);
  if (!target) {
    llvm::errs() << "pf-fuzz-replay: unknown target '" << argv[1]
                 << "' (targets: " << pf::fuzz::targetNames() << ")\n";
    return 2;
  }
  limitMemory();
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i)
    if (!collect(argv[i], files))
      return 2;
  for (const std::string &file : files) {
    auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer) {
      llvm::errs() << "pf-fuzz-replay: cannot read " << file << "\n";
      return 2;
    }
    // Printed before running, so a crash's output names its input.
    llvm::outs() << "replay " << file << "\n";
    llvm::outs().flush();
    // A copy: the targets may rely on owning exactly these bytes, as
    // libFuzzer's buffers are sized to the input (ASan sees overreads).
    std::vector<uint8_t> bytes((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
    target(bytes.data(), bytes.size());
  }
  llvm::outs() << "replayed " << files.size() << " inputs through " << argv[1] << "\n";
  return 0;
}
