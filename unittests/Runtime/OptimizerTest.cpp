//===- OptimizerTest.cpp - SGD, AdamW, LAMB, norms, clipping ---------------===//
//
// Each optimizer runs several steps with changing gradients and is compared
// with the update formulas written out in double in the test.
//
//===----------------------------------------------------------------------===//

#include "TrainingTestUtil.h"

using namespace pfrt_test;

namespace {

using OptimizerTest = RuntimeTest;

constexpr int kSteps = 5;

template <class T> struct State {
  Tensor<T> p, m, v;
  std::vector<double> rp, rm, rv; // reference in double
  State(const Dims &dims, unsigned seed)
      : p(random<T>(dims, -1, 1, seed)), m(dims), v(dims) {
    rp = asDouble(p);
    rm.assign(p.size(), 0.0);
    rv.assign(p.size(), 0.0);
  }
};

TEST_F(OptimizerTest, SgdMomentumNesterovWeightDecay) {
  for (int nesterov : {0, 1}) {
    for (double momentum : {0.0, 0.9}) {
      if (nesterov && momentum == 0)
        continue;
      SCOPED_TRACE("nesterov " + std::to_string(nesterov) + " momentum " +
                   std::to_string(momentum));
      const double lr = 0.1, wd = 0.01;
      State<float> s({33, 70}, 10);
      for (int step = 1; step <= kSteps; ++step) {
        Tensor<float> g = random<float>(s.p.dims, -1, 1, 100 + step);
        pfrt_tensor tp = s.p.desc(), tg = g.desc(), tm = s.m.desc();
        ok(pfrt_sgd_step(ctx, &tp, &tg, momentum ? &tm : nullptr, lr, momentum,
                         wd, nesterov));
        for (size_t i = 0; i < s.rp.size(); ++i) {
          double d = g[i] + wd * s.rp[i];
          if (momentum) {
            s.rm[i] = momentum * s.rm[i] + d;
            d = nesterov ? d + momentum * s.rm[i] : s.rm[i];
          }
          s.rp[i] -= lr * d;
        }
      }
      EXPECT_LT(maxAbsDiff(s.p.data, s.rp), 1e-6);
      if (momentum) {
        EXPECT_LT(maxAbsDiff(s.m.data, s.rm), 1e-5);
      }
    }
  }
}

TEST_F(OptimizerTest, AdamW) {
  for (int bc : {1, 0}) {
    SCOPED_TRACE(bc);
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    State<double> s({17, 40}, 20);
    State<float> f({17, 40}, 20);
    for (int step = 1; step <= kSteps; ++step) {
      Tensor<double> g = random<double>(s.p.dims, -1, 1, 200 + step);
      Tensor<float> gf = random<float>(s.p.dims, -1, 1, 200 + step);
      pfrt_tensor tp = s.p.desc(), tg = g.desc(), tm = s.m.desc(),
                  tv = s.v.desc();
      ok(pfrt_adamw_step(ctx, &tp, &tg, &tm, &tv, lr, b1, b2, eps, wd, step,
                         bc));
      pfrt_tensor tpf = f.p.desc(), tgf = gf.desc(), tmf = f.m.desc(),
                  tvf = f.v.desc();
      ok(pfrt_adamw_step(ctx, &tpf, &tgf, &tmf, &tvf, lr, b1, b2, eps, wd, step,
                         bc));
      const double c1 = bc ? 1 - std::pow(b1, step) : 1;
      const double c2 = bc ? 1 - std::pow(b2, step) : 1;
      for (size_t i = 0; i < s.rp.size(); ++i) {
        s.rp[i] *= 1 - lr * wd;
        s.rm[i] = b1 * s.rm[i] + (1 - b1) * g[i];
        s.rv[i] = b2 * s.rv[i] + (1 - b2) * g[i] * g[i];
        s.rp[i] -= lr * (s.rm[i] / c1) / (std::sqrt(s.rv[i] / c2) + eps);
      }
    }
    EXPECT_LT(maxAbsDiff(s.p.data, s.rp), 1e-14);
    EXPECT_LT(maxAbsDiff(s.m.data, s.rm), 1e-14);
    EXPECT_LT(maxAbsDiff(s.v.data, s.rv), 1e-14);
    EXPECT_LT(maxAbsDiff(f.p.data, s.rp), 1e-6);
  }
}

/// The LAMB reference for one tensor over kSteps.
void lambReference(State<double> &s, const std::vector<Tensor<double>> &grads,
                   double lr, double b1, double b2, double eps, double wd,
                   bool nvlamb, double maxRatio, std::vector<double> &ratios) {
  for (int step = 1; step <= kSteps; ++step) {
    const auto &g = grads[step - 1];
    const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
    std::vector<double> u(s.rp.size());
    double ww = 0, uu = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      s.rm[i] = b1 * s.rm[i] + (1 - b1) * g[i];
      s.rv[i] = b2 * s.rv[i] + (1 - b2) * g[i] * g[i];
      u[i] = (s.rm[i] / c1) / (std::sqrt(s.rv[i] / c2) + eps) + wd * s.rp[i];
      ww += s.rp[i] * s.rp[i];
      uu += u[i] * u[i];
    }
    double r = 1;
    if (nvlamb || wd != 0) {
      r = (ww > 0 && uu > 0) ? std::sqrt(ww) / std::sqrt(uu) : 1.0;
      if (maxRatio > 0)
        r = std::min(r, maxRatio);
    }
    ratios.push_back(r);
    for (size_t i = 0; i < u.size(); ++i)
      s.rp[i] -= lr * r * u[i];
  }
}

