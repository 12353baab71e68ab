//===- KfacTest.cpp - Factors, pi, damped inverses, preconditioning --------===//
//
// References are written out in double here: X^T X / n, traces, a
// Gauss-Jordan inverse, and explicit products B^-1 G A^-1.
//
//===----------------------------------------------------------------------===//

#include "TrainingTestUtil.h"

#include <omp.h>

using namespace pfrt_test;

namespace {

using KfacTest = RuntimeTest;

using Matrix = std::vector<double>; // row-major, square unless noted

/// scale * [X | 1]^T [X | 1] / n over the flattened rows of x.
template <class T>
Matrix factorRef(const Tensor<T> &x, bool bias, double scale) {
  const int64_t d = x.dims.back(), n = x.size() / (d ? d : 1);
  const int64_t dp = d + bias;
  Matrix f(dp * dp, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < dp; ++i)
      for (int64_t j = 0; j < dp; ++j) {
        const double xi = i < d ? double(x[r * d + i]) : 1.0;
        const double xj = j < d ? double(x[r * d + j]) : 1.0;
        f[i * dp + j] += xi * xj;
      }
  for (auto &v : f)
    v = n ? v * scale / n : 0.0;
  return f;
}

/// Gauss-Jordan inverse with partial pivoting.
Matrix inverseRef(Matrix a, int64_t n) {
  Matrix inv(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    inv[i * n + i] = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[p * n + c]))
        p = r;
    for (int64_t j = 0; j < n; ++j) {
      std::swap(a[c * n + j], a[p * n + j]);
      std::swap(inv[c * n + j], inv[p * n + j]);
    }
    const double d = a[c * n + c];
    for (int64_t j = 0; j < n; ++j) {
      a[c * n + j] /= d;
      inv[c * n + j] /= d;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (r == c)
        continue;
      const double f = a[r * n + c];
      for (int64_t j = 0; j < n; ++j) {
        a[r * n + j] -= f * a[c * n + j];
        inv[r * n + j] -= f * inv[c * n + j];
      }
    }
  }
  return inv;
}

/// [m, k] x [k, n]
Matrix matmulRef(const Matrix &a, const Matrix &b, int64_t m, int64_t k,
                 int64_t n) {
  Matrix c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

Matrix transposeRef(const Matrix &a, int64_t rows, int64_t cols) {
  Matrix t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[j * rows + i] = a[i * cols + j];
  return t;
}

template <class T> void expectSymmetric(const Tensor<T> &f) {
  const int64_t n = f.dims[0];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j)
      ASSERT_EQ(f[i * n + j], f[j * n + i]) << i << ", " << j;
}

TEST_F(KfacTest, FactorMatchesXtX) {
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias);
    Tensor<float> x = random<float>({4, 33, 48}, -1, 2, 1 + bias);
    const int64_t dp = 48 + bias;
    Tensor<float> f = random<float>({dp, dp}, -1, 1, 3); // overwritten
    pfrt_tensor tx = x.desc(), tf = f.desc();
    ok(pfrt_kfac_factor(ctx, &tx, bias, 1.0, PFRT_KFAC_OVERWRITE, 0, &tf));
    EXPECT_LT(relErr(f.data, factorRef(x, bias, 1.0)), 1e-5);
    expectSymmetric(f);
    if (bias) { // the corner is scale * n / n
      EXPECT_FLOAT_EQ(f[dp * dp - 1], 1.0f);
    }
  }
  // f64, factor B with a scale, rank-2 input.
  Tensor<double> g = random<double>({50, 7}, -1, 1, 4);
  Tensor<double> fb({7, 7});
  pfrt_tensor tg = g.desc(), tfb = fb.desc();
  ok(pfrt_kfac_factor(ctx, &tg, 0, 2500.0, PFRT_KFAC_OVERWRITE, 0, &tfb));
  EXPECT_LT(relErr(fb.data, factorRef(g, false, 2500.0)), 1e-13);
  expectSymmetric(fb);
}

TEST_F(KfacTest, FactorAccumulateAndRunningAverage) {
  Tensor<double> x1 = random<double>({20, 6}, -1, 1, 5);
  Tensor<double> x2 = random<double>({12, 6}, -1, 1, 6);
  const Matrix r1 = factorRef(x1, true, 0.5), r2 = factorRef(x2, true, 0.5);
  Tensor<double> f({7, 7});
  pfrt_tensor t1 = x1.desc(), t2 = x2.desc(), tf = f.desc();
  // Micro-batches: overwrite then accumulate, each scaled by 1/2.
  ok(pfrt_kfac_factor(ctx, &t1, 1, 0.5, PFRT_KFAC_OVERWRITE, 0, &tf));
  ok(pfrt_kfac_factor(ctx, &t2, 1, 0.5, PFRT_KFAC_ACCUMULATE, 0, &tf));
  Matrix sum(49);
  for (int i = 0; i < 49; ++i)
    sum[i] = r1[i] + r2[i];
  EXPECT_LT(maxAbsDiff(f.data, sum), 1e-14);
  expectSymmetric(f);
  // Running average: F = 0.95 F + 0.05 new.
  ok(pfrt_kfac_factor(ctx, &t1, 1, 0.5, PFRT_KFAC_RUNNING_AVERAGE, 0.95, &tf));
  Matrix avg(49);
  for (int i = 0; i < 49; ++i)
    avg[i] = 0.95 * sum[i] + 0.05 * r1[i];
  EXPECT_LT(maxAbsDiff(f.data, avg), 1e-14);
  expectSymmetric(f);
  // No rows: accumulate keeps F, overwrite gives 0 (and the corner 0).
  Tensor<double> none({0, 6});
  pfrt_tensor tn = none.desc();
  ok(pfrt_kfac_factor(ctx, &tn, 1, 1.0, PFRT_KFAC_ACCUMULATE, 0, &tf));
  EXPECT_LT(maxAbsDiff(f.data, avg), 1e-14);
  ok(pfrt_kfac_factor(ctx, &tn, 1, 1.0, PFRT_KFAC_OVERWRITE, 0, &tf));
  for (double v : f.data)
    EXPECT_EQ(v, 0.0);
}

