//===- ZeroBubbleTest.cpp - ZB-H2, ZB-V, DualPipe(V) against their formulas ===//
//
// Bubbles with uniform costs (every stage F, B (input gradient), W (weight
// gradient)), per device:
//  - idle time of a step: makespan - work;
//  - steady-state bubble: the longest busy span (first start to last end of
//    a device) - work, the idle time per step when consecutive steps overlap
//    (what the zero-bubble papers count: their schedules start the next step
//    where the skew allows, with the optimizer step validated afterwards).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "pf/Schedule/TorchCsv.h"
#include "pf/Schedule/Verify.h"

#include <map>
#include <tuple>

using namespace pf::sched;
using pf::Expected;
using pf::Status;
using namespace pf::sched::test;

namespace {

constexpr double kTol = 1e-6;

CostModel zbCosts(int layers, double f, double b, double w) {
  CostModel costs = uniformCosts(layers, f, b + w);
  for (LayerCost &l : costs.layers) {
    l.backwardInput = b;
    l.backwardWeight = w;
  }
  return costs;
}

double steadySpan(const PipelineStep &step);

PipelineStep run(const CostModel &costs, ScheduleKind kind, int devices, int micro) {
  ScheduleResult r = runValid(costs, request(kind, devices, micro, Policy::None, 1));
  Status verified = verifyProgram(r.program);
  EXPECT_TRUE(verified.ok()) << verified.message();
  EXPECT_NEAR(r.step.steadyStep, steadySpan(r.step), kTol);
  return r.step;
}

double work(const PipelineStep &step) {
  double most = 0;
  for (double b : step.busy)
    most = std::max(most, b);
  return most;
}

double stepBubble(const PipelineStep &step) { return step.makespan - work(step); }

/// The longest busy span of a device, from the items.
double steadySpan(const PipelineStep &step) {
  std::vector<double> first(step.layout.devices, 1e300), last(step.layout.devices, 0);
  for (const TimelineItem &it : step.items)
    if (it.lane == Lane::Compute) {
      first[it.device] = std::min(first[it.device], it.start);
      last[it.device] = std::max(last[it.device], it.end);
    }
  double span = 0;
  for (int d = 0; d < step.layout.devices; ++d)
    span = std::max(span, last[d] - first[d]);
  return span;
}

double steadyBubble(const PipelineStep &step) { return steadySpan(step) - work(step); }

bool programToTorchCsvOk(const PipelineProgram &p) { return programToTorchCsv(p).ok(); }

/// Every micro-batch's F, B and W (or whole backward) once on every stage.
void expectEveryPassOnce(const PipelineProgram &program) {
  const PipelineLayout &l = program.layout;
  std::map<std::tuple<int, int, int>, int> count; // (stage, micro, slot)
  for (const auto &ops : program.order)
    for (const PipelineOp &op : ops) {
      int slot = op.pass == PassKind::Forward          ? 0
                 : op.pass == PassKind::BackwardWeight ? 2
                                                       : 1;
      ++count[{op.stage, op.micro, slot}];
      if (op.pass == PassKind::Backward)
        ++count[{op.stage, op.micro, 2}]; // a whole backward holds its W
    }
  for (int s = 0; s < l.stages; ++s)
    for (int m = 0; m < l.microbatches; ++m)
      for (int slot = 0; slot < 3; ++slot)
        EXPECT_EQ((count[{s, m, slot}]), 1)
            << scheduleKindName(l.kind) << " stage " << s << " micro " << m
            << " slot " << slot;
}

struct Ratio {
  double f, b, w;
};
const Ratio kRatios[] = {{1, 1, 1}, {1, 1.2, 0.8}, {1.5, 1, 1}, {1, 1, 0.5}, {2, 1, 1}};
/// Ratios with T_F = T_B, where DualPipe's formula is exact in pf's model.
const Ratio kEqualFB[] = {{1, 1, 1}, {1, 1, 0.5}, {2, 2, 1}, {1, 1, 0.8}};

std::string label(int p, int m, Ratio r) {
  return "p=" + std::to_string(p) + " m=" + std::to_string(m) + " F=" +
         std::to_string(r.f) + " B=" + std::to_string(r.b) + " W=" + std::to_string(r.w);
}

TEST(ZeroBubble, ZBH2HasNoSteadyBubbleWhenPassesAreEqual) {
  // Qi et al.: (p-1)(T_F + T_B - 2T_W) = 0 for T_F = T_B = T_W; a step
  // with a flush still waits (p-1) T_F for the last device to start.
  // From m = 2p on (fewer cannot fill the extra warm-up).
  for (int p : {2, 3, 4, 8})
    for (int m : {2 * p, 3 * p, 4 * p}) {
      PipelineStep step = run(zbCosts(p, 1, 1, 1), ScheduleKind::ZBH2, p, m);
      EXPECT_NEAR(steadyBubble(step), 0, kTol) << label(p, m, {1, 1, 1});
      EXPECT_NEAR(stepBubble(step), p - 1, kTol) << label(p, m, {1, 1, 1});
    }
}

TEST(ZeroBubble, ZBH2NeverWorseThanZBH1) {
  // The list scheduler adapts to the costs; it never does worse than
  // ZB-H1's (p-1)(T_F + T_B - T_W).
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 4 * p})
      for (Ratio r : kRatios) {
        PipelineStep step = run(zbCosts(p, r.f, r.b, r.w), ScheduleKind::ZBH2, p, m);
        EXPECT_LE(steadyBubble(step), (p - 1) * (r.f + r.b - r.w) + kTol) << label(p, m, r);
        expectEveryPassOnce(runValid(zbCosts(p, r.f, r.b, r.w),
                                     request(ScheduleKind::ZBH2, p, m, Policy::None, 1))
                                .program);
      }
}

