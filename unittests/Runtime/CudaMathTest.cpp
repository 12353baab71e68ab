//===- CudaMathTest.cpp - The CUDA kernels' arithmetic, run on the CPU -----===//
//
// lib/Runtime/cuda/*Math.h hold the per-element and per-row formulas the
// CUDA kernels apply. These tests compile the same headers with GCC, drive
// them serially the way a kernel composes them (statistics in double, then
// the element formula) and compare with the CPU backend on random inputs,
// odd sizes and broadcasting: the GPU's arithmetic is checked on every CI
// run, with or without a GPU. (What they cannot check: the parallel
// reduction order and launch logic; CudaKernelTest does that on a GPU.)
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include "../../lib/Runtime/common/Shape.h"
#include "../../lib/Runtime/common/TensorChecks.h"
#include "../../lib/Runtime/cuda/DeviceError.h"
#include "../../lib/Runtime/cuda/ElementwiseMath.h"
#include "../../lib/Runtime/cuda/IndexingMath.h"
#include "../../lib/Runtime/cuda/KfacMath.h"
#include "../../lib/Runtime/cuda/OptimizerMath.h"
#include "../../lib/Runtime/cuda/RowMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace pfrt_test;
namespace cu = pfrt::cuda;

namespace {

class CudaMath : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = pfrt_context_create(nullptr);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override { pfrt_context_destroy(ctx); }
  pfrt_context *ctx = nullptr;
};

pfrt::Shape shapeOf(const Dims &d) {
  pfrt::Shape s;
  for (int64_t v : d)
    s.push(v);
  return s;
}

/// |a - b| <= atol + rtol |b| elementwise, with NaN matching NaN.
template <class T>
void expectClose(const std::vector<T> &got, const std::vector<T> &want,
                 double rtol, double atol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) // also +-inf
      continue;
    if (std::isnan(double(want[i]))) {
      EXPECT_TRUE(std::isnan(double(got[i]))) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(double(got[i]), double(want[i]),
                atol + rtol * std::fabs(double(want[i])))
        << what << " at " << i;
  }
}

using BinaryFn = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                                 const pfrt_tensor *, const pfrt_tensor *);

template <class T> void checkBinary(pfrt_context *ctx, double rtol) {
  const struct {
    cu::Binary kind;
    BinaryFn fn;
    const char *name;
  } ops[] = {{cu::Binary::Add, pfrt_add, "add"}, {cu::Binary::Sub, pfrt_sub, "sub"},
             {cu::Binary::Mul, pfrt_mul, "mul"}, {cu::Binary::Div, pfrt_div, "div"},
             {cu::Binary::Pow, pfrt_pow, "pow"}, {cu::Binary::Min, pfrt_min, "min"},
             {cu::Binary::Max, pfrt_max, "max"}};
  // Odd sizes, broadcasting on both sides, positive bases for pow.
  const Dims da = {3, 1, 5}, db = {4, 1}, dout = {3, 4, 5};
  auto a = random<T>(da, 0.1, 2.0, 11), b = random<T>(db, -1.5, 1.5, 12);
  a[2] = T(NAN); // NaN propagation of min/max
  const pfrt::Shape in[2] = {shapeOf(da), shapeOf(db)};
  const pfrt::BroadcastPlan plan = pfrt::planBroadcast(shapeOf(dout), in, 2);
  for (const auto &op : ops) {
    Tensor<T> want(dout);
    auto ta = a.desc(), tb = b.desc(), tw = want.desc();
    ASSERT_EQ(op.fn(ctx, &ta, &tb, &tw), PFRT_OK) << op.name;
    std::vector<T> got(want.size());
    for (int64_t i = 0; i < plan.numel; ++i)
      got[i] = cu::binaryOp(op.kind, a[cu::broadcastOffset(plan, 0, i)],
                            b[cu::broadcastOffset(plan, 1, i)]);
    expectClose(got, want.data, rtol, 0, op.name);
  }
}

TEST_F(CudaMath, BinaryOpsWithBroadcastingMatchCpu) {
  checkBinary<float>(ctx, 1e-6);
  checkBinary<double>(ctx, 1e-14);
}

using UnaryFn = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                                const pfrt_tensor *);

template <class T> void checkUnary(pfrt_context *ctx, double rtol, double atol) {
  const struct {
    cu::Unary kind;
    UnaryFn fn;
    const char *name;
  } ops[] = {{cu::Unary::Sqrt, pfrt_sqrt, "sqrt"}, {cu::Unary::Erf, pfrt_erf, "erf"},
             {cu::Unary::Tanh, pfrt_tanh, "tanh"}, {cu::Unary::Exp, pfrt_exp, "exp"},
             {cu::Unary::Neg, pfrt_neg, "neg"}, {cu::Unary::Abs, pfrt_abs, "abs"},
             {cu::Unary::Sign, pfrt_sign, "sign"},
             {cu::Unary::Reciprocal, pfrt_reciprocal, "reciprocal"}};
  auto x = random<T>({7, 13}, -4, 4, 21);
  x[0] = T(0);
  for (const auto &op : ops) {
    Tensor<T> in = x;
    if (op.kind == cu::Unary::Sqrt)
      for (auto &v : in.data)
        v = std::fabs(v);
    Tensor<T> want(in.dims);
    auto tx = in.desc(), tw = want.desc();
    ASSERT_EQ(op.fn(ctx, &tx, &tw), PFRT_OK) << op.name;
    std::vector<T> got(in.size());
    for (int64_t i = 0; i < in.size(); ++i)
      got[i] = cu::unaryOp(op.kind, in[i]);
    expectClose(got, want.data, rtol, atol, op.name);
  }
  for (int32_t approx : {PFRT_GELU_EXACT, PFRT_GELU_TANH}) {
    Tensor<T> want(x.dims), wantGrad(x.dims);
    auto dy = random<T>(x.dims, -1, 1, 22);
    auto tx = x.desc(), tw = want.desc(), tdy = dy.desc(), tg = wantGrad.desc();
    ASSERT_EQ(pfrt_gelu(ctx, &tx, approx, &tw), PFRT_OK);
    ASSERT_EQ(pfrt_gelu_backward(ctx, &tx, &tdy, approx, 0, &tg), PFRT_OK);
    std::vector<T> got(x.size()), grad(x.size());
    const bool exact = approx == PFRT_GELU_EXACT;
    for (int64_t i = 0; i < x.size(); ++i) {
      got[i] = cu::unaryOp(exact ? cu::Unary::GeluExact : cu::Unary::GeluTanh, x[i]);
      grad[i] = cu::geluGrad(exact, x[i], dy[i]);
    }
    expectClose(got, want.data, rtol, atol, "gelu");
    expectClose(grad, wantGrad.data, rtol, atol, "gelu_backward");
  }
}