/// A factor sums in the same order whatever the caller's OpenMP default:
/// the context's thread count holds for OpenBLAS' SYRK even once OpenBLAS'
/// own count already equals it (OpenBLAS re-syncs to omp_get_max_threads()
/// on every call). An mpirun rank that is not bound to a core has the
/// machine's count as its default; K-FAC factors there once summed in
/// another order than single-process training (pipeline parity, D = 4).
TEST(KfacThreads, FactorUsesTheContextThreadsWhateverTheOpenMPDefault) {
  pfrt_context_options opts;
  pfrt_context_options_init(&opts);
  opts.num_threads = 1;
  pfrt_context *one = pfrt_context_create(&opts);
  ASSERT_NE(one, nullptr);
  const int before = omp_get_max_threads();
  for (std::vector<int64_t> dims : {std::vector<int64_t>{2, 16, 256},
                                    std::vector<int64_t>{96, 384}}) {
    SCOPED_TRACE(dims.back());
    Tensor<float> x = random<float>(dims, -1, 1, 7);
    const int64_t d = dims.back();
    Tensor<float> want({d, d}), got({d, d});
    pfrt_tensor tx = x.desc(), tw = want.desc(), tg = got.desc();
    omp_set_num_threads(1);
    ASSERT_EQ(pfrt_kfac_factor(one, &tx, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tw), PFRT_OK);
    omp_set_num_threads(std::max(before, 4));
    ASSERT_EQ(pfrt_kfac_factor(one, &tx, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tg), PFRT_OK);
    EXPECT_EQ(omp_get_max_threads(), std::max(before, 4)) << "the caller's count is restored";
    EXPECT_EQ(0, std::memcmp(want.data.data(), got.data.data(), want.data.size() * sizeof(float)))
        << "the factor's bits depend on the caller's OpenMP thread count";
  }
  omp_set_num_threads(before);
  pfrt_context_destroy(one);
}

TEST_F(KfacTest, Pi) {
  Tensor<double> a({3, 3}, {2, 1, 0, 1, 4, 0, 0, 0, 6});     // tr 12, dim 3
  Tensor<float> b({2, 2}, {0.5f, 0.1f, 0.1f, 0.5f});         // tr 1, dim 2
  pfrt_tensor ta = a.desc(), tb = b.desc();
  double pi = 0;
  ok(pfrt_kfac_pi(ctx, &ta, &tb, &pi));
  EXPECT_NEAR(pi, std::sqrt((12.0 / 3) / (1.0 / 2)), 1e-7);
  Tensor<float> zero({2, 2});
  pfrt_tensor tz = zero.desc();
  ok(pfrt_kfac_pi(ctx, &ta, &tz, &pi));
  EXPECT_EQ(pi, 1.0);
  a[4] = INFINITY;
  fails(pfrt_kfac_pi(ctx, &ta, &tb, &pi), PFRT_NUMERIC, "pfrt_kfac_pi");
}

TEST_F(KfacTest, DampedInverse) {
  // An SPD factor from data (rank-deficient: 10 rows, 24 columns; the
  // damping makes it invertible).
  Tensor<double> x = random<double>({10, 24}, -1, 1, 7);
  Tensor<double> f({24, 24}), inv({24, 24});
  pfrt_tensor tx = x.desc(), tf = f.desc(), ti = inv.desc();
  ok(pfrt_kfac_factor(ctx, &tx, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tf));
  const double damping = 0.03;
  ok(pfrt_kfac_inverse(ctx, &tf, damping, &ti));
  expectSymmetric(inv);
  Matrix damped = f.data;
  for (int i = 0; i < 24; ++i)
    damped[i * 24 + i] += damping;
  Matrix prod = matmulRef(inv.data, damped, 24, 24, 24);
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 24; ++j)
      EXPECT_NEAR(prod[i * 24 + j], i == j ? 1.0 : 0.0, 1e-10);
  EXPECT_LT(relErr(inv.data, inverseRef(damped, 24)), 1e-10);

  // f32, BERT-sized (256), in place (inverse == factor).
  Tensor<float> xf = random<float>({512, 256}, -1, 1, 8);
  Tensor<float> ff({256, 256});
  pfrt_tensor txf = xf.desc(), tff = ff.desc();
  ok(pfrt_kfac_factor(ctx, &txf, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tff));
  Matrix dampedF(ff.data.begin(), ff.data.end());
  for (int i = 0; i < 256; ++i)
    dampedF[i * 256 + i] += 0.1;
  ok(pfrt_kfac_inverse(ctx, &tff, 0.1, &tff));
  expectSymmetric(ff);
  Matrix prodF = matmulRef(asDouble(ff), dampedF, 256, 256, 256);
  double worst = 0;
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 256; ++j)
      worst = std::max(worst, std::fabs(prodF[i * 256 + j] - (i == j)));
  EXPECT_LT(worst, 1e-4);
}

TEST_F(KfacTest, NotPositiveDefiniteIsNumeric) {
  // Indefinite: eigenvalues 3 and -1.
  Tensor<double> f({2, 2}, {1, 2, 2, 1});
  Tensor<double> inv({2, 2}, {7, 7, 7, 7}); // a "previous inverse"
  pfrt_tensor tf = f.desc(), ti = inv.desc();
  fails(pfrt_kfac_inverse(ctx, &tf, 0.5, &ti), PFRT_NUMERIC,
        "pfrt_kfac_inverse");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("not positive definite"),
            std::string::npos)
      << pfrt_last_error(ctx);
  for (double v : inv.data)
    EXPECT_EQ(v, 7.0); // left unchanged
  // More damping fixes it (the caller's retry).
  ok(pfrt_kfac_inverse(ctx, &tf, 1.5, &ti));
  EXPECT_LT(relErr(inv.data, inverseRef({2.5, 2, 2, 2.5}, 2)), 1e-12);
  // Float, negative definite, in place: the factor is kept as well.
  Tensor<float> neg({3, 3}, {-1, 0, 0, 0, -1, 0, 0, 0, -1});
  pfrt_tensor tn = neg.desc();
  fails(pfrt_kfac_inverse(ctx, &tn, 0.0, &tn), PFRT_NUMERIC,
        "pfrt_kfac_inverse");
  EXPECT_EQ(neg[0], -1.0f);
  // NaN in the factor.
  Tensor<double> nan({2, 2}, {1, 0, 0, NAN});
  pfrt_tensor tnan = nan.desc();
  fails(pfrt_kfac_inverse(ctx, &tnan, 0.1, &ti), PFRT_NUMERIC,
        "pfrt_kfac_inverse");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("NaN"), std::string::npos);
}

