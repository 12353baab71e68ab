//===- TrainLibraryTest.cpp - lib/Train's parts without a model -----------===//
//
// What makes a resumed run continue bit for bit: batches, masks and the
// K-FAC schedules are functions of the step, whatever steps were asked
// before; a checkpoint reads back what it wrote and refuses another run's.
//
//===----------------------------------------------------------------------===//
#include "pf/Train/Checkpoint.h"
#include "pf/Train/Masking.h"
#include "pf/Train/Schedules.h"
#include "pf/TrainCompile/TrainConfig.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace mlir::pf::train;

namespace {
/// 40 rows of 12 tokens: [CLS] words [SEP] and padding.
Corpus smallCorpus() {
  Corpus c;
  c.rows = c.trainRows = 40;
  c.seqLen = 12;
  c.vocab = 30;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t t = 0; t < c.seqLen; ++t)
      c.tokens.push_back(t == 0 ? c.cls : t == 9 ? c.sep : t > 9 ? c.pad
                                                               : c.firstWord + (r * 7 + t) % 25);
  c.hash = fnv1a(c.tokens.data(), c.tokens.size() * sizeof(int64_t));
  return c;
}

bool sameBatch(const Batch &a, const Batch &b) {
  if (a.size() != b.size())
    return false;
  for (const auto &[name, array] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.shape != array.shape || it->second.data != array.data)
      return false;
  }
  return true;
}

TEST(BatchMaker, BatchesAreFunctionsOfTheStep) {
  Corpus corpus = smallCorpus();
  BatchMaker inOrder(corpus, 4, 3, 0.15, 0), outOfOrder(corpus, 4, 3, 0.15, 0);
  std::vector<Batch> expected;
  for (int64_t step = 1; step <= 25; ++step) // several epochs of 10 steps
    expected.push_back(inOrder.training(step));
  for (int64_t step : {25, 1, 12, 3, 25})
    EXPECT_TRUE(sameBatch(outOfOrder.training(step), expected[step - 1])) << step;
  BatchMaker otherSeed(corpus, 4, 4, 0.15, 0);
  EXPECT_FALSE(sameBatch(otherSeed.training(1), expected[0]));
}

