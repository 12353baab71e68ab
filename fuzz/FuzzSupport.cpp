//===- FuzzSupport.cpp - scratch files and the target table --------------===//
#include "FuzzTargets.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// The sanitizers' runtime, when linked: where their reports go.
extern "C" void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

// LLVM's headers poison and unpoison BumpPtrAllocator memory when they see
// ASan (LLVM_ADDRESS_SANITIZER_BUILD: clang's __has_feature, which no flag
// takes back, unlike GCC's macro; see CMakeLists.txt). Debian's libMLIR is
// not instrumented and allocates from the same slabs without unpoisoning, so
// its reads of memory pf's inline copies poisoned are reported
// (use-after-poison in StringAttr::get after pf-lower-to-runtime set a
// RuntimePlanAttr: test/Fuzz/Regressions/ir/crash-3582a009...). pf poisons
// nothing itself, so the fuzzers and replays of a clang ASan build ignore
// manual poisoning; ASAN_OPTIONS set by the user still come after this.
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }
#endif
#endif

namespace pf::fuzz {
namespace {
struct NamedTarget {
  const char *name;
  Target target;
};
constexpr NamedTarget kTargets[] = {
    {"onnx", fuzzONNX},         {"onnxtext", fuzzONNXText}, {"profile", fuzzProfile},
    {"npz", fuzzNpz},           {"checkpoint", fuzzCheckpoint}, {"corpus", fuzzCorpus},
    {"ir", fuzzIR},             {"torchcsv", fuzzTorchCsv}, {"pipeline", fuzzPipelineOptions},
    {"aotplan", fuzzAotPlan},
};

/// The bytes of the external-data file every fuzzed model directory holds.
std::string weightsBytes() {
  std::string bytes(64 * 1024, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = char((i * 37 + 11) & 0x3f); // small floats' low bytes, no NaNs
  return bytes;
}

void writeFile(const std::string &path, const char *data, size_t size) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    llvm::errs() << "pf-fuzz: cannot write " << path << ": " << ec.message() << "\n";
    std::abort();
  }
  out.write(data, size);
}

/// One directory per process (libFuzzer's -fork workers are processes): on
/// /dev/shm when there, so the per-input writes stay in memory. Never
/// destroyed: the exit handler that removes the directory runs after static
/// destructors.
const std::string &scratchDir() {
  static const std::string *dir = [] {
    llvm::SmallString<128> base(llvm::sys::fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp");
    llvm::sys::path::append(base, "pf-fuzz-" + std::to_string(llvm::sys::Process::getProcessId()));
    llvm::sys::fs::create_directories(base);
    std::string weights = weightsBytes();
    writeFile((base + "/weights.bin").str(), weights.data(), weights.size());
    // Removed at exit; a crashed process leaves it (small) for inspection.
    std::atexit([] { llvm::sys::fs::remove_directories(scratchDir()); });
    return new std::string(base);
  }();
  return *dir;
}
} // namespace

std::string writeScratchFile(const std::string &fileName, const uint8_t *data, size_t size) {
  std::string path = scratchDir() + "/" + fileName;
  writeFile(path, reinterpret_cast<const char *>(data), size);
  return path;
}

bool verbose() {
  static const bool on = [] {
    const char *value = std::getenv("PF_FUZZ_VERBOSE");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return on;
}

Target findTarget(const std::string &name) {
  for (const auto &t : kTargets)
    if (name == t.name)
      return t.target;
  return nullptr;
}

const char *targetNames() {
  return "onnx, onnxtext, profile, npz, checkpoint, corpus, ir, torchcsv, pipeline, aotplan";
}

namespace {
/// Whether stderr may go to /dev/null for a while without losing a
/// sanitizer's report. Without a sanitizer, yes. With one runtime (clang's
/// ASan and UBSan), yes: its reports go to a copy of stderr from now on, as
/// libFuzzer's -close_fd_mask=2 does it. GCC's UBSan is a runtime of its own
/// (libubsan) beside libasan, and redirecting their reports loses them
/// (seen with GCC 12): there nothing is silenced, and only the replays of a
/// GCC sanitized build (./scripts/test.sh --sanitize) print the noise.
bool canSilenceStderr() {
  static const bool can = [] {
    if (!&__sanitizer_set_report_fd)
      return true;
    // Already /dev/null (libFuzzer's -close_fd_mask=2, which sent the
    // reports to its own copy of stderr): nothing to do.
    struct stat err, null;
    if (fstat(STDERR_FILENO, &err) == 0 && stat("/dev/null", &null) == 0 &&
        S_ISCHR(err.st_mode) && err.st_rdev == null.st_rdev)
      return true;
    if (void *ubsan = dlopen("libubsan.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(ubsan);
      return false;
    }
    int copy = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (copy < 0)
      return false;
    __sanitizer_set_report_fd(reinterpret_cast<void *>(static_cast<intptr_t>(copy)));
    return true;
  }();
  return can;
}
} // namespace

QuietStderr::QuietStderr() {
  if (verbose() || !canSilenceStderr())
    return;
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0)
    return;
  std::fflush(stderr);
  llvm::errs().flush();
  saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (saved >= 0 && dup2(null, STDERR_FILENO) < 0) {
    close(saved);
    saved = -1;
  }
  close(null);
}

QuietStderr::~QuietStderr() {
  if (saved < 0)
    return;
  std::fflush(stderr);
  llvm::errs().flush();
  dup2(saved, STDERR_FILENO);
  close(saved);
}

} // namespace pf::fuzz
