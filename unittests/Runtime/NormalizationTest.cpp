//===- NormalizationTest.cpp - layer_norm, softmax, reductions -------------===//

#include "RuntimeTestUtil.h"

#include <limits>

using namespace pfrt_test;

namespace {

using NormalizationTest = RuntimeTest;

/// Two-pass layer norm in double over blocks of `cols` elements.
struct LayerNormRef {
  std::vector<double> y, mean, invStd;
};

template <class T>
LayerNormRef referenceLayerNorm(const Tensor<T> &x, const Tensor<T> &scale,
                                const Tensor<T> *bias, int64_t cols,
                                double eps) {
  LayerNormRef r;
  const int64_t rows = x.size() / cols;
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += double(x[i * cols + j]);
    mean /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (double(x[i * cols + j]) - mean) * (double(x[i * cols + j]) - mean);
    var /= cols;
    const double inv = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j)
      r.y[i * cols + j] = (double(x[i * cols + j]) - mean) * inv *
                              double(scale[j]) +
                          (bias ? double((*bias)[j]) : 0.0);
    r.mean.push_back(mean);
    r.invStd.push_back(inv);
  }
  return r;
}

TEST_F(NormalizationTest, LayerNormLastAxis) {
  // Offset inputs: a one-pass E[x^2] - E[x]^2 would lose digits here.
  Tensor<float> x = random<float>({4, 33, 768}, 99, 101, 31);
  Tensor<float> scale = random<float>({768}, 0.5, 1.5, 32);
  Tensor<float> bias = random<float>({768}, -1, 1, 33);
  Tensor<float> y(x.dims), mean({4, 33, 1}), invStd({4, 33, 1});
  pfrt_tensor tx = x.desc(), ts = scale.desc(), tb = bias.desc(),
              ty = y.desc(), tm = mean.desc(), ti = invStd.desc();
  ok(pfrt_layer_norm(ctx, &tx, &ts, &tb, -1, 1e-12, &ty, &tm, &ti));
  LayerNormRef ref = referenceLayerNorm(x, scale, &bias, 768, 1e-12);
  EXPECT_LT(maxAbsDiff(y.data, ref.y), 2e-4);
  EXPECT_LT(maxAbsDiff(mean.data, ref.mean), 1e-4);
  for (size_t i = 0; i < ref.invStd.size(); ++i)
    EXPECT_NEAR(invStd[i], ref.invStd[i], 1e-5 * ref.invStd[i]);
}

TEST_F(NormalizationTest, LayerNormInnerBlockNoBias) {
  Tensor<float> x = random<float>({3, 4, 5}, -2, 2, 34);
  Tensor<float> scale = random<float>({4, 5}, 0.5, 1.5, 35);
  Tensor<float> y(x.dims), mean({3}); // the short statistics form
  pfrt_tensor tx = x.desc(), ts = scale.desc(), ty = y.desc(),
              tm = mean.desc();
  ok(pfrt_layer_norm(ctx, &tx, &ts, nullptr, 1, 1e-5, &ty, &tm, nullptr));
  LayerNormRef ref = referenceLayerNorm<float>(x, scale, nullptr, 20, 1e-5);
  EXPECT_LT(maxAbsDiff(y.data, ref.y), 1e-5);
  EXPECT_LT(maxAbsDiff(mean.data, ref.mean), 1e-6);
}

TEST_F(NormalizationTest, LayerNormDouble) {
  Tensor<double> x = random<double>({6, 10}, -3, 3, 36);
  Tensor<double> scale = random<double>({10}, 0.5, 1.5, 37);
  Tensor<double> bias = random<double>({10}, -1, 1, 38);
  Tensor<double> y(x.dims);
  pfrt_tensor tx = x.desc(), ts = scale.desc(), tb = bias.desc(),
              ty = y.desc();
  ok(pfrt_layer_norm(ctx, &tx, &ts, &tb, 1, 1e-5, &ty, nullptr, nullptr));
  EXPECT_LT(maxAbsDiff(y.data, referenceLayerNorm(x, scale, &bias, 10, 1e-5).y),
            1e-12);
}

