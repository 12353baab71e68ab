//===- ElementwiseTest.cpp - Broadcasting binary ops, where, unary, GELU ---===//

#include "RuntimeTestUtil.h"

#include <functional>
#include <limits>

using namespace pfrt_test;

namespace {

using BinaryFn = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                                 const pfrt_tensor *, const pfrt_tensor *);

/// out[i] = f(a[bcast], b[bcast]) in double.
template <class T>
std::vector<double> referenceBinary(const Tensor<T> &a, const Tensor<T> &b,
                                    const Dims &outDims,
                                    const std::function<double(double, double)> &f) {
  std::vector<double> out(numel(outDims));
  for (int64_t i = 0; i < numel(outDims); ++i) {
    Dims idx = unravel(i, outDims);
    out[i] = f(static_cast<double>(a[broadcastIndex(idx, a.dims)]),
               static_cast<double>(b[broadcastIndex(idx, b.dims)]));
  }
  return out;
}

struct BinaryCase {
  Dims a, b;
};

class Broadcasting : public RuntimeTest,
                     public ::testing::WithParamInterface<BinaryCase> {};

TEST_P(Broadcasting, ArithmeticMatchesReference) {
  const BinaryCase &c = GetParam();
  Tensor<float> a = random<float>(c.a, 0.5, 2.0, 1);
  Tensor<float> b = random<float>(c.b, 0.5, 2.0, 2);
  Dims outDims = broadcast(c.a, c.b);
  struct Op {
    BinaryFn fn;
    std::function<double(double, double)> ref;
  };
  const Op ops[] = {
      {pfrt_add, [](double x, double y) { return x + y; }},
      {pfrt_sub, [](double x, double y) { return x - y; }},
      {pfrt_mul, [](double x, double y) { return x * y; }},
      {pfrt_div, [](double x, double y) { return x / y; }},
      {pfrt_pow, [](double x, double y) { return std::pow(x, y); }},
  };
  for (const Op &op : ops) {
    Tensor<float> out(outDims);
    pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
    ok(op.fn(ctx, &ta, &tb, &to));
    std::vector<double> ref = referenceBinary(a, b, outDims, op.ref);
    for (int64_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-7) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Broadcasting,
    ::testing::Values(BinaryCase{{5}, {5}},
                      BinaryCase{{100003}, {100003}}, // several threads
                      BinaryCase{{2, 3, 4}, {4}},     // bias add
                      BinaryCase{{2, 3, 4}, {3, 1}},  // inner broadcast
                      BinaryCase{{2, 1, 4}, {3, 1}},  // both sides
                      BinaryCase{{4}, {}},            // scalar
                      BinaryCase{{}, {2, 2}},
                      BinaryCase{{}, {}},
                      BinaryCase{{1}, {3, 1, 2}},
                      BinaryCase{{2, 1, 3, 1}, {1, 4, 1, 5}},
                      BinaryCase{{64, 1, 300}, {64, 40, 1}},
                      BinaryCase{{2, 1, 1, 128}, {2, 12, 128, 128}}, // mask
                      BinaryCase{{0, 3}, {3}}));

using ElementwiseTest = RuntimeTest;

TEST_F(ElementwiseTest, IntegerArithmetic) {
  Tensor<int64_t> a({4}, {7, -7, 9, INT64_MIN});
  Tensor<int64_t> b({4}, {2, 2, -3, -1});
  Tensor<int64_t> out({4});
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_div(ctx, &ta, &tb, &to));
  EXPECT_EQ(out.data, (std::vector<int64_t>{3, -3, -3, INT64_MIN}));
  ok(pfrt_add(ctx, &ta, &tb, &to));
  EXPECT_EQ(out.data, (std::vector<int64_t>{9, -5, 6, INT64_MAX}));

  Tensor<int32_t> c({2, 2}, {1, 2, 3, 4}), d({2}, {10, 20}), e({2, 2});
  pfrt_tensor tc = c.desc(), td = d.desc(), te = e.desc();
  ok(pfrt_mul(ctx, &tc, &td, &te));
  EXPECT_EQ(e.data, (std::vector<int32_t>{10, 40, 30, 80}));
  ok(pfrt_sub(ctx, &td, &tc, &te));
  EXPECT_EQ(e.data, (std::vector<int32_t>{9, 18, 7, 16}));
}

