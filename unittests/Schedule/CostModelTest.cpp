//===- CostModelTest.cpp - Profiles and the analytic model ----------------===//

#include "TestUtil.h"

#include <cmath>

using namespace pf::sched;
using namespace pf::sched::test;

namespace {

/// A layer entry; `replace` overrides or adds fields ("forward": -1, ...).
std::string layerText(const std::string &fields = "") {
  std::string base = "\"backward\": 2, \"curvature\": 3, \"inversion\": 4, "
                     "\"precondition\": 0.5";
  if (fields.find("\"forward\"") == std::string::npos)
    base = "\"forward\": 1, " + base;
  return "{" + base + (fields.empty() ? "" : ", " + fields) + "}";
}

/// A profile of `layers` layers; layer 0 gets `fields`.
std::string profileText(int layers, const std::string &fields = "",
                        const std::string &top = "\"p2p\": 0.5, \"allreduce\": 0") {
  std::string s = "{" + top + ", \"layers\": [";
  for (int i = 0; i < layers; ++i)
    s += std::string(i ? ", " : "") + layerText(i == 0 ? fields : "");
  return s + "]}";
}

std::string errorOf(const std::string &text) {
  auto p = parseProfile(text, "test.json");
  EXPECT_FALSE(p.ok()) << "accepted: " << text;
  return p.ok() ? "" : p.error();
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Profile, ShippedReferenceProfilesLoad) {
  CostModel base = shippedProfile("p100-bert-base.json");
  CostModel large = shippedProfile("p100-bert-large.json");
  ASSERT_EQ(base.layers.size(), 12u);
  ASSERT_EQ(large.layers.size(), 24u);
  const LayerCost &l = large.layers[5];
  EXPECT_DOUBLE_EQ(l.forward, 16.10);
  EXPECT_DOUBLE_EQ(l.backward(), 26.95);
  EXPECT_DOUBLE_EQ(l.curvature(), 43.50);
  EXPECT_DOUBLE_EQ(l.inversion(), 126.7);
  EXPECT_DOUBLE_EQ(l.precondition, 14.73);
  // Unsplit totals are halved between the two parts.
  EXPECT_DOUBLE_EQ(l.curvatureA, 43.50 / 2);
  EXPECT_DOUBLE_EQ(l.backwardInput, 26.95 / 2);
  EXPECT_DOUBLE_EQ(base.layers[0].forward, 9.75);
  EXPECT_TRUE(large.warnings.empty());
}

TEST(Profile, SplitsAndDefaults) {
  auto p = parseProfile(
      "{\"p2p\": 0.25, \"allreduce\": 1.5, \"defaults\": {\"forward\": 1, "
      "\"backward_input\": 2, \"backward_weight\": 3, \"curvature_a\": 4, "
      "\"curvature_b\": 5, \"inversion\": 6, \"inversion_a\": 1, "
      "\"precondition\": 7}, \"layers\": [{\"name\": \"x\"}, "
      "{\"forward\": 10, \"allreduce\": 0.5}]}",
      "t.json");
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->layers.size(), 2u);
  EXPECT_EQ(p->layers[0].name, "x");
  EXPECT_DOUBLE_EQ(p->layers[0].backwardWeight, 3);
  EXPECT_DOUBLE_EQ(p->layers[0].curvatureB, 5);
  EXPECT_DOUBLE_EQ(p->layers[0].inversionA, 1);
  EXPECT_DOUBLE_EQ(p->layers[0].inversionB, 5); // the rest of the total
  EXPECT_DOUBLE_EQ(p->layers[0].allreduce, 1.5);
  EXPECT_DOUBLE_EQ(p->layers[1].forward, 10);
  EXPECT_DOUBLE_EQ(p->layers[1].allreduce, 0.5);
  EXPECT_DOUBLE_EQ(p->p2p, 0.25);
}

TEST(Profile, IndexedLayersAreReordered) {
  auto p = parseProfile("{\"p2p\": 0, \"allreduce\": 0, \"layers\": [" +
                            layerText("\"index\": 1, \"forward\": 2") + ", " +
                            layerText("\"index\": 0") + "]}",
                        "t.json");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_DOUBLE_EQ(p->layers[0].forward, 1);
  EXPECT_DOUBLE_EQ(p->layers[1].forward, 2);
}

TEST(Profile, MissingLayerIsAnError) {
  std::string e = errorOf("{\"p2p\": 0, \"allreduce\": 0, \"layers\": [" +
                          layerText("\"index\": 0") + ", " +
                          layerText("\"index\": 2") + "]}");
  EXPECT_TRUE(contains(e, "test.json")) << e;
  EXPECT_TRUE(contains(e, "missing")) << e;
}

TEST(Profile, MissingKeyIsAnError) {
  std::string text = profileText(3);
  size_t at = text.rfind(", \"precondition\": 0.5");
  text.erase(at, std::string(", \"precondition\": 0.5").size());
  std::string e = errorOf(text);
  EXPECT_TRUE(contains(e, "layer 2")) << e;
  EXPECT_TRUE(contains(e, "missing key 'precondition'")) << e;
}

TEST(Profile, MissingBackwardOrItsSplit) {
  std::string text = profileText(1);
  text.replace(text.find("\"backward\": 2"), 13, "\"backward_input\": 2");
  std::string e = errorOf(text);
  EXPECT_TRUE(contains(e, "missing key 'backward'")) << e;
}

