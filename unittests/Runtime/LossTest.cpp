//===- LossTest.cpp - Softmax cross-entropy with ignored labels ------------===//

#include "TrainingTestUtil.h"

#include <limits>

using namespace pfrt_test;

namespace {

using LossTest = RuntimeTest;

struct LossRef {
  double loss = 0;
  int64_t count = 0;
  std::vector<double> grad;
};

/// log-softmax reference in double: loss = -mean over counted rows of
/// log_softmax(row)[label]; grad = scale (softmax - onehot) / count.
template <class T, class L>
LossRef referenceLoss(const Tensor<T> &logits, const Tensor<L> &labels,
                      int64_t ignore, double scale) {
  const int64_t v = logits.dims.back(), rows = labels.size();
  LossRef r;
  r.grad.assign(logits.size(), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    r.count += labels[i] != ignore;
  for (int64_t i = 0; i < rows; ++i) {
    if (labels[i] == ignore)
      continue;
    double m = -INFINITY;
    for (int64_t j = 0; j < v; ++j)
      m = std::max(m, double(logits[i * v + j]));
    double s = 0;
    for (int64_t j = 0; j < v; ++j)
      s += std::exp(double(logits[i * v + j]) - m);
    const double lse = m + std::log(s);
    r.loss -= double(logits[i * v + labels[i]]) - lse;
    for (int64_t j = 0; j < v; ++j)
      r.grad[i * v + j] = scale *
                          (std::exp(double(logits[i * v + j]) - lse) -
                           (j == labels[i] ? 1.0 : 0.0)) /
                          double(r.count);
  }
  if (r.count)
    r.loss /= double(r.count);
  return r;
}

TEST_F(LossTest, MatchesLogSoftmaxWithIgnoredLabels) {
  const int64_t rows = 37, vocab = 1001;
  Tensor<float> logits = random<float>({rows, vocab}, -8, 8, 1);
  Tensor<int64_t> labels({rows});
  std::mt19937 gen(2);
  for (auto &l : labels.data)
    l = gen() % 3 == 0 ? -100 : int64_t(gen() % vocab);
  Tensor<float> loss(Dims{}), grad({rows, vocab});
  Tensor<int64_t> count(Dims{});
  pfrt_tensor tl = logits.desc(), tlab = labels.desc(), tloss = loss.desc(),
              tg = grad.desc(), tc = count.desc();
  ok(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 0.5, &tloss, &tg, &tc));
  LossRef ref = referenceLoss(logits, labels, -100, 0.5);
  EXPECT_GT(ref.count, 0);
  EXPECT_EQ(count[0], ref.count);
  EXPECT_NEAR(loss[0], ref.loss, 1e-5 * std::fabs(ref.loss));
  EXPECT_LT(maxAbsDiff(grad.data, ref.grad), 1e-8);
  // Ignored rows have zero gradient; counted rows sum to ~0.
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < vocab; ++j)
      s += grad[i * vocab + j];
    EXPECT_NEAR(s, 0.0, 1e-7);
  }
}

TEST_F(LossTest, FiniteDifferencesF64) {
  const int64_t vocab = 6;
  Tensor<double> logits = random<double>({2, 3, vocab}, -3, 3, 3);
  Tensor<int32_t> labels({2, 3}, {1, -100, 5, 0, 2, -100}); // i32 labels
  Tensor<double> loss(Dims{}), grad(logits.dims);
  pfrt_tensor tl = logits.desc(), tlab = labels.desc(), tloss = loss.desc(),
              tg = grad.desc();
  ok(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss, &tg,
                                nullptr));
  auto f = [&] {
    EXPECT_EQ(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss,
                                         nullptr, nullptr),
              PFRT_OK);
    return loss[0];
  };
  EXPECT_LT(relErr(grad.data, numericGradient(logits.data, f)), 1e-8);
  LossRef ref = referenceLoss(logits, labels, -100, 1.0);
  EXPECT_NEAR(loss[0], ref.loss, 1e-13);
}

