//===- MeasuredTimelineTest.cpp - figures, pictures, simulation of a run ---===//
//
// Synthetic measured runs with known durations: a GPipe step of D ranks and
// N micro-batches placed by the closed form of a blocking-free GPipe (rank r
// runs forward m at (m + r)·tf; the backwards in reverse micro-batch order
// after the last forward), an update after the flush, and receives on the
// communication lane. The figures are checked against the numbers worked out
// by hand in each test.
//
//===----------------------------------------------------------------------===//

#include "pf/PipelineRuntime/MeasuredTimeline.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace {
using namespace mlir::pf::driver;

struct Shape {
  int ranks = 2;
  int micro = 4;
  double tf = 1e-3, tb = 2e-3; ///< seconds
  double update = 0.5e-3;
  double recv = 0.25e-3; ///< a receive that does not wait
};

/// One GPipe step starting at `t0`, all durations scaled by `scale`.
/// Returns the step's end.
double addGpipeStep(MeasuredRun &run, const Shape &s, int64_t step, double t0,
                    double scale) {
  const int D = s.ranks, N = s.micro;
  const double tf = s.tf * scale, tb = s.tb * scale;
  auto add = [&](int r, MeasuredKind kind, int64_t m, double start, double end,
                 int64_t stage) {
    MeasuredEvent e;
    e.rank = r;
    e.step = step;
    e.kind = kind;
    e.stage = stage;
    e.microbatch = m;
    e.start = t0 + start;
    e.end = t0 + end;
    run.events.push_back(e);
  };
  for (int r = 0; r < D; ++r) {
    for (int m = 0; m < N; ++m) {
      double f = (m + r) * tf;
      add(r, MeasuredKind::Forward, m, f, f + tf, r);
      if (r > 0) // the first receive waits for the previous rank's forward
        add(r, MeasuredKind::Recv, m, m == 0 ? 0 : f - s.recv * scale, f, r);
      int j = N - 1 - m; // backwards run m = N-1 .. 0
      double b = (N + D - 1) * tf + (j + D - 1 - r) * tb;
      add(r, MeasuredKind::Backward, m, b, b + tb, r);
    }
    double flush = (N + D - 1) * (tf + tb);
    add(r, MeasuredKind::Update, -1, flush, flush + s.update * scale, r);
  }
  return t0 + (N + D - 1) * (tf + tb) + s.update * scale;
}