TEST_F(CudaMath, UnaryOpsAndGeluMatchCpu) {
  // The CPU's f32 exp/erf/tanh are vectorized approximations (relative
  // error < 1e-6); libm's (and CUDA's) differ from them by that much, and
  // GELU's 1 + erf(x) for negative x turns it into an absolute error.
  checkUnary<float>(ctx, 4e-6, 1e-6);
  checkUnary<double>(ctx, 1e-13, 1e-15);
}

/// Softmax along a middle axis (rows strided by `inner`), forward and
/// backward, composed as the row kernel does.
TEST_F(CudaMath, SoftmaxRowsMatchCpu) {
  const Dims dims = {3, 37, 5};
  auto x = random<double>(dims, -6, 6, 31), dy = random<double>(dims, -1, 1, 32);
  Tensor<double> want(dims), wantGrad(dims);
  auto tx = x.desc(), tw = want.desc();
  ASSERT_EQ(pfrt_softmax(ctx, &tx, 1, &tw), PFRT_OK);
  auto ty = want.desc(), tdy = dy.desc(), tg = wantGrad.desc();
  ASSERT_EQ(pfrt_softmax_backward(ctx, &ty, &tdy, 1, 0, &tg), PFRT_OK);
  const cu::RowLayout l{37, 5};
  const int64_t rows = 3 * 5;
  std::vector<double> got(x.size()), grad(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0, dot = 0;
    for (int64_t j = 0; j < l.n; ++j)
      m = cu::maxNan(m, x[cu::rowElement(l, r, j)]);
    for (int64_t j = 0; j < l.n; ++j)
      s += std::exp(x[cu::rowElement(l, r, j)] - m);
    for (int64_t j = 0; j < l.n; ++j) {
      const int64_t e = cu::rowElement(l, r, j);
      got[e] = cu::softmaxElement(x[e], m, s);
      dot += want[e] * dy[e];
    }
    for (int64_t j = 0; j < l.n; ++j) {
      const int64_t e = cu::rowElement(l, r, j);
      grad[e] = cu::softmaxGradElement(want[e], dy[e], dot);
    }
  }
  expectClose(got, want.data, 1e-12, 1e-15, "softmax");
  expectClose(grad, wantGrad.data, 1e-12, 1e-15, "softmax_backward");
}

TEST_F(CudaMath, LayerNormMatchesCpu) {
  const int64_t rows = 6, n = 45;
  const double eps = 1e-5;
  auto x = random<float>({2, 3, n}, -3, 3, 41);
  auto scale = random<float>({n}, 0.5, 1.5, 42), bias = random<float>({n}, -1, 1, 43);
  auto dy = random<float>({2, 3, n}, -1, 1, 44);
  Tensor<float> want({2, 3, n}), gx({2, 3, n});
  auto tx = x.desc(), ts = scale.desc(), tb = bias.desc(), tw = want.desc();
  ASSERT_EQ(pfrt_layer_norm(ctx, &tx, &ts, &tb, -1, eps, &tw, nullptr, nullptr), PFRT_OK);
  auto tdy = dy.desc(), tgx = gx.desc();
  ASSERT_EQ(pfrt_layer_norm_backward(ctx, &tx, &ts, nullptr, nullptr, &tdy, -1,
                                     eps, 0, 0, &tgx, nullptr, nullptr),
            PFRT_OK);
  std::vector<float> got(x.size()), grad(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, ss = 0;
    for (int64_t j = 0; j < n; ++j) {
      s += x[r * n + j];
      ss += double(x[r * n + j]) * x[r * n + j];
    }
    const cu::NormStats st = cu::normStats(s, ss, n, eps);
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      got[r * n + j] = float(cu::layerNormElement(x[r * n + j], st, scale[j], bias[j]));
      const double g = double(dy[r * n + j]) * scale[j];
      sg += g;
      sgx += g * (x[r * n + j] - st.mean) * st.invStd;
    }
    for (int64_t j = 0; j < n; ++j) {
      const double xhat = (x[r * n + j] - st.mean) * st.invStd;
      grad[r * n + j] = float(cu::layerNormGradElement(
          xhat, double(dy[r * n + j]) * scale[j], sg / n, sgx / n, st.invStd));
    }
  }
  expectClose(got, want.data, 2e-6, 2e-6, "layer_norm");
  expectClose(grad, gx.data, 2e-5, 2e-5, "layer_norm_backward");
}

TEST_F(CudaMath, MaskedCrossEntropyMatchesCpu) {
  const int64_t rows = 7, v = 29;
  auto logits = random<double>({rows, v}, -5, 5, 51);
  Tensor<int64_t> labels({rows}, {3, -100, 0, 28, -100, 17, 5});
  Tensor<double> loss(Dims{}), grad({rows, v});
  const double gradScale = 0.5;
  auto tl = logits.desc(), tlab = labels.desc(), tloss = loss.desc(), tg = grad.desc();
  ASSERT_EQ(pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, gradScale, &tloss,
                                       &tg, nullptr),
            PFRT_OK);
  const double count = 5;
  double total = 0;
  std::vector<double> g(logits.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == -100)
      continue;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < v; ++j)
      m = cu::maxNan(m, logits[r * v + j]);
    for (int64_t j = 0; j < v; ++j)
      s += std::exp(logits[r * v + j] - m);
    total += cu::crossEntropyRowLoss(m, s, logits[r * v + labels[r]]);
    for (int64_t j = 0; j < v; ++j)
      g[r * v + j] = cu::crossEntropyGradElement(logits[r * v + j], m, s,
                                                 j == labels[r], gradScale / count);
  }
  EXPECT_NEAR(total / count, loss[0], 1e-12);
  expectClose(g, grad.data, 1e-12, 1e-15, "cross-entropy gradient");
}