TEST_F(KfacTest, AllFinite) {
  int32_t result = -1;
  Tensor<float> a = random<float>({1000}, -1, 1, 9);
  pfrt_tensor ta = a.desc();
  ok(pfrt_all_finite(ctx, &ta, &result));
  EXPECT_EQ(result, 1);
  a[999] = INFINITY;
  ok(pfrt_all_finite(ctx, &ta, &result));
  EXPECT_EQ(result, 0);
  a[999] = -INFINITY;
  ok(pfrt_all_finite(ctx, &ta, &result));
  EXPECT_EQ(result, 0);
  Tensor<double> d({3}, {1, NAN, 2});
  pfrt_tensor td = d.desc();
  ok(pfrt_all_finite(ctx, &td, &result));
  EXPECT_EQ(result, 0);
  Tensor<uint16_t> h({2}, {0x3C00, 0x7C00}); // 1.0, +inf in binary16
  pfrt_tensor th = h.desc();
  ok(pfrt_all_finite(ctx, &th, &result));
  EXPECT_EQ(result, 0);
  h[1] = 0x7BFF; // the largest finite half
  ok(pfrt_all_finite(ctx, &th, &result));
  EXPECT_EQ(result, 1);
  Tensor<int32_t> i({4});
  pfrt_tensor tint = i.desc();
  ok(pfrt_all_finite(ctx, &tint, &result));
  EXPECT_EQ(result, 1);
  Tensor<float> empty({0});
  pfrt_tensor te = empty.desc();
  ok(pfrt_all_finite(ctx, &te, &result));
  EXPECT_EQ(result, 1);
  fails(pfrt_all_finite(ctx, &ta, nullptr), PFRT_INVALID_ARGUMENT,
        "pfrt_all_finite");
}

/// An SPD matrix (a damped random Gram matrix) as a test inverse.
Matrix spd(int64_t n, unsigned seed) {
  Tensor<double> x = random<double>({n + 3, n}, -1, 1, seed);
  Matrix f = factorRef(x, false, 1.0);
  for (int64_t i = 0; i < n; ++i)
    f[i * n + i] += 0.5;
  return f;
}

TEST_F(KfacTest, PreconditionMatchesExplicitProducts) {
  const int64_t in = 6, out = 4;
  unsigned seed = 20;
  for (int transposed : {1, 0}) {
    for (int mode = 0; mode < 3; ++mode) { // no bias, separate, joint
      SCOPED_TRACE("transposed " + std::to_string(transposed) + " mode " +
                   std::to_string(mode));
      const bool joint = mode == 2, withBias = mode > 0;
      const int64_t ia = in + joint;
      Tensor<double> ainv({ia, ia}, spd(ia, ++seed));
      Tensor<double> binv({out, out}, spd(out, ++seed));
      const Dims wd = transposed ? Dims{out, in} : Dims{in, out};
      Tensor<double> gw = random<double>(wd, -1, 1, ++seed);
      Tensor<double> gb = random<double>({out}, -1, 1, ++seed);
      // Reference on the [out, in(+1)] layout: B^-1 [G | g] A^-1.
      Matrix g = transposed ? gw.data : transposeRef(gw.data, in, out);
      Matrix j(out * ia);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i)
          j[o * ia + i] = g[o * in + i];
        if (joint)
          j[o * ia + in] = gb[o];
      }
      Matrix res = matmulRef(matmulRef(binv.data, j, out, out, ia), ainv.data,
                             out, ia, ia);
      Matrix refW(out * in), refB(out);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i)
          refW[o * in + i] = res[o * ia + i];
        refB[o] = joint ? res[o * ia + in] : 0.0;
      }
      if (mode == 1)
        refB = matmulRef(binv.data, gb.data, out, out, 1);
      if (!transposed)
        refW = transposeRef(refW, out, in);
      // In place: the outputs are the gradients' buffers.
      pfrt_tensor ta = ainv.desc(), tb = binv.desc(), tgw = gw.desc(),
                  tgb = gb.desc();
      ok(pfrt_kfac_precondition(ctx, &ta, &tb, &tgw, withBias ? &tgb : nullptr,
                                transposed, &tgw, withBias ? &tgb : nullptr));
      EXPECT_LT(relErr(gw.data, refW), 1e-12);
      if (withBias) {
        EXPECT_LT(relErr(gb.data, refB), 1e-12);
      }
    }
  }
  // f32, BERT-like shapes with separate outputs.
  const int64_t fin = 128, fout = 96;
  Tensor<float> ainv({fin + 1, fin + 1});
  Tensor<float> binv({fout, fout});
  {
    Matrix a = spd(fin + 1, 40), b = spd(fout, 41);
    std::copy(a.begin(), a.end(), ainv.data.begin());
    std::copy(b.begin(), b.end(), binv.data.begin());
  }
  Tensor<float> gw = random<float>({fout, fin}, -1, 1, 42);
  Tensor<float> gb = random<float>({fout}, -1, 1, 43);
  Tensor<float> ow({fout, fin}), ob({fout});
  pfrt_tensor ta = ainv.desc(), tb = binv.desc(), tgw = gw.desc(),
              tgb = gb.desc(), tow = ow.desc(), tob = ob.desc();
  ok(pfrt_kfac_precondition(ctx, &ta, &tb, &tgw, &tgb, 1, &tow, &tob));
  Matrix j(fout * (fin + 1));
  for (int64_t o = 0; o < fout; ++o) {
    for (int64_t i = 0; i < fin; ++i)
      j[o * (fin + 1) + i] = gw[o * fin + i];
    j[o * (fin + 1) + fin] = gb[o];
  }
  Matrix res = matmulRef(matmulRef(asDouble(binv), j, fout, fout, fin + 1),
                         asDouble(ainv), fout, fin + 1, fin + 1);
  Matrix refW(fout * fin), refB(fout);
  for (int64_t o = 0; o < fout; ++o) {
    for (int64_t i = 0; i < fin; ++i)
      refW[o * fin + i] = res[o * (fin + 1) + i];
    refB[o] = res[o * (fin + 1) + fin];
  }
  EXPECT_LT(relErr(ow.data, refW, 10.0), 1e-5);
  EXPECT_LT(relErr(ob.data, refB, 10.0), 1e-5);
}

TEST_F(KfacTest, EigenRebuildsTheFactor) {
  // Rank-deficient (10 rows, 12 columns): two eigenvalues are round-off
  // around 0 and come back as exactly 0 or above.
  Tensor<double> x = random<double>({10, 12}, -1, 1, 9);
  Tensor<double> f({12, 12}), q({12, 12}), l({12});
  pfrt_tensor tx = x.desc(), tf = f.desc(), tq = q.desc(), tl = l.desc();
  ok(pfrt_kfac_factor(ctx, &tx, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tf));
  ok(pfrt_kfac_eigen(ctx, &tf, &tq, &tl));
  for (int k = 0; k < 12; ++k) {
    EXPECT_GE(l[k], 0.0);
    if (k) {
      EXPECT_LE(l[k - 1], l[k]);
    }
  }
  EXPECT_EQ(l[0], 0.0); // clamped round-off
  // Q diag(l) Q^T = F and Q^T Q = I (eigenvector k in column k).
  Matrix scaled(144), qt(144);
  for (int i = 0; i < 12; ++i)
    for (int k = 0; k < 12; ++k) {
      scaled[i * 12 + k] = q[i * 12 + k] * l[k];
      qt[k * 12 + i] = q[i * 12 + k];
    }
  EXPECT_LT(relErr(matmulRef(scaled, qt, 12, 12, 12), f.data), 1e-12);
  Matrix gram = matmulRef(qt, q.data, 12, 12, 12);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 12; ++j)
      EXPECT_NEAR(gram[i * 12 + j], i == j ? 1.0 : 0.0, 1e-12);
}

