//===- TestUtil.h - Helpers for the schedule library tests ------*- C++ -*-===//

#ifndef PF_UNITTESTS_SCHEDULE_TESTUTIL_H
#define PF_UNITTESTS_SCHEDULE_TESTUTIL_H

#include "pf/Schedule/Scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace pf::sched::test {

/// `layers` identical layers; backward split evenly into B and W.
inline CostModel uniformCosts(int layers, double forward, double backward,
                              double curvature = 0, double inversion = 0,
                              double precondition = 0) {
  CostModel c;
  c.name = "uniform";
  for (int i = 0; i < layers; ++i) {
    LayerCost l;
    l.name = "layer" + std::to_string(i);
    l.forward = forward;
    l.backwardInput = backward / 2;
    l.backwardWeight = backward / 2;
    l.curvatureA = curvature / 2;
    l.curvatureB = curvature / 2;
    l.inversionA = inversion / 2;
    l.inversionB = inversion / 2;
    l.precondition = precondition;
    c.layers.push_back(l);
  }
  return c;
}

inline std::string profilePath(const std::string &name) {
  return std::string(PF_SCHED_PROFILE_DIR) + "/" + name;
}

/// One of the profiles shipped in bench/sched/profiles; fails the test when
/// it does not load.
inline CostModel shippedProfile(const std::string &name) {
  auto costs = loadProfile(profilePath(name));
  EXPECT_TRUE(costs.ok()) << costs.error();
  return costs.ok() ? *costs : CostModel{};
}

inline ScheduleRequest request(ScheduleKind kind, int devices, int micro,
                               Policy policy = Policy::None,
                               int layersPerStage = 0) {
  ScheduleRequest r;
  r.kind = kind;
  r.devices = devices;
  r.microbatches = micro;
  r.layersPerStage = layersPerStage;
  r.kfac.policy = policy;
  return r;
}

/// Runs a schedule and checks that it succeeds and validates.
inline ScheduleResult runValid(const CostModel &costs,
                               const ScheduleRequest &req) {
  auto result = schedulePipeline(costs, req);
  EXPECT_TRUE(result.ok()) << result.error();
  if (!result.ok())
    return ScheduleResult{};
  Status valid = validateTimeline(result->timeline, result->step, costs);
  EXPECT_TRUE(valid.ok()) << valid.message();
  return result.take();
}

/// Exhaustive min-max over all ways to cut `cost` into `stages` contiguous
/// parts: the reference partitionMinMax is checked against.
inline double bruteForceMinMax(const std::vector<double> &cost, int stages) {
  const int n = static_cast<int>(cost.size());
  double best = std::numeric_limits<double>::infinity();
  std::function<void(int, int, double)> rec = [&](int first, int left, double worst) {
    if (left == 1) {
      double c = 0;
      for (int i = first; i < n; ++i)
        c += cost[i];
      best = std::min(best, std::max(worst, c));
      return;
    }
    double c = 0;
    for (int end = first + 1; end <= n - (left - 1); ++end) {
      c += cost[end - 1];
      rec(end, left - 1, std::max(worst, c));
    }
  };
  rec(0, stages, 0);
  return best;
}

} // namespace pf::sched::test

#endif // PF_UNITTESTS_SCHEDULE_TESTUTIL_H