TEST(BatchMaker, MasksOnlyWordsAndCapsPredictions) {
  Corpus corpus = smallCorpus();
  BatchMaker batches(corpus, 8, 0, 0.5, /*predictions=*/2);
  Batch masked = batches.masked(1);
  const auto *ids = reinterpret_cast<const int64_t *>(masked["input_ids"].data.data());
  const auto *labels = reinterpret_cast<const int64_t *>(masked["labels"].data.data());
  int64_t predicted = 0;
  for (int64_t b = 0; b < 8; ++b) {
    int64_t inRow = 0;
    for (int64_t t = 0; t < corpus.seqLen; ++t) {
      int64_t i = b * corpus.seqLen + t;
      if (labels[i] == -100)
        continue;
      ++inRow;
      EXPECT_TRUE(t >= 1 && t <= 8) << "a special token was masked";
      EXPECT_TRUE(ids[i] == corpus.mask || ids[i] >= corpus.firstWord);
    }
    EXPECT_LE(inRow, 2);
    predicted += inRow;
  }
  EXPECT_GT(predicted, 0);
  // --predictions gathers the labels at the predicted positions.
  Batch training = batches.training(1);
  EXPECT_EQ(training["labels"].shape, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(training["mlm_positions"].shape, (std::vector<int64_t>{8, 2}));
}

TEST(Schedules, LearningRateWarmsUpAndDecays) {
  TrainConfig config;
  config.lr = 1.0;
  config.warmup = 4;
  config.steps = 12;
  EXPECT_DOUBLE_EQ(learningRate(config, 2), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(config, 4), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(config, 5), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(config, 12), 1.0 / 8);
  config.schedule = LRSchedule::Constant;
  EXPECT_DOUBLE_EQ(learningRate(config, 12), 1.0);
}

TEST(Schedules, DampingWarmupReachesTheFinalDamping) {
  TrainConfig config;
  config.training.kfac = true;
  config.training.precondition.damping = 1e-3;
  config.dampingSchedule = DampingSchedule::Warmup;
  config.dampingStart = 1e-1;
  config.dampingWarmup = 4;
  ASSERT_FALSE(llvm::errorToBool(prepareDampingSchedule(config, /*inBubbles=*/false)));
  EXPECT_TRUE(config.training.precondition.dampingInput);
  config.fixStepFacts();
  EXPECT_TRUE(config.step.dampingInput);
  KfacDampingSchedule damping(config);
  EXPECT_DOUBLE_EQ(damping.at(1), 1e-1);
  EXPECT_NEAR(damping.at(3), 1e-2, 1e-15);
  EXPECT_DOUBLE_EQ(damping.at(5), 1e-3);
  EXPECT_DOUBLE_EQ(damping.at(50), 1e-3);
}

TEST(Schedules, IntervalScheduleDependsOnTheStepOnly) {
  TrainConfig config;
  config.training.kfac = true;
  config.training.kfacFactorEvery = 2;
  config.training.precondition.refreshWarmup = 3;
  config.intervalSchedule = IntervalSchedule::Step;
  config.intervalGrowth = 2;
  config.intervalEvery = 10;
  config.intervalMax = 8;
  ASSERT_FALSE(llvm::errorToBool(prepareIntervalSchedule(config)));
  config.fixStepFacts();
  KfacIntervalSchedule run(config);
  std::vector<bool> due;
  for (int64_t step = 1; step <= 60; ++step)
    due.push_back(run.updatesFactors(step));
  // A resumed run asks from its first step on: the same answers.
  for (int64_t from : {1, 4, 17, 45}) {
    KfacIntervalSchedule resumed(config);
    for (int64_t step = from; step <= 60; ++step)
      EXPECT_EQ(resumed.updatesFactors(step), due[step - 1]) << from << " " << step;
  }
  // The warm-up updates every step; the intervals grow up to the cap.
  EXPECT_TRUE(due[0] && due[1] && due[2]);
  int64_t last = 0, widest = 0;
  for (int64_t step = 4; step <= 60; ++step)
    if (due[step - 1]) {
      if (last)
        widest = std::max(widest, step - last);
      last = step;
    }
  EXPECT_EQ(widest, 8);
}

struct TempFile {
  TempFile() {
    llvm::SmallString<128> name;
    EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("pf-train-test", "npz", name));
    path = std::string(name);
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

TEST(Checkpoints, ReadBackWhatTheyWrote) {
  Corpus corpus = smallCorpus();
  TrainConfig config;
  config.corpusFile = "corpus.npz";
  config.seed = 7;
  config.steps = 10;
  KfacDampingSchedule damping(config);
  Checkpoints checkpoints(config, corpus, damping);
  std::vector<float> weight{1, 2, 3, 4, 5, 6}, pending(4, 9);
  Parameters saved(2);
  saved[0] = {"w", 1, {2, 3}, weight.data(), int64_t(weight.size() * sizeof(float))};
  saved[1] = {"w.kfac.A_inv_next", 1, {2, 2}, pending.data(), 16};
  TempFile file;
  ASSERT_TRUE(checkpoints.write(stateArrays(saved), 4, file.path).ok());

  config.resumeFile = file.path;
  std::vector<float> loaded(6, 0);
  Parameters into(1);
  into[0] = {"w", 1, {2, 3}, loaded.data(), int64_t(loaded.size() * sizeof(float))};
  Checkpoints::Coverage coverage;
  auto step = checkpoints.load(into, coverage);
  ASSERT_TRUE(bool(step)) << step.error();
  EXPECT_EQ(*step, 4);
  EXPECT_EQ(loaded, weight);

  // A state this run does not have: another model or optimizer. A rank of
  // a pipeline holds its share of the state only, and takes its part.
  std::vector<float> moment(6, 0);
  Parameters another(1);
  another[0] = {"w.adam_m", 1, {2, 3}, moment.data(), int64_t(moment.size() * sizeof(float))};
  TempFile other;
  ASSERT_TRUE(checkpoints.write(stateArrays({saved[0], another[0]}), 4, other.path).ok());
  config.resumeFile = other.path;
  auto extra = checkpoints.load(into, coverage);
  ASSERT_TRUE(bool(extra)) << extra.error();
  EXPECT_EQ(coverage.names, (std::vector<std::string>{"w", "w.adam_m"}));
  EXPECT_EQ(coverage.loaded, (std::vector<double>{1, 0}));
  EXPECT_EQ(checkpoints.checkCovered(coverage).message(),
            other.path + ": holds 'w.adam_m', which this run does not have: it was written by "
                         "another model, optimizer or K-FAC configuration");
  // Another rank that loaded it (summed over the ranks): covered.
  coverage.loaded[1] += 1;
  EXPECT_TRUE(checkpoints.checkCovered(coverage).ok());
  config.resumeFile = file.path;

  // Another seed would train another run.
  config.seed = 8;
  auto refused = checkpoints.load(into, coverage);
  ASSERT_FALSE(bool(refused));
  EXPECT_EQ(refused.error(),
            file.path + ": was trained with --seed 7, this run has --seed 8");
}
} // namespace