TEST_F(CudaMath, IntegerOpsCompareAndCastMatchCpu) {
  // Integer add/mul wrap around, as on the CPU.
  Tensor<int64_t> a({4}, {INT64_MAX, -5, 7, INT64_MIN}), b({4}, {1, 3, -2, -1});
  for (auto [kind, fn] : {std::pair{cu::Binary::Add, pfrt_add},
                          std::pair{cu::Binary::Mul, pfrt_mul},
                          std::pair{cu::Binary::Sub, pfrt_sub},
                          std::pair{cu::Binary::Max, pfrt_max}}) {
    Tensor<int64_t> want({4});
    auto ta = a.desc(), tb = b.desc(), tw = want.desc();
    ASSERT_EQ(fn(ctx, &ta, &tb, &tw), PFRT_OK);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(cu::binaryOp(kind, a[i], b[i]), want[i]) << i;
  }
  // Comparisons, NaN comparing false.
  Tensor<double> x({5}, {1, NAN, -2, 3, 3}), y({5}, {1, 1, 2, NAN, 2});
  for (int32_t kind = PFRT_COMPARE_EQUAL; kind <= PFRT_COMPARE_LESS_EQUAL; ++kind) {
    Tensor<uint8_t> want({5});
    auto tx = x.desc(), ty = y.desc(), tw = want.desc();
    ASSERT_EQ(pfrt_compare(ctx, &tx, &ty, kind, &tw), PFRT_OK);
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(cu::compareOp(kind, x[i], y[i]), want[i]) << kind << " " << i;
  }
  // Casts: truncation, saturation, NaN to 0, to bool, i64 to i32.
  Tensor<double> f({7}, {2.7, -2.7, 1e30, -1e30, NAN, 0.0, 130.0});
  {
    Tensor<int8_t> want({7});
    auto tf = f.desc(), tw = want.desc();
    ASSERT_EQ(pfrt_cast(ctx, &tf, &tw), PFRT_OK);
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ((cu::castValue<int8_t, double>(f[i])), want[i]) << i;
  }
  {
    Tensor<int64_t> want({7});
    auto tf = f.desc(), tw = want.desc();
    ASSERT_EQ(pfrt_cast(ctx, &tf, &tw), PFRT_OK);
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ((cu::castValue<int64_t, double>(f[i])), want[i]) << i;
  }
  {
    Tensor<uint8_t> want({7});
    auto tf = f.desc(), tw = want.desc(PFRT_BOOL);
    ASSERT_EQ(pfrt_cast(ctx, &tf, &tw), PFRT_OK);
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ((cu::castValue<uint8_t, double>(f[i])), want[i]) << i;
  }
  {
    Tensor<int64_t> big({2}, {(int64_t(1) << 40) + 5, -3});
    Tensor<int32_t> want({2});
    auto tb = big.desc(), tw = want.desc();
    ASSERT_EQ(pfrt_cast(ctx, &tb, &tw), PFRT_OK);
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ((cu::castValue<int32_t, int64_t>(big[i])), want[i]) << i;
  }
}

TEST_F(CudaMath, LogicalAndInfinityTestsMatchCpu) {
  Tensor<uint8_t> a({4}, {0, 0, 1, 1}), b({4}, {0, 1, 0, 1});
  for (int32_t kind : {PFRT_LOGICAL_AND, PFRT_LOGICAL_OR, PFRT_LOGICAL_XOR}) {
    Tensor<uint8_t> want({4});
    auto ta = a.desc(PFRT_BOOL), tb = b.desc(PFRT_BOOL), tw = want.desc(PFRT_BOOL);
    ASSERT_EQ(pfrt_logical(ctx, &ta, &tb, kind, &tw), PFRT_OK);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(cu::logicalOp(kind, a[i], b[i]), want[i]) << kind << " " << i;
  }
  Tensor<float> x({4}, {INFINITY, -INFINITY, NAN, 1.0f});
  for (int neg = 0; neg < 2; ++neg)
    for (int pos = 0; pos < 2; ++pos) {
      Tensor<uint8_t> want({4});
      auto tx = x.desc(), tw = want.desc(PFRT_BOOL);
      ASSERT_EQ(pfrt_is_inf(ctx, &tx, neg, pos, &tw), PFRT_OK);
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(cu::isInfOf(x[i], neg, pos), want[i]) << i;
    }
}

/// reduce_max/min as the kernel composes it: the identity, then extremeOf
/// over the set (NaN wins; an empty set gives the identity).
TEST_F(CudaMath, ReduceMaxMinMatchCpu) {
  Tensor<float> x({3, 4}, {1, -2, 5, 0, NAN, 3, 2, 1, -7, -8, -9, -1});
  Tensor<float> empty({2, 0});
  for (bool isMax : {true, false}) {
    auto fn = isMax ? pfrt_reduce_max : pfrt_reduce_min;
    const int64_t axis = 1;
    Tensor<float> want({3}), wantEmpty({2});
    auto tx = x.desc(), tw = want.desc(), te = empty.desc(), twe = wantEmpty.desc();
    ASSERT_EQ(fn(ctx, &tx, &axis, 1, 0, &tw), PFRT_OK);
    ASSERT_EQ(fn(ctx, &te, &axis, 1, 0, &twe), PFRT_OK);
    std::vector<float> got(3);
    for (int r = 0; r < 3; ++r) {
      float v = cu::extremeIdentity<float>(isMax);
      for (int j = 0; j < 4; ++j)
        v = cu::extremeOf(isMax, v, x[r * 4 + j]);
      got[r] = v;
    }
    expectClose(got, want.data, 0, 0, isMax ? "reduce_max" : "reduce_min");
    EXPECT_EQ(cu::extremeIdentity<float>(isMax), wantEmpty[0]);
  }
  Tensor<int64_t> ints({3}, {INT64_MIN, 5, INT64_MAX}), wantI(Dims{});
  auto ti = ints.desc(), twi = wantI.desc();
  ASSERT_EQ(pfrt_reduce_min(ctx, &ti, nullptr, 0, 0, &twi), PFRT_OK);
  EXPECT_EQ(cu::extremeOf(false, cu::extremeOf(false, cu::extremeIdentity<int64_t>(false),
                                               ints[0]), ints[1]),
            wantI[0]);
}

