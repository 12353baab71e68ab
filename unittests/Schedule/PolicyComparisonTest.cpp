//===- PolicyComparisonTest.cpp - pf against the reference greedy ---------===//
//
// Issue 5, item 7: on every cell of {GPipe, 1F1B, Chimera, interleaved,
// ZB-H1} x D in {4, 8, 16} x N in {D, 2D, 4D} x {P100 BERT-Base, BERT-Large},
// pf refreshes at least as often as pipefisher, uses the devices at least as
// well and its steps are no longer; both timelines are valid.
//
// Cells whose pipeline has more stages than the model has layers are skipped
// (BERT-Base, 12 blocks: D = 16, and interleaved with 2 chunks at D >= 8;
// BERT-Large, 24 blocks: interleaved at D = 16): a stage cannot be empty.
// When D does not divide the layers (BERT-Base D = 8, BERT-Large D = 16,
// interleaved BERT-Base D = 4 and BERT-Large D = 8) the min-max partitioner
// balances them, as the reference's auto-partitioning would.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace pf::sched;
using namespace pf::sched::test;

namespace {

struct Cell {
  std::string profile;
  ScheduleKind kind;
  int devices;
  int micro;
};

std::string name(const Cell &c) {
  return c.profile + " " + scheduleKindName(c.kind) + " D=" +
         std::to_string(c.devices) + " N=" + std::to_string(c.micro);
}

class PolicyComparison : public ::testing::TestWithParam<Cell> {};

TEST_P(PolicyComparison, PfIsAtLeastAsGoodAsPipeFisher) {
  const Cell &cell = GetParam();
  CostModel costs = shippedProfile(cell.profile);
  const int layers = static_cast<int>(costs.layers.size());
  const int stages = stagesFor(cell.kind, cell.devices, 2);
  if (stages > layers)
    GTEST_SKIP() << stages << " stages > " << layers << " layers";
  const int perStage = layers % stages == 0 ? layers / stages : 0;

  ScheduleResult pf =
      runValid(costs, request(cell.kind, cell.devices, cell.micro, Policy::PF, perStage));
  ScheduleResult ref = runValid(
      costs, request(cell.kind, cell.devices, cell.micro, Policy::PipeFisher, perStage));
  const Report &a = pf.report, &b = ref.report;
  EXPECT_LE(a.refreshSteps, b.refreshSteps) << name(cell);
  EXPECT_GE(a.utilizationWithKfac, b.utilizationWithKfac - 1e-9) << name(cell);
  EXPECT_LE(a.stepTimeMs, b.stepTimeMs + 1e-9 * b.stepTimeMs) << name(cell);
  // pf's own windows win; it never falls back to the reference's.
  EXPECT_FALSE(a.usedReference) << name(cell);
  // Both run the same pipeline.
  EXPECT_DOUBLE_EQ(a.utilizationWithoutKfac, b.utilizationWithoutKfac);
}

std::vector<Cell> cells() {
  std::vector<Cell> out;
  for (const char *profile : {"p100-bert-base.json", "p100-bert-large.json"})
    for (ScheduleKind kind :
         {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Chimera,
          ScheduleKind::Interleaved, ScheduleKind::ZBH1})
      for (int d : {4, 8, 16})
        for (int n : {d, 2 * d, 4 * d})
          out.push_back({profile, kind, d, n});
  return out;
}

std::string cellName(const ::testing::TestParamInfo<Cell> &info) {
  std::string s = info.param.profile.substr(5, info.param.profile.size() - 10) +
                  "_" + scheduleKindName(info.param.kind) + "_D" +
                  std::to_string(info.param.devices) + "_N" +
                  std::to_string(info.param.micro);
  for (char &c : s)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Grid, PolicyComparison, ::testing::ValuesIn(cells()),
                         cellName);

} // namespace