TEST(ZeroBubble, ZBVHasNoSteadyBubbleWhenPassesAreEqual) {
  // Zero bubble for T_F = T_B = T_W (per chunk); with a flush the middle
  // devices start (p-1) T_F late.
  for (int p : {2, 3, 4, 8})
    for (int m : {2 * p - 1, 2 * p, 4 * p}) {
      PipelineStep step = run(zbCosts(2 * p, 1, 1, 1), ScheduleKind::ZBV, p, m);
      EXPECT_NEAR(steadyBubble(step), 0, kTol) << label(p, m, {1, 1, 1});
      EXPECT_NEAR(stepBubble(step), p - 1, kTol) << label(p, m, {1, 1, 1});
    }
}

TEST(ZeroBubble, ZBVWithFewMicrobatchesDropsTheMissingOnes) {
  // PyTorch's order for N < 2p-1 is the full one without the absent
  // micro-batches; it must still run and hold every pass once.
  for (int p : {2, 4})
    for (int m = 1; m < 2 * p - 1; ++m) {
      CostModel costs = zbCosts(2 * p, 1, 1, 1);
      expectEveryPassOnce(
          runValid(costs, request(ScheduleKind::ZBV, p, m, Policy::None, 1)).program);
    }
}

TEST(ZeroBubble, DualPipeBubbleFormula) {
  // DeepSeek's README: (PP/2-1)(F&B + B - 3W), B the whole backward, F&B
  // the overlapped pair (here F + B: the pair runs back to back, both outputs
  // leave at its end). DualPipeV on D devices is DualPipe on 2D ranks
  // folded: (D-1)(...) with the costs of one chunk.
  for (ScheduleKind kind : {ScheduleKind::DualPipe, ScheduleKind::DualPipeV})
    for (int p : {2, 4, 8})
      for (int m : {2 * p, 4 * p})
        for (Ratio r : kEqualFB) {
          const bool v = kind == ScheduleKind::DualPipeV;
          PipelineStep step = run(zbCosts(v ? 2 * p : p, r.f, r.b, r.w), kind, p, m);
          const double whole = r.b + r.w, pair = r.f + whole;
          const double ranks = v ? 2 * p : p;
          EXPECT_NEAR(stepBubble(step), (ranks / 2 - 1) * (pair + whole - 3 * r.w), kTol)
              << scheduleKindName(kind) << " " << label(p, m, r);
        }
}

TEST(ZeroBubble, DualPipeHoldsEveryPassOnce) {
  // For T_F != T_B pf measures about (PP/2-1)(2F + B_input - W)
  // (docs/schedule.md); the formula above is exact only for T_F = T_B.
  for (ScheduleKind kind : {ScheduleKind::DualPipe, ScheduleKind::DualPipeV})
    for (int p : {2, 4, 8})
      for (Ratio r : kRatios) {
        const bool v = kind == ScheduleKind::DualPipeV;
        CostModel costs = zbCosts(v ? 2 * p : p, r.f, r.b, r.w);
        expectEveryPassOnce(
            runValid(costs, request(kind, p, 2 * p, Policy::None, 1)).program);
      }
}

TEST(ZeroBubble, DualPipeRunsTwoReplicasLikeChimera) {
  CostModel costs = zbCosts(4, 1, 1, 1);
  ScheduleResult r = runValid(costs, request(ScheduleKind::DualPipe, 4, 8, Policy::None, 1));
  const PipelineLayout &l = r.program.layout;
  EXPECT_EQ(l.pipes, 2);
  EXPECT_EQ(l.deviceOf(1, 0), 3);
  EXPECT_FALSE(programToTorchCsvOk(r.program));
}

TEST(ZeroBubble, ShapeErrors) {
  CostModel costs = zbCosts(8, 1, 1, 1);
  auto e = schedulePipeline(costs, request(ScheduleKind::DualPipe, 3, 6));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("dualpipe needs an even number of stages"), std::string::npos);
  e = schedulePipeline(costs, request(ScheduleKind::DualPipeV, 4, 6));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("dualpipev needs at least 2 x 4 = 8 micro-batches"),
            std::string::npos)
      << e.error();
  EXPECT_EQ(*parseScheduleKind("ZB-V"), ScheduleKind::ZBV);
  EXPECT_EQ(*parseScheduleKind("dualpipev"), ScheduleKind::DualPipeV);
  EXPECT_EQ(*parseScheduleKind("zb2p"), ScheduleKind::ZBH2);
}

} // namespace