TEST_F(CudaMath, SgdAndAdamwMatchCpu) {
  const Dims dims = {33};
  auto p0 = random<float>(dims, -1, 1, 61), g = random<float>(dims, -1, 1, 62);
  auto buf0 = random<float>(dims, -0.1, 0.1, 63);
  { // SGD with momentum and Nesterov
    Tensor<float> p = p0, buf = buf0;
    auto tp = p.desc(), tg = g.desc(), tb = buf.desc();
    ASSERT_EQ(pfrt_sgd_step(ctx, &tp, &tg, &tb, 0.1, 0.9, 0.01, 1), PFRT_OK);
    const cu::SgdParams s{0.1, 0.9, 0.01, true, true};
    std::vector<float> q = p0.data, b = buf0.data;
    for (size_t i = 0; i < q.size(); ++i)
      cu::sgdElement(s, q[i], g[i], &b[i]);
    expectClose(q, p.data, 0, 0, "sgd param");
    expectClose(b, buf.data, 0, 0, "sgd momentum");
  }
  { // AdamW, step 3 with bias correction
    Tensor<float> p = p0, m = random<float>(dims, -0.1, 0.1, 64),
                  v = random<float>(dims, 0, 0.1, 65);
    const std::vector<float> m0 = m.data, v0 = v.data;
    auto tp = p.desc(), tg = g.desc(), tm = m.desc(), tv = v.desc();
    ASSERT_EQ(pfrt_adamw_step(ctx, &tp, &tg, &tm, &tv, 1e-3, 0.9, 0.999, 1e-8,
                              0.01, 3, 1),
              PFRT_OK);
    const cu::AdamParams a = cu::adamParams(1e-3, 0.9, 0.999, 1e-8, 0.01, 3, true);
    std::vector<float> q = p0.data, mm = m0, vv = v0;
    for (size_t i = 0; i < q.size(); ++i)
      cu::adamwElement(a, q[i], g[i], mm[i], vv[i]);
    // The same double formulas; std::pow vs the CPU's may differ in the
    // last bit of the bias correction.
    expectClose(q, p.data, 1e-7, 1e-9, "adamw param");
    expectClose(mm, m.data, 0, 0, "adamw exp_avg");
    expectClose(vv, v.data, 0, 0, "adamw exp_avg_sq");
  }
}

/// LAMB as the kernels compose it: moments and the two squared norms in
/// one pass, then p -= lr r u with u from the stored moments.
TEST_F(CudaMath, LambMatchesCpu) {
  const Dims dims = {41};
  for (int nvlamb = 0; nvlamb < 2; ++nvlamb)
    for (double wd : {0.0, 0.01}) {
      auto p = random<float>(dims, -1, 1, 81), g = random<float>(dims, -1, 1, 82);
      auto m = random<float>(dims, -0.1, 0.1, 83), v = random<float>(dims, 0, 0.1, 84);
      std::vector<float> q = p.data, mm = m.data, vv = v.data;
      auto tp = p.desc(), tg = g.desc(), tm = m.desc(), tv = v.desc();
      ASSERT_EQ(pfrt_lamb_step(ctx, &tp, &tg, &tm, &tv, 1e-2, 0.9, 0.999, 1e-6, wd, 4,
                               1, nvlamb, 10.0),
                PFRT_OK);
      const cu::AdamParams a = cu::adamParams(1e-2, 0.9, 0.999, 1e-6, 0.0, 4, true);
      double pp = 0, uu = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        cu::lambMoments(a, g[i], mm[i], vv[i]);
        const double u = cu::lambDirection(a, wd, q[i], mm[i], vv[i]);
        pp += double(q[i]) * q[i];
        uu += u * u;
      }
      const double rate = a.lr * cu::lambTrustRatio(pp, uu, nvlamb || wd != 0, 10.0);
      for (size_t i = 0; i < q.size(); ++i)
        q[i] = float(double(q[i]) - rate * cu::lambDirection(a, wd, q[i], mm[i], vv[i]));
      expectClose(mm, m.data, 0, 0, "lamb exp_avg");
      expectClose(vv, v.data, 0, 0, "lamb exp_avg_sq");
      expectClose(q, p.data, 1e-6, 1e-8, "lamb param");
    }
}

TEST_F(CudaMath, KfacPiAndFactorBiasColumnMatchCpu) {
  const int64_t n = 9, d = 5;
  auto x = random<double>({n, d}, -1, 1, 71);
  Tensor<double> f({d + 1, d + 1});
  for (auto &e : f.data)
    e = 0.25; // running average over an old factor
  const std::vector<double> old = f.data;
  auto tx = x.desc(), tf = f.desc();
  const double scale = 2.0, decay = 0.9;
  ASSERT_EQ(pfrt_kfac_factor(ctx, &tx, 1, scale, PFRT_KFAC_RUNNING_AVERAGE,
                             decay, &tf),
            PFRT_OK);
  const double alpha = scale / n * (1 - decay), beta = decay;
  for (int64_t j = 0; j <= d; ++j) {
    double s = 0;
    if (j < d)
      for (int64_t r = 0; r < n; ++r)
        s += x[r * d + j];
    else
      s = double(n);
    EXPECT_NEAR(cu::combineFactor(beta, old[d * (d + 1) + j], alpha, s),
                f[d * (d + 1) + j], 1e-13);
  }
  Tensor<double> a({3, 3}, {4, 0, 0, 0, 2, 0, 0, 0, 3}), b({2, 2}, {1, 0, 0, 0.5});
  auto ta = a.desc(), tb = b.desc();
  double pi = 0;
  ASSERT_EQ(pfrt_kfac_pi(ctx, &ta, &tb, &pi), PFRT_OK);
  EXPECT_DOUBLE_EQ(cu::kfacPi(9, 3, 1.5, 2), pi);
  EXPECT_EQ(cu::kfacPi(0, 3, 1.5, 2), 1.0);
  EXPECT_EQ(cu::dampedDiagonal(2.0, 0.5), 2.5);
}

