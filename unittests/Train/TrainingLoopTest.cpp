//===- TrainingLoopTest.cpp - The training loop without a compiler --------===//
//
// The loop library (lib/Train) drives any TrainingStep. Here it trains a
// bigram model written in plain C++ (no compiled step at all): the loop's
// schedules, evaluation, checkpoints and bitwise resume are checked on their
// own, and this binary links no LLVM or MLIR library (check-no-llvm.sh,
// registered with ctest below it), as the MLIR-free trainer must not.
//
//===----------------------------------------------------------------------===//
#include "pf/Runtime/pfrt.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Train/TrainingStep.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

namespace {

constexpr int64_t kVocab = 24;

/// The masked-LM loss of a bigram model: each labelled position predicts its
/// token from the (unmasked) token before it, softmax over W's row.
double bigramLoss(const std::vector<float> &w, const Batch &inputs, std::vector<float> *grad) {
  const auto &ids = inputs.at("input_ids");
  const auto &labels = inputs.at("labels");
  const int64_t rows = ids.shape[0], length = ids.shape[1];
  const auto *id = reinterpret_cast<const int64_t *>(ids.data.data());
  const auto *label = reinterpret_cast<const int64_t *>(labels.data.data());
  double loss = 0;
  int64_t count = 0;
  std::vector<double> p(kVocab);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 1; t < length; ++t) {
      int64_t target = label[r * length + t];
      if (target < 0)
        continue;
      const float *row = &w[id[r * length + t - 1] * kVocab];
      double top = *std::max_element(row, row + kVocab), sum = 0;
      for (int64_t v = 0; v < kVocab; ++v)
        sum += p[v] = std::exp(double(row[v]) - top);
      loss += std::log(sum) - (double(row[target]) - top);
      ++count;
      if (grad)
        for (int64_t v = 0; v < kVocab; ++v)
          (*grad)[id[r * length + t - 1] * kVocab + v] += float(p[v] / sum - (v == target));
    }
  if (grad && count)
    for (float &g : *grad)
      g /= float(count);
  return count ? loss / double(count) : 0.0;
}

drv::ModelParameter parameterOf(std::vector<float> &w) {
  return {"w", PFRT_F32, {kVocab, kVocab}, w.data(), int64_t(w.size() * sizeof(float))};
}

/// The held-out forward pass, with its own copy of the weights.
class BigramEvaluation final : public drv::Model {
public:
  std::vector<drv::ModelParameter> parameters() const override {
    return {parameterOf(const_cast<std::vector<float> &>(w))};
  }
  ::pf::Status copyParametersToHost() override { return ::pf::Status::success(); }
  ::pf::Status copyParametersToBackend() override { return ::pf::Status::success(); }
  ::pf::Status run(const drv::NamedArrays &inputs, drv::NamedArrays &outputs) override {
    outputs["loss"] = scalar<float>(PFRT_F32, float(bigramLoss(w, inputs, nullptr)));
    return ::pf::Status::success();
  }
  std::vector<float> w = std::vector<float>(kVocab * kVocab, 0.f);
};

/// SGD on the bigram model, one process.
class BigramStep final : public TrainingStep {
public:
  bool reports() const override { return true; }
  int fail(const std::string &message) override {
    failure = message;
    return 1;
  }
  Parameters stateParameters() override { return {parameterOf(w)}; }
  ::pf::Status copyStateToBackend() override { return ::pf::Status::success(); }
  void printStart() override {}
  bool addKfacWindowInputs(int64_t, Batch &) override { return false; }
  ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) override {
    double lr;
    std::memcpy(&lr, inputs.at("lr").data.data(), sizeof(lr));
    std::vector<float> grad(w.size(), 0.f);
    StepResult result;
    result.loss = float(bigramLoss(w, inputs, &grad));
    for (size_t i = 0; i < w.size(); ++i)
      w[i] -= float(lr) * grad[i];
    losses[step] = float(result.loss);
    result.stop = step == stopAfter; // as a SIGINT would
    return result;
  }
  ::pf::Status reportStep(int64_t, const StepResult &) override {
    return ::pf::Status::success();
  }
  ::pf::Expected<drv::Model *> evaluationModel() override {
    return static_cast<drv::Model *>(&evaluation);
  }
  ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) override {
    ++evaluations;
    return use([this](const std::string &name) -> std::pair<const void *, int64_t> {
      if (name != "w")
        return {nullptr, 0};
      return {w.data(), int64_t(w.size() * sizeof(float))};
    });
  }
  ::pf::Expected<std::optional<Batch>> checkpointState() override {
    return std::optional<Batch>(stateArrays({parameterOf(w)}));
  }

  std::vector<float> w = std::vector<float>(kVocab * kVocab, 0.f);
  std::map<int64_t, float> losses;
  int64_t stopAfter = 0;
  BigramEvaluation evaluation;
  int evaluations = 0;
  std::string failure;
};