TEST_F(OptimizerTest, Lamb) {
  const double lr = 2e-3, b1 = 0.9, b2 = 0.999, eps = 1e-6;
  struct Case {
    double wd;
    int nvlamb;
    double maxRatio;
    double pScale;
  };
  // Trust ratio below 1, clamped at 0.5, above 1, and skipped (apex's
  // default with no weight decay); a zero tensor (ratio 1).
  const Case cases[] = {{0.01, 1, 0, 1.0},  {0.01, 1, 0.5, 1.0},
                        {0.0, 1, 0, 50.0},  {0.0, 0, 0, 50.0},
                        {0.01, 1, 10, 0.0}};
  unsigned seed = 300;
  for (const Case &c : cases) {
    SCOPED_TRACE("wd " + std::to_string(c.wd) + " nvlamb " +
                 std::to_string(c.nvlamb) + " max " +
                 std::to_string(c.maxRatio));
    State<double> s({24, 31}, ++seed);
    for (auto &v : s.p.data)
      v *= c.pScale;
    s.rp = s.p.data;
    std::vector<Tensor<double>> grads;
    for (int step = 1; step <= kSteps; ++step)
      grads.push_back(random<double>(s.p.dims, -1, 1, ++seed));
    std::vector<double> ratios;
    State<double> ref = s;
    lambReference(ref, grads, lr, b1, b2, eps, c.wd, c.nvlamb, c.maxRatio,
                  ratios);
    for (int step = 1; step <= kSteps; ++step) {
      pfrt_tensor tp = s.p.desc(), tg = grads[step - 1].desc(),
                  tm = s.m.desc(), tv = s.v.desc();
      ok(pfrt_lamb_step(ctx, &tp, &tg, &tm, &tv, lr, b1, b2, eps, c.wd, step,
                        1, c.nvlamb, c.maxRatio));
    }
    EXPECT_LT(maxAbsDiff(s.p.data, ref.rp), 1e-13);
    EXPECT_LT(maxAbsDiff(s.m.data, ref.rm), 1e-14);
    EXPECT_LT(maxAbsDiff(s.v.data, ref.rv), 1e-14);
    if (c.maxRatio == 0.5) {
      EXPECT_EQ(ratios[0], 0.5); // the clamp was active
    }
    if (c.pScale == 50.0 && c.nvlamb) {
      EXPECT_GT(ratios[0], 1.0);
    }
  }
}

/// pfrt_weighted_add's bits are pfrt_cast's, pfrt_mul's, pfrt_add's and
/// pfrt_div's one after the other (what the unfused accumulate functions
/// computed), in place too: a fused multiply-add would differ in the last
/// bit of many elements.
TEST_F(OptimizerTest, WeightedAddIsMulAddDivBitForBit) {
  auto check = [&](auto zero) {
    using T = decltype(zero);
    const Dims dims{257, 33};
    Tensor<T> sum = random<T>(dims, -3, 3, 500), x = random<T>(dims, -1e3, 1e3, 501);
    const int64_t count = 37, total = 151;
    Tensor<T> cf(Dims{}), tf(Dims{}), term(dims), added(dims), expect(dims), out(dims);
    Tensor<int64_t> ci(Dims{}), ti(Dims{});
    ci[0] = count;
    ti[0] = total;
    pfrt_tensor tci = ci.desc(), tti = ti.desc(), tcf = cf.desc(), ttf = tf.desc();
    ok(pfrt_cast(ctx, &tci, &tcf));
    ok(pfrt_cast(ctx, &tti, &ttf));
    pfrt_tensor ts = sum.desc(), tx = x.desc(), tterm = term.desc(), tadded = added.desc(),
                texpect = expect.desc(), tout = out.desc();
    ok(pfrt_mul(ctx, &tx, &tcf, &tterm));
    ok(pfrt_add(ctx, &ts, &tterm, &tadded));
    // Without a total (1): the running sum.
    ok(pfrt_weighted_add(ctx, &ts, &tx, count, 1, &tout));
    EXPECT_EQ(out.data, added.data);
    ok(pfrt_div(ctx, &tadded, &ttf, &texpect));
    ok(pfrt_weighted_add(ctx, &ts, &tx, count, total, &tout));
    EXPECT_EQ(out.data, expect.data);
    // In place on the running sum.
    ok(pfrt_weighted_add(ctx, &ts, &tx, count, total, &ts));
    EXPECT_EQ(sum.data, expect.data);
  };
  check(0.0f);
  check(0.0);
  // Mismatched shapes are refused, an integer dtype unsupported.
  Tensor<float> a({4}), b({5});
  pfrt_tensor ta = a.desc(), tb = b.desc();
  fails(pfrt_weighted_add(ctx, &ta, &tb, 1, 1, &ta), PFRT_INVALID_ARGUMENT, "pfrt_weighted_add");
  Tensor<int64_t> i({4});
  pfrt_tensor ti = i.desc();
  fails(pfrt_weighted_add(ctx, &ti, &ti, 1, 1, &ti), PFRT_UNSUPPORTED, "pfrt_weighted_add");
}