/// The LayerNorm factor and its preconditioning composed the way the CUDA
/// kernels do (row statistics, a thread per feature over the rows, the 2x2
/// solve) against the CPU backend, both layouts, over an old factor.
TEST_F(CudaMath, KfacLayerNormFactorAndPreconditionMatchCpu) {
  const int64_t n = 11, h = 7;
  const double eps = 1e-5, scale = 9.0, decay = 0.5, damping = 0.3;
  auto x = random<double>({n, h}, -2, 3, 81), dy = random<double>({n, h}, -1, 1, 82);
  for (int64_t columns : {3, 2}) {
    SCOPED_TRACE(columns);
    Tensor<double> f({h, columns});
    for (auto &e : f.data)
      e = 0.125;
    const std::vector<double> old = f.data;
    auto tx = x.desc(), tdy = dy.desc(), tf = f.desc();
    ASSERT_EQ(pfrt_kfac_layer_norm_factor(ctx, &tx, &tdy, eps, scale, PFRT_KFAC_RUNNING_AVERAGE,
                                          decay, &tf),
              PFRT_OK);
    std::vector<double> mean(n), rstd(n);
    for (int64_t r = 0; r < n; ++r) {
      double s = 0, v = 0;
      for (int64_t j = 0; j < h; ++j)
        s += x[r * h + j];
      mean[r] = s / h;
      for (int64_t j = 0; j < h; ++j)
        v += (x[r * h + j] - mean[r]) * (x[r * h + j] - mean[r]);
      rstd[r] = 1.0 / std::sqrt(v / h + eps);
    }
    const double alpha = scale / n * (1 - decay);
    std::vector<double> mine(size_t(h * columns));
    for (int64_t j = 0; j < h; ++j) {
      cu::LayerNormFisherSums sums;
      for (int64_t r = 0; r < n; ++r)
        cu::addLayerNormFisher(sums, dy[r * h + j],
                               cu::layerNormHat(x[r * h + j], mean[r], rstd[r]));
      for (int64_t c = 0; c < columns; ++c) {
        mine[j * columns + c] = cu::combineFactor(decay, old[j * columns + c], alpha,
                                                  cu::layerNormFactorColumn(sums, columns, c));
        EXPECT_NEAR(mine[j * columns + c], f[j * columns + c], 1e-12);
      }
    }
    auto gs = random<double>({h}, -1, 1, 83), gb = random<double>({h}, -1, 1, 84);
    Tensor<double> us({h}), ub({h});
    auto tgs = gs.desc(), tgb = gb.desc(), tus = us.desc(), tub = ub.desc();
    ASSERT_EQ(pfrt_kfac_precondition_layer_norm(ctx, &tf, damping, &tgs, &tgb, &tus, &tub),
              PFRT_OK);
    for (int64_t j = 0; j < h; ++j) {
      const double *row = &mine[size_t(j * columns)];
      double u0, u1;
      cu::solveLayerNormBlock(row[0], columns == 3 ? row[1] : 0.0, row[columns - 1], damping,
                              columns == 2, gs[j], gb[j], u0, u1);
      EXPECT_NEAR(u0, us[j], 1e-12 * (1 + std::fabs(u0)));
      EXPECT_NEAR(u1, ub[j], 1e-12 * (1 + std::fabs(u1)));
    }
  }
  // Without damping a singular block keeps its gradient.
  double u0 = 0, u1 = 0;
  cu::solveLayerNormBlock(1, 1, 1, 0, false, 3, -4, u0, u1);
  EXPECT_EQ(u0, 3.0);
  EXPECT_EQ(u1, -4.0);
}

/// The embedding kernels' per-element arithmetic composed the way the CUDA
/// kernels do (ids to rows and counts, the diagonal damping with retries,
/// 1 / (a + d), rows scaled) against the CPU backend.
TEST_F(CudaMath, KfacEmbeddingMatchesCpu) {
  const int64_t vocab = 6, h = 3;
  Tensor<int64_t> ids({2, 4}, {0, 5, -1, 2, 2, -6, 3, 2});
  Tensor<double> f({vocab});
  for (auto &e : f.data)
    e = 0.25;
  const std::vector<double> old = f.data;
  auto ti = ids.desc(), tf = f.desc();
  ASSERT_EQ(pfrt_kfac_embedding_factor(ctx, &ti, 3.0, PFRT_KFAC_RUNNING_AVERAGE, 0.5, &tf),
            PFRT_OK);
  std::vector<double> counts(vocab, 0.0);
  for (int64_t id : ids.data) {
    EXPECT_EQ(cu::embeddingIdRow(id, vocab), pfrt::embeddingRow(id, vocab));
    counts[size_t(cu::embeddingIdRow(id, vocab))] += 1;
  }
  EXPECT_EQ(cu::embeddingIdRow(6, vocab), -1);
  EXPECT_EQ(cu::embeddingIdRow(-7, vocab), -1);
  const double alpha = 3.0 / 8 * (1 - 0.5);
  for (int64_t v = 0; v < vocab; ++v)
    EXPECT_NEAR(cu::combineFactor(0.5, old[v], alpha, counts[v]), f[v], 1e-15);

  // The refresh: pi from sum(a) and tr(b), the retried diagonal damping.
  f.data = {0.5, 0, 0.25, 0.125, 0, 0.125};
  Tensor<double> b({h, h}, {2, 0.5, 0, 0.5, 1, 0, 0, 0, 3}), aInv({vocab}), bInv({h, h});
  auto ta = f.desc(), tb = b.desc(), tai = aInv.desc(), tbi = bInv.desc();
  for (double damping : {0.01, 0.0}) {
    SCOPED_TRACE(damping);
    int32_t outcome = -1;
    ASSERT_EQ(pfrt_kfac_embedding_inverses(ctx, &ta, &tb, damping, 3, &tai, &tbi, &outcome),
              PFRT_OK);
    const double pi = cu::kfacPi(1.0, vocab, 6.0, h);
    int32_t mine = -1;
    const double d = cu::embeddingDiagonalDamping(0.0, std::sqrt(damping) * pi, 3, mine);
    EXPECT_EQ(mine, outcome); // B is positive definite: A decides
    for (int64_t v = 0; v < vocab; ++v)
      EXPECT_NEAR(cu::embeddingInverseEntry(f[v], d), aInv[v], 1e-9 * aInv[v]);
  }
  int32_t kept = -1;
  cu::embeddingDiagonalDamping(0.0, 0.0, 0, kept);
  EXPECT_EQ(kept, PFRT_KFAC_KEPT_PREVIOUS);

  // The preconditioning: rows scaled by a_inv, then B^-1.
  auto g = random<double>({vocab, h}, -1, 1, 85);
  Tensor<double> out({vocab, h});
  auto tg = g.desc(), to = out.desc();
  ASSERT_EQ(pfrt_kfac_precondition_embedding(ctx, &tai, &tbi, &tg, 0, &to), PFRT_OK);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t j = 0; j < h; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < h; ++k)
        sum += g[v * h + k] * aInv[v] * bInv[k * h + j];
      EXPECT_NEAR(sum, out[v * h + j], 1e-12 * (1 + std::fabs(sum)));
    }
}

