//===- PartitionTest.cpp - Contiguous min-max partitioning ----------------===//

#include "pf/Schedule/Partition.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

using namespace pf::sched;

namespace {

TEST(Partition, UniformLayersSplitEvenly) {
  auto p = partitionMinMax(std::vector<double>(24, 1.0), 8);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->maxStageCost, 3);
  for (double c : p->stageCost)
    EXPECT_EQ(c, 3);
}

TEST(Partition, UnevenCountSpreadsTheRemainder) {
  // 24 layers on 16 stages: the best maximum is 2 layers, and the tie-break
  // (least sum of squares) still gives every stage one or two layers.
  auto p = partitionMinMax(std::vector<double>(24, 1.0), 16);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->maxStageCost, 2);
  EXPECT_EQ(p->numStages(), 16);
  for (double c : p->stageCost)
    EXPECT_TRUE(c == 1 || c == 2);
}

TEST(Partition, MatchesBruteForceOnRandomCosts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(0.1, 10.0);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + trial % 9;
    int stages = 1 + trial % n;
    std::vector<double> cost(n);
    for (double &c : cost)
      c = dist(rng);
    auto p = partitionMinMax(cost, stages);
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_NEAR(p->maxStageCost, test::bruteForceMinMax(cost, stages), 1e-9);
    // The reported stages cover the layers contiguously.
    EXPECT_EQ(p->firstLayer.front(), 0);
    EXPECT_EQ(p->firstLayer.back(), n);
    for (int s = 0; s < stages; ++s)
      EXPECT_LT(p->firstLayer[s], p->firstLayer[s + 1]);
  }
}

TEST(Partition, MemoryCapIsRespected) {
  std::vector<double> cost = {1, 1, 1, 1, 1, 1};
  std::vector<double> memory = {5, 1, 1, 1, 1, 5};
  auto p = partitionMinMax(cost, 3, memory, 6.0);
  ASSERT_TRUE(p.ok()) << p.error();
  for (int s = 0; s < 3; ++s) {
    double m = 0;
    for (int l = p->firstLayer[s]; l < p->firstLayer[s + 1]; ++l)
      m += memory[l];
    EXPECT_LE(m, 6.0);
  }
}

TEST(Partition, ImpossibleMemoryCapIsAnError) {
  auto p = partitionMinMax({1, 1, 1}, 2, {5, 5, 5}, 4.0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("memory cap"), std::string::npos) << p.error();
}

TEST(Partition, MoreStagesThanLayersIsAnError) {
  auto p = partitionMinMax({1, 1}, 3);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("more stages (3) than layers (2)"), std::string::npos)
      << p.error();
}

TEST(Partition, UniformRequestMustDivideTheLayers) {
  auto tooFew = partitionUniform(std::vector<double>(24, 1.0), 8, 2);
  ASSERT_FALSE(tooFew.ok());
  EXPECT_NE(tooFew.error().find("do not divide"), std::string::npos)
      << tooFew.error();
  auto tooMany = partitionUniform(std::vector<double>(12, 1.0), 8, 3);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_NE(tooMany.error().find("missing"), std::string::npos)
      << tooMany.error();
  auto ok = partitionUniform(std::vector<double>(24, 2.0), 8, 3);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->maxStageCost, 6);
}

} // namespace