TEST_F(ElementwiseTest, IntegerDivisionByZero) {
  Tensor<int32_t> a({3}, {1, 2, 3}), b({3}, {1, 0, 1}), out({3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  fails(pfrt_div(ctx, &ta, &tb, &to), PFRT_NUMERIC, "pfrt_div");
  // Floats divide by zero the IEEE way.
  Tensor<float> x({2}, {1, -1}), y({1}, {0}), z({2});
  pfrt_tensor tx = x.desc(), ty = y.desc(), tz = z.desc();
  ok(pfrt_div(ctx, &tx, &ty, &tz));
  EXPECT_EQ(z[0], INFINITY);
  EXPECT_EQ(z[1], -INFINITY);
}

TEST_F(ElementwiseTest, PowSquareShortcutAndGeneral) {
  Tensor<float> a({5}, {-3, -0.5f, 0, 1.5f, 1e20f});
  Tensor<float> two({}, {2.0f}), out({5});
  pfrt_tensor ta = a.desc(), t2 = two.desc(), to = out.desc();
  ok(pfrt_pow(ctx, &ta, &t2, &to));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(out[i], std::pow(a[i], 2.0f)) << i;
  Tensor<double> x({3}, {2, 4, 9}), e({3}, {0.5, -1, 3}), y({3});
  pfrt_tensor tx = x.desc(), te = e.desc(), ty = y.desc();
  ok(pfrt_pow(ctx, &tx, &te, &ty));
  EXPECT_DOUBLE_EQ(y[0], std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(y[1], 0.25);
  EXPECT_DOUBLE_EQ(y[2], 729.0);
}

TEST_F(ElementwiseTest, InPlace) {
  Tensor<float> a = random<float>({3, 70000}, -1, 1, 3);
  Tensor<float> b = random<float>({70000}, -1, 1, 4);
  Tensor<float> expected = a;
  for (int64_t i = 0; i < a.size(); ++i)
    expected[i] = a[i] + b[i % 70000];
  pfrt_tensor ta = a.desc(), tb = b.desc();
  ok(pfrt_add(ctx, &ta, &tb, &ta));
  EXPECT_EQ(a.data, expected.data);
}

TEST_F(ElementwiseTest, Equal) {
  Tensor<float> a({2, 3}, {1, 2, 3, 4, NAN, -0.0f}), b({3}, {1, NAN, 0});
  Tensor<uint8_t> out({2, 3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_equal(ctx, &ta, &tb, &to));
  EXPECT_EQ(out.data, (std::vector<uint8_t>{1, 0, 0, 0, 0, 1}));

  Tensor<int64_t> c({4}, {5, -1, 5, 7}), d({}, {5});
  Tensor<uint8_t> e({4});
  pfrt_tensor tc = c.desc(), td = d.desc(), te = e.desc();
  ok(pfrt_equal(ctx, &tc, &td, &te));
  EXPECT_EQ(e.data, (std::vector<uint8_t>{1, 0, 1, 0}));

  Tensor<uint8_t> p({3}, {0, 1, 1}), q({3}, {0, 0, 1}), r({3});
  pfrt_tensor tp = p.desc(), tq = q.desc(), tr = r.desc();
  ok(pfrt_equal(ctx, &tp, &tq, &tr));
  EXPECT_EQ(r.data, (std::vector<uint8_t>{1, 0, 1}));
}

TEST_F(ElementwiseTest, CompareKindsBroadcast) {
  Dims ad = {2, 3}, bd = {3};
  Tensor<float> a(ad, {1, 2, 3, 4, NAN, -0.0f}), b(bd, {2, NAN, 0});
  struct Kind {
    int32_t kind;
    std::function<bool(float, float)> ref;
  };
  const Kind kinds[] = {
      {PFRT_COMPARE_EQUAL, [](float x, float y) { return x == y; }},
      {PFRT_COMPARE_GREATER, [](float x, float y) { return x > y; }},
      {PFRT_COMPARE_GREATER_EQUAL, [](float x, float y) { return x >= y; }},
      {PFRT_COMPARE_LESS, [](float x, float y) { return x < y; }},
      {PFRT_COMPARE_LESS_EQUAL, [](float x, float y) { return x <= y; }},
  };
  for (const Kind &k : kinds) {
    Tensor<uint8_t> out(ad);
    pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
    ok(pfrt_compare(ctx, &ta, &tb, k.kind, &to));
    for (int64_t i = 0; i < out.size(); ++i) {
      Dims idx = unravel(i, ad);
      EXPECT_EQ(out[i], k.ref(a[i], b[broadcastIndex(idx, bd)]) ? 1 : 0)
          << "kind " << k.kind << " element " << i;
    }
  }
  // Exact values: 1 > 2, 2 > NaN, 3 > 0, 4 > 2, NaN > NaN, -0 > 0.
  Tensor<uint8_t> gt(ad);
  pfrt_tensor ta = a.desc(), tb = b.desc(), tg = gt.desc();
  ok(pfrt_compare(ctx, &ta, &tb, PFRT_COMPARE_GREATER, &tg));
  EXPECT_EQ(gt.data, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0}));

  // Signed integers, a scalar operand on the left.
  Tensor<int64_t> c({}, {0}), d({4}, {-5, 0, 5, std::numeric_limits<int64_t>::min()});
  Tensor<uint8_t> e({4});
  pfrt_tensor tc = c.desc(), td = d.desc(), te = e.desc();
  ok(pfrt_compare(ctx, &tc, &td, PFRT_COMPARE_LESS_EQUAL, &te));
  EXPECT_EQ(e.data, (std::vector<uint8_t>{0, 1, 1, 0}));
  Tensor<int8_t> i8a({2}, {-128, 7}), i8b({2}, {127, 7});
  Tensor<uint8_t> i8o({2});
  pfrt_tensor t8a = i8a.desc(), t8b = i8b.desc(), t8o = i8o.desc();
  ok(pfrt_compare(ctx, &t8a, &t8b, PFRT_COMPARE_GREATER_EQUAL, &t8o));
  EXPECT_EQ(i8o.data, (std::vector<uint8_t>{0, 1}));
}

TEST_F(ElementwiseTest, CompareErrors) {
  Tensor<uint8_t> p({3}, {0, 1, 1}), r({3});
  pfrt_tensor tp = p.desc(), tr = r.desc();
  // Bools have equality only.
  fails(pfrt_compare(ctx, &tp, &tp, PFRT_COMPARE_GREATER, &tr), PFRT_UNSUPPORTED,
        "pfrt_compare");
  ok(pfrt_compare(ctx, &tp, &tp, PFRT_COMPARE_EQUAL, &tr));
  Tensor<float> a({3}), b({2});
  Tensor<float> fout({3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), tf = fout.desc();
  fails(pfrt_compare(ctx, &ta, &tb, PFRT_COMPARE_LESS, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_compare"); // 3 vs 2 do not broadcast
  fails(pfrt_compare(ctx, &ta, &ta, PFRT_COMPARE_LESS, &tf), PFRT_INVALID_ARGUMENT,
        "pfrt_compare"); // out must be bool
  fails(pfrt_compare(ctx, &ta, &tp, PFRT_COMPARE_LESS, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_compare"); // mixed dtypes
  fails(pfrt_compare(ctx, &ta, &ta, 7, &tr), PFRT_INVALID_ARGUMENT, "pfrt_compare");
}

TEST_F(ElementwiseTest, LogicalKindsBroadcast) {
  Dims ad = {2, 2}, bd = {2, 1};
  // 2 is a non-canonical true byte: it must read as true and give 0/1.
  Tensor<uint8_t> a(ad, {0, 1, 2, 0}), b(bd, {1, 0});
  const std::pair<int32_t, std::vector<uint8_t>> kinds[] = {
      {PFRT_LOGICAL_AND, {0, 1, 0, 0}},
      {PFRT_LOGICAL_OR, {1, 1, 1, 0}},
      {PFRT_LOGICAL_XOR, {1, 0, 1, 0}},
  };
  for (const auto &[kind, want] : kinds) {
    Tensor<uint8_t> out(ad);
    pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
    ok(pfrt_logical(ctx, &ta, &tb, kind, &to));
    EXPECT_EQ(out.data, want) << "kind " << kind;
  }
  Tensor<uint8_t> n(ad);
  pfrt_tensor ta = a.desc(), tn = n.desc();
  ok(pfrt_not(ctx, &ta, &tn));
  EXPECT_EQ(n.data, (std::vector<uint8_t>{1, 0, 0, 1}));
  ok(pfrt_not(ctx, &ta, &ta)); // in place
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 0, 0, 1}));

  // A large broadcast exercises the parallel runs.
  Tensor<uint8_t> big({3, 70001}), row({70001}), bigOut({3, 70001});
  for (int64_t i = 0; i < big.size(); ++i)
    big[i] = (i * 7) % 3 == 0;
  for (int64_t i = 0; i < row.size(); ++i)
    row[i] = i % 2;
  pfrt_tensor tbig = big.desc(), trow = row.desc(), tbo = bigOut.desc();
  ok(pfrt_logical(ctx, &tbig, &trow, PFRT_LOGICAL_XOR, &tbo));
  for (int64_t i = 0; i < bigOut.size(); ++i)
    ASSERT_EQ(bigOut[i], uint8_t(big[i] ^ row[i % 70001])) << i;
}

TEST_F(ElementwiseTest, LogicalErrors) {
  Tensor<float> f({2}), fo({2});
  Tensor<uint8_t> p({2}), q({3}), r({2});
  pfrt_tensor tf = f.desc(), tfo = fo.desc(), tp = p.desc(), tq = q.desc(), tr = r.desc();
  fails(pfrt_logical(ctx, &tf, &tf, PFRT_LOGICAL_AND, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_logical"); // And on floats
  fails(pfrt_logical(ctx, &tp, &tq, PFRT_LOGICAL_OR, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_logical"); // 2 vs 3 do not broadcast
  fails(pfrt_logical(ctx, &tp, &tp, -1, &tr), PFRT_INVALID_ARGUMENT, "pfrt_logical");
  fails(pfrt_not(ctx, &tf, &tfo), PFRT_INVALID_ARGUMENT, "pfrt_not");
  fails(pfrt_not(ctx, &tp, &tq), PFRT_INVALID_ARGUMENT, "pfrt_not"); // shape
}

TEST_F(ElementwiseTest, MinMax) {
  Dims ad = {2, 3}, bd = {2, 1};
  Tensor<float> a(ad, {1, NAN, -3, 4, 5, -0.5f}), b(bd, {0, NAN});
  Tensor<float> lo(ad), hi(ad);
  pfrt_tensor ta = a.desc(), tb = b.desc(), tl = lo.desc(), th = hi.desc();
  ok(pfrt_min(ctx, &ta, &tb, &tl));
  ok(pfrt_max(ctx, &ta, &tb, &th));
  EXPECT_EQ(lo[0], 0.0f);
  EXPECT_TRUE(std::isnan(lo[1])); // NaN on the left propagates
  EXPECT_EQ(lo[2], -3.0f);
  EXPECT_EQ(hi[0], 1.0f);
  EXPECT_TRUE(std::isnan(hi[1]));
  EXPECT_EQ(hi[2], 0.0f);
  for (int i = 3; i < 6; ++i) { // NaN on the right propagates
    EXPECT_TRUE(std::isnan(lo[i])) << i;
    EXPECT_TRUE(std::isnan(hi[i])) << i;
  }
  Tensor<int32_t> c({3}, {-7, 0, 7}), d({}, {1}), e({3});
  pfrt_tensor tc = c.desc(), td = d.desc(), te = e.desc();
  ok(pfrt_max(ctx, &tc, &td, &te));
  EXPECT_EQ(e.data, (std::vector<int32_t>{1, 1, 7}));
  ok(pfrt_min(ctx, &tc, &td, &te));
  EXPECT_EQ(e.data, (std::vector<int32_t>{-7, 0, 1}));
  // int8 (Clip of int8 models): the extremes of the type survive.
  Tensor<int8_t> f({3}, {-128, 5, 127}), g({}, {-2}), h({3});
  pfrt_tensor tf = f.desc(), tg = g.desc(), th8 = h.desc();
  ok(pfrt_max(ctx, &tf, &tg, &th8));
  EXPECT_EQ(h.data, (std::vector<int8_t>{-2, 5, 127}));
  ok(pfrt_min(ctx, &tf, &tg, &th8));
  EXPECT_EQ(h.data, (std::vector<int8_t>{-128, -2, -2}));
  fails(pfrt_add(ctx, &tf, &tf, &th8), PFRT_UNSUPPORTED, "pfrt_add"); // min/max only
  Tensor<uint8_t> p({3}), r({3});
  pfrt_tensor tp = p.desc(), tr = r.desc();
  fails(pfrt_min(ctx, &tp, &tp, &tr), PFRT_UNSUPPORTED, "pfrt_min");
}

TEST_F(ElementwiseTest, AbsSignReciprocal) {
  Tensor<float> x({6}, {-2, -0.0f, 0, 0.5f, NAN, -INFINITY}), out({6});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_abs(ctx, &tx, &to));
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_FALSE(std::signbit(out[1]));
  EXPECT_EQ(out[3], 0.5f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5], INFINITY);
  ok(pfrt_sign(ctx, &tx, &to));
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5], -1.0f);
  ok(pfrt_reciprocal(ctx, &tx, &to));
  EXPECT_EQ(out[0], -0.5f);
  EXPECT_EQ(out[1], -INFINITY);
  EXPECT_EQ(out[2], INFINITY);
  EXPECT_EQ(out[3], 2.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_TRUE(out[5] == 0.0f && std::signbit(out[5]));
  Tensor<double> xd({2}, {4, -3}), od({2});
  pfrt_tensor txd = xd.desc(), tod = od.desc();
  ok(pfrt_reciprocal(ctx, &txd, &tod));
  EXPECT_EQ(od.data, (std::vector<double>{0.25, 1.0 / -3.0}));
  Tensor<int32_t> xi({2}), oi({2});
  pfrt_tensor txi = xi.desc(), toi = oi.desc();
  fails(pfrt_abs(ctx, &txi, &toi), PFRT_UNSUPPORTED, "pfrt_abs");
  fails(pfrt_sign(ctx, &txi, &toi), PFRT_UNSUPPORTED, "pfrt_sign");
}

TEST_F(ElementwiseTest, WhereBroadcastsThreeWays) {
  Dims cd = {2, 1, 4}, xd = {3, 1}, yd = {};
  Tensor<uint8_t> cond(cd, {1, 0, 1, 0, 0, 0, 1, 1});
  Tensor<float> x = random<float>(xd, -1, 1, 5);
  Tensor<float> y({}, {-7});
  Dims od = {2, 3, 4};
  Tensor<float> out(od);
  pfrt_tensor tc = cond.desc(), tx = x.desc(), ty = y.desc(), to = out.desc();
  ok(pfrt_where(ctx, &tc, &tx, &ty, &to));
  for (int64_t i = 0; i < out.size(); ++i) {
    Dims idx = unravel(i, od);
    float want = cond[broadcastIndex(idx, cd)] ? x[broadcastIndex(idx, xd)]
                                               : y[0];
    EXPECT_EQ(out[i], want) << i;
  }
  // f16 (and every dtype) just moves bits.
  Tensor<uint16_t> hx({2}, {0x3c00, 0x4000}), hy({2}, {0xbc00, 0xc000});
  Tensor<uint16_t> ho({2});
  Tensor<uint8_t> c2({2}, {0, 1});
  pfrt_tensor thx = hx.desc(), thy = hy.desc(), tho = ho.desc(),
              tc2 = c2.desc();
  ok(pfrt_where(ctx, &tc2, &thx, &thy, &tho));
  EXPECT_EQ(ho.data, (std::vector<uint16_t>{0xbc00, 0x4000}));
}

/// Relative error bound of the f32 unary kernels against libm in double.
struct UnaryCase {
  const char *name;
  pfrt_status (*fn)(pfrt_context *, const pfrt_tensor *, const pfrt_tensor *);
  double (*ref)(double);
  double lo, hi, relTol, absTol;
};

class UnaryAccuracy : public RuntimeTest,
                      public ::testing::WithParamInterface<UnaryCase> {};

TEST_P(UnaryAccuracy, MatchesLibm) {
  const UnaryCase &c = GetParam();
  const int64_t n = 200001;
  Tensor<float> x({n}), out({n});
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(c.lo + (c.hi - c.lo) * i / (n - 1));
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(c.fn(ctx, &tx, &to));
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = c.ref(static_cast<double>(x[i]));
    const double err = std::fabs(out[i] - want);
    ASSERT_LE(err, c.relTol * std::fabs(want) + c.absTol)
        << c.name << "(" << x[i] << ") = " << out[i] << ", want " << want;
    worst = std::max(worst, err / std::max(std::fabs(want), 1e-30));
  }
  RecordProperty("worst_relative_error", std::to_string(worst));

  // f64 goes through libm: exact to double rounding.
  Tensor<double> xd({5}, {-2.5, -0.3, 0, 0.7, 3.1}), od({5});
  pfrt_tensor txd = xd.desc(), tod = od.desc();
  ok(c.fn(ctx, &txd, &tod));
  for (int i = 0; i < 5; ++i) {
    const double want = c.ref(xd[i]);
    if (std::isnan(want)) // sqrt of negatives
      continue;
    EXPECT_NEAR(od[i], want, 1e-15 * std::fabs(want));
  }
}

double negate(double v) { return -v; }

INSTANTIATE_TEST_SUITE_P(
    Functions, UnaryAccuracy,
    ::testing::Values(
        UnaryCase{"exp", pfrt_exp, [](double v) { return std::exp(v); }, -80,
                  88, 4e-7, 0},
        UnaryCase{"erf", pfrt_erf, [](double v) { return std::erf(v); }, -6,
                  6, 1e-6, 1e-30},
        UnaryCase{"tanh", pfrt_tanh, [](double v) { return std::tanh(v); }, -12,
                  12, 1e-6, 1e-30},
        UnaryCase{"sqrt", pfrt_sqrt, [](double v) { return std::sqrt(v); }, 0,
                  1e6, 1e-7, 0},
        UnaryCase{"neg", pfrt_neg, negate, -5, 5, 0, 0}),
    [](const auto &info) { return std::string(info.param.name); });

TEST_F(ElementwiseTest, SpecialValues) {
  Tensor<float> x({6}, {NAN, INFINITY, -INFINITY, -100.0f, 89.0f, -0.0f});
  Tensor<float> out({6});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_exp(ctx, &tx, &to));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], INFINITY);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], INFINITY);
  EXPECT_EQ(out[5], 1.0f);
  ok(pfrt_tanh(ctx, &tx, &to));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -1.0f);
  ok(pfrt_erf(ctx, &tx, &to));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_NEAR(out[1], 1.0f, 1e-7);
  EXPECT_NEAR(out[2], -1.0f, 1e-7);
  ok(pfrt_sqrt(ctx, &tx, &to));
  EXPECT_TRUE(std::isnan(out[3])); // sqrt(-100): NaN, not an error
}