TEST_F(LossTest, AllIgnoredGivesZero) {
  Tensor<float> logits = random<float>({4, 10}, -1, 1, 4);
  Tensor<int64_t> labels({4}, {-1, -1, -1, -1}); // a custom ignore_index
  Tensor<float> loss(Dims{}), grad = random<float>({4, 10}, -1, 1, 5);
  Tensor<int64_t> count({}, {99});
  pfrt_tensor tl = logits.desc(), tlab = labels.desc(), tloss = loss.desc(),
              tg = grad.desc(), tc = count.desc();
  ok(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -1, 1.0, &tloss, &tg, &tc));
  EXPECT_EQ(loss[0], 0.0f);
  EXPECT_EQ(count[0], 0);
  for (float g : grad.data)
    EXPECT_EQ(g, 0.0f);
  // No rows at all.
  Tensor<float> empty({0, 10});
  Tensor<int64_t> none({0});
  pfrt_tensor te = empty.desc(), tn = none.desc();
  ok(pfrt_softmax_cross_entropy(ctx, &te, &tn, -100, 1.0, &tloss, nullptr,
                                &tc));
  EXPECT_EQ(loss[0], 0.0f);
  EXPECT_EQ(count[0], 0);
}

TEST_F(LossTest, StableInPlaceAndThreadIndependent) {
  // Large logits (a naive exp overflows), gradient written over the logits.
  const int64_t rows = 300, vocab = 517;
  Tensor<float> logits = random<float>({rows, vocab}, -3, 3, 6);
  for (int64_t i = 0; i < rows; ++i)
    logits[i * vocab + (i % vocab)] += 1e4f;
  Tensor<int64_t> labels({rows});
  for (int64_t i = 0; i < rows; ++i)
    labels[i] = i % 5 == 0 ? -100 : (i * 7) % vocab;
  LossRef ref = referenceLoss(logits, labels, -100, 1.0);
  std::vector<float> losses;
  for (int threads : {1, 2, 3}) {
    ScopedContext c(threads);
    Tensor<float> work = logits, loss(Dims{});
    pfrt_tensor tw = work.desc(), tlab = labels.desc(), tloss = loss.desc();
    ASSERT_EQ(pfrt_softmax_cross_entropy(c.ctx, &tw, &tlab, -100, 1.0, &tloss,
                                         &tw, nullptr),
              PFRT_OK);
    EXPECT_TRUE(std::isfinite(loss[0]));
    EXPECT_NEAR(loss[0], ref.loss, 1e-4 * std::fabs(ref.loss));
    EXPECT_LT(maxAbsDiff(work.data, ref.grad), 1e-7);
    losses.push_back(loss[0]);
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(losses[0], losses[2]);
}

TEST_F(LossTest, Errors) {
  Tensor<float> logits = random<float>({3, 4}, -1, 1, 7), loss(Dims{});
  Tensor<float> grad({3, 4});
  std::fill(grad.data.begin(), grad.data.end(), 5.0f);
  Tensor<int64_t> labels({3}, {0, 4, 1}); // 4 is out of range
  pfrt_tensor tl = logits.desc(), tlab = labels.desc(), tloss = loss.desc(),
              tg = grad.desc();
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss, &tg,
                                   nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("label 4"),
            std::string::npos);
  for (float g : grad.data)
    EXPECT_EQ(g, 5.0f); // nothing written
  labels[1] = -7;
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss, &tg,
                                   nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
  labels[1] = 2;
  Tensor<int64_t> wrongLabels({4});
  pfrt_tensor twl = wrongLabels.desc();
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &twl, -100, 1.0, &tloss, &tg,
                                   nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
  Tensor<float> vecLoss({1});
  pfrt_tensor tvl = vecLoss.desc();
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tvl, &tg,
                                   nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
  Tensor<float> floatLabels({3});
  pfrt_tensor tfl = floatLabels.desc();
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tfl, -100, 1.0, &tloss, &tg,
                                   nullptr),
        PFRT_UNSUPPORTED, "pfrt_softmax_cross_entropy");
  Tensor<int32_t> count32(Dims{});
  pfrt_tensor tc32 = count32.desc();
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss, &tg,
                                   &tc32),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
  fails(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, NAN, &tloss, &tg,
                                   nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_cross_entropy");
}

} // namespace
