//===- ReportTest.cpp - Report, trace and SVG writers ---------------------===//

#include "TestUtil.h"

#include <nlohmann/json.hpp>

using namespace pf::sched;
using pf::Expected;
using pf::Status;
using namespace pf::sched::test;
using nlohmann::json;

namespace {

ScheduleResult sample() {
  static const CostModel costs = shippedProfile("p100-bert-large.json");
  return runValid(costs, request(ScheduleKind::Chimera, 4, 4, Policy::PF, 6));
}

json parse(const std::string &text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << text.substr(0, 200);
  return j;
}

TEST(Report, JsonHasTheRequiredFields) {
  ScheduleResult r = sample();
  json j = parse(reportToJson(r.report));
  for (const char *key :
       {"step_time_ms", "utilization", "bubble_fraction", "refresh_steps",
        "overhead", "per_device", "pipeline_step_ms", "kfac_work_ms"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["utilization"].contains("without_kfac"));
  EXPECT_TRUE(j["utilization"].contains("with_kfac"));
  EXPECT_EQ(j["per_device"].size(), 4u);
  EXPECT_EQ(j["refresh_steps"].get<int>(), r.report.refreshSteps);
  EXPECT_DOUBLE_EQ(j["step_time_ms"].get<double>(), r.report.stepTimeMs);
  EXPECT_NEAR(j["bubble_fraction"].get<double>() +
                  j["utilization"]["without_kfac"].get<double>(),
              1.0, 1e-12);
}

TEST(Report, FiguresAreConsistent) {
  ScheduleResult r = sample();
  const Report &rep = r.report;
  EXPECT_NEAR(rep.stepTimeMs * rep.refreshSteps, r.timeline.windowTime(), 1e-6);
  EXPECT_NEAR(rep.overheadMs, rep.stepTimeMs - rep.pipelineStepMs, 1e-9);
  EXPECT_NEAR(rep.kfacInBubblesMs + rep.kfacOutsideMs, rep.kfacWorkMs, 1e-6);
  double mean = 0;
  for (const DeviceReport &d : rep.perDevice)
    mean += d.utilizationWithKfac / rep.perDevice.size();
  EXPECT_NEAR(mean, rep.utilizationWithKfac, 1e-9);
}

TEST(Report, TextNamesTheFigures) {
  std::string text = reportToText(sample().report);
  for (const char *s : {"utilization", "step time", "refresh interval K",
                        "bubble fraction", "overhead"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
}

TEST(Report, ChromeTraceHasEveryItem) {
  ScheduleResult r = sample();
  json j = parse(timelineToChromeTrace(r.timeline, r.report));
  ASSERT_TRUE(j.contains("traceEvents"));
  size_t complete = 0;
  for (const json &e : j["traceEvents"])
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
  EXPECT_EQ(complete, r.timeline.numItems());
}

TEST(Report, SvgHasRowsAndLegend) {
  ScheduleResult r = sample();
  std::string svg = timelineToSvg(r.timeline, r.report);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (const char *label : {"forward", "backward", "curvature A", "inversion B",
                            "precondition", "communication", "idle"})
    EXPECT_NE(svg.find(std::string(">") + label + "<"), std::string::npos)
        << label;
  for (int d = 0; d < 4; ++d)
    EXPECT_NE(svg.find("GPU " + std::to_string(d) + "<"), std::string::npos);
}

TEST(Report, WriteFailsCleanly) {
  Status s = writeTextFile("/nonexistent-dir/report.json", "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot open"), std::string::npos);
}

} // namespace
