//===- RankRunnerTest.cpp - The rank runtime without a compiler -----------===//
//
// The rank runner (pf/RankRuntime/RankRunner.h) with a "lowered program"
// and a stage function written in plain C++: what it checks of a plan and
// of the program's slots, and that host code reads only the step's results.
// The binary links no LLVM or MLIR library (ctest checks it).
//
//===----------------------------------------------------------------------===//
#include "pf/RankRuntime/RankRunner.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Runtime/pfrt_rank.h"

#include <gtest/gtest.h>

#include <cstring>

namespace drv = mlir::pf::driver;

namespace {

/// One job of one rank for every test (MPI starts once per process).
struct Job : ::testing::Environment {
  static pfrt_context *ctx;
  static pfrt_comm *world;
  void SetUp() override {
    ctx = pfrt_context_create(nullptr);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(pfrt_comm_create(ctx, nullptr, &world), PFRT_OK) << pfrt_last_error(ctx);
  }
  void TearDown() override {
    pfrt_comm_destroy(world);
    pfrt_comm_finalize(ctx);
    pfrt_context_destroy(ctx);
  }
};
pfrt_context *Job::ctx = nullptr;
pfrt_comm *Job::world = nullptr;
const auto *job = ::testing::AddGlobalTestEnvironment(new Job);

/// stage0_forward: loss = w · Σ x, the graph input x (f32 [4]), the
/// parameter w (f32 [1]); its result `loss` is a stage value.
class SumStage final : public drv::StagePrograms {
public:
  SumStage() {
    context = pfrt_context_create(nullptr);
    params.push_back({"w", PFRT_F32, {1}, &w, sizeof(w)});
  }
  ~SumStage() override { pfrt_context_destroy(context); }
  bool hasEntry(const std::string &f) const override { return f == "stage0_forward"; }
  const std::vector<drv::TensorSpec> &inputs(const std::string &) const override {
    return in;
  }
  const std::vector<drv::TensorSpec> &outputs(const std::string &) const override {
    return out;
  }
  ::pf::Status run(const std::string &, const std::vector<drv::StageView> &inputs,
                   const std::vector<drv::StageView> &outputs) override {
    ++calls;
    const float *x = static_cast<const float *>(inputs.at(0).data);
    *static_cast<float *>(outputs.at(0).data) = w * (x[0] + x[1] + x[2] + x[3]);
    return ::pf::Status::success();
  }
  ::pf::Status run(const std::string &, const drv::NamedArrays &, drv::NamedArrays &) override {
    return ::pf::Status::error("not called");
  }
  const std::vector<drv::ModelParameter> &parameters() const override { return params; }
  ::pf::Status copyParametersToHost() override { return ::pf::Status::success(); }
  ::pf::Status copyParametersToBackend() override { return ::pf::Status::success(); }
  bool onBackendMemory() const override { return false; }
  pfrt_context *runtimeContext() const override { return context; }
  int64_t stageValueCopies() const override { return 0; }

  float w = 0.5f;
  int calls = 0;

private:
  pfrt_context *context = nullptr;
  std::vector<drv::TensorSpec> in{{"x", PFRT_F32, {4}, false}};
  std::vector<drv::TensorSpec> out{{"loss", PFRT_F32, {}, false}};
  std::vector<drv::ModelParameter> params;
};

/// What pf-lower-rank-programs makes of "%loss = run_stage forward
/// @stage0_forward; step_result loss %loss": the slot's descriptor written
/// into the arena before the call, then the two services.
int32_t program(pfrt_rank_host *host, pfrt_context *, pfrt_comm *, pfrt_tensor *slots,
                void *arena, pfrt_comm **, pfrt_context *, pfrt_comm *) {
  slots[0] = pfrt_tensor{};
  slots[0].data = arena;
  slots[0].dtype = PFRT_F32;
  const int64_t outputs[] = {0};
  if (int32_t status = pfrt_rank_run_stage(host, 0, /*forward*/ 0, "stage0_forward", 0, -1, 0,
                                           nullptr, 1, outputs))
    return status;
  return pfrt_rank_step_result(host, 1, "loss", 0);
}

/// The same, but the slot it hands the call holds an i32.
int32_t programOfAnotherType(pfrt_rank_host *host, pfrt_context *, pfrt_comm *,
                             pfrt_tensor *slots, void *arena, pfrt_comm **, pfrt_context *,
                             pfrt_comm *) {
  slots[0] = pfrt_tensor{};
  slots[0].data = arena;
  slots[0].dtype = PFRT_I32;
  const int64_t outputs[] = {0};
  return pfrt_rank_run_stage(host, 0, 0, "stage0_forward", 0, -1, 0, nullptr, 1, outputs);
}

drv::RankPlan plan() {
  drv::RankPlan p;
  p.rank = 0;
  p.ranks = 1;
  p.stages = {0};
  p.functions = {"stage0_forward"};
  p.program.name = "rank0";
  p.program.symbol = "pf_rank0";
  p.program.slots = 1;
  p.program.arenaBytes = 64;
  p.program.liveBytes = 4;
  return p;
}

drv::Values graph() {
  drv::NpyArray x;
  x.dtype = PFRT_F32;
  x.shape = {4};
  const float values[] = {1, 2, 3, 4};
  x.data.assign(reinterpret_cast<const char *>(values),
                reinterpret_cast<const char *>(values) + sizeof(values));
  return {{"x", x}};
}

} // namespace

