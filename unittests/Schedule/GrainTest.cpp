//===- GrainTest.cpp - Blocks split into halves or linears ----------------===//

#include "pf/Schedule/Grain.h"
#include "pf/Schedule/Partition.h"
#include "pf/Schedule/Scheduler.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace pf::sched;

namespace {

std::string profilePath(const std::string &name) {
  return std::string(PF_SCHED_PROFILE_DIR) + "/" + name;
}

/// Every quantity a split must conserve, per layer.
std::vector<double> totalsOf(const LayerCost &l) {
  return {l.forward,
          l.backwardInput,
          l.backwardWeight,
          l.curvatureA,
          l.curvatureB,
          l.inversionA,
          l.inversionB,
          l.precondition,
          l.allreduce,
          l.factorAllreduce,
          l.memory.activationBytes,
          l.memory.parameters};
}

/// A model with distinct numbers in every field, so that a share applied to
/// the wrong quantity shows.
CostModel unevenBlocks(int blocks) {
  CostModel costs;
  costs.name = "uneven";
  costs.block = {64, 4, 32, 8};
  costs.hasMemory = true;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(0.5, 20.0);
  for (int b = 0; b < blocks; ++b) {
    LayerCost l;
    l.name = "block" + std::to_string(b);
    l.forward = dist(rng);
    l.backwardInput = dist(rng);
    l.backwardWeight = dist(rng);
    l.curvatureA = dist(rng);
    l.curvatureB = dist(rng);
    l.inversionA = dist(rng);
    l.inversionB = dist(rng);
    l.precondition = dist(rng);
    l.allreduce = dist(rng);
    l.factorAllreduce = dist(rng);
    l.memory.activationBytes = 1e6 * dist(rng);
    l.memory.parameters = 1e5 * dist(rng);
    costs.layers.push_back(l);
  }
  return costs;
}

TEST(Grain, SplitConservesEveryBlocksTotals) {
  const CostModel costs = unevenBlocks(3);
  for (PartitionGrain grain : {PartitionGrain::Half, PartitionGrain::Linear}) {
    auto split = splitCostModel(costs, grain);
    ASSERT_TRUE(split.ok()) << split.error();
    const int units = unitsPerBlock(grain);
    ASSERT_EQ(split->layers.size(), costs.layers.size() * units);
    for (size_t b = 0; b < costs.layers.size(); ++b) {
      std::vector<double> want = totalsOf(costs.layers[b]), got(want.size(), 0);
      std::vector<std::pair<double, double>> linears;
      for (int u = 0; u < units; ++u) {
        const LayerCost &l = split->layers[b * units + u];
        EXPECT_EQ(l.name.rfind(costs.layers[b].name + ".", 0), 0u) << l.name;
        std::vector<double> t = totalsOf(l);
        for (size_t i = 0; i < t.size(); ++i) {
          EXPECT_GE(t[i], 0);
          got[i] += t[i];
        }
        linears.insert(linears.end(), l.memory.kfacLinears.begin(), l.memory.kfacLinears.end());
      }
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-9 * want[i]) << "block " << b << ", quantity " << i;
      // The 6 linears of a BERT block, each in exactly one unit.
      const double h = costs.block.hidden;
      std::vector<std::pair<double, double>> bert = {{h, h}, {h, h},     {h, h},
                                                     {h, h}, {h, 4 * h}, {4 * h, h}};
      EXPECT_EQ(linears, bert);
    }
  }
}

TEST(Grain, HalvesFollowTheAnalyticShares) {
  // BERT-Base shape: forward attention 8bsh^2 + 4bs^2h, FFN 16bsh^2.
  auto costs = loadProfile(profilePath("p100-bert-base.json"));
  ASSERT_TRUE(costs.ok()) << costs.error();
  auto split = splitCostModel(*costs, PartitionGrain::Half);
  ASSERT_TRUE(split.ok()) << split.error();
  const double h = 768, s = 128;
  const double attention = 8 * h * h + 4 * s * h, ffn = 16 * h * h;
  EXPECT_EQ(split->layers[0].name, "block0.attn");
  EXPECT_EQ(split->layers[1].name, "block0.ffn");
  EXPECT_NEAR(split->layers[0].forward, 9.75 * attention / (attention + ffn), 1e-9);
  EXPECT_NEAR(split->layers[1].forward, 9.75 * ffn / (attention + ffn), 1e-9);
  // Inversion A: widths h (Q, K, V, output, FFN1) and 4h (FFN2): n^3 each.
  EXPECT_NEAR(split->layers[0].inversionA, 71.7 / 2 * 4 / 69, 1e-9);
  EXPECT_NEAR(split->layers[1].inversionA, 71.7 / 2 * 65 / 69, 1e-9);
}

TEST(Grain, BlockGrainKeepsTheModelAndUnknownShapesAreErrors) {
  CostModel costs = unevenBlocks(2);
  auto same = splitCostModel(costs, PartitionGrain::Block);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->layers.size(), 2u);
  costs.block = {};
  auto refused = splitCostModel(costs, PartitionGrain::Half);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("'block'"), std::string::npos) << refused.error();
  EXPECT_FALSE(parsePartitionGrain("quarter").ok());
  EXPECT_EQ(*parsePartitionGrain("Linear"), PartitionGrain::Linear);
}

TEST(Grain, MinMaxPartitionOfUnitsMatchesBruteForce) {
  for (PartitionGrain grain : {PartitionGrain::Half, PartitionGrain::Linear}) {
    for (int blocks = 1; blocks <= 3; ++blocks) {
      auto split = splitCostModel(unevenBlocks(blocks), grain);
      ASSERT_TRUE(split.ok());
      std::vector<double> cost;
      for (const LayerCost &l : split->layers)
        cost.push_back(l.forward + l.backward());
      for (int p = 1; p <= static_cast<int>(cost.size()) && p <= 8; ++p) {
        auto part = partitionMinMax(cost, p);
        ASSERT_TRUE(part.ok()) << part.error();
        EXPECT_NEAR(part->maxStageCost, test::bruteForceMinMax(cost, p), 1e-9)
            << partitionGrainName(grain) << ", " << blocks << " blocks, " << p << " stages";
      }
    }
  }
}

} // namespace
