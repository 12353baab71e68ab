//===- PipelineTest.cpp - Schedules against their published formulas ------===//

#include "TestUtil.h"

using namespace pf::sched;
using namespace pf::sched::test;

namespace {

constexpr double kTol = 1e-9;

/// Runs the bare pipeline (no K-FAC) and checks the timeline.
PipelineStep bare(const CostModel &costs, ScheduleKind kind, int devices,
                  int micro, int layersPerStage, int chunks = 2) {
  ScheduleRequest r = request(kind, devices, micro, Policy::None, layersPerStage);
  r.chunks = chunks;
  return runValid(costs, r).step;
}

TEST(Pipeline, GPipeAnd1F1BBubbleShare) {
  // (p-1)/(m+p-1) exactly, whatever the forward/backward ratio.
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p : {1, 2, 3, 4, 8, 16})
      for (int m : {1, 2, 3, 4, 8, 16, 32}) {
        CostModel costs = uniformCosts(p, 1.0, 2.0);
        ScheduleResult r =
            runValid(costs, request(kind, p, m, Policy::None, 1));
        EXPECT_NEAR(r.report.bubbleFraction, double(p - 1) / (m + p - 1), kTol)
            << scheduleKindName(kind) << " p=" << p << " m=" << m;
        EXPECT_NEAR(r.step.makespan, (m + p - 1) * 3.0, kTol);
      }
}

TEST(Pipeline, OneFOneBKeepsAtMostPInFlight) {
  CostModel costs = uniformCosts(4, 1.0, 2.0);
  auto program = runValid(costs, request(ScheduleKind::OneFOneB, 4, 16)).program;
  for (int d = 0; d < 4; ++d) {
    int inFlight = 0, peak = 0;
    for (const PipelineOp &op : program.order[d]) {
      inFlight += op.pass == PassKind::Forward ? 1 : -1;
      peak = std::max(peak, inFlight);
    }
    EXPECT_EQ(peak, 4 - d) << "device " << d;
  }
}

TEST(Pipeline, ZBH1Bubble) {
  // (p-1)(T_F + T_B - T_W) per device on top of the work.
  for (int p : {2, 4, 8, 16})
    for (int m : {p, 2 * p, 4 * p})
      for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, {1.0, 1.2, 0.8},
                             {16.1, 13.5, 13.45}}) {
        CostModel costs = uniformCosts(p, f, b + w);
        for (LayerCost &l : costs.layers) {
          l.backwardInput = b;
          l.backwardWeight = w;
        }
        PipelineStep step = bare(costs, ScheduleKind::ZBH1, p, m, 1);
        EXPECT_NEAR(step.makespan, m * (f + b + w) + (p - 1) * (f + b - w), 1e-6)
            << "p=" << p << " m=" << m << " F=" << f << " B=" << b;
      }
}