TEST_F(OptimizerTest, GlobalNormClipScaleDot) {
  Tensor<float> a = random<float>({100, 70}, -1, 1, 400);
  Tensor<double> b = random<double>({33}, -2, 2, 401);
  Tensor<float> c({0});
  double ref = 0;
  for (float v : a.data)
    ref += double(v) * v;
  for (double v : b.data)
    ref += v * v;
  ref = std::sqrt(ref);
  pfrt_tensor list[3] = {a.desc(), b.desc(), c.desc()};
  double norm = -1;
  ok(pfrt_global_norm(ctx, list, 3, &norm));
  EXPECT_NEAR(norm, ref, 1e-12 * ref);
  ok(pfrt_global_norm(ctx, nullptr, 0, &norm));
  EXPECT_EQ(norm, 0.0);

  // Below the threshold: unchanged.
  const std::vector<float> a0 = a.data;
  ok(pfrt_clip_by_global_norm(ctx, list, 3, ref * 2, &norm));
  EXPECT_EQ(a.data, a0);
  // Above: scaled by max / (norm + 1e-6).
  ok(pfrt_clip_by_global_norm(ctx, list, 3, 1.0, nullptr));
  const double coef = 1.0 / (ref + 1e-6);
  for (int64_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], a0[i] * coef, 1e-7);
  ok(pfrt_global_norm(ctx, list, 3, &norm));
  EXPECT_NEAR(norm, 1.0, 1e-5);

  // A NaN: PFRT_NUMERIC, nothing scaled.
  const std::vector<float> a1 = a.data;
  b[3] = NAN;
  fails(pfrt_clip_by_global_norm(ctx, list, 3, 1e-3, &norm), PFRT_NUMERIC,
        "pfrt_clip_by_global_norm");
  EXPECT_TRUE(std::isnan(norm));
  EXPECT_EQ(a.data, a1);

  // With the norm given (a pipeline's norm over ranks): the same bits as
  // the kernel that forms it; below it, nothing; a non-finite norm fails.
  b[3] = 0.5;
  Tensor<float> a2 = a, viaNorm = a;
  Tensor<double> b2 = b, bViaNorm = b;
  pfrt_tensor formed[2] = {a2.desc(), b2.desc()}, given[2] = {viaNorm.desc(), bViaNorm.desc()};
  ok(pfrt_global_norm(ctx, formed, 2, &norm));
  ok(pfrt_clip_by_global_norm(ctx, formed, 2, 0.25, nullptr));
  ok(pfrt_clip_to_norm(ctx, given, 2, 0.25, norm));
  EXPECT_EQ(viaNorm.data, a2.data);
  EXPECT_EQ(bViaNorm.data, b2.data);
  const std::vector<float> a3 = viaNorm.data;
  ok(pfrt_clip_to_norm(ctx, given, 2, 0.25, 0.25));
  EXPECT_EQ(viaNorm.data, a3);
  fails(pfrt_clip_to_norm(ctx, given, 2, 0.25, INFINITY), PFRT_NUMERIC, "pfrt_clip_to_norm");
  EXPECT_EQ(viaNorm.data, a3);
  fails(pfrt_clip_to_norm(ctx, given, 2, -1.0, 2.0), PFRT_INVALID_ARGUMENT, "pfrt_clip_to_norm");

  // scale in place; dot.
  Tensor<double> x = random<double>({5000}, -1, 1, 402);
  Tensor<double> y = random<double>({5000}, -1, 1, 403);
  double dref = 0;
  for (int64_t i = 0; i < x.size(); ++i)
    dref += x[i] * y[i];
  pfrt_tensor tx = x.desc(), ty = y.desc();
  double dot = 0;
  ok(pfrt_dot(ctx, &tx, &ty, &dot));
  EXPECT_NEAR(dot, dref, 1e-10);
  const std::vector<double> x0 = x.data;
  ok(pfrt_scale(ctx, &tx, -0.25, &tx));
  for (int64_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(x[i], -0.25 * x0[i]);

  // The norm does not depend on the thread count (bitwise).
  Tensor<float> big = random<float>({300000}, -1, 1, 404);
  pfrt_tensor tbig = big.desc();
  std::vector<double> norms;
  for (int threads : {1, 2, 7}) {
    ScopedContext sc(threads);
    double n1 = 0;
    ASSERT_EQ(pfrt_global_norm(sc.ctx, &tbig, 1, &n1), PFRT_OK);
    norms.push_back(n1);
  }
  EXPECT_EQ(norms[0], norms[1]);
  EXPECT_EQ(norms[0], norms[2]);
}