/// Step 0 (warm-up) twice as slow, steps 1 and 2 as given, 1 ms apart.
MeasuredRun gpipeRun(const Shape &s = {}) {
  MeasuredRun run;
  run.ranks = s.ranks;
  run.stages = s.ranks;
  run.microbatches = s.micro;
  run.schedule = "gpipe";
  double t = 100.0; // an arbitrary clock origin
  t = addGpipeStep(run, s, 0, t, 2.0) + 1e-3;
  t = addGpipeStep(run, s, 1, t, 1.0) + 1e-3;
  addGpipeStep(run, s, 2, t, 1.0);
  return run;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tempDir() {
  char tmpl[] = "/tmp/pf-measured-XXXXXX";
  const char *dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "/tmp";
}

size_t count(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

TEST(MeasuredTimeline, FiguresOfGpipe) {
  // D=2, N=4, tf=1, tb=2, update 0.5 (ms): T_pipe = (N+D-1)(tf+tb) = 15,
  // step 15.5; per rank 4·(1+2) = 12 ms of passes, busy 12.5, idle 3;
  // bubbles per rank 15-12 = 3, fraction 6/30 = (D-1)/(N+D-1) = 0.2.
  auto r = summarize(gpipeRun(), 1, -1);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->steps, 2);
  EXPECT_EQ(r->lastStep, 2);
  EXPECT_NEAR(r->pipelineSpanMs, 15.0, 1e-9);
  EXPECT_NEAR(r->stepTimeMs, 15.5, 1e-9);
  ASSERT_EQ(r->perRank.size(), 2u);
  for (const MeasuredRankFigures &f : r->perRank) {
    EXPECT_NEAR(f.pipelineMs, 12.0, 1e-9);
    EXPECT_NEAR(f.otherMs, 0.5, 1e-9);
    EXPECT_NEAR(f.busyMs, 12.5, 1e-9);
    EXPECT_NEAR(f.idleMs, 3.0, 1e-9);
    EXPECT_NEAR(f.utilizationWithoutKfac, 12.0 / 15.5, 1e-12);
  }
  // Rank 1 receives 4 times: 1 ms (waiting for forward 0) + 3 × 0.25 ms.
  EXPECT_NEAR(r->perRank[0].commMs, 0.0, 1e-12);
  EXPECT_NEAR(r->perRank[1].commMs, 1.75, 1e-9);
  EXPECT_NEAR(r->utilizationWithoutKfac, 24.0 / 31.0, 1e-12);
  EXPECT_NEAR(r->utilizationWithKfac, 24.0 / 31.0, 1e-12);
  EXPECT_NEAR(r->bubbleMs, 6.0, 1e-9);
  EXPECT_NEAR(r->bubbleFraction, 0.2, 1e-12);
  EXPECT_NEAR(r->bubbleFill, 0.0, 1e-12);

  // The warm-up step (twice as slow) counts when asked for: mean of 31 and 15.5.
  auto all = summarize(gpipeRun(), 0, 2);
  ASSERT_TRUE(static_cast<bool>(all));
  EXPECT_NEAR(all->stepTimeMs, (31.0 + 15.5 + 15.5) / 3, 1e-9);

  EXPECT_NE(r->text().find("bubble fraction"), std::string::npos);
  auto json = llvm::json::parse(r->json());
  ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
  EXPECT_NEAR(*json->getAsObject()->getNumber("step_time_ms"), 15.5, 1e-9);
}

TEST(MeasuredTimeline, KfacInTheBubbles) {
  MeasuredRun run = gpipeRun();
  // Step 1 starts at t1 (rank 0's first forward). Rank 0 idles in [4, 7) ms
  // of the step: a 1 ms factor there is inside a bubble; a 1 ms
  // preconditioning after the update (at [15.5, 16.5)) is outside.
  double t1 = 1e300;
  for (const MeasuredEvent &e : run.events)
    if (e.step == 1)
      t1 = std::min(t1, e.start);
  MeasuredEvent a{0, 1, MeasuredKind::KfacFactorA, 0, 3, 0, t1 + 4e-3, t1 + 5e-3};
  MeasuredEvent p{0, 1, MeasuredKind::Precondition, 0, -1, 0, t1 + 15.5e-3,
                  t1 + 16.5e-3};
  run.events.push_back(a);
  run.events.push_back(p);
  auto r = summarize(run, 1, 1);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->steps, 1);
  EXPECT_NEAR(r->stepTimeMs, 16.5, 1e-9);
  EXPECT_NEAR(r->perRank[0].kfacMs, 2.0, 1e-9);
  EXPECT_NEAR(r->kfacInBubblesMs, 1.0, 1e-9);
  EXPECT_NEAR(r->kfacOutsideMs, 1.0, 1e-9);
  EXPECT_NEAR(r->bubbleFill, 1.0 / 6.0, 1e-9);
  EXPECT_NEAR(r->utilizationWithoutKfac, 24.0 / 33.0, 1e-12);
  EXPECT_NEAR(r->utilizationWithKfac, 26.0 / 33.0, 1e-12);

  // The simulation gets the layer's measured K-FAC durations.
  auto c = simulateFromMeasured(run, 1, 1);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  ASSERT_EQ(c->costs.layers.size(), 2u); // stage 0 layer 0, stage 1
  EXPECT_NEAR(c->costs.layers[0].curvatureA, 1.0, 1e-9);
  EXPECT_NEAR(c->costs.layers[0].precondition, 1.0, 1e-9);
  EXPECT_NEAR(c->costs.layers[0].forward, 1.0, 1e-9);
  EXPECT_NE(c->simulated.policy, "none");
  EXPECT_GT(c->simulated.kfacWorkMs, 0.0);
}