TEST(RankRunner, RunsTheProgramAndReadsOnlyItsResults) {
  auto stages = std::make_unique<SumStage>();
  SumStage *stage = stages.get();
  auto runner = drv::RankRunner::create(plan(), program, std::move(stages), Job::ctx, Job::world,
                                        {});
  ASSERT_TRUE(runner.ok()) << runner.error();
  drv::Values results;
  ::pf::Status status = (*runner)->runStep(graph(), results, 1);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(results.count("loss"), 1u);
  float loss;
  std::memcpy(&loss, results["loss"].data.data(), sizeof(loss));
  EXPECT_EQ(loss, 5.0f);
  EXPECT_EQ(stage->calls, 1);
  // The update of a parameter is the next step's read: one copy.
  stage->w = 2.0f;
  ASSERT_TRUE((*runner)->runStep(graph(), results, 2).ok());
  std::memcpy(&loss, results["loss"].data.data(), sizeof(loss));
  EXPECT_EQ(loss, 20.0f);
  EXPECT_EQ((*runner)->hostStageValueBytes(), 8);
  EXPECT_EQ((*runner)->resultBytes(), 8);
  EXPECT_EQ((*runner)->plannedActivations().arenaBytes, 64);
  EXPECT_EQ((*runner)->summary(),
            "rank 0: stages [0], functions stage0_forward, parameters 1 (4 bytes)\n");
}

TEST(RankRunner, RefusesAPlanOfAnotherJob) {
  drv::RankPlan twoRanks = plan();
  twoRanks.ranks = 2;
  auto runner = drv::RankRunner::create(twoRanks, program, std::make_unique<SumStage>(),
                                        Job::ctx, Job::world, {});
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.error().find("for 2 ranks but the job has 1: start it with mpirun -np 2"),
            std::string::npos)
      << runner.error();
}

TEST(RankRunner, RefusesAProgramCallingAFunctionItsStagesLack) {
  drv::RankPlan other = plan();
  other.functions.push_back("stage1_forward");
  auto runner = drv::RankRunner::create(other, program, std::make_unique<SumStage>(), Job::ctx,
                                        Job::world, {});
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.error().find("calls 'stage1_forward', which its stage functions lack"),
            std::string::npos)
      << runner.error();
  auto noCode = drv::RankRunner::create(plan(), nullptr, std::make_unique<SumStage>(), Job::ctx,
                                        Job::world, {});
  ASSERT_FALSE(noCode.ok());
  EXPECT_NE(noCode.error().find("has no code"), std::string::npos) << noCode.error();
}

TEST(RankRunner, NamesTheOpWhoseSlotHoldsAnotherType) {
  auto runner = drv::RankRunner::create(plan(), programOfAnotherType,
                                        std::make_unique<SumStage>(), Job::ctx, Job::world, {});
  ASSERT_TRUE(runner.ok()) << runner.error();
  drv::Values results;
  ::pf::Status status = (*runner)->runStep(graph(), results, 1);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(
                "op 0 (pf.run_stage): slot 0 is int32 scalar but 'loss' is float32 scalar"),
            std::string::npos)
      << status.message();
}
