//===- LinalgTest.cpp - matmul, gemm and linear against naive products -----===//

#include "RuntimeTestUtil.h"

using namespace pfrt_test;

namespace {

/// NumPy matmul in double: returns the result and its shape.
template <class T>
std::vector<double> referenceMatmul(const Tensor<T> &a, const Tensor<T> &b,
                                    Dims &outDims) {
  Dims ad = a.dims, bd = b.dims;
  const bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  if (aVec)
    ad.insert(ad.begin(), 1);
  if (bVec)
    bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  Dims ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  Dims batch = broadcast(ab, bb);
  outDims = batch;
  if (!aVec)
    outDims.push_back(m);
  if (!bVec)
    outDims.push_back(n);
  std::vector<double> out(numel(batch) * m * n);
  for (int64_t p = 0; p < numel(batch); ++p) {
    Dims idx = unravel(p, batch);
    const int64_t ia = (ab.empty() ? 0 : broadcastIndex(idx, ab)) * m * k;
    const int64_t ib = (bb.empty() ? 0 : broadcastIndex(idx, bb)) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s += double(a[ia + i * k + l]) * double(b[ib + l * n + j]);
        out[(p * m + i) * n + j] = s;
      }
  }
  return out;
}

struct MatmulCase {
  Dims a, b;
};

class Matmul : public RuntimeTest,
               public ::testing::WithParamInterface<MatmulCase> {};

TEST_P(Matmul, MatchesNumpySemantics) {
  Tensor<float> a = random<float>(GetParam().a, -1, 1, 11);
  Tensor<float> b = random<float>(GetParam().b, -1, 1, 12);
  Dims outDims;
  std::vector<double> ref = referenceMatmul(a, b, outDims);
  Tensor<float> out(outDims);
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_matmul(ctx, &ta, &tb, &to));
  EXPECT_LT(maxAbsDiff(out.data, ref), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Matmul,
    ::testing::Values(MatmulCase{{3, 4}, {4, 5}},
                      MatmulCase{{2, 7, 16}, {16, 9}},       // one GEMM
                      MatmulCase{{2, 3, 5, 8}, {2, 3, 8, 4}}, // same batch
                      MatmulCase{{2, 1, 5, 8}, {3, 8, 4}},    // broadcast
                      MatmulCase{{5, 8}, {3, 8, 4}},          // a unbatched
                      MatmulCase{{1, 1, 5, 8}, {1, 8, 4}},    // unit batches
                      MatmulCase{{8}, {8, 3}},                // a vector
                      MatmulCase{{2, 4, 8}, {8}},             // b vector
                      MatmulCase{{6}, {6}},                   // dot -> scalar
                      MatmulCase{{3, 0}, {0, 2}},             // K = 0
                      MatmulCase{{0, 4}, {4, 2}},             // M = 0
                      // attention-like: many small GEMMs run batch-parallel
                      MatmulCase{{2, 12, 32, 16}, {2, 12, 16, 32}}));

using LinalgTest = RuntimeTest;

TEST_F(LinalgTest, MatmulDouble) {
  Tensor<double> a = random<double>({2, 3, 4}, -1, 1, 13);
  Tensor<double> b = random<double>({2, 4, 6}, -1, 1, 14);
  Dims outDims;
  std::vector<double> ref = referenceMatmul(a, b, outDims);
  Tensor<double> out(outDims);
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_matmul(ctx, &ta, &tb, &to));
  EXPECT_LT(maxAbsDiff(out.data, ref), 1e-12);
}

TEST_F(LinalgTest, MatmulLargeBatchedThreadedBlas) {
  // Per-GEMM work above the batch-parallel threshold: threaded BLAS calls.
  Tensor<float> a = random<float>({2, 160, 128}, -1, 1, 15);
  Tensor<float> b = random<float>({2, 128, 130}, -1, 1, 16);
  Dims outDims;
  std::vector<double> ref = referenceMatmul(a, b, outDims);
  Tensor<float> out(outDims);
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_matmul(ctx, &ta, &tb, &to));
  EXPECT_LT(maxAbsDiff(out.data, ref), 1e-4);
}

/// out = alpha op(a) op(b) + beta c (c broadcast), in double.
std::vector<double> referenceGemm(const Tensor<float> &a, const Tensor<float> &b,
                                  const Tensor<float> *c, double alpha,
                                  double beta, bool ta, bool tb, int64_t m,
                                  int64_t n, int64_t k) {
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l)
        s += double(ta ? a[l * m + i] : a[i * k + l]) *
             double(tb ? b[j * k + l] : b[l * n + j]);
      double cv = c ? double((*c)[broadcastIndex({i, j}, c->dims)]) : 0.0;
      out[i * n + j] = alpha * s + (c ? beta * cv : 0.0);
    }
  return out;
}