TEST_F(KfacTest, EigenPreconditionIsTheDampedKroneckerSolve) {
  // [out=3, in=2] with a bias column (A 3x3): the update solves
  // (B (x) A + d I) vec(U) = vec([G | g_b]) (row-major vec).
  Tensor<double> xa = random<double>({8, 2}, -1, 1, 3), xb = random<double>({8, 3}, -1, 1, 4);
  Tensor<double> fa({3, 3}), fb({3, 3}), qa({3, 3}), la({3}), qb({3, 3}), lb({3});
  pfrt_tensor txa = xa.desc(), txb = xb.desc(), tfa = fa.desc(), tfb = fb.desc(),
              tqa = qa.desc(), tla = la.desc(), tqb = qb.desc(), tlb = lb.desc();
  ok(pfrt_kfac_factor(ctx, &txa, 1, 1.0, PFRT_KFAC_OVERWRITE, 0, &tfa));
  ok(pfrt_kfac_factor(ctx, &txb, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tfb));
  int32_t outcome = -1;
  ok(pfrt_kfac_eigen_refresh(ctx, &tfa, &tfb, &tqa, &tla, &tqb, &tlb, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_INVERTED);
  Tensor<double> gw = random<double>({3, 2}, -1, 1, 5), gb = random<double>({3}, -1, 1, 6);
  Tensor<double> ow({3, 2}), ob({3});
  pfrt_tensor tgw = gw.desc(), tgb = gb.desc(), tow = ow.desc(), tob = ob.desc();
  const double damping = 0.2;
  ok(pfrt_kfac_precondition_eigen(ctx, &tqa, &tla, &tqb, &tlb, damping, &tgw, &tgb, 1, &tow,
                                  &tob));
  // (B (x) A + d I) applied to the result gives back the gradient: B U A + d U.
  Matrix u(9), j(9);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 2; ++c) {
      u[r * 3 + c] = ow[r * 2 + c];
      j[r * 3 + c] = gw[r * 2 + c];
    }
    u[r * 3 + 2] = ob[r];
    j[r * 3 + 2] = gb[r];
  }
  Matrix back = matmulRef(matmulRef(fb.data, u, 3, 3, 3), fa.data, 3, 3, 3);
  for (int i = 0; i < 9; ++i)
    back[i] += damping * u[i];
  EXPECT_LT(relErr(back, j), 1e-10);
  // In place (out_w = grad_w, out_b = grad_b) gives the same.
  ok(pfrt_kfac_precondition_eigen(ctx, &tqa, &tla, &tqb, &tlb, damping, &tgw, &tgb, 1, &tgw,
                                  &tgb));
  EXPECT_EQ(gw.data, ow.data);
  EXPECT_EQ(gb.data, ob.data);
}

