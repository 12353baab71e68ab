//===- RefreshThroughputTest.cpp - pf's refresh chosen for throughput -----===//
//
// Issue 15 item 5: the unmovable preconditioning per step, the overhead
// beyond it, the staggered refresh, and the goal: >= 98% utilization with
// K-FAC within 1% beyond the unmovable, on the P100 profile and on cost
// models of other GPUs (the analytic model, and the P100 profile with its
// forward/backward/curvature/inversion ratios changed).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cmath>
#include <set>

namespace pf::sched {
namespace {

using test::request;
using test::shippedProfile;
using test::uniformCosts;

ScheduleRequest throughput(ScheduleKind kind, int devices, int micro, int layersPerStage = 0) {
  ScheduleRequest r = request(kind, devices, micro, Policy::PF, layersPerStage);
  r.kfac.refresh = RefreshChoice::Throughput;
  r.validate = true; // every window below also passes validateTimeline
  return r;
}

/// Runs a request; fails the test when it does not succeed.
Report reportOf(const CostModel &costs, const ScheduleRequest &r) {
  auto result = schedulePipeline(costs, r);
  EXPECT_TRUE(result.ok()) << result.error();
  return result.ok() ? result->report : Report{};
}

/// The P100 BERT-Large profile with some of its per-layer times scaled.
CostModel scaledP100(double backward, double curvature, double inversion, double precondition) {
  CostModel c = shippedProfile("p100-bert-large.json");
  for (LayerCost &l : c.layers) {
    l.backwardInput *= backward;
    l.backwardWeight *= backward;
    l.curvatureA *= curvature;
    l.curvatureB *= curvature;
    l.inversionA *= inversion;
    l.inversionB *= inversion;
    l.precondition *= precondition;
  }
  return c;
}

CostModel analytic(const char *device, Precision precision = Precision::FP32) {
  auto d = findDevice(device);
  auto m = findModel("bert-large");
  EXPECT_TRUE(d.ok() && m.ok());
  return analyticCostModel(*d, *m, precision);
}

// 1F1B, no communication: the first stage's gradient is final at T_pipe and
// nothing else runs then, so its preconditioning (2 layers x 3 ms) is what
// cannot move; the other stages' fits before it ends.
TEST(RefreshThroughput, UnmovableIsTheLastStagesPreconditioning) {
  CostModel costs = uniformCosts(8, 1, 2, 4, 10, 3);
  Report r = reportOf(costs, throughput(ScheduleKind::OneFOneB, 4, 8, 2));
  EXPECT_NEAR(r.unmovableMs, 6.0, 1e-9);
  EXPECT_NEAR(r.overheadBeyondMs, r.stepTimeMs - r.pipelineStepMs - 6.0, 1e-9);
  EXPECT_LE(r.overheadBeyondFraction, 0.01 + 1e-9);
}

// Chimera runs a stage's preconditioning on both replicas: with 3 layers the
// default split is 2 + 1 layers; half a layer's linears on each replica
// shortens what cannot move to 1.5 layers.
TEST(RefreshThroughput, ChimeraSplitsTheUnmovableBetweenReplicas) {
  CostModel costs = uniformCosts(12, 1, 2, 4, 10, 3);
  auto step = [&] {
    ScheduleRequest r = request(ScheduleKind::Chimera, 4, 4, Policy::None, 3);
    auto result = schedulePipeline(costs, r);
    EXPECT_TRUE(result.ok()) << result.error();
    return result->step;
  }();
  const double fixed = unmovablePerStep(step, costs);
  std::vector<double> split = bestPreconditionSplit(step, costs);
  ASSERT_FALSE(split.empty());
  RefreshShape shape;
  shape.preconditionDownShare = split;
  EXPECT_NEAR(fixed, 6.0, 1e-9);
  EXPECT_NEAR(unmovablePerStep(step, costs, shape), 4.5, 1e-9);
  Report r = reportOf(costs, throughput(ScheduleKind::Chimera, 4, 4, 3));
  EXPECT_NEAR(r.unmovableMs, 4.5, 1e-9);
  EXPECT_EQ(r.preconditionDownShare, split);
}

// The reference cell: the interval choice (K = 3) runs 1.3% beyond the
// unmovable; the throughput choice staggers the refreshes (mean K between
// the bound and 4) and stays within 1% at >= 98%.
TEST(RefreshThroughput, P100BertLargeChimeraReachesTheGoal) {
  CostModel costs = shippedProfile("p100-bert-large.json");
  ScheduleRequest interval = throughput(ScheduleKind::Chimera, 8, 8, 3);
  interval.kfac.refresh = RefreshChoice::Interval;
  Report before = reportOf(costs, interval);
  EXPECT_EQ(before.refreshSteps, 3);
  EXPECT_GT(before.overheadBeyondFraction, 0.01);

  EXPECT_NEAR(before.utilizationWithKfac, 0.9946, 1e-4); // docs/schedule.md, "Results"

  Report r = reportOf(costs, throughput(ScheduleKind::Chimera, 8, 8, 3));
  EXPECT_GE(r.utilizationWithKfac, 0.99); // 98.36% before the flushed sweep, 99.20% with it
  EXPECT_LE(r.overheadBeyondFraction, 0.01 + 1e-9);
  EXPECT_GT(r.unmovableMs, 0);
  EXPECT_LT(r.unmovableMs, before.unmovableMs + 1e-9);
  EXPECT_TRUE(r.staggered);
  EXPECT_GT(r.meanRefreshInterval, r.refreshLowerBound);
  EXPECT_LT(r.meanRefreshInterval, 4);
  EXPECT_LE(r.utilizationWithKfac, r.utilizationLimit + 1e-9);
}

// A staggered window: every layer's refreshes at distinct steps inside the
// period, the layers of a stage at different steps, the mean interval the
// period over the refreshes per layer.
TEST(RefreshThroughput, StaggeredRefreshStepsSpreadOverThePeriod) {
  CostModel costs = shippedProfile("p100-bert-large.json");
  auto result = schedulePipeline(costs, throughput(ScheduleKind::Chimera, 8, 8, 3));
  ASSERT_TRUE(result.ok()) << result.error();
  const Report &r = result->report;
  ASSERT_TRUE(r.staggered);
  ASSERT_EQ(r.layerRefreshSteps.size(), 24u);
  double refreshes = 0;
  std::set<int> firstSteps;
  for (const std::vector<int> &steps : r.layerRefreshSteps) {
    ASSERT_FALSE(steps.empty());
    for (size_t j = 0; j < steps.size(); ++j) {
      EXPECT_GE(steps[j], 0);
      EXPECT_LT(steps[j], r.refreshSteps);
      if (j > 0) {
        EXPECT_GT(steps[j], steps[j - 1]);
      }
    }
    refreshes += steps.size();
    firstSteps.insert(steps.front());
  }
  EXPECT_EQ(firstSteps.size(), 3u); // one phase per layer of a stage
  EXPECT_NEAR(r.meanRefreshInterval, 24 * r.refreshSteps / refreshes, 1e-9);
  // Every refresh's inversions are in the window, each layer's in order.
  for (const TimelineItem &it : result->timeline.kfacItems) {
    if (it.kind == ItemKind::InversionA && it.refreshLag == 0) {
      EXPECT_LT(it.refresh, static_cast<int>(r.layerRefreshSteps[it.layer].size()));
    }
  }
}

// The check rebuilds the tasks from the timeline's refresh steps: a window
// whose refreshes claim other steps than those it ran is rejected.
TEST(RefreshThroughput, ValidationSeesTheStaggeredSteps) {
  CostModel costs = shippedProfile("p100-bert-large.json");
  auto result = schedulePipeline(costs, throughput(ScheduleKind::Chimera, 8, 8, 3));
  ASSERT_TRUE(result.ok()) << result.error();
  Timeline tl = result->timeline;
  EXPECT_TRUE(validateTimeline(tl, result->step, costs).ok());
  ASSERT_FALSE(tl.refreshSteps.empty());
  Timeline dropped = tl;
  dropped.refreshSteps[0].pop_back(); // one refresh fewer: its pieces match nothing
  EXPECT_FALSE(validateTimeline(dropped, result->step, costs).ok());
  Timeline later = tl;
  for (int &s : later.refreshSteps[5])
    s = std::min(s + 1, tl.steps - 1); // released a step later than placed
  EXPECT_FALSE(validateTimeline(later, result->step, costs).ok());
}

// GPipe's first device runs its backwards back to back at the end of the
// step, so the curvature B of a refresh that reads the window's last step
// is released at T_pipe. In steady state it runs with its inversion in the
// next window's free bubble time (refresh lag 1) instead of after the last
// flush: only the preconditioning (0.5 ms) stays after the flush.
TEST(RefreshThroughput, CurvatureOfTheLastStepWrapsIntoTheNextWindow) {
  CostModel costs = uniformCosts(4, 1, 2, 0.5, 2, 0.5);
  ScheduleRequest r = request(ScheduleKind::GPipe, 4, 4, Policy::PF, 1);
  r.kfac.refreshSteps = 1;
  r.validate = true;
  auto result = schedulePipeline(costs, r);
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_NEAR(result->report.pipelineStepMs, 21, 1e-9);
  EXPECT_NEAR(result->report.stepTimeMs, 21.5, 1e-9);
  bool wrapped = false;
  for (const TimelineItem &it : result->timeline.kfacItems)
    wrapped |= it.kind == ItemKind::CurvatureB && it.device == 0 && it.refreshLag == 1;
  EXPECT_TRUE(wrapped);
  // Without the steady state the curvature and inversion B follow the flush.
  r.kfac.steadyState = false;
  auto flushed = schedulePipeline(costs, r);
  ASSERT_TRUE(flushed.ok()) << flushed.error();
  EXPECT_NEAR(flushed->report.stepTimeMs, 23.5, 1e-9);
}

// The time after the flush that the first device's preconditioning forces
// every device to wait is bubble time for the others: the throughput
// refresh's sweep fills it in every step, not only in the window's last.
TEST(RefreshThroughput, OtherDevicesWorkWhileTheFirstPreconditions) {
  CostModel costs = shippedProfile("p100-bert-base.json");
  auto result = schedulePipeline(costs, throughput(ScheduleKind::GPipe, 4, 4, 3));
  ASSERT_TRUE(result.ok()) << result.error();
  std::set<int> steps;
  for (const TimelineItem &it : result->timeline.kfacItems)
    if (it.device != 0 && it.outsideBubble && it.kind != ItemKind::Precondition &&
        it.step + 1 < result->timeline.steps)
      steps.insert(it.step);
  EXPECT_GE(steps.size(), static_cast<size_t>(result->timeline.steps) / 2);
  EXPECT_GE(result->report.utilizationWithKfac, 0.99); // 92.83% when only leftovers went there
}

struct Cell {
  const char *name;
  CostModel (*costs)();
  ScheduleKind kind;
  int devices, micro, layersPerStage;
};

CostModel p100Profile() { return shippedProfile("p100-bert-large.json"); }
CostModel p100BaseProfile() { return shippedProfile("p100-bert-base.json"); }
CostModel p100() { return analytic("p100"); }
CostModel v100() { return analytic("v100"); }
CostModel h100() { return analytic("h100"); }
CostModel a100tf32() { return analytic("a100", Precision::TF32); }
CostModel inversionX15() { return scaledP100(1, 1, 1.5, 1); }
CostModel inversionX05() { return scaledP100(1, 1, 0.5, 1); }
CostModel curvatureX2() { return scaledP100(1, 2, 1, 1); }
CostModel backwardX15() { return scaledP100(1.5, 1, 1, 1); }
CostModel curvatureX05InversionX2() { return scaledP100(1, 0.5, 2, 1); }

class Goal : public ::testing::TestWithParam<Cell> {};

// >= 98% with K-FAC, at most 1% beyond the unmovable, and never above the
// bubbles' limit (which would mean the limit is wrong).
TEST_P(Goal, NinetyEightPercentWithinOnePercentBeyondTheUnmovable) {
  const Cell &c = GetParam();
  Report r = reportOf(c.costs(), throughput(c.kind, c.devices, c.micro, c.layersPerStage));
  EXPECT_GE(r.utilizationWithKfac, 0.98) << c.name;
  EXPECT_LE(r.overheadBeyondFraction, 0.01 + 1e-9) << c.name;
  EXPECT_LE(r.utilizationWithKfac, r.utilizationLimit + 1e-9) << c.name;
}

const Cell kGoalCells[] = {
    {"p100_profile_chimera_D8_N8", p100Profile, ScheduleKind::Chimera, 8, 8, 3},
    {"p100_profile_1f1b_D4_N16", p100Profile, ScheduleKind::OneFOneB, 4, 16, 6},
    {"p100_profile_gpipe_D4_N16", p100Profile, ScheduleKind::GPipe, 4, 16, 6},
    {"p100_profile_zb_h1_D4_N16", p100Profile, ScheduleKind::ZBH1, 4, 16, 6},
    {"p100_profile_interleaved_D4_N16", p100Profile, ScheduleKind::Interleaved, 4, 16, 3},
    {"p100_chimera_D8_N8", p100, ScheduleKind::Chimera, 8, 8, 3},
    {"v100_chimera_D8_N8", v100, ScheduleKind::Chimera, 8, 8, 3},
    {"h100_chimera_D8_N8", h100, ScheduleKind::Chimera, 8, 8, 3},
    {"v100_chimera_D4_N8", v100, ScheduleKind::Chimera, 4, 8, 6},
    {"v100_zb_h1_D8_N16", v100, ScheduleKind::ZBH1, 8, 16, 3},
    {"h100_interleaved_D8_N16", h100, ScheduleKind::Interleaved, 8, 16, 0},
    {"a100_tf32_1f1b_D4_N16", a100tf32, ScheduleKind::OneFOneB, 4, 16, 6},
    {"a100_tf32_chimera_D4_N16", a100tf32, ScheduleKind::Chimera, 4, 16, 6},
    {"a100_tf32_zb_h1_D8_N16", a100tf32, ScheduleKind::ZBH1, 8, 16, 3},
    {"inversion_x1_5_chimera_D8_N8", inversionX15, ScheduleKind::Chimera, 8, 8, 3},
    {"inversion_x0_5_chimera_D8_N8", inversionX05, ScheduleKind::Chimera, 8, 8, 3},
    {"curvature_x2_chimera_D8_N8", curvatureX2, ScheduleKind::Chimera, 8, 8, 3},
    {"backward_x1_5_chimera_D8_N8", backwardX15, ScheduleKind::Chimera, 8, 8, 3},
    {"curvature_x0_5_inversion_x2_chimera_D8_N8", curvatureX05InversionX2, ScheduleKind::Chimera, 8,
     8, 3},
    {"inversion_x1_5_zb_h1_D4_N8", inversionX15, ScheduleKind::ZBH1, 4, 8, 6},
    // Few micro-batches per device (92.8-97.9% before the wrapped curvature
    // and the flushed sweep; docs/schedule.md, "Results").
    {"p100_profile_gpipe_D4_N4", p100Profile, ScheduleKind::GPipe, 4, 4, 6},
    {"p100_profile_1f1b_D4_N4", p100Profile, ScheduleKind::OneFOneB, 4, 4, 6},
    {"p100_profile_1f1b_D4_N8", p100Profile, ScheduleKind::OneFOneB, 4, 8, 6},
    {"p100_profile_gpipe_D8_N8", p100Profile, ScheduleKind::GPipe, 8, 8, 3},
    {"p100_profile_1f1b_D8_N8", p100Profile, ScheduleKind::OneFOneB, 8, 8, 3},
    {"p100_profile_zb_h2_D8_N8", p100Profile, ScheduleKind::ZBH2, 8, 8, 3},
    {"p100_base_profile_gpipe_D4_N4", p100BaseProfile, ScheduleKind::GPipe, 4, 4, 3},
    {"p100_base_profile_1f1b_D4_N4", p100BaseProfile, ScheduleKind::OneFOneB, 4, 4, 3},
    {"p100_base_profile_chimera_D8_N8", p100BaseProfile, ScheduleKind::Chimera, 8, 8, 0},
    {"p100_1f1b_D8_N8", p100, ScheduleKind::OneFOneB, 8, 8, 0},
};

INSTANTIATE_TEST_SUITE_P(Cells, Goal, ::testing::ValuesIn(kGoalCells),
                         [](const auto &info) { return std::string(info.param.name); });

// Where the bubbles do not allow 98%: interleaved on 8 devices with 16
// stages for 24 blocks holds 1 or 2 blocks per stage, so the devices with
// two one-block stages idle half the time whatever K-FAC does. The report
// says so (limit 75%), and pf gets within a point of it.
TEST(RefreshThroughput, UnevenStagesReportTheirBubbleLimit) {
  for (CostModel (*costs)() : {p100, v100, a100tf32}) {
    Report r = reportOf(costs(), throughput(ScheduleKind::Interleaved, 8, 16));
    EXPECT_LT(r.utilizationLimit, 0.98);
    EXPECT_NEAR(r.utilizationLimit, 0.75, 0.01);
    EXPECT_GE(r.utilizationWithKfac, r.utilizationLimit - 0.01);
    EXPECT_LE(r.utilizationWithKfac, r.utilizationLimit + 1e-9);
    EXPECT_LE(r.overheadBeyondFraction, 0.01 + 1e-9);
  }
}

// TF32 GEMMs with FP32 factorisations: one layer's inversion is about half
// a step of Chimera D = N = 8, and its eighths do not fit most bubbles. With
// finer pieces (panels of a blocked Cholesky) the goal holds.
TEST(RefreshThroughput, InversionHeavyChimeraNeedsFinerPieces) {
  ScheduleRequest r = throughput(ScheduleKind::Chimera, 8, 8, 3);
  r.kfac.splitPieces = 128;
  Report fine = reportOf(a100tf32(), r);
  EXPECT_GE(fine.utilizationWithKfac, 0.98);
  EXPECT_LE(fine.overheadBeyondFraction, 0.01 + 1e-9);
}

// Interleaved 4/16 with TF32: an eighth of an inversion (4.3 ms) does not
// fit the 3.4 ms bubbles between passes, and the first device runs its
// whole preconditioning after T_pipe, so its inversions get only its one
// larger bubble and the budget's last 1%: the limit counts that
// preconditioning against the time after T_pipe and says 97.8%, not
// 99.97%; finer pieces fit the small bubbles.
TEST(RefreshThroughput, InversionsShareTheFlushWithUnmovablePreconditioning) {
  Report r = reportOf(a100tf32(), throughput(ScheduleKind::Interleaved, 4, 16, 3));
  EXPECT_LT(r.utilizationLimit, 0.98);
  EXPECT_LE(r.utilizationWithKfac, r.utilizationLimit + 1e-9);
  EXPECT_GE(r.utilizationWithKfac, r.utilizationLimit - 0.015);
  ScheduleRequest fine = throughput(ScheduleKind::Interleaved, 4, 16, 3);
  fine.kfac.splitPieces = 32;
  Report f = reportOf(a100tf32(), fine);
  EXPECT_GE(f.utilizationWithKfac, 0.99);
  EXPECT_LE(f.overheadBeyondFraction, 0.01 + 1e-9);
}

// Chimera on the analytic models: the interval choice's window (K = 3, the
// default preconditioning split) stays within 1% beyond the unmovable, so
// the throughput choice, which considers it too, is at least as good.
TEST(RefreshThroughput, ThroughputIsAtLeastTheIntervalWithinTheBudget) {
  for (CostModel (*costs)() : {p100, v100, h100}) {
    ScheduleRequest r = throughput(ScheduleKind::Chimera, 8, 8, 3);
    Report t = reportOf(costs(), r);
    r.kfac.refresh = RefreshChoice::Interval;
    Report i = reportOf(costs(), r);
    ASSERT_LE(i.overheadBeyondFraction, 0.01);
    EXPECT_GE(t.utilizationWithKfac, i.utilizationWithKfac - 1e-9);
    EXPECT_LE(t.overheadBeyondFraction, 0.01 + 1e-9);
  }
}

// A looser budget never lowers utilization: the refresh may only get more
// frequent.
TEST(RefreshThroughput, LooserBudgetNeverLowersUtilization) {
  CostModel costs = shippedProfile("p100-bert-large.json");
  ScheduleRequest r = throughput(ScheduleKind::Chimera, 8, 8, 3);
  r.kfac.maxOverheadBeyond = 0;
  Report tight = reportOf(costs, r);
  r.kfac.maxOverheadBeyond = 0.05;
  Report loose = reportOf(costs, r);
  EXPECT_LE(tight.overheadBeyondFraction, 1e-9);
  EXPECT_GE(loose.utilizationWithKfac, tight.utilizationWithKfac - 1e-9);
  EXPECT_LE(loose.meanRefreshInterval, tight.meanRefreshInterval + 1e-9);
}

} // namespace
} // namespace pf::sched