TEST_F(CudaMath, TriluMaskMatchesCpu) {
  // The CUDA kernel keeps element (i, j) where triluKeeps says; the CPU
  // backend keeps column ranges: both must agree for every k.
  Tensor<float> x({4, 5}), out({4, 5});
  for (int64_t i = 0; i < 20; ++i)
    x[i] = float(i + 1);
  for (int upper : {0, 1})
    for (int64_t k = -5; k <= 6; ++k) {
      auto tx = x.desc(), to = out.desc();
      ASSERT_EQ(pfrt_trilu(ctx, &tx, k, upper, &to), PFRT_OK);
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 5; ++j)
          EXPECT_EQ(out[i * 5 + j], cu::triluKeeps(i, j, k, upper != 0) ? x[i * 5 + j] : 0.0f)
              << "k " << k << " upper " << upper << " at " << i << "," << j;
    }
}

TEST_F(CudaMath, ScatterCombineMatchesCpu) {
  // scatterCombine is the CPU backend's rule too: spot checks of NaN and
  // order, and a repeated tuple applied twice in order.
  EXPECT_EQ(cu::scatterCombine(PFRT_SCATTER_ADD, 2.0, 3.0), 5.0);
  EXPECT_EQ(cu::scatterCombine(PFRT_SCATTER_MUL, 2, 3), 6);
  EXPECT_TRUE(std::isnan(cu::scatterCombine(PFRT_SCATTER_MAX, 1.0f, NAN)));
  EXPECT_TRUE(std::isnan(cu::scatterCombine(PFRT_SCATTER_MIN, NAN, 1.0f)));
  Tensor<float> data({3}, {1, 2, 3}), updates({2}, {10, 20}), out({3});
  Tensor<int64_t> idx({2, 1}, {1, 1});
  auto td = data.desc(), tu = updates.desc(), ti = idx.desc(), to = out.desc();
  ASSERT_EQ(pfrt_scatter_nd(ctx, &td, &ti, &tu, PFRT_SCATTER_MUL, &to), PFRT_OK);
  EXPECT_EQ(out[1], cu::scatterCombine(PFRT_SCATTER_MUL,
                                       cu::scatterCombine(PFRT_SCATTER_MUL, 2.0f, 10.0f), 20.0f));
}

/// pfrt_binary_backward composed as the CUDA kernels do: binaryGrad per
/// element of the broadcast result; an operand that was broadcast sums its
/// elements' contributions in double (one block per element on the GPU).
template <class T>
void checkBinaryBackward(pfrt_context *ctx, const Dims &da, const Dims &db, double rtol,
                         double atol) {
  const Dims full = broadcast(da, db);
  auto a = random<T>(da, 0.2, 2.0, 51), b = random<T>(db, -1.5, 1.5, 52);
  auto dy = random<T>(full, -1, 1, 53);
  if (a.size() > 1)
    a[0] = T(0); // pow's special cases at a == 0
  if (b.size() > 1)
    b[1] = T(0); // and at b == 0
  const pfrt::Shape in[2] = {shapeOf(da), shapeOf(db)};
  const pfrt::BroadcastPlan plan = pfrt::planBroadcast(shapeOf(full), in, 2);
  for (int32_t kind = PFRT_BINARY_ADD; kind <= PFRT_BINARY_POW; ++kind)
    for (int acc = 0; acc < 2; ++acc) {
      auto ga = random<T>(da, -1, 1, 54), gb = random<T>(db, -1, 1, 55);
      const Tensor<T> ga0 = ga, gb0 = gb;
      auto ta = a.desc(), tb = b.desc(), tdy = dy.desc(), tga = ga.desc(), tgb = gb.desc();
      ASSERT_EQ(pfrt_binary_backward(ctx, kind, &ta, &tb, &tdy, acc, acc, &tga, &tgb), PFRT_OK)
          << pfrt_last_error(ctx);
      for (int which = 0; which < 2; ++which) {
        const Tensor<T> &init = which == 0 ? ga0 : gb0;
        pfrt::StridedIndex kept, reduced;
        cu::splitBroadcastGradient(shapeOf(full), shapeOf(which == 0 ? da : db), kept, reduced);
        std::vector<T> got(init.data);
        for (int64_t o = 0; o < kept.count(); ++o) {
          double sum = 0;
          T single = T(0);
          for (int64_t r = 0; r < reduced.count(); ++r) {
            const int64_t i = cu::indexOffset(kept, o) + cu::indexOffset(reduced, r);
            single = cu::binaryGrad(kind, which, a[cu::broadcastOffset(plan, 0, i)],
                                    b[cu::broadcastOffset(plan, 1, i)], dy[i]);
            sum += double(single);
          }
          if (reduced.rank == 0) // the element kernel, in T
            got[o] = acc ? T(init[o] + single) : single;
          else
            got[o] = acc ? T(double(init[o]) + sum) : T(sum);
        }
        const std::string what = "binary_backward kind " + std::to_string(kind) + " operand " +
                                 std::to_string(which) + (acc ? " accumulating" : "");
        expectClose(got, (which == 0 ? ga : gb).data, rtol, atol, what.c_str());
      }
    }
}

TEST_F(CudaMath, BinaryBackwardWithBroadcastingMatchesCpu) {
  // Both operands broadcast, neither, a scalar, and an empty result (whose
  // broadcast operand's gradient is a sum of nothing).
  for (auto [da, db] : {std::pair{Dims{3, 1, 5}, Dims{4, 1}}, std::pair{Dims{2, 7}, Dims{2, 7}},
                        std::pair{Dims{}, Dims{3, 2}}, std::pair{Dims{0, 3}, Dims{1, 3}}}) {
    checkBinaryBackward<float>(ctx, da, db, 2e-6, 1e-6);
    checkBinaryBackward<double>(ctx, da, db, 1e-13, 1e-15);
  }
}

