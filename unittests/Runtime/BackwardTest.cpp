//===- BackwardTest.cpp - Gradient kernels vs references and FD ------------===//
//
// Every backward kernel is checked twice: in f64 against central finite
// differences of the runtime's own forward kernel (L = sum(r * forward(x))
// for a random r, so dL/dy = r is the grad_out), and in f32 on larger
// shapes (the threaded paths) against a naive double reference.
//
//===----------------------------------------------------------------------===//

#include "TrainingTestUtil.h"

using namespace pfrt_test;

namespace {

using BackwardTest = RuntimeTest;

/// Sums grad (of shape full) into the shape `to` (broadcast to full).
std::vector<double> reduceRef(const std::vector<double> &grad, const Dims &full,
                              const Dims &to) {
  std::vector<double> out(numel(to), 0.0);
  for (int64_t i = 0; i < numel(full); ++i)
    out[broadcastIndex(unravel(i, full), to)] += grad[i];
  return out;
}

//===---------------------------- reduce_to_shape -------------------------===//

TEST_F(BackwardTest, ReduceToShape) {
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{2, 3, 4}, {3, 1}},    {{2, 3, 4}, {4}},       {{2, 3, 4}, {}},
      {{2, 3, 4}, {1, 1, 4}}, {{2, 1, 4}, {1, 4}},    {{5, 6}, {5, 6}},
      {{0, 3}, {3}},          {{2, 3, 4}, {2, 1, 4}}, {{64, 128, 96}, {96}},
      {{64, 128, 96}, {64, 1, 96}}, {{64, 128, 96}, {64, 128, 1}}};
  unsigned seed = 100;
  for (const auto &[full, to] : cases) {
    SCOPED_TRACE(testing::PrintToString(full) + " -> " +
                 testing::PrintToString(to));
    Tensor<float> g = random<float>(full, -1, 1, ++seed);
    Tensor<float> out = random<float>(to, -1, 1, ++seed);
    const std::vector<float> before = out.data;
    pfrt_tensor tg = g.desc(), to_ = out.desc();
    ok(pfrt_reduce_to_shape(ctx, &tg, 0, &to_));
    std::vector<double> ref = reduceRef(asDouble(g), full, to);
    EXPECT_LT(relErr(out.data, ref), 1e-5);
    // accumulate adds onto what was there
    ok(pfrt_reduce_to_shape(ctx, &tg, 1, &to_));
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] *= 2;
    EXPECT_LT(relErr(out.data, ref), 1e-5);
    (void)before;
  }
  // f64 exact-ish
  Tensor<double> g = random<double>({3, 4, 5}, -1, 1, 7);
  Tensor<double> out({4, 1});
  pfrt_tensor tg = g.desc(), to_ = out.desc();
  ok(pfrt_reduce_to_shape(ctx, &tg, 0, &to_));
  EXPECT_LT(maxAbsDiff(out.data, reduceRef(g.data, {3, 4, 5}, {4, 1})), 1e-13);
}

//===----------------------------- binary ---------------------------------===//

pfrt_status forwardBinary(pfrt_context *ctx, int kind, const pfrt_tensor *a,
                          const pfrt_tensor *b, const pfrt_tensor *y) {
  switch (kind) {
  case PFRT_BINARY_ADD:
    return pfrt_add(ctx, a, b, y);
  case PFRT_BINARY_SUB:
    return pfrt_sub(ctx, a, b, y);
  case PFRT_BINARY_MUL:
    return pfrt_mul(ctx, a, b, y);
  case PFRT_BINARY_DIV:
    return pfrt_div(ctx, a, b, y);
  default:
    return pfrt_pow(ctx, a, b, y);
  }
}

TEST_F(BackwardTest, BinaryAgainstFiniteDifferences) {
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{3, 1}, {1, 4}},
      {{}, {2, 3}},     {{2, 1, 3}, {2, 3}}};
  unsigned seed = 200;
  for (int kind = PFRT_BINARY_ADD; kind <= PFRT_BINARY_POW; ++kind) {
    for (const auto &[da, db] : shapes) {
      SCOPED_TRACE("kind " + std::to_string(kind) + " " +
                   testing::PrintToString(da) + " " +
                   testing::PrintToString(db));
      // Positive bases for pow and divisors away from 0.
      Tensor<double> a = random<double>(da, 0.5, 2.0, ++seed);
      Tensor<double> b = random<double>(db, kind == PFRT_BINARY_POW ? -1.5 : 0.5,
                                        2.0, ++seed);
      const Dims dy = broadcast(da, db);
      Tensor<double> y(dy), r = random<double>(dy, -1, 1, ++seed);
      pfrt_tensor ta = a.desc(), tb = b.desc(), ty = y.desc(), tr = r.desc();
      Tensor<double> ga(da), gb(db);
      pfrt_tensor tga = ga.desc(), tgb = gb.desc();
      ok(pfrt_binary_backward(ctx, kind, &ta, &tb, &tr, 0, 0, &tga, &tgb));
      auto loss = [&] {
        EXPECT_EQ(forwardBinary(ctx, kind, &ta, &tb, &ty), PFRT_OK);
        return weighted(y.data, r.data);
      };
      EXPECT_LT(relErr(ga.data, numericGradient(a.data, loss)), 1e-7);
      EXPECT_LT(relErr(gb.data, numericGradient(b.data, loss)), 1e-7);
    }
  }
}