TEST_F(LinalgTest, GemmTransposesAndBias) {
  const int64_t m = 7, n = 5, k = 9;
  for (int transA = 0; transA < 2; ++transA)
    for (int transB = 0; transB < 2; ++transB)
      for (Dims cDims : {Dims{m, n}, Dims{n}, Dims{m, 1}, Dims{}}) {
        Tensor<float> a = random<float>(transA ? Dims{k, m} : Dims{m, k}, -1,
                                        1, 17);
        Tensor<float> b = random<float>(transB ? Dims{n, k} : Dims{k, n}, -1,
                                        1, 18);
        Tensor<float> c = random<float>(cDims, -1, 1, 19);
        Tensor<float> out({m, n});
        pfrt_tensor tA = a.desc(), tB = b.desc(), tC = c.desc(),
                    tO = out.desc();
        ok(pfrt_gemm(ctx, &tA, &tB, &tC, 0.5, 2.0, transA, transB, &tO));
        auto ref = referenceGemm(a, b, &c, 0.5, 2.0, transA, transB, m, n, k);
        EXPECT_LT(maxAbsDiff(out.data, ref), 1e-5)
            << transA << transB << " c rank " << cDims.size();
      }
}

TEST_F(LinalgTest, GemmWithoutCAndInPlaceC) {
  Tensor<float> a = random<float>({4, 3}, -1, 1, 20);
  Tensor<float> b = random<float>({3, 2}, -1, 1, 21);
  Tensor<float> out({4, 2});
  for (auto &v : out.data)
    v = NAN; // must be overwritten, not accumulated
  pfrt_tensor tA = a.desc(), tB = b.desc(), tO = out.desc();
  ok(pfrt_gemm(ctx, &tA, &tB, nullptr, 1.0, 1.0, 0, 0, &tO));
  auto ref = referenceGemm(a, b, nullptr, 1, 0, false, false, 4, 2, 3);
  EXPECT_LT(maxAbsDiff(out.data, ref), 1e-6);

  // out aliasing a full-shape c: out = a b + c.
  Tensor<float> c = random<float>({4, 2}, -1, 1, 22);
  auto refC = referenceGemm(a, b, &c, 1, 1, false, false, 4, 2, 3);
  pfrt_tensor tC = c.desc();
  ok(pfrt_gemm(ctx, &tA, &tB, &tC, 1.0, 1.0, 0, 0, &tC));
  EXPECT_LT(maxAbsDiff(c.data, refC), 1e-6);
}

/// y = x W + bias over the last dimension, in double.
std::vector<double> referenceLinear(const Tensor<float> &x,
                                    const Tensor<float> &w,
                                    const Tensor<float> *bias, bool wT,
                                    int64_t in, int64_t out) {
  const int64_t rows = x.size() / in;
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? double((*bias)[o]) : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += double(x[r * in + i]) * double(wT ? w[o * in + i] : w[i * out + o]);
      y[r * out + o] = s;
    }
  return y;
}

TEST_F(LinalgTest, Linear) {
  const int64_t in = 24, outF = 10;
  Tensor<float> x = random<float>({2, 3, in}, -1, 1, 23);
  Tensor<float> bias = random<float>({outF}, -1, 1, 24);
  for (int wT = 0; wT < 2; ++wT)
    for (bool withBias : {true, false}) {
      Tensor<float> w =
          random<float>(wT ? Dims{outF, in} : Dims{in, outF}, -1, 1, 25);
      Tensor<float> y({2, 3, outF});
      pfrt_tensor tx = x.desc(), tw = w.desc(), tb = bias.desc(),
                  ty = y.desc();
      ok(pfrt_linear(ctx, &tx, &tw, withBias ? &tb : nullptr, wT, &ty));
      auto ref = referenceLinear(x, w, withBias ? &bias : nullptr, wT, in, outF);
      EXPECT_LT(maxAbsDiff(y.data, ref), 1e-5) << wT << withBias;
    }
}

TEST_F(LinalgTest, LinearVectorAndEmptyInput) {
  Tensor<float> x = random<float>({5}, -1, 1, 26);
  Tensor<float> w = random<float>({5, 3}, -1, 1, 27);
  Tensor<float> y({3});
  pfrt_tensor tx = x.desc(), tw = w.desc(), ty = y.desc();
  ok(pfrt_linear(ctx, &tx, &tw, nullptr, 0, &ty));
  EXPECT_LT(maxAbsDiff(y.data, referenceLinear(x, w, nullptr, false, 5, 3)),
            1e-6);

  // in_features == 0: the result is the bias.
  Tensor<float> x0({2, 0}), w0({0, 3}), b0({3}, {1, 2, 3}), y0({2, 3});
  pfrt_tensor tx0 = x0.desc(), tw0 = w0.desc(), tb0 = b0.desc(),
              ty0 = y0.desc();
  ok(pfrt_linear(ctx, &tx0, &tw0, &tb0, 0, &ty0));
  EXPECT_EQ(y0.data, (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

} // namespace