template <class T>
void checkUnaryBackward(pfrt_context *ctx, double rtol, double atol) {
  const Dims dims = {7, 13};
  auto dy = random<T>(dims, -1, 1, 62);
  for (int32_t kind = PFRT_UNARY_SQRT; kind <= PFRT_UNARY_NEG; ++kind)
    for (int acc = 0; acc < 2; ++acc) {
      // y = sqrt(x) > 0; tanh's y in (-1, 1); erf's x anywhere.
      auto v = kind == PFRT_UNARY_SQRT   ? random<T>(dims, 0.1, 3, 61)
               : kind == PFRT_UNARY_TANH ? random<T>(dims, -0.99, 0.99, 61)
                                         : random<T>(dims, -3, 3, 61);
      auto want = random<T>(dims, -1, 1, 63);
      const Tensor<T> init = want;
      auto tv = v.desc(), tdy = dy.desc(), tw = want.desc();
      ASSERT_EQ(pfrt_unary_backward(ctx, kind, &tv, &tdy, acc, &tw), PFRT_OK);
      std::vector<T> got(v.size());
      for (int64_t i = 0; i < v.size(); ++i) {
        const T g = cu::unaryGrad(kind, v[i], dy[i]);
        got[i] = acc ? T(init[i] + g) : g;
      }
      expectClose(got, want.data, rtol, atol, ("unary_backward " + std::to_string(kind)).c_str());
    }
}

TEST_F(CudaMath, UnaryBackwardMatchesCpu) {
  // erf' uses the CPU's vectorized f32 exp (relative error < 2e-7).
  checkUnaryBackward<float>(ctx, 1e-6, 1e-7);
  checkUnaryBackward<double>(ctx, 1e-14, 1e-15);
}

template <class T>
void checkIntegerDivision(pfrt_context *ctx) {
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  Tensor<T> a({2, 4}, {lo, hi, -7, 7, lo, 0, -1, 9}), b({4}, {-1, 3, -2, 7});
  Tensor<T> want({2, 4});
  auto ta = a.desc(), tb = b.desc(), tw = want.desc();
  ASSERT_EQ(pfrt_div(ctx, &ta, &tb, &tw), PFRT_OK) << pfrt_last_error(ctx);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(cu::binaryOp(cu::Binary::Div, a[i], b[i % 4]), want[i]) << i;
}

template <class T>
void checkIntegerNeg(pfrt_context *ctx) {
  Tensor<T> x({4}, {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), 0, -5});
  Tensor<T> want({4});
  auto tx = x.desc(), tw = want.desc();
  ASSERT_EQ(pfrt_neg(ctx, &tx, &tw), PFRT_OK) << pfrt_last_error(ctx);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(cu::unaryOp(cu::Unary::Neg, x[i]), want[i]) << i;
}

TEST_F(CudaMath, IntegerDivisionAndNegMatchCpu) {
  // Truncation toward zero, MIN / -1 wrapping, negation of MIN wrapping.
  checkIntegerDivision<int32_t>(ctx);
  checkIntegerDivision<int64_t>(ctx);
  checkIntegerNeg<int8_t>(ctx);
  checkIntegerNeg<int32_t>(ctx);
  checkIntegerNeg<int64_t>(ctx);
}

/// castValue from S (f16 as cu::Half) to D against pfrt_cast on the CPU,
/// bit for bit.
template <class D, class S>
void checkCast(pfrt_context *ctx, const std::vector<S> &values, int32_t from, int32_t to) {
  const int64_t n = int64_t(values.size());
  std::vector<D> want(values.size());
  pfrt_tensor tx{}, tw{};
  tx.data = const_cast<S *>(values.data());
  tx.dtype = from;
  tx.rank = 1;
  tx.shape[0] = n;
  tw = tx;
  tw.data = want.data();
  tw.dtype = to;
  ASSERT_EQ(pfrt_cast(ctx, &tx, &tw), PFRT_OK) << pfrt_last_error(ctx);
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 10; ++i) {
    const D got = cu::castValue<D>(values[i]);
    if (std::memcmp(&got, &want[i], sizeof(D)) != 0) {
      ADD_FAILURE() << "cast " << pfrt_dtype_name(from) << " -> " << pfrt_dtype_name(to) << " at "
                    << i;
      ++failures;
    }
  }
}

TEST_F(CudaMath, HalfCastsMatchCpu) {
  // Every f16 bit pattern to f32, f64, i8, i32, i64 and bool.
  std::vector<cu::Half> halves(1 << 16);
  for (uint32_t h = 0; h < (1u << 16); ++h)
    halves[h].bits = uint16_t(h);
  checkCast<float>(ctx, halves, PFRT_F16, PFRT_F32);
  checkCast<double>(ctx, halves, PFRT_F16, PFRT_F64);
  checkCast<int8_t>(ctx, halves, PFRT_F16, PFRT_I8);
  checkCast<int32_t>(ctx, halves, PFRT_F16, PFRT_I32);
  checkCast<int64_t>(ctx, halves, PFRT_F16, PFRT_I64);
  checkCast<uint8_t>(ctx, halves, PFRT_F16, PFRT_BOOL);
  // f32 to f16: rounding ties to even, the overflow and subnormal edges,
  // NaN and inf, then random values over the whole exponent range.
  std::vector<float> floats = {
      0.0f,         -0.0f,         1.0f,          65504.0f,       65519.99f,
      65520.0f,     -65520.0f,     5.9604645e-8f, 2.9802322e-8f,  2.9802326e-8f,
      8.940697e-8f, 6.1035156e-5f, 6.1035153e-5f, 1.00048828125f, 1.00146484375f,
      INFINITY,     -INFINITY,     NAN,           1e-30f,         -3e10f};
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-30, 20);
  for (int i = 0; i < 20000; ++i)
    floats.push_back(float(std::ldexp(mantissa(gen), exponent(gen))));
  checkCast<cu::Half>(ctx, floats, PFRT_F32, PFRT_F16);
  std::vector<double> doubles(floats.begin(), floats.end());
  doubles.push_back(1.0 + 1e-12); // rounds to f32 first, as on the CPU
  checkCast<cu::Half>(ctx, doubles, PFRT_F64, PFRT_F16);
  std::vector<int64_t> integers = {0, 1, -1, 2049, 65504, 65520, 1 << 20, -(int64_t(1) << 40)};
  checkCast<cu::Half>(ctx, integers, PFRT_I64, PFRT_F16);
  std::vector<uint8_t> bools = {0, 1};
  checkCast<cu::Half>(ctx, bools, PFRT_BOOL, PFRT_F16);
}