/// Softmax along `axis` in double.
std::vector<double> referenceSoftmax(const Tensor<float> &x, int axis) {
  const Dims &d = x.dims;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i)
    outer *= d[i];
  for (size_t i = axis + 1; i < d.size(); ++i)
    inner *= d[i];
  const int64_t n = d[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i)
        mx = std::max(mx, double(x[(o * n + i) * inner + c]));
      for (int64_t i = 0; i < n; ++i)
        sum += std::exp(double(x[(o * n + i) * inner + c]) - mx);
      for (int64_t i = 0; i < n; ++i)
        y[(o * n + i) * inner + c] =
            std::exp(double(x[(o * n + i) * inner + c]) - mx) / sum;
    }
  return y;
}

TEST_F(NormalizationTest, SoftmaxEveryAxis) {
  Tensor<float> x = random<float>({3, 70, 130}, -5, 5, 39);
  for (int axis = 0; axis < 3; ++axis) {
    Tensor<float> y(x.dims);
    pfrt_tensor tx = x.desc(), ty = y.desc();
    ok(pfrt_softmax(ctx, &tx, axis - 3 * (axis == 2), &ty)); // -1 for the last
    EXPECT_LT(maxAbsDiff(y.data, referenceSoftmax(x, axis)), 1e-6) << axis;
  }
}

TEST_F(NormalizationTest, SoftmaxRowsSumToOneAndStayStable) {
  // Large logits overflow a naive exp; the maximum is subtracted first.
  Tensor<float> x = random<float>({64, 128}, 1000, 3000, 40);
  x[5] = 1e30f;
  x[200] = -1e30f;
  Tensor<float> y(x.dims);
  pfrt_tensor tx = x.desc(), ty = y.desc();
  ok(pfrt_softmax(ctx, &tx, -1, &ty));
  for (int64_t r = 0; r < 64; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 128; ++c) {
      ASSERT_TRUE(std::isfinite(y[r * 128 + c]));
      sum += y[r * 128 + c];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << r;
  }
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_LT(maxAbsDiff(y.data, referenceSoftmax(x, 1)), 1e-6);
}

TEST_F(NormalizationTest, SoftmaxMaskedRowIsNaN) {
  Tensor<float> x({2, 3}, {-INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, 0});
  Tensor<float> y(x.dims);
  pfrt_tensor tx = x.desc(), ty = y.desc();
  ok(pfrt_softmax(ctx, &tx, 1, &ty));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[4], 0.0f);
}

TEST_F(NormalizationTest, SoftmaxDouble) {
  Tensor<double> x({1, 3}, {1, 2, 3}), y({1, 3});
  pfrt_tensor tx = x.desc(), ty = y.desc();
  ok(pfrt_softmax(ctx, &tx, 1, &ty));
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(y[i], std::exp(i + 1.0) / s, 1e-15);
}

/// Sum over `reduced` axes in double, output shape with keepdims.
std::vector<double> referenceReduce(const Tensor<float> &x,
                                    const std::vector<bool> &reduced,
                                    bool mean) {
  Dims outDims;
  for (size_t i = 0; i < x.dims.size(); ++i)
    outDims.push_back(reduced[i] ? 1 : x.dims[i]);
  std::vector<double> out(numel(outDims), 0.0);
  int64_t count = 1;
  for (size_t i = 0; i < x.dims.size(); ++i)
    count *= reduced[i] ? x.dims[i] : 1;
  for (int64_t i = 0; i < x.size(); ++i) {
    Dims idx = unravel(i, x.dims);
    for (size_t d = 0; d < idx.size(); ++d)
      if (reduced[d])
        idx[d] = 0;
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      o = o * outDims[d] + idx[d];
    out[o] += x[i];
  }
  if (mean)
    for (double &v : out)
      v /= count;
  return out;
}

