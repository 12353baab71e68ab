//===- WaitPolicyTest.cpp - libgomp starts passive unless the user chose --===//
//
// This binary links lib/Runtime/cpu/WaitPolicy.cpp like pf-run and pf-train.
// What libgomp actually parsed at its start is read back from
// omp_display_env (GOMP_SPINCOUNT '0' is the passive policy; the default is
// 300000 spins), and the environment the process was started with from
// /proc/self/environ (setenv does not change it). ctest also runs these
// tests with OMP_WAIT_POLICY=active and with GOMP_SPINCOUNT set, which must
// be left as the user gave them.
//
//===----------------------------------------------------------------------===//

#include "gtest/gtest.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <omp.h>
#include <optional>
#include <string>

namespace {

/// NAME's value in the environment this process was started with.
std::optional<std::string> startupEnv(const std::string &name) {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  const std::string key = name + "=";
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos)
      end = all.size();
    if (all.compare(at, key.size(), key) == 0)
      return all.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return std::nullopt;
}

/// The value libgomp reports for NAME, quotes removed.
std::string gompSetting(const std::string &name) {
  ::testing::internal::CaptureStderr();
  omp_display_env(/*verbose=*/1);
  const std::string shown = ::testing::internal::GetCapturedStderr();
  const std::string key = "  " + name + " = '";
  const size_t at = shown.find(key);
  if (at == std::string::npos)
    return "<" + name + " not shown>";
  const size_t begin = at + key.size();
  return shown.substr(begin, shown.find('\'', begin) - begin);
}

TEST(WaitPolicy, PassiveUnlessTheUserChose) {
  ASSERT_TRUE(std::ifstream("/proc/self/environ").good());
  const auto policy = startupEnv("OMP_WAIT_POLICY");
  const auto spins = startupEnv("GOMP_SPINCOUNT");
  if (!policy && !spins) {
    EXPECT_STREQ(std::getenv("OMP_WAIT_POLICY"), "passive");
    EXPECT_EQ(gompSetting("OMP_WAIT_POLICY"), "PASSIVE");
    EXPECT_EQ(gompSetting("GOMP_SPINCOUNT"), "0");
    return;
  }
  // The user's choice, untouched.
  if (policy) {
    ASSERT_NE(std::getenv("OMP_WAIT_POLICY"), nullptr);
    EXPECT_EQ(*policy, std::getenv("OMP_WAIT_POLICY"));
  } else {
    EXPECT_EQ(std::getenv("OMP_WAIT_POLICY"), nullptr);
  }
  if (spins) {
    EXPECT_EQ(gompSetting("GOMP_SPINCOUNT"), *spins);
  } else if (*policy == "active" || *policy == "ACTIVE") {
    EXPECT_EQ(gompSetting("OMP_WAIT_POLICY"), "ACTIVE");
  }
}

} // namespace