/// The DeviceError of a failed check, filled as the kernels do: bad
/// elements noted in any order, then settled with the first one's value.
template <class I>
cu::DeviceError settledIndexError(const std::vector<I> &values, int64_t dim, int32_t status,
                                  cu::DeviceCheck check, int64_t axis) {
  cu::DeviceError e{};
  for (int64_t i = int64_t(values.size()) - 1; i >= 0; --i) // the GPU's order is any
    if (values[i] < -dim || values[i] >= dim)
      e.pending = std::max(e.pending, cu::pendingKey(i));
  const int64_t first = cu::pendingElement(e.pending);
  cu::settlePending(e, status, check, int64_t(values[first]), axis, dim);
  return e;
}

/// The CPU backend's status and message against reportDeviceError's.
void expectSameError(pfrt_context *cpu, pfrt_status cpuStatus, const cu::DeviceError &e) {
  const std::string cpuMessage = pfrt_last_error(cpu);
  pfrt_context *other = pfrt_context_create(nullptr);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(cu::reportDeviceError(other, e), cpuStatus);
  EXPECT_EQ(std::string(pfrt_last_error(other)), cpuMessage);
  pfrt_context_destroy(other);
}

TEST_F(CudaMath, DeviceErrorsGiveTheCpuMessages) {
  // gather: the first out-of-range index (element 1), not the largest.
  Tensor<float> data({5, 2}), out({4, 2});
  Tensor<int64_t> idx({4}, {1, 7, -9, 2});
  auto td = data.desc(), ti = idx.desc(), to = out.desc();
  pfrt_status st = pfrt_gather(ctx, &td, &ti, 0, &to);
  ASSERT_EQ(st, PFRT_INVALID_ARGUMENT);
  cu::DeviceError e =
      settledIndexError(idx.data, 5, PFRT_INVALID_ARGUMENT, cu::DeviceCheck::GatherIndex, 0);
  EXPECT_EQ(e.element, 1);
  expectSameError(ctx, st, e);
  // gather_backward along axis 1 with i32 indices.
  Tensor<int32_t> idx32({3}, {0, -2, -4});
  Tensor<float> dy({5, 3}), grad({5, 3});
  auto ti32 = idx32.desc(), tdy = dy.desc(), tg = grad.desc();
  st = pfrt_gather_backward(ctx, &ti32, &tdy, 1, 0, &tg);
  ASSERT_EQ(st, PFRT_INVALID_ARGUMENT);
  expectSameError(ctx, st,
                  settledIndexError(idx32.data, 3, PFRT_INVALID_ARGUMENT,
                                    cu::DeviceCheck::GatherBackwardIndex, 1));
  // Integer division: the first zero of b.
  Tensor<int32_t> a({2, 4}), b({4}, {3, 0, -1, 0}), q({2, 4});
  auto ta = a.desc(), tb = b.desc(), tq = q.desc();
  st = pfrt_div(ctx, &ta, &tb, &tq);
  ASSERT_EQ(st, PFRT_NUMERIC);
  cu::DeviceError div{};
  for (int64_t i = 3; i >= 0; --i)
    if (b[i] == 0)
      div.pending = std::max(div.pending, cu::pendingKey(i));
  cu::settlePending(div, PFRT_NUMERIC, cu::DeviceCheck::IntegerDivision, 0, 0, 0);
  expectSameError(ctx, st, div);
  // Clipping with an infinite norm; a later error does not replace it.
  Tensor<float> g({3}, {1, INFINITY, 2});
  auto tgr = g.desc();
  st = pfrt_clip_by_global_norm(ctx, &tgr, 1, 1.0, nullptr);
  ASSERT_EQ(st, PFRT_NUMERIC);
  cu::DeviceError clip{};
  cu::recordReal(clip, PFRT_NUMERIC, cu::DeviceCheck::ClipNorm, std::sqrt(double(INFINITY)));
  cu::recordReal(clip, PFRT_INVALID_ARGUMENT, cu::DeviceCheck::GatherIndex, 0);
  EXPECT_EQ(cu::clipCoefficient(clip.real, 1.0), 1.0); // left unscaled
  expectSameError(ctx, st, clip);
  // Cross-entropy: the first row whose label is out of range and not
  // ignored (i32 labels).
  Tensor<float> logits({4, 3}), ceLoss(Dims{});
  Tensor<int32_t> labels({4}, {2, -100, 3, -1});
  auto tl = logits.desc(), tlab = labels.desc(), tloss = ceLoss.desc();
  st = pfrt_softmax_cross_entropy(ctx, &tl, &tlab, -100, 1.0, &tloss, nullptr, nullptr);
  ASSERT_EQ(st, PFRT_INVALID_ARGUMENT);
  cu::DeviceError ce{};
  for (int64_t r = 3; r >= 0; --r)
    if (labels[r] != -100 && (labels[r] < 0 || labels[r] >= 3))
      ce.pending = std::max(ce.pending, cu::pendingKey(r));
  cu::settlePending(ce, PFRT_INVALID_ARGUMENT, cu::DeviceCheck::CrossEntropyLabel,
                    labels[cu::pendingElement(ce.pending)], -100, 3);
  expectSameError(ctx, st, ce);
  // Nothing recorded: no error.
  EXPECT_EQ(cu::reportDeviceError(ctx, cu::DeviceError{}), PFRT_OK);
}

TEST_F(CudaMath, ClipCoefficientMatchesCpu) {
  for (double maxNorm : {0.5, 100.0}) {
    auto x = random<float>({1001}, -1, 1, 71);
    auto y = random<double>({37}, -2, 2, 72);
    Tensor<float> wantX = x;
    Tensor<double> wantY = y;
    pfrt_tensor list[2] = {wantX.desc(), wantY.desc()};
    double norm = 0;
    ASSERT_EQ(pfrt_clip_by_global_norm(ctx, list, 2, maxNorm, &norm), PFRT_OK);
    double squares = 0; // per tensor, then in list order, as the kernels
    for (const auto &t : {std::vector<double>(x.data.begin(), x.data.end()), y.data}) {
      double s = 0;
      for (double v : t)
        s += v * v;
      squares += s;
    }
    const double c = cu::clipCoefficient(std::sqrt(squares), maxNorm);
    EXPECT_NEAR(std::sqrt(squares), norm, 1e-12 * norm);
    std::vector<float> gotX(x.data);
    std::vector<double> gotY(y.data);
    if (c != 1.0) {
      for (auto &v : gotX)
        v = v * float(c);
      for (auto &v : gotY)
        v = v * c;
    }
    expectClose(gotX, wantX.data, 1e-6, 0, "clipped f32");
    expectClose(gotY, wantY.data, 1e-12, 0, "clipped f64");
  }
}

} // namespace