TEST_F(KfacTest, EigenFailuresKeepThePreviousDecomposition) {
  Tensor<double> nan({2, 2}, {1, 0, 0, NAN}), good({2, 2}, {2, 1, 1, 2});
  Tensor<double> qa({2, 2}, {7, 7, 7, 7}), la({2}, {7, 7}), qb({2, 2}), lb({2});
  pfrt_tensor tnan = nan.desc(), tgood = good.desc(), tqa = qa.desc(), tla = la.desc(),
              tqb = qb.desc(), tlb = lb.desc();
  fails(pfrt_kfac_eigen(ctx, &tnan, &tqa, &tla), PFRT_NUMERIC, "pfrt_kfac_eigen");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("NaN"), std::string::npos);
  int32_t outcome = -1;
  ok(pfrt_kfac_eigen_refresh(ctx, &tnan, &tgood, &tqa, &tla, &tqb, &tlb, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_KEPT_PREVIOUS);
  for (double v : qa.data)
    EXPECT_EQ(v, 7.0);
  EXPECT_EQ(la.data, (std::vector<double>{7, 7}));
  EXPECT_NEAR(lb[0], 1.0, 1e-12); // the good factor was decomposed
  EXPECT_NEAR(lb[1], 3.0, 1e-12);
  // Bad arguments.
  Tensor<double> l3({3}), rect({2, 3});
  Tensor<float> qf({2, 2});
  pfrt_tensor tl3 = l3.desc(), trect = rect.desc(), tqf = qf.desc();
  fails(pfrt_kfac_eigen(ctx, &tgood, &tqb, &tl3), PFRT_INVALID_ARGUMENT, "pfrt_kfac_eigen");
  fails(pfrt_kfac_eigen(ctx, &trect, &tqb, &tlb), PFRT_INVALID_ARGUMENT, "pfrt_kfac_eigen");
  fails(pfrt_kfac_eigen(ctx, &tgood, &tqf, &tlb), PFRT_INVALID_ARGUMENT, "pfrt_kfac_eigen");
  Tensor<double> gw({2, 2}), ow({2, 2});
  pfrt_tensor tgw = gw.desc(), tow = ow.desc();
  fails(pfrt_kfac_precondition_eigen(ctx, &tqb, &tlb, &tqb, &tlb, 0.0, &tgw, nullptr, 1, &tow,
                                     nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition_eigen"); // damping 0
  fails(pfrt_kfac_precondition_eigen(ctx, &tqb, &tl3, &tqb, &tlb, 0.1, &tgw, nullptr, 1, &tow,
                                     nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition_eigen"); // 3 values for 2 vectors
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("a_values"), std::string::npos)
      << pfrt_last_error(ctx);
}

/// A layer's two factors are inverted side by side on a 2-thread context,
/// one thread each: the bits equal a 1-thread context's and each equals
/// pfrt_kfac_inverse with its pi-damping; a bad factor keeps its previous
/// inverse while the other one is refreshed, and the context says why.
TEST(KfacThreads, DampedInversesSideBySideEqualOneThread) {
  pfrt_context_options opts;
  pfrt_context_options_init(&opts);
  opts.num_threads = 1;
  pfrt_context *one = pfrt_context_create(&opts);
  opts.num_threads = 2;
  pfrt_context *two = pfrt_context_create(&opts);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  Tensor<float> xa = random<float>({400, 129}, -1, 1, 3), xb = random<float>({400, 257}, -1, 1, 4);
  Tensor<float> a({129, 129}), b({257, 257});
  pfrt_tensor txa = xa.desc(), txb = xb.desc(), ta = a.desc(), tb = b.desc();
  ASSERT_EQ(pfrt_kfac_factor(one, &txa, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &ta), PFRT_OK);
  ASSERT_EQ(pfrt_kfac_factor(one, &txb, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &tb), PFRT_OK);
  const double damping = 1e-3;
  Tensor<float> ai1({129, 129}), bi1({257, 257}), ai2({129, 129}), bi2({257, 257});
  pfrt_tensor tai1 = ai1.desc(), tbi1 = bi1.desc(), tai2 = ai2.desc(), tbi2 = bi2.desc();
  int32_t outcome1 = -1, outcome2 = -1;
  ASSERT_EQ(pfrt_kfac_damped_inverses(one, &ta, &tb, damping, 2, &tai1, &tbi1, &outcome1), PFRT_OK);
  ASSERT_EQ(pfrt_kfac_damped_inverses(two, &ta, &tb, damping, 2, &tai2, &tbi2, &outcome2), PFRT_OK);
  EXPECT_EQ(outcome1, PFRT_KFAC_INVERTED);
  EXPECT_EQ(outcome2, PFRT_KFAC_INVERTED);
  EXPECT_EQ(ai1.data, ai2.data);
  EXPECT_EQ(bi1.data, bi2.data);
  double pi = 0;
  ASSERT_EQ(pfrt_kfac_pi(two, &ta, &tb, &pi), PFRT_OK);
  Tensor<float> alone({129, 129});
  pfrt_tensor talone = alone.desc();
  ASSERT_EQ(pfrt_kfac_inverse(two, &ta, std::sqrt(damping) * pi, &talone), PFRT_OK);
  EXPECT_EQ(alone.data, ai2.data);
  Matrix damped = asDouble(a);
  for (int i = 0; i < 129; ++i)
    damped[i * 129 + i] += std::sqrt(damping) * pi;
  EXPECT_LT(relErr(asDouble(ai2), inverseRef(damped, 129)), 1e-3);

  // A NaN off b's diagonal (the traces, so pi, stay finite): b's inverse
  // is kept, a's refreshed, the message says why.
  Tensor<float> bad = b;
  bad[5] = NAN;
  pfrt_tensor tbad = bad.desc();
  Tensor<float> ai3({129, 129}), bi3({257, 257}, std::vector<float>(257 * 257, 7.0f));
  pfrt_tensor tai3 = ai3.desc(), tbi3 = bi3.desc();
  int32_t outcome3 = -1;
  ASSERT_EQ(pfrt_kfac_damped_inverses(two, &ta, &tbad, damping, 2, &tai3, &tbi3, &outcome3),
            PFRT_OK);
  EXPECT_EQ(outcome3, PFRT_KFAC_KEPT_PREVIOUS);
  EXPECT_NE(std::string(pfrt_last_error(two)).find("NaN"), std::string::npos)
      << pfrt_last_error(two);
  for (float v : bi3.data)
    ASSERT_EQ(v, 7.0f);
  EXPECT_EQ(ai3.data, ai2.data);
  pfrt_context_destroy(one);
  pfrt_context_destroy(two);
}

TEST_F(KfacTest, Errors) {
  Tensor<float> x = random<float>({4, 3}), f({3, 3}), fb({4, 4}), rect({3, 4});
  Tensor<double> fd({3, 3});
  pfrt_tensor tx = x.desc(), tf = f.desc(), tfb = fb.desc(),
              trect = rect.desc(), tfd = fd.desc();
  fails(pfrt_kfac_factor(ctx, &tx, 1, 1.0, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_factor"); // a bias column needs 4 x 4
  fails(pfrt_kfac_factor(ctx, &tx, 0, 1.0, 0, 0, &tfb), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_factor");
  fails(pfrt_kfac_factor(ctx, &tx, 0, 1.0, 0, 0, &tfd), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_factor");
  fails(pfrt_kfac_factor(ctx, &tx, 0, 1.0, 7, 0, &tf), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_factor");
  fails(pfrt_kfac_factor(ctx, &tx, 0, 1.0, PFRT_KFAC_RUNNING_AVERAGE, 1.5, &tf),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_factor");
  fails(pfrt_kfac_factor(ctx, &tx, 0, INFINITY, 0, 0, &tf),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_factor");
  double pi;
  fails(pfrt_kfac_pi(ctx, &trect, &tf, &pi), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_pi");
  fails(pfrt_kfac_inverse(ctx, &trect, 0.1, &trect), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_inverse");
  fails(pfrt_kfac_inverse(ctx, &tf, -0.1, &tf), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_inverse");
  fails(pfrt_kfac_inverse(ctx, &tf, 0.1, &tfd), PFRT_INVALID_ARGUMENT,
        "pfrt_kfac_inverse");
  // precondition: [out=4, in=3] gradient.
  Tensor<float> a3({3, 3}), a4({4, 4}), a5({5, 5}), b4({4, 4}), b3({3, 3});
  Tensor<float> gw({4, 3}), gb({4}), ob({4});
  pfrt_tensor ta3 = a3.desc(), ta4 = a4.desc(), ta5 = a5.desc(),
              tb4 = b4.desc(), tb3 = b3.desc(), tgw = gw.desc(),
              tgb = gb.desc(), tob = ob.desc();
  fails(pfrt_kfac_precondition(ctx, &ta3, &tb3, &tgw, nullptr, 1, &tgw,
                               nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition"); // b_inv 3 != out 4
  fails(pfrt_kfac_precondition(ctx, &ta5, &tb4, &tgw, nullptr, 1, &tgw,
                               nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition"); // a_inv 5 vs in 3
  fails(pfrt_kfac_precondition(ctx, &ta4, &tb4, &tgw, nullptr, 1, &tgw,
                               nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition"); // joint needs bias
  fails(pfrt_kfac_precondition(ctx, &ta3, &tb4, &tgw, &tgb, 1, &tgw, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition");
  fails(pfrt_kfac_precondition(ctx, &ta3, &tb4, &tgw, nullptr, 0, &tgw,
                               nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_precondition"); // layout mismatch
  ok(pfrt_kfac_precondition(ctx, &ta3, &tb4, &tgw, &tgb, 1, &tgw, &tob));
}

/// The LayerNorm factor in double: per feature j, scale · mean over rows of
/// (g_γ², g_γ g_β, g_β²), g_γ = dy·x̂, g_β = dy.
template <class T>
Matrix layerNormFactorRef(const Tensor<T> &x, const Tensor<T> &dy, double eps, double scale) {
  const int64_t h = x.dims.back(), n = x.size() / (h ? h : 1);
  Matrix f(h * 3, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < h; ++j)
      mean += double(x[r * h + j]) / double(h);
    for (int64_t j = 0; j < h; ++j)
      var += std::pow(double(x[r * h + j]) - mean, 2) / double(h);
    for (int64_t j = 0; j < h; ++j) {
      const double d = double(dy[r * h + j]);
      const double g = d * (double(x[r * h + j]) - mean) / std::sqrt(var + eps);
      f[j * 3 + 0] += g * g;
      f[j * 3 + 1] += g * d;
      f[j * 3 + 2] += d * d;
    }
  }
  for (auto &v : f)
    v = n ? v * scale / double(n) : 0.0;
  return f;
}

TEST_F(KfacTest, LayerNormFactorBlocksAndDiagonal) {
  Tensor<double> x = random<double>({3, 5, 9}, -2, 3, 21),
                 dy = random<double>({3, 5, 9}, -1, 1, 22);
  const Matrix ref = layerNormFactorRef(x, dy, 1e-5, 4.0);
  Tensor<double> f = random<double>({9, 3}, -1, 1, 23), diag({9, 2});
  pfrt_tensor tx = x.desc(), tdy = dy.desc(), tf = f.desc(), td = diag.desc();
  ok(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 4.0, PFRT_KFAC_OVERWRITE, 0, &tf));
  EXPECT_LT(maxAbsDiff(f.data, ref), 1e-12);
  ok(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 4.0, PFRT_KFAC_OVERWRITE, 0, &td));
  for (int64_t j = 0; j < 9; ++j) {
    EXPECT_NEAR(diag[j * 2], ref[j * 3], 1e-12);
    EXPECT_NEAR(diag[j * 2 + 1], ref[j * 3 + 2], 1e-12);
  }
  // Micro-batches accumulate; a running average decays.
  ok(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 4.0, PFRT_KFAC_ACCUMULATE, 0, &tf));
  Matrix twice(ref);
  for (auto &v : twice)
    v *= 2;
  EXPECT_LT(maxAbsDiff(f.data, twice), 1e-12);
  ok(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 4.0, PFRT_KFAC_RUNNING_AVERAGE, 0.75, &tf));
  Matrix avg(ref);
  for (size_t i = 0; i < avg.size(); ++i)
    avg[i] = 0.75 * twice[i] + 0.25 * ref[i];
  EXPECT_LT(maxAbsDiff(f.data, avg), 1e-12);
  // f32, no rows: overwrite gives 0.
  Tensor<float> none({0, 4}), fn = random<float>({4, 3}, -1, 1, 24);
  pfrt_tensor tn = none.desc(), tfn = fn.desc();
  ok(pfrt_kfac_layer_norm_factor(ctx, &tn, &tn, 1e-5, 1.0, PFRT_KFAC_OVERWRITE, 0, &tfn));
  for (float v : fn.data)
    EXPECT_EQ(v, 0.0f);
}

TEST_F(KfacTest, LayerNormPreconditionSolvesEachBlock) {
  // Blocks [[2, 1], [1, 3]] and [[4, 0], [0, 1]], damping 0.5.
  Tensor<double> f({2, 3}), gs({2}), gb({2}), us({2}), ub({2});
  f.data = {2, 1, 3, 4, 0, 1};
  gs.data = {1, -2};
  gb.data = {2, 0.5};
  pfrt_tensor tf = f.desc(), tgs = gs.desc(), tgb = gb.desc(), tus = us.desc(), tub = ub.desc();
  ok(pfrt_kfac_precondition_layer_norm(ctx, &tf, 0.5, &tgs, &tgb, &tus, &tub));
  // (F + 0.5 I) u = g: [[2.5, 1], [1, 3.5]] u = (1, 2) -> det 7.75.
  EXPECT_NEAR(us[0], (3.5 * 1 - 1 * 2) / 7.75, 1e-15);
  EXPECT_NEAR(ub[0], (2.5 * 2 - 1 * 1) / 7.75, 1e-15);
  EXPECT_NEAR(us[1], -2 / 4.5, 1e-15);
  EXPECT_NEAR(ub[1], 0.5 / 1.5, 1e-15);
  // The diagonal variant divides; in place (outputs are the gradients).
  Tensor<double> d({2, 2});
  d.data = {2, 3, 4, 1};
  pfrt_tensor td = d.desc();
  ok(pfrt_kfac_precondition_layer_norm(ctx, &td, 0.5, &tgs, &tgb, &tgs, &tgb));
  EXPECT_NEAR(gs[0], 1 / 2.5, 1e-15);
  EXPECT_NEAR(gb[0], 2 / 3.5, 1e-15);
  EXPECT_NEAR(gs[1], -2 / 4.5, 1e-15);
  EXPECT_NEAR(gb[1], 0.5 / 1.5, 1e-15);
  // Without damping a singular block keeps its gradient.
  Tensor<float> z({1, 3}), g1({1}), g2({1}), o1({1}), o2({1});
  z.data = {1, 1, 1};
  g1.data = {3};
  g2.data = {-4};
  pfrt_tensor tz = z.desc(), tg1 = g1.desc(), tg2 = g2.desc(), to1 = o1.desc(), to2 = o2.desc();
  ok(pfrt_kfac_precondition_layer_norm(ctx, &tz, 0, &tg1, &tg2, &to1, &to2));
  EXPECT_EQ(o1[0], 3.0f);
  EXPECT_EQ(o2[0], -4.0f);
}

TEST_F(KfacTest, LayerNormErrors) {
  Tensor<float> x = random<float>({4, 3}), dy({4, 3}), dyBad({4, 2}), f({3, 3}), f4({3, 4}),
                fw({2, 3});
  Tensor<double> dyD({4, 3}), fd({3, 3});
  pfrt_tensor tx = x.desc(), tdy = dy.desc(), tdb = dyBad.desc(), tf = f.desc(), tf4 = f4.desc(),
              tfw = fw.desc(), tdd = dyD.desc(), tfd = fd.desc();
  const char *factor = "pfrt_kfac_layer_norm_factor";
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdb, 1e-5, 1, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor); // dy's shape
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdd, 1e-5, 1, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor); // dy's dtype
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 1, 0, 0, &tf4), PFRT_INVALID_ARGUMENT,
        factor); // 4 columns
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 1, 0, 0, &tfw), PFRT_INVALID_ARGUMENT,
        factor); // 2 features, x has 3
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 1, 0, 0, &tfd), PFRT_INVALID_ARGUMENT,
        factor); // factor's dtype
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, -1, 1, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor);
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, NAN, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor);
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 1, 9, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor);
  fails(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, 1e-5, 1, PFRT_KFAC_RUNNING_AVERAGE, 2, &tf),
        PFRT_INVALID_ARGUMENT, factor);
  fails(pfrt_kfac_layer_norm_factor(ctx, nullptr, &tdy, 1e-5, 1, 0, 0, &tf), PFRT_INVALID_ARGUMENT,
        factor);
  const char *precondition = "pfrt_kfac_precondition_layer_norm";
  Tensor<float> g3({3}), g2({2});
  Tensor<double> gd({3});
  pfrt_tensor tg3 = g3.desc(), tg2 = g2.desc(), tgd = gd.desc();
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf4, 0.1, &tg3, &tg3, &tg3, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf, 0.1, &tg2, &tg3, &tg3, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf, 0.1, &tg3, &tgd, &tg3, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf, 0.1, &tg3, &tg3, nullptr, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf, -0.1, &tg3, &tg3, &tg3, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  fails(pfrt_kfac_precondition_layer_norm(ctx, &tf, INFINITY, &tg3, &tg3, &tg3, &tg3),
        PFRT_INVALID_ARGUMENT, precondition);
  ok(pfrt_kfac_precondition_layer_norm(ctx, &tf, 0.1, &tg3, &tg3, &tg3, &tg3));
}

//===--- Embeddings --------------------------------------------------------===//

TEST_F(KfacTest, EmbeddingFactorCountsTheIds) {
  // 6 ids over a vocabulary of 5; -1 is row 4 (as a gather reads it).
  Tensor<int64_t> ids({2, 3}, {0, 3, 3, -1, 0, 3});
  Tensor<double> f = random<double>({5}, -1, 1, 41);
  pfrt_tensor ti = ids.desc(), tf = f.desc();
  ok(pfrt_kfac_embedding_factor(ctx, &ti, 2.0, PFRT_KFAC_OVERWRITE, 0, &tf));
  const std::vector<double> counts{2, 0, 0, 3, 1};
  std::vector<double> want(5);
  for (int v = 0; v < 5; ++v)
    want[v] = 2.0 * counts[v] / 6.0;
  EXPECT_LT(maxAbsDiff(f.data, want), 1e-15);
  // Micro-batches accumulate (i32 ids); a running average decays.
  Tensor<int32_t> narrow({3}, {1, 1, 4});
  pfrt_tensor tn = narrow.desc();
  ok(pfrt_kfac_embedding_factor(ctx, &tn, 1.0, PFRT_KFAC_ACCUMULATE, 0, &tf));
  want[1] += 2.0 / 3;
  want[4] += 1.0 / 3;
  EXPECT_LT(maxAbsDiff(f.data, want), 1e-15);
  ok(pfrt_kfac_embedding_factor(ctx, &ti, 1.0, PFRT_KFAC_RUNNING_AVERAGE, 0.75, &tf));
  for (int v = 0; v < 5; ++v)
    want[v] = 0.75 * want[v] + 0.25 * counts[v] / 6.0;
  EXPECT_LT(maxAbsDiff(f.data, want), 1e-15);
  // An id out of range names itself and leaves the factor as it was.
  Tensor<int64_t> bad({3}, {1, 5, 2});
  pfrt_tensor tb = bad.desc();
  fails(pfrt_kfac_embedding_factor(ctx, &tb, 1.0, PFRT_KFAC_OVERWRITE, 0, &tf),
        PFRT_INVALID_ARGUMENT, "pfrt_kfac_embedding_factor");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("ids[1] = 5 is outside [-5, 5)"),
            std::string::npos)
      << pfrt_last_error(ctx);
  EXPECT_LT(maxAbsDiff(f.data, want), 1e-15);
  // No ids: an overwrite gives 0 (f32).
  Tensor<int64_t> none({0});
  Tensor<float> g = random<float>({4}, -1, 1, 42);
  pfrt_tensor tnone = none.desc(), tg = g.desc();
  ok(pfrt_kfac_embedding_factor(ctx, &tnone, 1.0, PFRT_KFAC_OVERWRITE, 0, &tg));
  for (float v : g.data)
    EXPECT_EQ(v, 0.0f);
}

TEST_F(KfacTest, EmbeddingInversesArePiDamped) {
  Tensor<double> a({4}, {0.5, 0.25, 0.25, 0}), b = random<double>({3, 3}, -1, 1, 43);
  // b := b b^T + 0.1 I (positive definite).
  Matrix bb = matmulRef(b.data, transposeRef(b.data, 3, 3), 3, 3, 3);
  for (int i = 0; i < 3; ++i)
    bb[i * 3 + i] += 0.1;
  b.data = bb;
  Tensor<double> aInv({4}), bInv({3, 3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), tai = aInv.desc(), tbi = bInv.desc();
  const double damping = 0.01;
  int32_t outcome = -1;
  ok(pfrt_kfac_embedding_inverses(ctx, &ta, &tb, damping, 3, &tai, &tbi, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_INVERTED);
  const double traceB = bb[0] + bb[4] + bb[8];
  const double pi = std::sqrt((1.0 / 4) / (traceB / 3));
  for (int v = 0; v < 4; ++v)
    EXPECT_NEAR(aInv[v], 1 / (a[v] + std::sqrt(damping) * pi), 1e-12);
  Matrix damped(bb);
  for (int i = 0; i < 3; ++i)
    damped[i * 3 + i] += std::sqrt(damping) / pi;
  EXPECT_LT(maxAbsDiff(bInv.data, inverseRef(damped, 3)), 1e-10);
  // Without damping the zero count needs more: 1e-6 on the first retry.
  ok(pfrt_kfac_embedding_inverses(ctx, &ta, &tb, 0, 3, &tai, &tbi, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_MORE_DAMPING);
  EXPECT_NEAR(aInv[3], 1e6, 1e-3);
  EXPECT_NEAR(aInv[0], 1 / (0.5 + 1e-6), 1e-12);
  // No retries: A keeps its inverse; B (positive definite) is refreshed.
  const std::vector<double> keptA = aInv.data;
  ok(pfrt_kfac_embedding_inverses(ctx, &ta, &tb, 0, 0, &tai, &tbi, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_KEPT_PREVIOUS);
  EXPECT_EQ(aInv.data, keptA);
  EXPECT_LT(maxAbsDiff(bInv.data, inverseRef(bb, 3)), 1e-10);
  // A NaN count keeps both inverses.
  const std::vector<double> keptB = bInv.data;
  a.data[1] = NAN;
  ok(pfrt_kfac_embedding_inverses(ctx, &ta, &tb, damping, 3, &tai, &tbi, &outcome));
  EXPECT_EQ(outcome, PFRT_KFAC_KEPT_PREVIOUS);
  EXPECT_EQ(aInv.data, keptA);
  EXPECT_EQ(bInv.data, keptB);
}

TEST_F(KfacTest, EmbeddingPreconditionScalesRowsThenMultipliesByB) {
  const int64_t vocab = 5, h = 3;
  Tensor<double> aInv = random<double>({vocab}, 0.5, 2, 44),
                 bInv = random<double>({h, h}, -1, 1, 45);
  Tensor<double> g = random<double>({vocab, h}, -1, 1, 46), out({vocab, h});
  pfrt_tensor ta = aInv.desc(), tb = bInv.desc(), tg = g.desc(), to = out.desc();
  ok(pfrt_kfac_precondition_embedding(ctx, &ta, &tb, &tg, 0, &to));
  Matrix scaled(g.data);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < h; ++j)
      scaled[v * h + j] *= aInv[v];
  const Matrix want = matmulRef(scaled, bInv.data, vocab, h, h);
  EXPECT_LT(maxAbsDiff(out.data, want), 1e-12);
  // The table stored [h, vocab]: the same update, transposed; in place.
  Tensor<double> gt({h, vocab});
  gt.data = transposeRef(g.data, vocab, h);
  pfrt_tensor tgt = gt.desc();
  ok(pfrt_kfac_precondition_embedding(ctx, &ta, &tb, &tgt, 1, &tgt));
  // b_inv . G^T . diag(a_inv): for a symmetric b_inv, the first update transposed.
  Matrix wantT = matmulRef(bInv.data, transposeRef(g.data, vocab, h), h, h, vocab);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t v = 0; v < vocab; ++v)
      wantT[i * vocab + v] *= aInv[v];
  EXPECT_LT(maxAbsDiff(gt.data, wantT), 1e-12);
  // f32.
  Tensor<float> af({2}, {2, 0.5}), bf({1, 1}, {3}), gf({2, 1}, {1, -4}), of({2, 1});
  pfrt_tensor taf = af.desc(), tbf = bf.desc(), tgf = gf.desc(), tof = of.desc();
  ok(pfrt_kfac_precondition_embedding(ctx, &taf, &tbf, &tgf, 0, &tof));
  EXPECT_EQ(of[0], 6.0f);
  EXPECT_EQ(of[1], -6.0f);
}

TEST_F(KfacTest, EmbeddingErrors) {
  Tensor<float> f({5}), f2({5, 1}), b({3, 3}), b2({3, 2}), g({5, 3}), g4({4, 3}), gt({3, 5});
  Tensor<double> fd({5}), gd({5, 3});
  Tensor<float> idsF({2});
  Tensor<int64_t> ids({2}, {0, 1});
  pfrt_tensor tf = f.desc(), tf2 = f2.desc(), tb = b.desc(), tb2 = b2.desc(), tg = g.desc(),
              tg4 = g4.desc(), tgt = gt.desc(), tfd = fd.desc(), tgd = gd.desc(), tif = idsF.desc(),
              ti = ids.desc();
  const char *factor = "pfrt_kfac_embedding_factor";
  fails(pfrt_kfac_embedding_factor(ctx, &tif, 1, 0, 0, &tf), PFRT_UNSUPPORTED, factor); // f32 ids
  fails(pfrt_kfac_embedding_factor(ctx, &ti, 1, 0, 0, &tf2), PFRT_INVALID_ARGUMENT, factor);
  fails(pfrt_kfac_embedding_factor(ctx, &ti, NAN, 0, 0, &tf), PFRT_INVALID_ARGUMENT, factor);
  fails(pfrt_kfac_embedding_factor(ctx, &ti, 1, 7, 0, &tf), PFRT_INVALID_ARGUMENT, factor);
  fails(pfrt_kfac_embedding_factor(ctx, &ti, 1, PFRT_KFAC_RUNNING_AVERAGE, 1.5, &tf),
        PFRT_INVALID_ARGUMENT, factor);
  fails(pfrt_kfac_embedding_factor(ctx, nullptr, 1, 0, 0, &tf), PFRT_INVALID_ARGUMENT, factor);
  const char *inverses = "pfrt_kfac_embedding_inverses";
  int32_t outcome = 0;
  fails(pfrt_kfac_embedding_inverses(ctx, &tf, &tb, -1, 3, &tf, &tb, &outcome),
        PFRT_INVALID_ARGUMENT, inverses);
  fails(pfrt_kfac_embedding_inverses(ctx, &tf, &tb, 0.1, -1, &tf, &tb, &outcome),
        PFRT_INVALID_ARGUMENT, inverses);
  fails(pfrt_kfac_embedding_inverses(ctx, &tf2, &tb, 0.1, 3, &tf2, &tb, &outcome),
        PFRT_INVALID_ARGUMENT, inverses); // A not 1-D
  fails(pfrt_kfac_embedding_inverses(ctx, &tf, &tb2, 0.1, 3, &tf, &tb2, &outcome),
        PFRT_INVALID_ARGUMENT, inverses); // B not square
  fails(pfrt_kfac_embedding_inverses(ctx, &tf, &tb, 0.1, 3, &tfd, &tb, &outcome),
        PFRT_INVALID_ARGUMENT, inverses); // a_inv's dtype
  const char *precondition = "pfrt_kfac_precondition_embedding";
  fails(pfrt_kfac_precondition_embedding(ctx, &tf, &tb, &tg4, 0, &tg4), PFRT_INVALID_ARGUMENT,
        precondition); // 4 rows, 5 counts
  fails(pfrt_kfac_precondition_embedding(ctx, &tf, &tb, &tg, 1, &tg), PFRT_INVALID_ARGUMENT,
        precondition); // layout: [h, vocab] expected
  fails(pfrt_kfac_precondition_embedding(ctx, &tf, &tb, &tgd, 0, &tgd), PFRT_INVALID_ARGUMENT,
        precondition); // dtype
  fails(pfrt_kfac_precondition_embedding(ctx, &tf, &tb, &tg, 0, &tgt), PFRT_INVALID_ARGUMENT,
        precondition); // out_w's shape
  ok(pfrt_kfac_precondition_embedding(ctx, &tf, &tb, &tgt, 1, &tgt));
}

} // namespace