TEST_F(OptimizerTest, Errors) {
  Tensor<float> p({4}), g({4}), m({4}), v({4}), wrong({5});
  Tensor<double> d({4});
  pfrt_tensor tp = p.desc(), tg = g.desc(), tm = m.desc(), tv = v.desc(),
              tw = wrong.desc(), td = d.desc();
  fails(pfrt_sgd_step(ctx, &tp, &tw, nullptr, 0.1, 0, 0, 0),
        PFRT_INVALID_ARGUMENT, "pfrt_sgd_step");
  fails(pfrt_sgd_step(ctx, &tp, &tg, nullptr, 0.1, 0.9, 0, 0),
        PFRT_INVALID_ARGUMENT, "pfrt_sgd_step"); // momentum needs a buffer
  fails(pfrt_sgd_step(ctx, &tp, &tg, nullptr, 0.1, 0, 0, 1),
        PFRT_INVALID_ARGUMENT, "pfrt_sgd_step"); // nesterov without momentum
  fails(pfrt_sgd_step(ctx, &tp, &tg, nullptr, -1, 0, 0, 0),
        PFRT_INVALID_ARGUMENT, "pfrt_sgd_step");
  fails(pfrt_adamw_step(ctx, &tp, &tg, &tm, &td, 1e-3, 0.9, 0.999, 1e-8, 0, 1,
                        1),
        PFRT_INVALID_ARGUMENT, "pfrt_adamw_step");
  fails(pfrt_adamw_step(ctx, &tp, &tg, &tm, &tv, 1e-3, 1.0, 0.999, 1e-8, 0, 1,
                        1),
        PFRT_INVALID_ARGUMENT, "pfrt_adamw_step");
  fails(pfrt_adamw_step(ctx, &tp, &tg, &tm, &tv, 1e-3, 0.9, 0.999, 1e-8, 0, 0,
                        1),
        PFRT_INVALID_ARGUMENT, "pfrt_adamw_step");
  fails(pfrt_adamw_step(ctx, &tp, &tg, &tm, &tv, NAN, 0.9, 0.999, 1e-8, 0, 1,
                        1),
        PFRT_INVALID_ARGUMENT, "pfrt_adamw_step");
  fails(pfrt_lamb_step(ctx, &tp, &tg, &tm, nullptr, 1e-3, 0.9, 0.999, 1e-6, 0,
                       1, 1, 1, 0),
        PFRT_INVALID_ARGUMENT, "pfrt_lamb_step");
  fails(pfrt_lamb_step(ctx, &tp, &tg, &tm, &tv, 1e-3, 0.9, 0.999, 1e-6, 0, 1,
                       1, 1, -2),
        PFRT_INVALID_ARGUMENT, "pfrt_lamb_step");
  Tensor<int32_t> ints({4});
  pfrt_tensor ti = ints.desc();
  fails(pfrt_sgd_step(ctx, &ti, &ti, nullptr, 0.1, 0, 0, 0), PFRT_UNSUPPORTED,
        "pfrt_sgd_step");
  pfrt_tensor list[2] = {tp, ti};
  double norm;
  fails(pfrt_global_norm(ctx, list, 2, &norm), PFRT_UNSUPPORTED,
        "pfrt_global_norm");
  fails(pfrt_global_norm(ctx, list, 1, nullptr), PFRT_INVALID_ARGUMENT,
        "pfrt_global_norm");
  fails(pfrt_global_norm(ctx, nullptr, 2, &norm), PFRT_INVALID_ARGUMENT,
        "pfrt_global_norm");
  fails(pfrt_clip_by_global_norm(ctx, list, 1, 0.0, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_clip_by_global_norm");
  fails(pfrt_scale(ctx, &tp, 2.0, &tw), PFRT_INVALID_ARGUMENT, "pfrt_scale");
  fails(pfrt_dot(ctx, &tp, &td, &norm), PFRT_INVALID_ARGUMENT, "pfrt_dot");
}

} // namespace