TEST(Profile, NegativeTimeIsAnError) {
  std::string e = errorOf(profileText(2, "\"forward\": -1"));
  EXPECT_TRUE(contains(e, "layer 0")) << e;
  EXPECT_TRUE(contains(e, "'forward' is negative")) << e;
  std::string top = errorOf(profileText(1, "", "\"p2p\": -2, \"allreduce\": 0"));
  EXPECT_TRUE(contains(top, "'p2p' is negative")) << top;
}

TEST(Profile, InconsistentSplitIsAnError) {
  std::string e = errorOf(profileText(1, "\"curvature_a\": 1, \"curvature_b\": 1"));
  EXPECT_TRUE(contains(e, "'curvature_a' + 'curvature_b'")) << e;
}

TEST(Profile, CommunicationKeysAreRequired) {
  std::string e = errorOf(profileText(1, "", "\"p2p\": 0"));
  EXPECT_TRUE(contains(e, "missing key 'allreduce'")) << e;
}

TEST(Profile, MalformedInputIsAnError) {
  EXPECT_TRUE(contains(errorOf("{\"layers\": ["), "not valid JSON"));
  EXPECT_TRUE(contains(errorOf("[1, 2]"), "must be a JSON object"));
  EXPECT_TRUE(contains(errorOf("{\"p2p\": 0, \"allreduce\": 0}"),
                       "missing key 'layers'"));
  EXPECT_TRUE(contains(errorOf(profileText(1, "\"forward\": \"fast\"")),
                       "must be a number"));
  auto missingFile = loadProfile("/nonexistent/profile.json");
  ASSERT_FALSE(missingFile.ok());
  EXPECT_TRUE(contains(missingFile.error(), "cannot open"));
}

TEST(Profile, UnknownKeysAreWarnings) {
  auto p = parseProfile(profileText(1, "\"forwrad\": 3"), "t.json");
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->warnings.size(), 1u);
  EXPECT_TRUE(contains(p->warnings[0], "forwrad"));
}

TEST(Profile, ExportRoundTrips) {
  CostModel large = shippedProfile("p100-bert-large.json");
  auto again = parseProfile(profileToJson(large), "export.json");
  ASSERT_TRUE(again.ok()) << again.error();
  ASSERT_EQ(again->layers.size(), large.layers.size());
  EXPECT_DOUBLE_EQ(again->layers[3].inversionB, large.layers[3].inversionB);
  EXPECT_DOUBLE_EQ(again->layers[3].backwardWeight,
                   large.layers[3].backwardWeight);
}

TEST(Analytic, KnowsTheDevicesAndModels) {
  for (const char *name : {"p100", "v100", "a100", "h100", "H200"})
    EXPECT_TRUE(findDevice(name).ok()) << name;
  auto bad = findDevice("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.error(), "unknown device 'tpu'"));
  EXPECT_FALSE(findModel("gpt-5").ok());
  EXPECT_FALSE(parsePrecision("fp8").ok());
}

TEST(Analytic, BertFormulas) {
  TransformerSpec large = *findModel("bert-large");
  BlockWork w = transformerBlockWork(large);
  const double b = 32, s = 128, h = 1024;
  EXPECT_DOUBLE_EQ(w.forwardFlops, 24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_DOUBLE_EQ(w.backwardInputFlops + w.backwardWeightFlops,
                   2 * w.forwardFlops);
  // A+B factors of a block: 2 * (5 h^2 + (4h)^2) fp32 values = 168 MiB, the
  // reference's factor memory.
  EXPECT_NEAR(w.factorBytes / (1024.0 * 1024.0), 168, 1e-9);
}

TEST(Analytic, P100MatchesTheMeasuredProfile) {
  CostModel measured = shippedProfile("p100-bert-large.json");
  CostModel model = analyticCostModel(*findDevice("p100"),
                                      *findModel("bert-large"), Precision::FP32);
  ASSERT_EQ(model.layers.size(), 24u);
  const LayerCost &m = model.layers[0], &p = measured.layers[0];
  auto rel = [](double a, double b) { return std::fabs(a - b) / b; };
  EXPECT_LT(rel(m.forward, p.forward), 0.10);
  EXPECT_LT(rel(m.inversion(), p.inversion()), 0.10);
  EXPECT_LT(rel(m.precondition, p.precondition), 0.15);
  EXPECT_LT(rel(m.backward(), p.backward()), 0.35);
  EXPECT_LT(rel(m.curvature(), p.curvature()), 0.35);
}

TEST(Analytic, NewerDevicesAreFaster) {
  TransformerSpec large = *findModel("bert-large");
  double previous = std::numeric_limits<double>::infinity();
  for (const char *name : {"p100", "v100", "a100", "h100"}) {
    CostModel c = analyticCostModel(*findDevice(name), large, Precision::FP32);
    EXPECT_LT(c.layers[0].forward, previous) << name;
    previous = c.layers[0].forward;
  }
  CostModel fp32 = analyticCostModel(*findDevice("a100"), large, Precision::FP32);
  CostModel tf32 = analyticCostModel(*findDevice("a100"), large, Precision::TF32);
  EXPECT_LT(tf32.layers[0].forward, fp32.layers[0].forward);
  // Factorisations stay in FP32.
  EXPECT_DOUBLE_EQ(tf32.layers[0].inversionA, fp32.layers[0].inversionA);
  EXPECT_GT(fp32.p2p, 0);
}

} // namespace