TEST(Pipeline, InterleavedBubbleShrinksWithChunks) {
  // Megatron's interleaved 1F1B: bubble (p-1)(t_f + t_b)/v, where t_f and
  // t_b are a device's whole share (v chunks of 1/v each).
  for (int p : {2, 4, 8})
    for (int v : {1, 2, 3})
      for (int m : {p, 2 * p, 4 * p}) {
        CostModel costs = uniformCosts(p * v, 1.0 / v, 2.0 / v);
        PipelineStep step = bare(costs, ScheduleKind::Interleaved, p, m, 1, v);
        double ideal = m * 3.0;
        EXPECT_NEAR(step.makespan, ideal + (p - 1) * 3.0 / v, 1e-6)
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(Pipeline, ChimeraBubbleShareUniform) {
  // Chimera's (p-2)/(2m+p-2) with forward = backward, for N = D, 2D, 4D.
  for (int p : {2, 4, 8, 16})
    for (int n : {p, 2 * p, 4 * p}) {
      CostModel costs = uniformCosts(p, 1.0, 1.0);
      PipelineStep step = bare(costs, ScheduleKind::Chimera, p, n, 1);
      double busy = 0;
      for (double b : step.busy)
        busy += b;
      double share = 1 - busy / (p * step.makespan);
      EXPECT_NEAR(share, double(p - 2) / (2 * n + p - 2), kTol)
          << "p=" << p << " N=" << n;
    }
}

TEST(Pipeline, ChimeraMatchesPipeFisherBubbleCounts) {
  // PipeFisher counts, for Chimera with N = D, 0 forward and D-2 backward
  // bubbles: T = N t_f + (N + D - 2) t_b, also when backward != forward.
  for (int d : {4, 8, 16}) {
    CostModel costs = uniformCosts(d, 16.1, 26.95);
    PipelineStep step = bare(costs, ScheduleKind::Chimera, d, d, 1);
    EXPECT_NEAR(step.makespan, d * 16.1 + (2 * d - 2) * 26.95, 1e-6) << d;
  }
}

TEST(Pipeline, ChimeraPlacesTwoPipelinesInOppositeDirections) {
  CostModel costs = uniformCosts(4, 1.0, 2.0);
  auto program = runValid(costs, request(ScheduleKind::Chimera, 4, 8)).program;
  const PipelineLayout &l = program.layout;
  EXPECT_EQ(l.pipes, 2);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(l.deviceOf(0, s), s);
    EXPECT_EQ(l.deviceOf(1, s), 3 - s);
  }
  EXPECT_EQ(l.pipeOf(3), 0);
  EXPECT_EQ(l.pipeOf(4), 1);
}

TEST(Pipeline, P100BertLargeChimeraMatchesTheAnalyticModel) {
  // Reference setup: Chimera, D = 8, N = 8, 3 blocks per stage.
  CostModel costs = shippedProfile("p100-bert-large.json");
  ScheduleResult r = runValid(
      costs, request(ScheduleKind::Chimera, 8, 8, Policy::None, 3));
  const double tf = 3 * 16.10, tb = 3 * 26.95, n = 8, d = 8;
  const double bubbleF = 0, bubbleB = d - 2;
  const double tPipe = (bubbleF + n) * tf + (bubbleB + n) * tb;
  EXPECT_NEAR(r.step.makespan, tPipe, 1e-6);
  EXPECT_NEAR(r.report.utilizationWithoutKfac, n * (tf + tb) / tPipe, 1e-9);
  EXPECT_NEAR(r.report.utilizationWithoutKfac, 0.6805, 1e-4);
  // The reference's bound on steps per refresh: (t_inv + N t_kron)/T_bubble.
  EXPECT_NEAR(r.report.refreshLowerBound,
              (3 * 126.7 + n * 3 * 43.5) / (tPipe - n * (tf + tb)), 1e-9);
  EXPECT_NEAR(r.report.refreshLowerBound, 2.94, 0.005);
}

TEST(Pipeline, PointToPointCostDelaysConsumers) {
  CostModel costs = uniformCosts(4, 1.0, 2.0);
  PipelineStep without = bare(costs, ScheduleKind::GPipe, 4, 4, 1);
  costs.p2p = 0.5;
  ScheduleResult with = runValid(costs, request(ScheduleKind::GPipe, 4, 4));
  // The first forward reaches the last stage 3 sends later, and its
  // gradient comes back as late: 6 sends on the critical path.
  EXPECT_NEAR(with.step.makespan, without.makespan + 6 * 0.5, kTol);
  int sends = 0;
  for (const TimelineItem &it : with.step.items)
    sends += it.kind == ItemKind::SendRecv;
  EXPECT_EQ(sends, 2 * 3 * 4);
}

TEST(Pipeline, ChimeraAllReducesGradientsBetweenReplicas) {
  CostModel costs = uniformCosts(4, 1.0, 2.0);
  for (LayerCost &l : costs.layers)
    l.allreduce = 0.75;
  ScheduleResult r = runValid(costs, request(ScheduleKind::Chimera, 4, 4));
  int allReduces = 0;
  for (const TimelineItem &it : r.step.items)
    if (it.kind == ItemKind::AllReduce) {
      ++allReduces;
      EXPECT_NEAR(it.duration(), 0.75, kTol);
    }
  EXPECT_EQ(allReduces, 2 * 4);
  for (double g : r.step.gradientReady)
    EXPECT_LE(g, r.step.makespan + kTol);
}

TEST(Pipeline, EveryScheduleValidates) {
  CostModel costs = shippedProfile("p100-bert-base.json");
  costs.p2p = 0.3;
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
        ScheduleKind::Chimera, ScheduleKind::ZBH1})
    for (int micro : {4, 8, 12}) {
      if (kind == ScheduleKind::Interleaved && micro % 4)
        continue;
      ScheduleResult r = runValid(costs, request(kind, 4, micro));
      EXPECT_GT(r.step.makespan, 0) << scheduleKindName(kind);
    }
}