TEST_F(BackwardTest, BinaryLargeF32AndAccumulate) {
  // [B, S, H] (op) [H]: the reduced operand needs the workspace path.
  const Dims da = {8, 64, 96}, db = {96};
  unsigned seed = 300;
  for (int kind = PFRT_BINARY_ADD; kind <= PFRT_BINARY_POW; ++kind) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    Tensor<float> a = random<float>(da, 0.5, 2, ++seed);
    Tensor<float> b = random<float>(db, 0.5, 2, ++seed);
    Tensor<float> r = random<float>(da, -1, 1, ++seed);
    Tensor<float> ga = random<float>(da, -1, 1, ++seed);
    Tensor<float> gb = random<float>(db, -1, 1, ++seed);
    const std::vector<float> ga0 = ga.data, gb0 = gb.data;
    std::vector<double> refA(ga.size()), refB(gb.size(), 0.0);
    for (int64_t i = 0; i < a.size(); ++i) {
      const double x = a[i], w = b[i % 96], d = r[i];
      double dA, dB;
      switch (kind) {
      case PFRT_BINARY_ADD: dA = d; dB = d; break;
      case PFRT_BINARY_SUB: dA = d; dB = -d; break;
      case PFRT_BINARY_MUL: dA = d * w; dB = d * x; break;
      case PFRT_BINARY_DIV: dA = d / w; dB = -d * x / (w * w); break;
      default:
        dA = d * w * std::pow(x, w - 1);
        dB = d * std::pow(x, w) * std::log(x);
      }
      refA[i] = ga0[i] + dA;
      refB[i % 96] += dB;
    }
    for (int64_t j = 0; j < 96; ++j)
      refB[j] += gb0[j];
    pfrt_tensor ta = a.desc(), tb = b.desc(), tr = r.desc(), tga = ga.desc(),
                tgb = gb.desc();
    ok(pfrt_binary_backward(ctx, kind, &ta, &tb, &tr, 1, 1, &tga, &tgb));
    EXPECT_LT(relErr(ga.data, refA), 1e-5);
    EXPECT_LT(relErr(gb.data, refB, 10.0), 1e-5);
    // Only one gradient requested.
    Tensor<float> only(db);
    pfrt_tensor to = only.desc();
    ok(pfrt_binary_backward(ctx, kind, &ta, &tb, &tr, 0, 0, nullptr, &to));
    for (int64_t j = 0; j < 96; ++j)
      refB[j] -= gb0[j];
    EXPECT_LT(relErr(only.data, refB, 10.0), 1e-5);
  }
}

