//===- SchedulerTest.cpp - The library's entry point, schedulePipeline ----===//
//
// What pf-sched (the library partitions) and pf-schedule (the caller
// partitioned) get from one call, and that bad requests come back as errors.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace pf::sched;
using pf::Expected;
using pf::Status;
using namespace pf::sched::test;

namespace {

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string errorOf(const CostModel &costs, const ScheduleRequest &r) {
  auto result = schedulePipeline(costs, r);
  EXPECT_FALSE(result.ok());
  return result.ok() ? "" : result.error();
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Field-by-field equality of two windows' timelines (times exact: the
/// same program on the same costs must give the same numbers).
void expectSameTimeline(const Timeline &a, const Timeline &b) {
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.stepTime, b.stepTime);
  auto ai = a.allItems(), bi = b.allItems();
  ASSERT_EQ(ai.size(), bi.size());
  for (size_t i = 0; i < ai.size(); ++i) {
    EXPECT_EQ(ai[i].kind, bi[i].kind) << i;
    EXPECT_EQ(ai[i].device, bi[i].device) << i;
    EXPECT_EQ(ai[i].start, bi[i].start) << i;
    EXPECT_EQ(ai[i].end, bi[i].end) << i;
  }
}

} // namespace

TEST(Scheduler, ReturnsStepPlanTimelineAndReport) {
  CostModel costs = shippedProfile("p100-bert-large.json");
  ScheduleRequest r = request(ScheduleKind::Chimera, 8, 8, Policy::PF, 3);
  r.validate = true;
  auto result = schedulePipeline(costs, r);
  ASSERT_TRUE(result.ok()) << result.error();
  // The reference setup (docs/schedule.md): T_pipe 1518.30 ms, pf's K = 3.
  EXPECT_NEAR(result->step.makespan, 1518.30, 0.005);
  EXPECT_EQ(result->plan.policy, Policy::PF);
  EXPECT_EQ(result->plan.steps, 3);
  EXPECT_EQ(result->timeline.steps, 3);
  EXPECT_EQ(result->report.refreshSteps, 3);
  EXPECT_EQ(result->report.policy, "pf");
  EXPECT_EQ(result->program.layout.devices, 8);
  EXPECT_EQ(result->program.layout.stageLayers.size(), 8u);
  EXPECT_EQ(result->report.layersPerStage, std::vector<int>(8, 3));
  EXPECT_GT(result->report.schedulerSeconds, 0);
}

TEST(Scheduler, GivenStagesScheduleLikeTheLibrarysPartition) {
  // pf-schedule passes the stages pf-partition made; the same stages must
  // give the same window as when the library partitions itself.
  CostModel costs = shippedProfile("p100-bert-base.json");
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::Chimera,
                            ScheduleKind::Interleaved, ScheduleKind::ZBH1}) {
    ScheduleRequest own = request(kind, 4, 8, Policy::PF);
    auto a = schedulePipeline(costs, own);
    ASSERT_TRUE(a.ok()) << a.error();
    ScheduleRequest given = own;
    given.devices = 0; // derived from the stages (interleaved: / chunks)
    given.stageLayers = a->program.layout.stageLayers;
    auto b = schedulePipeline(costs, given);
    ASSERT_TRUE(b.ok()) << b.error();
    EXPECT_EQ(b->program.layout.devices, 4) << scheduleKindName(kind);
    EXPECT_EQ(b->step.makespan, a->step.makespan) << scheduleKindName(kind);
    EXPECT_EQ(b->plan.steps, a->plan.steps) << scheduleKindName(kind);
    expectSameTimeline(a->timeline, b->timeline);
  }
}

TEST(Scheduler, GivenStagesMayRepeatTheDeviceCount) {
  CostModel costs = uniformCosts(8, 1, 2, 1, 1, 0.5);
  ScheduleRequest r = request(ScheduleKind::Interleaved, 2, 4, Policy::PF);
  r.stageLayers = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  auto result = schedulePipeline(costs, r);
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_EQ(result->program.layout.devices, 2);
  EXPECT_EQ(result->program.layout.stages, 4);
}

TEST(SchedulerErrors, ConflictingOptionsAreErrors) {
  CostModel costs = uniformCosts(8, 1, 2, 1, 1, 0.5);
  ScheduleRequest r = request(ScheduleKind::OneFOneB, 0, 4, Policy::PF, 2);
  r.stageLayers = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  EXPECT_EQ(errorOf(costs, r), "give either the layers per stage or the "
                               "layers of every stage, not both");

  r.layersPerStage = 0;
  r.devices = 2;
  EXPECT_EQ(errorOf(costs, r), "4 stages of 1f1b run on 4 devices, not 2");

  r.kind = ScheduleKind::Interleaved;
  r.devices = 0;
  r.chunks = 3;
  EXPECT_EQ(errorOf(costs, r),
            "interleaved needs the 4 stages to be a multiple of chunks=3");
}

TEST(SchedulerErrors, BadStagesAndOptionsAreErrors) {
  CostModel costs = uniformCosts(4, 1, 2, 1, 1, 0.5);
  ScheduleRequest r = request(ScheduleKind::GPipe, 0, 4, Policy::PF);
  r.stageLayers = {{0, 1}, {}};
  EXPECT_EQ(errorOf(costs, r), "stage 1 has no layers");
  r.stageLayers = {{0, 1}, {2, 9}};
  EXPECT_TRUE(contains(errorOf(costs, r), "refers to layer 9")) << errorOf(costs, r);

  r.stageLayers = {{0, 1}, {2, 3}};
  r.kfac.splitPieces = 0;
  EXPECT_EQ(errorOf(costs, r), "split pieces must be at least 1");
  r.kfac.splitPieces = 8;
  r.kfac.margin = -1;
  EXPECT_EQ(errorOf(costs, r), "the bubble margin must not be negative");

  r.kfac.margin = 0.05;
  r.kind = ScheduleKind::Chimera;
  r.microbatches = 3;
  EXPECT_TRUE(contains(errorOf(costs, r), "even number of micro-batches"));

  r = request(ScheduleKind::GPipe, 2, 4, Policy::PF, -1);
  EXPECT_EQ(errorOf(costs, r), "layers per stage must be positive (got -1)");
}

TEST(Scheduler, WritesTheRequestedOutputsOnly) {
  CostModel costs = uniformCosts(4, 1, 2, 1, 1, 0.5);
  auto result = schedulePipeline(costs, request(ScheduleKind::OneFOneB, 2, 4,
                                                Policy::PipeFisher));
  ASSERT_TRUE(result.ok()) << result.error();
  const std::string dir = ::testing::TempDir();
  ScheduleOutputs outputs;
  outputs.reportJson = dir + "/pf-scheduler-test-report.json";
  outputs.svg = dir + "/pf-scheduler-test.svg";
  std::remove(outputs.reportJson.c_str());
  std::remove(outputs.svg.c_str());
  ASSERT_TRUE(writeScheduleOutputs(*result, outputs).ok());
  EXPECT_EQ(readFile(outputs.reportJson), reportToJson(result->report));
  EXPECT_EQ(readFile(outputs.svg),
            timelineToSvg(result->timeline, result->report));

  outputs.chromeTrace = dir + "/no-such-directory/trace.json";
  Status failed = writeScheduleOutputs(*result, outputs);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(),
            outputs.chromeTrace + ": cannot open for writing: No such file or directory");
}