TEST(MeasuredTimeline, SimulationMatchesGpipeFormula) {
  // Uniform stages: the simulated step is (N+D-1)·(tf+tb), for several D, N;
  // 1F1B has the same makespan (the events are GPipe-placed either way: the
  // simulation only takes their durations).
  for (const char *schedule : {"gpipe", "1f1b"})
    for (int D : {2, 3, 4})
      for (int N : {1, 4, 8}) {
        Shape s;
        s.ranks = D;
        s.micro = N;
        SimulationOptions options;
        options.p2pMs = 0;
        MeasuredRun run = gpipeRun(s);
        run.schedule = schedule;
        auto c = simulateFromMeasured(run, 1, -1, options);
        ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
        const double formula = (N + D - 1) * (1.0 + 2.0);
        EXPECT_EQ(c->simulated.schedule, schedule);
        EXPECT_NEAR(c->simulated.pipelineStepMs, formula, 1e-9)
            << schedule << " D=" << D << " N=" << N;
        EXPECT_NEAR(c->simulated.stepTimeMs, formula, 1e-9);
        // The closed-form run is exactly what the simulator predicts.
        EXPECT_NEAR(c->measured.pipelineSpanMs, formula, 1e-9);
        EXPECT_NEAR(c->simulated.bubbleFraction, (D - 1.0) / (N + D - 1.0), 1e-12);
        EXPECT_NEAR(c->measured.bubbleFraction, (D - 1.0) / (N + D - 1.0), 1e-12);
        ASSERT_EQ(c->simulatedBusyMs.size(), static_cast<size_t>(D));
        for (int r = 0; r < D; ++r)
          EXPECT_NEAR(c->simulatedBusyMs[r], c->measured.perRank[r].pipelineMs, 1e-9);
      }
}

TEST(MeasuredTimeline, SimulationUsesMeasuredTransferTime) {
  // The shortest receive run is 0.25 ms; GPipe over D=2 crosses the cut
  // twice on the critical path (forward, then backward): 15 + 2·0.25.
  auto c = simulateFromMeasured(gpipeRun(), 1, -1);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_NEAR(c->costs.p2p, 0.25, 1e-9);
  EXPECT_NEAR(c->simulated.pipelineStepMs, 15.5, 1e-9);
  std::string text = c->text();
  EXPECT_NE(text.find("measured vs simulated"), std::string::npos);
  EXPECT_NE(text.find("step time (ms)"), std::string::npos);
  auto json = llvm::json::parse(c->json());
  ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
  const llvm::json::Object *sim = json->getAsObject()->getObject("simulated");
  ASSERT_NE(sim, nullptr);
  EXPECT_NEAR(*sim->getNumber("pipeline_span_ms"), 15.5, 1e-9);
}

