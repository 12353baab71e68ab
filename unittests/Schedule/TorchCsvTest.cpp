//===- TorchCsvTest.cpp - PyTorch's schedule CSV and the verifier ----------===//
//
// Golden orders: test/pf-sched/Inputs/torch holds PyTorch's own orders (how
// they were made: README.md there); pf's orders for the same configuration
// must equal them pass for pass, and pf's export must read back the same.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "pf/Schedule/TorchCsv.h"
#include "pf/Schedule/Verify.h"

#include <fstream>
#include <sstream>

using namespace pf::sched;
using pf::Expected;
using pf::Status;
using namespace pf::sched::test;

namespace {

std::string goldenPath(const std::string &name) {
  return std::string(PF_SCHED_TORCH_DIR) + "/" + name;
}

PipelineProgram pfProgram(ScheduleKind kind, int devices, int micro, int chunks = 2) {
  ScheduleRequest r = request(kind, devices, micro, Policy::None, 1);
  r.chunks = chunks;
  return runValid(uniformCosts(stagesFor(kind, devices, chunks), 1, 2), r).program;
}

bool sameOp(const PipelineOp &a, const PipelineOp &b) {
  return a.pass == b.pass && a.stage == b.stage && a.micro == b.micro &&
         a.overlapsPrevious == b.overlapsPrevious;
}

void expectGolden(const std::string &file, ScheduleKind kind, int devices, int micro,
                  int chunks = 2) {
  SCOPED_TRACE(file);
  auto golden = loadTorchCsv(goldenPath(file));
  ASSERT_TRUE(golden.ok()) << golden.error();
  Status verified = verifyProgram(golden->program, &golden->steps);
  EXPECT_TRUE(verified.ok()) << verified.message();
  PipelineProgram mine = pfProgram(kind, devices, micro, chunks);
  EXPECT_EQ(golden->program.layout.stages, mine.layout.stages);
  EXPECT_EQ(golden->program.layout.microbatches, micro);
  EXPECT_EQ(golden->program.layout.placement, mine.layout.placement);
  ASSERT_EQ(golden->program.order.size(), mine.order.size());
  for (size_t r = 0; r < mine.order.size(); ++r) {
    const auto &g = golden->program.order[r], &m = mine.order[r];
    ASSERT_EQ(g.size(), m.size()) << "rank " << r;
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(sameOp(g[i], m[i]))
          << "rank " << r << " pass " << i << ": PyTorch " << actionName(g[i])
          << ", pf " << actionName(m[i]);
  }
  // pf's export reads back as the same program.
  auto text = programToTorchCsv(mine);
  ASSERT_TRUE(text.ok()) << text.error();
  auto back = parseTorchCsv(*text, "export");
  ASSERT_TRUE(back.ok()) << back.error();
  for (size_t r = 0; r < mine.order.size(); ++r)
    for (size_t i = 0; i < mine.order[r].size(); ++i)
      EXPECT_TRUE(sameOp(back->program.order[r][i], mine.order[r][i]));
}

TEST(TorchCsv, OrdersEqualPyTorchs) {
  expectGolden("1f1b-4x8.csv", ScheduleKind::OneFOneB, 4, 8);
  expectGolden("interleaved-4x2x8.csv", ScheduleKind::Interleaved, 4, 8, 2);
  expectGolden("zbv-4x8.csv", ScheduleKind::ZBV, 4, 8);
  expectGolden("zbv-2x2.csv", ScheduleKind::ZBV, 2, 2);
  expectGolden("dualpipev-4x8.csv", ScheduleKind::DualPipeV, 4, 8);
  expectGolden("dualpipev-2x6.csv", ScheduleKind::DualPipeV, 2, 6);
}

TEST(TorchCsv, ExportWritesPyTorchsNotation) {
  auto text = programToTorchCsv(pfProgram(ScheduleKind::DualPipeV, 2, 4));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("OVERLAP_F_B"), std::string::npos);
  EXPECT_EQ(text->substr(0, 9), "0F0,0F1,0");
  auto chimera = programToTorchCsv(pfProgram(ScheduleKind::Chimera, 2, 4));
  ASSERT_FALSE(chimera.ok());
  EXPECT_NE(chimera.error().find("two pipelines"), std::string::npos);
}

std::string parseError(const std::string &text) {
  auto parsed = parseTorchCsv(text, "t.csv");
  if (!parsed.ok())
    return parsed.error();
  Status s = verifyProgram(parsed->program, &parsed->steps);
  return s.ok() ? "" : s.message();
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(TorchCsv, BadInputIsNamed) {
  std::string e = parseError("0F0,0X0,0B0\n");
  EXPECT_TRUE(contains(e, "t.csv: line 1 (rank 0), step 1: unknown action 'X'")) << e;
  e = parseError("0F0,F0\n");
  EXPECT_TRUE(contains(e, "step 1: malformed action 'F0'")) << e;
  e = parseError("0F0,0SEND_F0\n");
  EXPECT_TRUE(contains(e, "unknown action 'SEND_F'")) << e;
  e = parseError("0F0,(0F1;1B0\n");
  EXPECT_TRUE(contains(e, "malformed overlapped pair")) << e;
  EXPECT_TRUE(contains(parseError(""), "empty schedule"));
  e = parseError("0F0,1F0\n1F0\n");
  EXPECT_TRUE(contains(e, "stage 1 runs on rank 0 and on rank 1 (line 2, step 0)")) << e;
  e = parseError("1F0,1B0\n0F0,0B0\n");
  EXPECT_TRUE(contains(e, "fit none of pf's placements")) << e;
}

TEST(Verifier, NamesRankStepAndAction) {
  // Micro-batch 1 never runs its forward on stage 1.
  std::string e = parseError("0F0,0F1,0B0,0B1\n1F0,1B0,,1B1\n");
  EXPECT_TRUE(contains(e, "stage 1 never runs the forward of micro-batch 1 (1F1, on rank 1)"))
      << e;
  // Twice.
  e = parseError("0F0,0B0,0F0\n1F0,1B0\n");
  EXPECT_TRUE(contains(e, "rank 0, step 2, action 0F0: the forward of stage 0, micro-batch "
                          "0 runs a second time (first at rank 0, step 0")) << e;
  // Rank 0 waits for 1B0 before its forward: deadlock.
  e = parseError("0B0,0F0\n1F0,1B0\n");
  EXPECT_TRUE(contains(e, "rank 0, step 0, action 0B0: waits for 0F0, which the same rank "
                          "runs later, at step 1 (dependency order)")) << e;
  // Rank 1 starts with micro-batch 1, which rank 0 forwards only after the
  // backward of micro-batch 0 comes back from rank 1.
  e = parseError("0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n");
  EXPECT_TRUE(contains(e, "the schedule deadlocks: rank 0, step 1, action 0B0: waits for "
                          "1B0, which rank 1 runs at step 2 after its own blocked rank 1, "
                          "step 0, action 1F1")) << e;
  // A weight gradient before its input gradient.
  e = parseError("0F0,0W0,0I0\n1F0,1I0,1W0\n");
  EXPECT_TRUE(contains(e, "rank 0, step 1, action 0W0: waits for 0I0")) << e;
  EXPECT_EQ(parseError("0F0,0I0,,0W0\n1F0,1I0,1W0\n"), "");
  EXPECT_EQ(parseError("0F0,0B0\r\n1F0,1B0\r\n\n\n"), ""); // CRLF, blank lines at the end
}

} // namespace