Corpus syntheticCorpus() {
  Corpus corpus;
  corpus.rows = corpus.trainRows = 48;
  corpus.seqLen = 12;
  corpus.vocab = kVocab;
  std::mt19937_64 rng(3);
  corpus.tokens.resize(corpus.rows * corpus.seqLen);
  for (int64_t r = 0; r < corpus.rows; ++r)
    for (int64_t t = 0; t < corpus.seqLen; ++t) // a learnable rule: mostly t -> t + 1
      corpus.tokens[r * corpus.seqLen + t] =
          t == 0 ? corpus.cls
                 : corpus.firstWord + (corpus.tokens[r * corpus.seqLen + t - 1] + (rng() % 4 == 0)) %
                                          (kVocab - corpus.firstWord);
  corpus.hash = fnv1a(corpus.tokens.data(), corpus.tokens.size() * sizeof(int64_t));
  return corpus;
}

struct TempPath {
  explicit TempPath(const char *name)
      : path((std::filesystem::temp_directory_path() /
              (std::string("pf-loop-") + std::to_string(::getpid()) + "-" + name))
                 .string()) {}
  ~TempPath() { std::remove(path.c_str()); }
  std::string path;
};

RunConfig smallRun(int steps) {
  RunConfig config;
  config.batch = 4;
  config.steps = steps;
  config.warmup = 2;
  config.lr = 0.5;
  config.logEvery = 4;
  return config;
}

TEST(TrainingLoop, TrainsEvaluatesAndResumesBitForBit) {
  Corpus corpus = syntheticCorpus();
  corpus.trainRows = corpus.rows - 8; // --eval-sequences 8
  TempPath straight("straight.npz"), half("half.npz");

  RunConfig config = smallRun(12);
  config.evalEvery = 6;
  config.evalSequences = 8;
  config.checkpointFile = straight.path;
  TrainingRun run(config, corpus);
  BigramStep whole;
  ASSERT_EQ(runTrainingLoop(run, whole), 0) << whole.failure;
  ASSERT_EQ(whole.losses.size(), 12u);
  EXPECT_LT(whole.losses[12], whole.losses[1]); // it learns
  EXPECT_EQ(whole.evaluations, 3);              // before step 1, after 6 and 12

  // Stopped after six steps (exit status 130, a checkpoint), then a second
  // run resumed from it.
  RunConfig first = smallRun(12);
  first.checkpointFile = half.path;
  TrainingRun firstRun(first, corpus);
  BigramStep firstHalf;
  firstHalf.stopAfter = 6;
  ASSERT_EQ(runTrainingLoop(firstRun, firstHalf), 130) << firstHalf.failure;
  ASSERT_EQ(firstHalf.losses.rbegin()->first, 6);

  RunConfig second = smallRun(12);
  second.resumeFile = half.path;
  TrainingRun secondRun(second, corpus);
  BigramStep secondHalf;
  ASSERT_EQ(runTrainingLoop(secondRun, secondHalf), 0) << secondHalf.failure;
  ASSERT_EQ(secondHalf.losses.begin()->first, 7);
  for (int64_t step = 7; step <= 12; ++step)
    EXPECT_EQ(secondHalf.losses[step], whole.losses[step]) << "step " << step;
  EXPECT_EQ(std::memcmp(secondHalf.w.data(), whole.w.data(), whole.w.size() * sizeof(float)), 0);
}

TEST(TrainingLoop, RefusesACheckpointOfAnotherSeed) {
  Corpus corpus = syntheticCorpus();
  TempPath file("seed.npz");
  RunConfig config = smallRun(4);
  config.checkpointFile = file.path;
  TrainingRun run(config, corpus);
  BigramStep step;
  ASSERT_EQ(runTrainingLoop(run, step), 0) << step.failure;

  RunConfig other = smallRun(8);
  other.seed = 5;
  other.resumeFile = file.path;
  TrainingRun otherRun(other, corpus);
  BigramStep resumed;
  EXPECT_EQ(runTrainingLoop(otherRun, resumed), 1);
  EXPECT_EQ(resumed.failure, file.path + ": was trained with --seed 0, this run has --seed 5");
  EXPECT_TRUE(resumed.losses.empty());
}

} // namespace