TEST(MeasuredTimeline, TraceHasOneEventPerMeasuredEvent) {
  MeasuredRun run = gpipeRun();
  std::string dir = tempDir(), path = dir + "/trace.json";
  ASSERT_FALSE(static_cast<bool>(writeMeasuredTrace(run, path)));
  auto parsed = llvm::json::parse(readFile(path));
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Array *events = parsed->getAsObject()->getArray("traceEvents");
  ASSERT_NE(events, nullptr);
  size_t complete = 0, comm = 0;
  double first = 1e300;
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    if (e->getString("ph") != "X")
      continue;
    ++complete;
    first = std::min(first, *e->getNumber("ts"));
    int64_t tid = *e->getInteger("tid");
    bool isComm = e->getString("cat") == "recv";
    comm += isComm;
    EXPECT_EQ(tid % 2, isComm ? 1 : 0) << "communication on the comm lane";
  }
  EXPECT_EQ(complete, run.events.size());
  EXPECT_EQ(comm, 3u * 4u); // rank 1, 3 steps, 4 receives each
  EXPECT_EQ(first, 0.0);    // time 0 = the first event's start
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(MeasuredTimeline, SvgDrawsTheMedianStepAboveItsSimulation) {
  MeasuredRun run = gpipeRun();
  // Steps 1 and 2 have the same events; step 1 ends 1 ms later (the gap
  // before step 2), so it is the longer, and the median of two is the
  // longer one.
  auto picture = steadyStepPicture(run, 1);
  ASSERT_TRUE(static_cast<bool>(picture)) << llvm::toString(picture.takeError());
  EXPECT_EQ(picture->step, 1);
  EXPECT_NEAR(picture->measuredStepMs, 16.5, 1e-6);
  EXPECT_GT(picture->simulatedStepMs, 0);
  std::string dir = tempDir(), path = dir + "/timeline.svg";
  ASSERT_FALSE(static_cast<bool>(writeMeasuredSvg(run, path, 1)));
  std::string svg = readFile(path);
  size_t compute = 0, received = 0;
  for (const MeasuredEvent &e : run.events)
    if (e.step == 1) {
      compute += !isCommunication(e.kind);
      received += e.kind == MeasuredKind::Recv;
    }
  // One measured step (its events only, not all 3 steps) and the simulated
  // step's passes (2 stages x 4 micro-batches, forward and backward) below it.
  size_t drawn = count(svg, "><title>forward ") + count(svg, "><title>backward ") +
                 count(svg, "><title>update ");
  EXPECT_EQ(drawn, compute + 2u * 2u * 4u);
  EXPECT_EQ(count(svg, "><title>recv "), received);
  EXPECT_NE(svg.find("measured gpipe, D=2, N=4: step 1 (median of 2 steps) 16.5 ms"), std::string::npos)
      << svg.substr(0, 600);
  EXPECT_NE(svg.find("below, simulated with the measured durations"), std::string::npos);
  EXPECT_NE(svg.find(">rank 0 measured<"), std::string::npos);
  EXPECT_NE(svg.find(">rank 1 simulated<"), std::string::npos);
  EXPECT_NE(svg.find(">update<"), std::string::npos) << "legend entry";
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(MeasuredTimeline, FailedWriteKeepsTheExistingFile) {
  MeasuredRun run = gpipeRun();
  llvm::Error missing = writeMeasuredSvg(run, "/nonexistent-dir/timeline.svg");
  ASSERT_TRUE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(std::move(missing)).find("/nonexistent-dir/timeline.svg"),
            std::string::npos);

  std::string dir = tempDir(), path = dir + "/timeline.svg";
  { std::ofstream(path) << "good"; }
  // A write that fails half-way (files limited to 64 bytes; EFBIG instead of
  // SIGXFSZ): works for root too, unlike a read-only directory.
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  llvm::Error trace = writeMeasuredTrace(run, path);
  llvm::Error svg = writeMeasuredSvg(run, path);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_TRUE(static_cast<bool>(trace));
  EXPECT_TRUE(static_cast<bool>(svg));
  llvm::consumeError(std::move(trace));
  llvm::consumeError(std::move(svg));
  EXPECT_EQ(readFile(path), "good");
  // No temporary file left behind.
  std::remove(path.c_str());
  EXPECT_EQ(rmdir(dir.c_str()), 0) << "the directory still holds files";
}

TEST(MeasuredTimeline, BadRunsAreErrors) {
  MeasuredRun run = gpipeRun();
  run.events[3].rank = 5;
  auto r = summarize(run, 0, -1);
  ASSERT_FALSE(static_cast<bool>(r));
  std::string message = llvm::toString(r.takeError());
  EXPECT_NE(message.find("event 3"), std::string::npos) << message;
  EXPECT_NE(message.find("rank outside"), std::string::npos) << message;

  auto empty = summarize(gpipeRun(), 7, 9);
  ASSERT_FALSE(static_cast<bool>(empty));
  EXPECT_NE(llvm::toString(empty.takeError()).find("no events in steps 7..9"),
            std::string::npos);

  MeasuredRun unknown = gpipeRun();
  unknown.schedule = "zigzag";
  auto c = simulateFromMeasured(unknown, 1, -1);
  ASSERT_FALSE(static_cast<bool>(c));
  llvm::consumeError(c.takeError());

  MeasuredRun moved = gpipeRun();
  for (MeasuredEvent &e : moved.events)
    if (e.rank == 1 && e.kind == MeasuredKind::Forward)
      e.stage = 0;
  auto m = simulateFromMeasured(moved, 1, -1);
  ASSERT_FALSE(static_cast<bool>(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("the gpipe schedule runs stage 0 elsewhere"),
            std::string::npos);
}

} // namespace