//===----------------------------------------------------------------------===//
// Bad input
//===----------------------------------------------------------------------===//

std::string errorOf(const CostModel &costs, const ScheduleRequest &r) {
  auto result = schedulePipeline(costs, r);
  EXPECT_FALSE(result.ok());
  return result.ok() ? "" : result.error();
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(PipelineErrors, ChimeraNeedsEvenStages) {
  CostModel costs = uniformCosts(6, 1, 2);
  std::string e = errorOf(costs, request(ScheduleKind::Chimera, 3, 4));
  EXPECT_TRUE(contains(e, "chimera needs an even number of stages (got 3)")) << e;
  e = errorOf(costs, request(ScheduleKind::Chimera, 2, 3));
  EXPECT_TRUE(contains(e, "even number of micro-batches")) << e;
}

TEST(PipelineErrors, MoreStagesThanLayers) {
  std::string e = errorOf(uniformCosts(12, 1, 2),
                          request(ScheduleKind::OneFOneB, 16, 16));
  EXPECT_TRUE(contains(e, "more stages (16) than layers (12)")) << e;
  ScheduleRequest r = request(ScheduleKind::Interleaved, 8, 8);
  r.chunks = 2;
  e = errorOf(uniformCosts(12, 1, 2), r);
  EXPECT_TRUE(contains(e, "more stages (16) than layers (12)")) << e;
}

TEST(PipelineErrors, StagesMustDivideTheLayersAsAsked) {
  std::string e = errorOf(uniformCosts(24, 1, 2),
                          request(ScheduleKind::OneFOneB, 5, 8, Policy::None, 4));
  EXPECT_TRUE(contains(e, "do not divide the layers")) << e;
  // A profile with fewer layers than the stages ask for lacks layers.
  e = errorOf(shippedProfile("p100-bert-base.json"),
              request(ScheduleKind::Chimera, 8, 8, Policy::None, 3));
  EXPECT_TRUE(contains(e, "need 24 layers")) << e;
  EXPECT_TRUE(contains(e, "only 12")) << e;
}

TEST(PipelineErrors, InterleavedNeedsWholeGroups) {
  std::string e = errorOf(uniformCosts(16, 1, 2),
                          request(ScheduleKind::Interleaved, 4, 6));
  EXPECT_TRUE(contains(e, "multiple of the stages")) << e;
}

TEST(PipelineErrors, NonPositiveSizes) {
  EXPECT_TRUE(contains(errorOf(uniformCosts(4, 1, 2),
                               request(ScheduleKind::GPipe, 0, 4)),
                       "must be positive"));
  EXPECT_TRUE(contains(errorOf(uniformCosts(4, 1, 2),
                               request(ScheduleKind::GPipe, 2, 0)),
                       "micro-batches must be positive"));
  EXPECT_TRUE(contains(errorOf(CostModel{}, request(ScheduleKind::GPipe, 1, 1)),
                       "no layers"));
}

TEST(PipelineErrors, UnknownNames) {
  auto s = parseScheduleKind("pipedream-2bw");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.error(), "unknown schedule 'pipedream-2bw'"));
  EXPECT_TRUE(contains(s.error(), "chimera"));
  auto p = parsePolicy("greedy");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.error(), "unknown policy 'greedy'"));
  EXPECT_EQ(*parseScheduleKind("ZB-H1"), ScheduleKind::ZBH1);
  EXPECT_EQ(*parseScheduleKind("1F1B"), ScheduleKind::OneFOneB);
}

TEST(PipelineErrors, BrokenProgramsAreReported) {
  CostModel costs = uniformCosts(2, 1, 2);
  PipelineConfig config;
  config.kind = ScheduleKind::OneFOneB;
  config.devices = 2;
  config.microbatches = 2;
  config.stageLayers = {{0}, {1}};
  auto program = buildPipeline(config, costs);
  ASSERT_TRUE(program.ok()) << program.error();
  // Device 0 runs the backward of micro-batch 0 before its forward.
  std::swap(program->order[0].front(), program->order[0].back());
  auto step = simulatePipeline(*program, costs);
  ASSERT_FALSE(step.ok());
  EXPECT_TRUE(contains(step.error(), "deadlocks")) << step.error();
}

} // namespace
