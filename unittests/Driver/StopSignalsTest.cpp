//===- StopSignalsTest.cpp - SIGINT/SIGTERM through the watcher thread ----===//
//
// Its own test binary: routeStopSignals blocks the signals process-wide.

#include "pf/Support/StopSignals.h"

#include "gtest/gtest.h"

#include <chrono>
#include <csignal>
#include <pthread.h>
#include <thread>
#include <unistd.h>

using namespace mlir::pf::driver;

namespace {

bool blockedHere(int signal) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

/// Waits up to 10 s for the watcher to record `signal`.
bool recorded(int signal) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stopSignal() == signal)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(StopSignalsTest, BlockedInEveryThreadAndRecordedByTheWatcher) {
  routeStopSignals();
  // No compute thread may run a handler: the signals are blocked here and
  // in threads started afterwards.
  EXPECT_TRUE(blockedHere(SIGINT));
  EXPECT_TRUE(blockedHere(SIGTERM));
  bool workerBlocked = false;
  std::thread([&] { workerBlocked = blockedHere(SIGINT) && blockedHere(SIGTERM); }).join();
  EXPECT_TRUE(workerBlocked);

  catchStopSignals();
  EXPECT_FALSE(stopRequested());
  EXPECT_EQ(stopSignal(), 0);
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_TRUE(recorded(SIGTERM));
  EXPECT_TRUE(stopRequested());
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_TRUE(recorded(SIGINT));
}

TEST(StopSignalsDeathTest, EndsTheProcessAsTheDefaultActionBeforeCatching) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        routeStopSignals();
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        _exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

} // namespace