TEST_F(BackwardTest, PowConventionsAtZero) {
  // a == 0: da = 0 where b == 0, db = 0 where b >= 0 (PyTorch).
  Tensor<double> a({3}, {0.0, 0.0, 2.0}), b({3}, {0.0, 2.0, 3.0});
  Tensor<double> r({3}, {1.0, 1.0, 1.0}), ga({3}), gb({3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), tr = r.desc(), tga = ga.desc(),
              tgb = gb.desc();
  ok(pfrt_binary_backward(ctx, PFRT_BINARY_POW, &ta, &tb, &tr, 0, 0, &tga,
                          &tgb));
  EXPECT_EQ(ga[0], 0.0);
  EXPECT_EQ(ga[1], 0.0); // 2 * 0^1
  EXPECT_DOUBLE_EQ(ga[2], 3 * 4.0);
  EXPECT_EQ(gb[0], 0.0);
  EXPECT_EQ(gb[1], 0.0);
  EXPECT_DOUBLE_EQ(gb[2], 8 * std::log(2.0));
}

//===------------------------------ unary ---------------------------------===//

TEST_F(BackwardTest, UnaryAgainstFiniteDifferences) {
  using Fwd = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                              const pfrt_tensor *);
  const struct {
    int kind;
    Fwd forward;
    bool takesOutput;
    double lo, hi;
  } ops[] = {{PFRT_UNARY_SQRT, pfrt_sqrt, true, 0.2, 3},
             {PFRT_UNARY_ERF, pfrt_erf, false, -2.5, 2.5},
             {PFRT_UNARY_TANH, pfrt_tanh, true, -3, 3},
             {PFRT_UNARY_EXP, pfrt_exp, true, -3, 3},
             {PFRT_UNARY_NEG, pfrt_neg, false, -3, 3}};
  unsigned seed = 400;
  for (const auto &op : ops) {
    SCOPED_TRACE("kind " + std::to_string(op.kind));
    Tensor<double> x = random<double>({4, 7}, op.lo, op.hi, ++seed);
    Tensor<double> y(x.dims), r = random<double>(x.dims, -1, 1, ++seed);
    Tensor<double> gx(x.dims);
    pfrt_tensor tx = x.desc(), ty = y.desc(), tr = r.desc(), tg = gx.desc();
    ok(op.forward(ctx, &tx, &ty));
    ok(pfrt_unary_backward(ctx, op.kind, op.takesOutput ? &ty : &tx, &tr, 0,
                           &tg));
    auto loss = [&] {
      EXPECT_EQ(op.forward(ctx, &tx, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    EXPECT_LT(relErr(gx.data, numericGradient(x.data, loss)), 1e-7);

    // f32, large, accumulate and in place (grad_in == grad_out).
    Tensor<float> xf = random<float>({300, 257}, op.lo, op.hi, ++seed);
    Tensor<float> yf(xf.dims), rf = random<float>(xf.dims, -1, 1, ++seed);
    pfrt_tensor txf = xf.desc(), tyf = yf.desc(), trf = rf.desc();
    ok(op.forward(ctx, &txf, &tyf));
    std::vector<double> ref(xf.size());
    for (int64_t i = 0; i < xf.size(); ++i) {
      const double v = xf[i], d = rf[i];
      switch (op.kind) {
      case PFRT_UNARY_SQRT: ref[i] = d / (2 * std::sqrt(v)); break;
      case PFRT_UNARY_ERF: ref[i] = d * 2 / std::sqrt(M_PI) * std::exp(-v * v); break;
      case PFRT_UNARY_TANH: ref[i] = d * (1 - std::tanh(v) * std::tanh(v)); break;
      case PFRT_UNARY_EXP: ref[i] = d * std::exp(v); break;
      default: ref[i] = -d;
      }
    }
    ok(pfrt_unary_backward(ctx, op.kind, op.takesOutput ? &tyf : &txf, &trf, 0,
                           &trf));
    EXPECT_LT(relErr(rf.data, ref), 2e-6);
  }
}

TEST_F(BackwardTest, GeluAgainstFiniteDifferences) {
  unsigned seed = 500;
  for (int approx : {PFRT_GELU_EXACT, PFRT_GELU_TANH}) {
    SCOPED_TRACE(approx);
    Tensor<double> x = random<double>({5, 9}, -4, 4, ++seed);
    Tensor<double> y(x.dims), r = random<double>(x.dims, -1, 1, ++seed);
    Tensor<double> gx = random<double>(x.dims, -1, 1, ++seed);
    const std::vector<double> g0 = gx.data;
    pfrt_tensor tx = x.desc(), ty = y.desc(), tr = r.desc(), tg = gx.desc();
    ok(pfrt_gelu_backward(ctx, &tx, &tr, approx, 1, &tg)); // accumulate
    auto loss = [&] {
      EXPECT_EQ(pfrt_gelu(ctx, &tx, approx, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    std::vector<double> fd = numericGradient(x.data, loss);
    for (size_t i = 0; i < fd.size(); ++i)
      fd[i] += g0[i];
    EXPECT_LT(relErr(gx.data, fd), 1e-7);

    // f32 against the closed form in double.
    Tensor<float> xf = random<float>({200, 300}, -6, 6, ++seed);
    Tensor<float> rf = random<float>(xf.dims, -1, 1, ++seed), gf(xf.dims);
    pfrt_tensor txf = xf.desc(), trf = rf.desc(), tgf = gf.desc();
    ok(pfrt_gelu_backward(ctx, &txf, &trf, approx, 0, &tgf));
    std::vector<double> ref(xf.size());
    for (int64_t i = 0; i < xf.size(); ++i) {
      const double v = xf[i];
      double d;
      if (approx == PFRT_GELU_EXACT) {
        d = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
            v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
      } else {
        const double k = std::sqrt(2 / M_PI), c = 0.044715;
        const double t = std::tanh(k * (v + c * v * v * v));
        d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
      }
      ref[i] = d * rf[i];
    }
    // The f32 erf/tanh approximations (relative error ~1e-6) enter
    // through 1 - t^2 near saturation.
    EXPECT_LT(relErr(gf.data, ref), approx == PFRT_GELU_EXACT ? 3e-6 : 1e-5);
  }
}

//===----------------------------- softmax --------------------------------===//

TEST_F(BackwardTest, SoftmaxEveryAxis) {
  unsigned seed = 600;
  for (int64_t axis : {0, 1, 2, -1}) {
    SCOPED_TRACE(axis);
    Tensor<double> x = random<double>({3, 4, 5}, -3, 3, ++seed);
    Tensor<double> y(x.dims), r = random<double>(x.dims, -1, 1, ++seed);
    Tensor<double> gx(x.dims);
    pfrt_tensor tx = x.desc(), ty = y.desc(), tr = r.desc(), tg = gx.desc();
    ok(pfrt_softmax(ctx, &tx, axis, &ty));
    ok(pfrt_softmax_backward(ctx, &ty, &tr, axis, 0, &tg));
    auto loss = [&] {
      EXPECT_EQ(pfrt_softmax(ctx, &tx, axis, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    EXPECT_LT(relErr(gx.data, numericGradient(x.data, loss)), 1e-7);
  }
  // f32, attention-sized, axis -1 (rows) and 1 (strided), in place.
  for (int64_t axis : {-1, 1}) {
    const Dims dims = {4, 128, 130};
    Tensor<float> x = random<float>(dims, -5, 5, ++seed), y(dims);
    Tensor<float> r = random<float>(dims, -1, 1, ++seed);
    pfrt_tensor tx = x.desc(), ty = y.desc(), tr = r.desc();
    ok(pfrt_softmax(ctx, &tx, axis, &ty));
    const int32_t ax = axis < 0 ? 2 : 1;
    const Dims st = stridesOf(dims);
    std::vector<double> ref(x.size());
    for (int64_t i = 0; i < x.size(); ++i) {
      Dims idx = unravel(i, dims);
      double dot = 0;
      for (int64_t k = 0; k < dims[ax]; ++k) {
        const int64_t j = i + (k - idx[ax]) * st[ax];
        dot += double(r[j]) * double(y[j]);
      }
      ref[i] = y[i] * (r[i] - dot);
    }
    ok(pfrt_softmax_backward(ctx, &ty, &tr, axis, 0, &tr)); // in place
    EXPECT_LT(maxAbsDiff(r.data, ref), 1e-6);
  }
}

//===---------------------------- layer norm ------------------------------===//

TEST_F(BackwardTest, LayerNormAgainstFiniteDifferences) {
  unsigned seed = 700;
  for (int64_t axis : {-1, 1}) {
    for (bool givenStats : {false, true}) {
      SCOPED_TRACE("axis " + std::to_string(axis) +
                   (givenStats ? " stats given" : " recomputed"));
      const Dims dims = {3, 4, 6};
      const Dims norm = axis == 1 ? Dims{4, 6} : Dims{6};
      const Dims lead = axis == 1 ? Dims{3} : Dims{3, 4, 1};
      const double eps = 1e-5;
      Tensor<double> x = random<double>(dims, -2, 3, ++seed);
      Tensor<double> scale = random<double>(norm, 0.5, 1.5, ++seed);
      Tensor<double> bias = random<double>(norm, -1, 1, ++seed);
      Tensor<double> y(dims), mean(lead), inv(lead);
      Tensor<double> r = random<double>(dims, -1, 1, ++seed);
      Tensor<double> gx(dims), gs(norm), gb(norm);
      pfrt_tensor tx = x.desc(), ts = scale.desc(), tb = bias.desc(),
                  ty = y.desc(), tm = mean.desc(), ti = inv.desc(),
                  tr = r.desc(), tgx = gx.desc(), tgs = gs.desc(),
                  tgb = gb.desc();
      ok(pfrt_layer_norm(ctx, &tx, &ts, &tb, axis, eps, &ty, &tm, &ti));
      ok(pfrt_layer_norm_backward(ctx, &tx, &ts, givenStats ? &tm : nullptr,
                                  givenStats ? &ti : nullptr, &tr, axis, eps,
                                  0, 0, &tgx, &tgs, &tgb));
      auto loss = [&] {
        EXPECT_EQ(pfrt_layer_norm(ctx, &tx, &ts, &tb, axis, eps, &ty, nullptr,
                                  nullptr),
                  PFRT_OK);
        return weighted(y.data, r.data);
      };
      EXPECT_LT(relErr(gx.data, numericGradient(x.data, loss)), 1e-7);
      EXPECT_LT(relErr(gs.data, numericGradient(scale.data, loss)), 1e-7);
      EXPECT_LT(relErr(gb.data, numericGradient(bias.data, loss)), 1e-7);
    }
  }
}

TEST_F(BackwardTest, LayerNormLargeF32AccumulateInPlace) {
  const int64_t rows = 512, cols = 768;
  Tensor<float> x = random<float>({rows, cols}, 9, 11, 800);
  Tensor<float> scale = random<float>({cols}, 0.5, 1.5, 801);
  Tensor<float> r = random<float>({rows, cols}, -1, 1, 802);
  Tensor<float> gs = random<float>({cols}, -1, 1, 803), gb = gs;
  const std::vector<float> gs0 = gs.data, r0 = r.data;
  // Double reference.
  std::vector<double> rgx(x.size()), rgs(cols), rgb(cols);
  for (int64_t j = 0; j < cols; ++j) {
    rgs[j] = gs0[j];
    rgb[j] = gs0[j];
  }
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j)
      m += x[i * cols + j];
    m /= cols;
    for (int64_t j = 0; j < cols; ++j)
      v += (x[i * cols + j] - m) * (x[i * cols + j] - m);
    const double inv = 1 / std::sqrt(v / cols + 1e-12);
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (x[i * cols + j] - m) * inv, d = r[i * cols + j];
      sg += d * scale[j];
      sgx += d * scale[j] * xh;
      rgs[j] += d * xh;
      rgb[j] += d;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (x[i * cols + j] - m) * inv;
      rgx[i * cols + j] =
          inv * (r[i * cols + j] * scale[j] - sg / cols - xh * sgx / cols);
    }
  }
  pfrt_tensor tx = x.desc(), ts = scale.desc(), tr = r.desc(),
              tgs = gs.desc(), tgb = gb.desc();
  // grad_x written over grad_out; parameters accumulated.
  ok(pfrt_layer_norm_backward(ctx, &tx, &ts, nullptr, nullptr, &tr, -1, 1e-12,
                              0, 1, &tr, &tgs, &tgb));
  EXPECT_LT(relErr(r.data, rgx), 1e-4);
  EXPECT_LT(relErr(gs.data, rgs), 1e-5);
  EXPECT_LT(relErr(gb.data, rgb), 1e-5);
}

//===----------------------------- linear ---------------------------------===//

TEST_F(BackwardTest, LinearAgainstFiniteDifferences) {
  unsigned seed = 900;
  for (int transposed : {0, 1}) {
    SCOPED_TRACE(transposed);
    const int64_t in = 5, out = 4;
    Tensor<double> x = random<double>({2, 3, in}, -1, 1, ++seed);
    Tensor<double> w = random<double>(transposed ? Dims{out, in} : Dims{in, out},
                                      -1, 1, ++seed);
    Tensor<double> b = random<double>({out}, -1, 1, ++seed);
    Tensor<double> y({2, 3, out}), r = random<double>({2, 3, out}, -1, 1, ++seed);
    Tensor<double> gx(x.dims), gw(w.dims), gb(b.dims);
    pfrt_tensor tx = x.desc(), tw = w.desc(), tb = b.desc(), ty = y.desc(),
                tr = r.desc(), tgx = gx.desc(), tgw = gw.desc(),
                tgb = gb.desc();
    ok(pfrt_linear_backward(ctx, &tx, &tw, &tr, transposed, 0, 0, &tgx, &tgw,
                            &tgb));
    auto loss = [&] {
      EXPECT_EQ(pfrt_linear(ctx, &tx, &tw, &tb, transposed, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    EXPECT_LT(relErr(gx.data, numericGradient(x.data, loss)), 1e-7);
    EXPECT_LT(relErr(gw.data, numericGradient(w.data, loss)), 1e-7);
    EXPECT_LT(relErr(gb.data, numericGradient(b.data, loss)), 1e-7);

    // Micro-batch accumulation: a second call with accumulate_params adds;
    // grad_x is overwritten (accumulate_x = 0).
    const std::vector<double> gw1 = gw.data, gb1 = gb.data, gx1 = gx.data;
    ok(pfrt_linear_backward(ctx, &tx, &tw, &tr, transposed, 0, 1, &tgx, &tgw,
                            &tgb));
    for (size_t i = 0; i < gw1.size(); ++i)
      EXPECT_NEAR(gw[i], 2 * gw1[i], 1e-12);
    for (size_t i = 0; i < gb1.size(); ++i)
      EXPECT_NEAR(gb[i], 2 * gb1[i], 1e-12);
    EXPECT_LT(maxAbsDiff(gx.data, gx1), 1e-15);
    // Only dW.
    Tensor<double> only(w.dims);
    pfrt_tensor to = only.desc();
    ok(pfrt_linear_backward(ctx, &tx, &tw, &tr, transposed, 0, 0, nullptr, &to,
                            nullptr));
    EXPECT_LT(maxAbsDiff(only.data, gw1), 1e-14);
  }
}

TEST_F(BackwardTest, LinearLargeF32) {
  const int64_t rows = 256, in = 96, out = 160;
  for (int transposed : {0, 1}) {
    Tensor<float> x = random<float>({rows, in}, -1, 1, 950 + transposed);
    Tensor<float> w = random<float>(transposed ? Dims{out, in} : Dims{in, out},
                                    -1, 1, 960);
    Tensor<float> r = random<float>({rows, out}, -1, 1, 970);
    Tensor<float> gx({rows, in}), gw(w.dims), gb({out});
    pfrt_tensor tx = x.desc(), tw = w.desc(), tr = r.desc(), tgx = gx.desc(),
                tgw = gw.desc(), tgb = gb.desc();
    ok(pfrt_linear_backward(ctx, &tx, &tw, &tr, transposed, 0, 0, &tgx, &tgw,
                            &tgb));
    auto W = [&](int64_t i, int64_t o) {
      return double(transposed ? w[o * in + i] : w[i * out + o]);
    };
    std::vector<double> rx(gx.size(), 0.0), rw(gw.size(), 0.0), rb(out, 0.0);
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t o = 0; o < out; ++o) {
        const double d = r[n * out + o];
        rb[o] += d;
        for (int64_t i = 0; i < in; ++i) {
          rx[n * in + i] += d * W(i, o);
          rw[transposed ? o * in + i : i * out + o] += d * x[n * in + i];
        }
      }
    EXPECT_LT(relErr(gx.data, rx), 1e-5);
    EXPECT_LT(relErr(gw.data, rw), 1e-5);
    EXPECT_LT(relErr(gb.data, rb), 1e-5);
  }
}

//===----------------------------- matmul ---------------------------------===//

TEST_F(BackwardTest, MatmulAgainstFiniteDifferences) {
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{2, 3, 4}, {4, 5}},    {{2, 3, 4}, {2, 4, 5}}, {{3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 5}}, {{4}, {4, 5}},       {{2, 3, 4}, {4}},
      {{4}, {4}},             {{1, 3, 4}, {2, 4, 2}}, {{3, 4}, {4, 2}}};
  unsigned seed = 1000;
  for (const auto &[da, db] : cases) {
    SCOPED_TRACE(testing::PrintToString(da) + " x " +
                 testing::PrintToString(db));
    Tensor<double> a = random<double>(da, -1, 1, ++seed);
    Tensor<double> b = random<double>(db, -1, 1, ++seed);
    // out shape from the forward's rules
    Dims ba(da.begin(), da.size() >= 2 ? da.end() - 2 : da.begin());
    Dims bb(db.begin(), db.size() >= 2 ? db.end() - 2 : db.begin());
    Dims dy = broadcast(ba, bb);
    if (da.size() >= 2)
      dy.push_back(da[da.size() - 2]);
    if (db.size() >= 2)
      dy.push_back(db.back());
    Tensor<double> y(dy), r = random<double>(dy, -1, 1, ++seed);
    Tensor<double> ga = random<double>(da, -1, 1, ++seed);
    Tensor<double> gb = random<double>(db, -1, 1, ++seed);
    const std::vector<double> ga0 = ga.data;
    pfrt_tensor ta = a.desc(), tb = b.desc(), ty = y.desc(), tr = r.desc(),
                tga = ga.desc(), tgb = gb.desc();
    // grad_a accumulates onto its old value, grad_b is overwritten.
    ok(pfrt_matmul_backward(ctx, &ta, &tb, &tr, 1, 0, &tga, &tgb));
    auto loss = [&] {
      EXPECT_EQ(pfrt_matmul(ctx, &ta, &tb, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    std::vector<double> fdA = numericGradient(a.data, loss);
    for (size_t i = 0; i < fdA.size(); ++i)
      fdA[i] += ga0[i];
    EXPECT_LT(relErr(ga.data, fdA), 1e-7);
    EXPECT_LT(relErr(gb.data, numericGradient(b.data, loss)), 1e-7);
  }
}

TEST_F(BackwardTest, MatmulBatchedF32) {
  // Attention-like: [B, H, S, D] x [B, H, D, S] (the grouped, parallel
  // path) and [B, S, H] x [H, O] (flattened into one GEMM).
  unsigned seed = 1100;
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{2, 4, 32, 16}, {2, 4, 16, 32}}, {{4, 32, 48}, {48, 40}},
      {{4, 1, 16, 8}, {3, 8, 12}}};
  for (const auto &[da, db] : cases) {
    SCOPED_TRACE(testing::PrintToString(da));
    Tensor<float> a = random<float>(da, -1, 1, ++seed);
    Tensor<float> b = random<float>(db, -1, 1, ++seed);
    Dims ba(da.begin(), da.end() - 2), bb(db.begin(), db.end() - 2);
    Dims bo = broadcast(ba, bb), dy = bo;
    const int64_t M = da[da.size() - 2], K = da.back(), N = db.back();
    dy.push_back(M);
    dy.push_back(N);
    Tensor<float> r = random<float>(dy, -1, 1, ++seed);
    Tensor<float> ga(da), gb(db);
    pfrt_tensor ta = a.desc(), tb = b.desc(), tr = r.desc(), tga = ga.desc(),
                tgb = gb.desc();
    ok(pfrt_matmul_backward(ctx, &ta, &tb, &tr, 0, 0, &tga, &tgb));
    std::vector<double> ra(ga.size(), 0.0), rb(gb.size(), 0.0);
    for (int64_t o = 0; o < numel(bo); ++o) {
      Dims idx = unravel(o, bo);
      const int64_t ia = broadcastIndex(idx, ba), ib = broadcastIndex(idx, bb);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const double d = r[(o * M + m) * N + n];
          for (int64_t k = 0; k < K; ++k) {
            ra[(ia * M + m) * K + k] += d * b[(ib * K + k) * N + n];
            rb[(ib * K + k) * N + n] += d * a[(ia * M + m) * K + k];
          }
        }
    }
    EXPECT_LT(relErr(ga.data, ra), 1e-5);
    EXPECT_LT(relErr(gb.data, rb), 1e-5);
  }
}

//===----------------------------- gather ---------------------------------===//

TEST_F(BackwardTest, GatherAgainstFiniteDifferences) {
  // Embedding lookup (axis 0, repeated and negative indices) and axis 1.
  struct Case {
    Dims data;
    Dims indexDims;
    std::vector<int64_t> indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{7, 3}, {2, 4}, {0, 3, 3, -1, 6, 0, 2, 3}, 0},
      {{3, 5, 2}, {4}, {4, 0, -5, 2}, 1},
      {{2, 3}, {}, {2}, 1}};
  unsigned seed = 1200;
  for (const auto &c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.data));
    Tensor<double> data = random<double>(c.data, -1, 1, ++seed);
    Tensor<int64_t> idx(c.indexDims, c.indices);
    Dims od(c.data.begin(), c.data.begin() + c.axis);
    od.insert(od.end(), c.indexDims.begin(), c.indexDims.end());
    od.insert(od.end(), c.data.begin() + c.axis + 1, c.data.end());
    Tensor<double> y(od), r = random<double>(od, -1, 1, ++seed);
    Tensor<double> g = random<double>(c.data, -1, 1, ++seed); // overwritten
    pfrt_tensor td = data.desc(), ti = idx.desc(), ty = y.desc(),
                tr = r.desc(), tg = g.desc();
    ok(pfrt_gather_backward(ctx, &ti, &tr, c.axis, 0, &tg));
    auto loss = [&] {
      EXPECT_EQ(pfrt_gather(ctx, &td, &ti, c.axis, &ty), PFRT_OK);
      return weighted(y.data, r.data);
    };
    EXPECT_LT(relErr(g.data, numericGradient(data.data, loss)), 1e-7);
  }
}

TEST_F(BackwardTest, GatherEmbeddingDeterministic) {
  // A vocabulary table with heavily repeated ids; i32 indices; accumulate.
  const int64_t vocab = 1000, hidden = 64, tokens = 4096;
  Tensor<int32_t> ids({8, tokens / 8});
  std::mt19937 gen(1300);
  for (auto &v : ids.data)
    v = int32_t(gen() % 50) * (gen() % 2 ? 1 : 19) % vocab;
  Tensor<float> dy = random<float>({8, tokens / 8, hidden}, -1, 1, 1301);
  Tensor<float> base = random<float>({vocab, hidden}, -1, 1, 1302);
  std::vector<double> ref(base.data.begin(), base.data.end());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < hidden; ++j)
      ref[ids[t] * hidden + j] += dy[t * hidden + j];
  pfrt_tensor ti = ids.desc(), td = dy.desc();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 5}) {
    ScopedContext c(threads);
    ASSERT_NE(c.ctx, nullptr);
    Tensor<float> g = base;
    pfrt_tensor tg = g.desc();
    ASSERT_EQ(pfrt_gather_backward(c.ctx, &ti, &td, 0, 1, &tg), PFRT_OK);
    EXPECT_LT(relErr(g.data, ref), 1e-5);
    results.push_back(g.data);
  }
  // Bitwise identical whatever the thread count.
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

//===------------------------------ errors --------------------------------===//

TEST_F(BackwardTest, Errors) {
  Tensor<float> a = random<float>({2, 3}), b = random<float>({3});
  Tensor<float> g({2, 3}), gb({3}), wrong({2});
  Tensor<double> d({2, 3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), tg = g.desc(), tgb = gb.desc(),
              tw = wrong.desc(), td = d.desc();
  EXPECT_EQ(pfrt_reduce_to_shape(nullptr, &ta, 0, &tb), PFRT_INVALID_ARGUMENT);
  fails(pfrt_reduce_to_shape(ctx, &ta, 0, &tw), PFRT_INVALID_ARGUMENT,
        "pfrt_reduce_to_shape");
  fails(pfrt_reduce_to_shape(ctx, &ta, 0, &td), PFRT_INVALID_ARGUMENT,
        "pfrt_reduce_to_shape");
  fails(pfrt_binary_backward(ctx, 9, &ta, &tb, &tg, 0, 0, &tg, &tgb),
        PFRT_INVALID_ARGUMENT, "pfrt_binary_backward");
  fails(pfrt_binary_backward(ctx, PFRT_BINARY_MUL, &ta, &tb, &tgb, 0, 0, &tg,
                             &tgb),
        PFRT_INVALID_ARGUMENT, "pfrt_binary_backward");
  fails(pfrt_binary_backward(ctx, PFRT_BINARY_MUL, &ta, &tb, &tg, 0, 0, &tgb,
                             nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_binary_backward");
  fails(pfrt_unary_backward(ctx, 42, &ta, &tg, 0, &tg), PFRT_INVALID_ARGUMENT,
        "pfrt_unary_backward");
  fails(pfrt_unary_backward(ctx, PFRT_UNARY_EXP, &ta, &tw, 0, &tg),
        PFRT_INVALID_ARGUMENT, "pfrt_unary_backward");
  fails(pfrt_gelu_backward(ctx, &ta, &tg, 7, 0, &tg), PFRT_INVALID_ARGUMENT,
        "pfrt_gelu_backward");
  fails(pfrt_softmax_backward(ctx, &ta, &tg, 2, 0, &tg), PFRT_INVALID_ARGUMENT,
        "pfrt_softmax_backward");
  Tensor<int32_t> ints({2, 3});
  pfrt_tensor tint = ints.desc();
  fails(pfrt_softmax_backward(ctx, &tint, &tint, 1, 0, &tint),
        PFRT_UNSUPPORTED, "pfrt_softmax_backward");
  // layer_norm: one statistic without the other; wrong scale shape.
  Tensor<float> m({2});
  pfrt_tensor tm = m.desc();
  fails(pfrt_layer_norm_backward(ctx, &ta, &tb, &tm, nullptr, &tg, -1, 1e-5, 0,
                                 0, &tg, nullptr, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm_backward");
  fails(pfrt_layer_norm_backward(ctx, &ta, &tw, nullptr, nullptr, &tg, -1,
                                 1e-5, 0, 0, &tg, nullptr, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm_backward");
  fails(pfrt_layer_norm_backward(ctx, &ta, &tb, nullptr, nullptr, &tg, -1,
                                 -1.0, 0, 0, &tg, nullptr, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm_backward");
  // linear: w does not match x; grad_w of the wrong shape.
  Tensor<float> w({4, 5}), dy({2, 5}), gw({5, 4});
  pfrt_tensor tw2 = w.desc(), tdy = dy.desc(), tgw = gw.desc();
  fails(pfrt_linear_backward(ctx, &ta, &tw2, &tdy, 0, 0, 0, &tg, nullptr,
                             nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_linear_backward");
  Tensor<float> w3({3, 5}), gw3({5, 3});
  pfrt_tensor tw3 = w3.desc(), tgw3 = gw3.desc();
  fails(pfrt_linear_backward(ctx, &ta, &tw3, &tdy, 0, 0, 0, nullptr, &tgw3,
                             nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_linear_backward");
  (void)tgw;
  // matmul: grad_out of the wrong shape.
  Tensor<float> mb({3, 4}), mdy({2, 5});
  pfrt_tensor tmb = mb.desc(), tmdy = mdy.desc();
  fails(pfrt_matmul_backward(ctx, &ta, &tmb, &tmdy, 0, 0, &tg, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_matmul_backward");
  // gather: an index out of range, checked before anything is written.
  Tensor<int64_t> idx({3}, {0, 5, 1});
  Tensor<float> table({5, 2}), gy({3, 2});
  std::fill(table.data.begin(), table.data.end(), 7.0f);
  pfrt_tensor tidx = idx.desc(), ttable = table.desc(), tgy = gy.desc();
  fails(pfrt_gather_backward(ctx, &tidx, &tgy, 0, 0, &ttable),
        PFRT_INVALID_ARGUMENT, "pfrt_gather_backward");
  for (float v : table.data)
    EXPECT_EQ(v, 7.0f);
  fails(pfrt_gather_backward(ctx, &tidx, &tgy, 2, 0, &ttable),
        PFRT_INVALID_ARGUMENT, "pfrt_gather_backward");
}

} // namespace