TEST_F(NormalizationTest, ReduceAxisSets) {
  Tensor<float> x = random<float>({3, 4, 1, 5, 6}, -1, 1, 41);
  const std::vector<std::vector<int64_t>> axisSets = {
      {-1}, {0}, {1}, {1, 3}, {0, 4}, {0, 1, 3, 4}, {2}, {3, -5}, {}};
  for (const auto &axes : axisSets)
    for (int keep = 0; keep < 2; ++keep)
      for (bool mean : {false, true}) {
        std::vector<bool> reduced(5, axes.empty());
        for (int64_t a : axes)
          reduced[a < 0 ? a + 5 : a] = true;
        Dims outDims;
        for (int i = 0; i < 5; ++i)
          if (!reduced[i])
            outDims.push_back(x.dims[i]);
          else if (keep)
            outDims.push_back(1);
        Tensor<float> out(outDims);
        pfrt_tensor tx = x.desc(), to = out.desc();
        auto fn = mean ? pfrt_reduce_mean : pfrt_reduce_sum;
        ok(fn(ctx, &tx, axes.empty() ? nullptr : axes.data(),
              static_cast<int32_t>(axes.size()), keep, &to));
        EXPECT_LT(maxAbsDiff(out.data, referenceReduce(x, reduced, mean)), 1e-5)
            << "axes " << ::testing::PrintToString(axes) << " keep " << keep
            << " mean " << mean;
      }
}

TEST_F(NormalizationTest, ReduceLargeRowsThreaded) {
  // BERT-style ReduceMean over the hidden size, and a column sum (bias
  // gradient) whose kept last axis is tiled across threads.
  Tensor<float> x = random<float>({512, 768}, -1, 1, 42);
  Tensor<float> rowMean({512, 1}), colSum({768});
  pfrt_tensor tx = x.desc(), tr = rowMean.desc(), tc = colSum.desc();
  const int64_t last = -1, first = 0;
  ok(pfrt_reduce_mean(ctx, &tx, &last, 1, 1, &tr));
  ok(pfrt_reduce_sum(ctx, &tx, &first, 1, 0, &tc));
  EXPECT_LT(maxAbsDiff(rowMean.data, referenceReduce(x, {false, true}, true)),
            1e-6);
  EXPECT_LT(maxAbsDiff(colSum.data, referenceReduce(x, {true, false}, false)),
            1e-4);
}

TEST_F(NormalizationTest, ReduceIntegersAndEmpty) {
  Tensor<int64_t> x({2, 3}, {1, 2, 3, 4, 5, 7});
  Tensor<int64_t> s({2}), m({2});
  pfrt_tensor tx = x.desc(), ts = s.desc(), tm = m.desc();
  const int64_t axis = 1;
  ok(pfrt_reduce_sum(ctx, &tx, &axis, 1, 0, &ts));
  ok(pfrt_reduce_mean(ctx, &tx, &axis, 1, 0, &tm));
  EXPECT_EQ(s.data, (std::vector<int64_t>{6, 16}));
  EXPECT_EQ(m.data, (std::vector<int64_t>{2, 5})); // truncated
  Tensor<int32_t> xi({3}, {-1, -2, 4}), si(Dims{});
  pfrt_tensor txi = xi.desc(), tsi = si.desc();
  ok(pfrt_reduce_sum(ctx, &txi, nullptr, 0, 0, &tsi));
  EXPECT_EQ(si[0], 1);

  // Reducing an empty dimension: sum 0, mean NaN.
  Tensor<float> e({2, 0}), es({2}), em({2});
  pfrt_tensor te = e.desc(), tes = es.desc(), tem = em.desc();
  ok(pfrt_reduce_sum(ctx, &te, &axis, 1, 0, &tes));
  ok(pfrt_reduce_mean(ctx, &te, &axis, 1, 0, &tem));
  EXPECT_EQ(es.data, (std::vector<float>{0, 0}));
  EXPECT_TRUE(std::isnan(em[0]));
}

} // namespace
