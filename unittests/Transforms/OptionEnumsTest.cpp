//===- OptionEnumsTest.cpp - the command-line values of pf's enums --------===//
//
// The schedule kinds and K-FAC policies have names in the schedule library
// (pf-sched, reports) and command-line values (the passes' options): they
// must agree. A parsed bad value names the valid ones.
//
//===----------------------------------------------------------------------===//
#include "pf/Transforms/OptionEnums.h"
#include "pf/Schedule/Kfac.h"

#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

namespace {
namespace cl = llvm::cl;
namespace sched = pf::sched;

/// Every value of `option`'s parser, as (name, value).
template <typename T>
std::vector<std::pair<std::string, T>> valuesOf(cl::opt<T> &option) {
  std::vector<std::pair<std::string, T>> values;
  auto &parser = option.getParser();
  for (unsigned i = 0; i < parser.getNumOptions(); ++i)
    values.emplace_back(
        parser.getOption(i).str(),
        static_cast<const cl::OptionValue<T> &>(parser.getOptionValue(i)).getValue());
  return values;
}

TEST(OptionEnums, ScheduleKindsAgreeWithTheScheduleLibrary) {
  cl::SubCommand sub("schedule-test", "");
  cl::opt<sched::ScheduleKind> option("schedule", cl::sub(sub),
                                      mlir::pf::scheduleKindValues());
  auto values = valuesOf(option);
  // The schedules the pipeline passes run: gpipe, 1f1b, interleaved, chimera,
  // zb-h1, zb-h2, zb-v, dualpipe, dualpipev (all but an imported order).
  EXPECT_EQ(values.size(), 9u);
  for (const auto &[name, kind] : values) {
    auto parsed = sched::parseScheduleKind(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, kind) << name;
    EXPECT_EQ(sched::scheduleKindName(kind), name);
  }
}

TEST(OptionEnums, PoliciesAgreeWithTheScheduleLibrary) {
  cl::SubCommand sub("policy-test", "");
  cl::opt<sched::Policy> option("policy", cl::sub(sub), mlir::pf::kfacPolicyValues());
  auto values = valuesOf(option);
  EXPECT_EQ(values.size(), 2u);
  for (const auto &[name, policy] : values) {
    auto parsed = sched::parsePolicy(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, policy) << name;
    EXPECT_EQ(sched::policyName(policy), name);
  }
}

TEST(OptionEnums, ABadValueNamesTheValidOnes) {
  cl::SubCommand sub("optimizer-test", "");
  cl::opt<mlir::pf::Optimizer> option("optimizer", cl::sub(sub), mlir::pf::optimizerValues(),
                                      cl::init(mlir::pf::Optimizer::AdamW));
  mlir::pf::Optimizer value = mlir::pf::Optimizer::AdamW;
  testing::internal::CaptureStderr();
  bool failed = option.getParser().parse(option, "optimizer", "adagrad", value);
  std::string error = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(failed);
  EXPECT_NE(error.find("optimizer must be sgd, adamw or lamb, got 'adagrad'"), std::string::npos)
      << error;
  EXPECT_FALSE(option.getParser().parse(option, "optimizer", "lamb", value));
  EXPECT_EQ(value, mlir::pf::Optimizer::LAMB);
}
} // namespace
