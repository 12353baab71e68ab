//===- StopSignals.cpp - SIGINT/SIGTERM as a stop request -----------------===//

#include "pf/Support/StopSignals.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <pthread.h>
#include <thread>

namespace mlir::pf::driver {
namespace {

std::atomic<bool> catching{false};
std::atomic<int> lastSignal{0};
std::atomic<void (*)()> cleanup{nullptr};

sigset_t stopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

/// The signal's default action, from the watcher: the tool's cleanup first
/// (LLVM's interrupt handlers, what its own SIGINT handler would have run,
/// in the tools that link LLVM), then the signal
/// re-raised at this thread with the default disposition, which ends the
/// process with it.
[[noreturn]] void endAsDefault(int signal) {
  if (void (*beforeDefault)() = cleanup.load())
    beforeDefault();
  std::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
  std::_Exit(128 + signal); // not reached: the default action ends the process
}

void watch() {
  const sigset_t set = stopSet();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0)
      continue;
    if (!catching.load())
      endAsDefault(signal);
    lastSignal.store(signal);
  }
}

} // namespace

void routeStopSignals(void (*beforeDefaultAction)()) {
  static std::atomic<bool> started{false};
  if (started.exchange(true))
    return;
  cleanup.store(beforeDefaultAction);
  const sigset_t set = stopSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch).detach();
}

void catchStopSignals() { catching.store(true); }

bool stopRequested() { return lastSignal.load() != 0; }

int stopSignal() { return lastSignal.load(); }

} // namespace mlir::pf::driver