TEST_F(ElementwiseTest, NegIntegers) {
  Tensor<int8_t> x({3}, {1, -128, 127}), out({3});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_neg(ctx, &tx, &to));
  EXPECT_EQ(out.data, (std::vector<int8_t>{-1, -128, -127}));
}

TEST_F(ElementwiseTest, Gelu) {
  Tensor<float> x = random<float>({4, 50000}, -8, 8, 6);
  Tensor<float> exact(x.dims), approx(x.dims);
  pfrt_tensor tx = x.desc(), te = exact.desc(), ta = approx.desc();
  ok(pfrt_gelu(ctx, &tx, PFRT_GELU_EXACT, &te));
  ok(pfrt_gelu(ctx, &tx, PFRT_GELU_TANH, &ta));
  for (int64_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double e = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double t =
        0.5 * v *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    // The absolute term covers the far negative tail, where 1 + erf(v)
    // cancels and f32 keeps only the erf approximation's error.
    ASSERT_NEAR(exact[i], e, 2e-6 * std::fabs(e) + 1e-6) << v;
    ASSERT_NEAR(approx[i], t, 2e-6 * std::fabs(t) + 1e-6) << v;
  }
  Tensor<double> xd({3}, {-1, 0.5, 2}), od({3});
  pfrt_tensor txd = xd.desc(), tod = od.desc();
  ok(pfrt_gelu(ctx, &txd, PFRT_GELU_EXACT, &tod));
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(od[i], 0.5 * xd[i] * (1 + std::erf(xd[i] / std::sqrt(2.0))),
                1e-15);
}

} // namespace
