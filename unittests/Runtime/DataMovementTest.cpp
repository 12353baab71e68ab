//===- DataMovementTest.cpp - transpose, gather, slice, concat, cast, ... --===//

#include "RuntimeTestUtil.h"

#include <limits>
#include <numeric>

using namespace pfrt_test;

namespace {

using DataMovementTest = RuntimeTest;

/// 0, 1, 2, ... so every element is distinguishable.
template <class T> Tensor<T> iota(Dims dims) {
  Tensor<T> t(std::move(dims));
  for (int64_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<T>(i);
  return t;
}

template <class T>
std::vector<T> referenceTranspose(const Tensor<T> &x, const Dims &perm,
                                  Dims &outDims) {
  outDims.clear();
  for (int64_t p : perm)
    outDims.push_back(x.dims[p]);
  Dims xs = stridesOf(x.dims);
  std::vector<T> out(x.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    Dims idx = unravel(i, outDims);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += idx[d] * xs[perm[d]];
    out[i] = x[src];
  }
  return out;
}

TEST_F(DataMovementTest, TransposePermutations) {
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{300, 200}, {1, 0}},          // tiled 2-D transpose
      {{2, 5, 3, 4}, {0, 2, 1, 3}},  // attention heads: contiguous rows
      {{2, 3, 5, 4}, {0, 1, 3, 2}},  // K^T
      {{2, 3, 4}, {2, 0, 1}},
      {{4, 1, 3}, {1, 2, 0}},
      {{7}, {0}},
      {{}, {}},
  };
  for (const auto &[dims, perm] : cases) {
    Tensor<float> x = iota<float>(dims);
    Dims outDims;
    std::vector<float> ref = referenceTranspose(x, perm, outDims);
    Tensor<float> out(outDims);
    pfrt_tensor tx = x.desc(), to = out.desc();
    ok(pfrt_transpose(ctx, &tx, perm.data(), static_cast<int32_t>(perm.size()),
                      &to));
    EXPECT_EQ(out.data, ref) << ::testing::PrintToString(dims);
  }
}

TEST_F(DataMovementTest, TransposeDefaultReversesAndMovesAnyDtype) {
  Tensor<int64_t> x = iota<int64_t>({2, 3, 4});
  Dims outDims;
  std::vector<int64_t> ref = referenceTranspose(x, {2, 1, 0}, outDims);
  Tensor<int64_t> out(outDims);
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_transpose(ctx, &tx, nullptr, 0, &to));
  EXPECT_EQ(out.data, ref);

  Tensor<uint16_t> h = iota<uint16_t>({3, 2}), ho({2, 3});
  pfrt_tensor th = h.desc(PFRT_F16), tho = ho.desc(PFRT_F16);
  const int64_t perm[] = {-1, 0}; // negative entries count from the back
  ok(pfrt_transpose(ctx, &th, perm, 2, &tho));
  EXPECT_EQ(ho.data, (std::vector<uint16_t>{0, 2, 4, 1, 3, 5}));
}

TEST_F(DataMovementTest, GatherEmbeddingAndNegativeIndices) {
  Tensor<float> table = iota<float>({10, 4});
  Tensor<int64_t> ids({2, 3}, {0, 9, -1, 3, -10, 5});
  Tensor<float> out({2, 3, 4});
  pfrt_tensor tt = table.desc(), ti = ids.desc(), to = out.desc();
  ok(pfrt_gather(ctx, &tt, &ti, 0, &to));
  for (int64_t k = 0; k < 6; ++k) {
    int64_t row = ids[k] < 0 ? ids[k] + 10 : ids[k];
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(out[k * 4 + j], table[row * 4 + j]) << k;
  }
}

TEST_F(DataMovementTest, GatherInnerAxisAndScalarIndex) {
  Tensor<int32_t> data = iota<int32_t>({2, 5, 3});
  Tensor<int32_t> idx({2}, {4, -5});
  Tensor<int32_t> out({2, 2, 3});
  pfrt_tensor td = data.desc(), ti = idx.desc(), to = out.desc();
  ok(pfrt_gather(ctx, &td, &ti, 1, &to));
  EXPECT_EQ(out.data, (std::vector<int32_t>{12, 13, 14, 0, 1, 2, 27, 28, 29,
                                            15, 16, 17}));
  // A rank-0 index removes the axis (Shape -> Gather(scalar) in BERT graphs).
  Tensor<int64_t> shape({4}, {8, 128, 12, 64}), one({}, {-3}), dim(Dims{});
  pfrt_tensor ts = shape.desc(), t1 = one.desc(), tdim = dim.desc();
  ok(pfrt_gather(ctx, &ts, &t1, 0, &tdim));
  EXPECT_EQ(dim[0], 128);
}

TEST_F(DataMovementTest, GatherRejectsOutOfRangeBeforeWriting) {
  Tensor<float> table = iota<float>({4, 2});
  Tensor<int64_t> ids({3}, {1, 4, 0});
  Tensor<float> out({3, 2});
  std::fill(out.data.begin(), out.data.end(), -1.0f);
  pfrt_tensor tt = table.desc(), ti = ids.desc(), to = out.desc();
  fails(pfrt_gather(ctx, &tt, &ti, 0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_gather");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("index 4"),
            std::string::npos)
      << pfrt_last_error(ctx);
  for (float v : out.data)
    EXPECT_EQ(v, -1.0f);
  ids[1] = -5;
  fails(pfrt_gather(ctx, &tt, &ti, 0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_gather");
}

/// ONNX-style slice reference: element lists per axis.
TEST_F(DataMovementTest, SliceOnnxNormalization) {
  Tensor<float> x = iota<float>({6, 8});
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<int64_t> rows, cols; // selected indices
  };
  const std::vector<Case> cases = {
      {{1, 2}, {3, 6}, {}, {}, {1, 2}, {2, 3, 4, 5}},
      {{0}, {big}, {1}, {3}, {0, 1, 2, 3, 4, 5}, {0, 3, 6}},
      {{-1}, {small}, {0}, {-2}, {5, 3, 1}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {{-3, 100}, {-1, -100}, {0, 1}, {1, -3}, {3, 4}, {7, 4, 1}},
      {{2}, {2}, {0}, {1}, {}, {0, 1, 2, 3, 4, 5, 6, 7}}, // empty
      {{-100}, {100}, {-1}, {big}, {0, 1, 2, 3, 4, 5}, {0}},
  };
  for (const Case &c : cases) {
    Tensor<float> out({static_cast<int64_t>(c.rows.size()),
                       static_cast<int64_t>(c.cols.size())});
    pfrt_tensor tx = x.desc(), to = out.desc();
    ok(pfrt_slice(ctx, &tx, c.starts.data(), c.ends.data(),
                  c.axes.empty() ? nullptr : c.axes.data(),
                  c.steps.empty() ? nullptr : c.steps.data(),
                  static_cast<int32_t>(c.starts.size()), &to));
    for (size_t i = 0; i < c.rows.size(); ++i)
      for (size_t j = 0; j < c.cols.size(); ++j)
        EXPECT_EQ(out[i * c.cols.size() + j], x[c.rows[i] * 8 + c.cols[j]])
            << ::testing::PrintToString(c.starts);
  }
}

TEST_F(DataMovementTest, SliceThreeDimsBytes) {
  Tensor<int8_t> x = iota<int8_t>({4, 3, 5});
  const int64_t starts[] = {1, 1}, ends[] = {4, 5}, axes[] = {0, 2},
                steps[] = {2, 2};
  Tensor<int8_t> out({2, 3, 2});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_slice(ctx, &tx, starts, ends, axes, steps, 2, &to));
  std::vector<int8_t> want;
  for (int i : {1, 3})
    for (int j = 0; j < 3; ++j)
      for (int k : {1, 3})
        want.push_back(static_cast<int8_t>(i * 15 + j * 5 + k));
  EXPECT_EQ(out.data, want);
}

TEST_F(DataMovementTest, Concat) {
  Tensor<float> a = iota<float>({2, 1, 3}), b = iota<float>({2, 2, 3}),
                c = iota<float>({2, 0, 3});
  for (auto &v : b.data)
    v += 100;
  pfrt_tensor inputs[] = {a.desc(), b.desc(), c.desc()};
  Tensor<float> out({2, 3, 3});
  pfrt_tensor to = out.desc();
  ok(pfrt_concat(ctx, inputs, 3, -2, &to));
  EXPECT_EQ(out.data,
            (std::vector<float>{0, 1, 2, 100, 101, 102, 103, 104, 105, 3, 4, 5,
                                106, 107, 108, 109, 110, 111}));
  // Shape arithmetic: concatenating i64 vectors along axis 0.
  Tensor<int64_t> s1({2}, {8, 128}), s2({1}, {768}), s({3});
  pfrt_tensor ins[] = {s1.desc(), s2.desc()}, ts = s.desc();
  ok(pfrt_concat(ctx, ins, 2, 0, &ts));
  EXPECT_EQ(s.data, (std::vector<int64_t>{8, 128, 768}));
}

TEST_F(DataMovementTest, Expand) {
  Tensor<float> x({3, 1}, {1, 2, 3});
  Tensor<float> out({2, 3, 4});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_expand(ctx, &tx, &to));
  for (int64_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], x[(i / 4) % 3]) << i;
  Tensor<uint8_t> flag({}, {1}), flags({5});
  pfrt_tensor tf = flag.desc(), tfs = flags.desc();
  ok(pfrt_expand(ctx, &tf, &tfs));
  EXPECT_EQ(flags.data, (std::vector<uint8_t>{1, 1, 1, 1, 1}));
}

TEST_F(DataMovementTest, CastFloatToInteger) {
  Tensor<float> x({7}, {1.9f, -1.9f, 3e9f, -3e9f, NAN, 0.0f, 2.5f});
  Tensor<int32_t> out({7});
  pfrt_tensor tx = x.desc(), to = out.desc();
  ok(pfrt_cast(ctx, &tx, &to));
  EXPECT_EQ(out.data, (std::vector<int32_t>{1, -1, INT32_MAX, INT32_MIN, 0, 0,
                                            2}));
  Tensor<uint8_t> b({7});
  pfrt_tensor tb = b.desc();
  ok(pfrt_cast(ctx, &tx, &tb));
  EXPECT_EQ(b.data, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1}));
}

TEST_F(DataMovementTest, CastIntegersAndBool) {
  Tensor<int64_t> x({4}, {-1, 0, 300, 1LL << 40});
  Tensor<double> d({4});
  Tensor<int8_t> i8({4});
  Tensor<uint8_t> b({4});
  pfrt_tensor tx = x.desc(), td = d.desc(), t8 = i8.desc(), tb = b.desc();
  ok(pfrt_cast(ctx, &tx, &td));
  ok(pfrt_cast(ctx, &tx, &t8));
  ok(pfrt_cast(ctx, &tx, &tb));
  EXPECT_EQ(d.data, (std::vector<double>{-1, 0, 300, 1099511627776.0}));
  EXPECT_EQ(i8.data, (std::vector<int8_t>{-1, 0, 44, 0})); // wraps like numpy
  EXPECT_EQ(b.data, (std::vector<uint8_t>{1, 0, 1, 1}));
  Tensor<float> f({4});
  pfrt_tensor tf = f.desc();
  ok(pfrt_cast(ctx, &tb, &tf));
  EXPECT_EQ(f.data, (std::vector<float>{1, 0, 1, 1}));
}

TEST_F(DataMovementTest, CastHalf) {
  // Exactly representable values, rounding ties to even, overflow,
  // subnormals, infinities and NaN.
  Tensor<float> x({10}, {1.0f, -2.5f, 65504.0f, 1e6f, 5.9604645e-8f, 1e-9f,
                         1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, INFINITY,
                         NAN});
  Tensor<uint16_t> h({10});
  pfrt_tensor tx = x.desc(), th = h.desc(PFRT_F16);
  ok(pfrt_cast(ctx, &tx, &th));
  EXPECT_EQ(h.data, (std::vector<uint16_t>{0x3c00, 0xc100, 0x7bff, 0x7c00,
                                           0x0001, 0x0000, 0x3c00, 0x3c02,
                                           0x7c00, h[9]}));
  EXPECT_EQ(h[9] & 0x7c00, 0x7c00);
  EXPECT_NE(h[9] & 0x03ff, 0);
  Tensor<float> back({10});
  pfrt_tensor tback = back.desc();
  ok(pfrt_cast(ctx, &th, &tback));
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[3], INFINITY);
  EXPECT_EQ(back[4], 5.9604645e-8f);
  EXPECT_TRUE(std::isnan(back[9]));
  // Every half value survives f16 -> f32 -> f16.
  Tensor<uint16_t> all({65536}), again({65536});
  for (int i = 0; i < 65536; ++i)
    all[i] = static_cast<uint16_t>(i);
  Tensor<float> wide({65536});
  pfrt_tensor ta = all.desc(PFRT_F16), tw = wide.desc(),
              tg = again.desc(PFRT_F16);
  ok(pfrt_cast(ctx, &ta, &tw));
  ok(pfrt_cast(ctx, &tw, &tg));
  for (int i = 0; i < 65536; ++i) {
    const bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
    if (!nan) {
      ASSERT_EQ(again[i], all[i]) << i;
    }
  }
}

TEST_F(DataMovementTest, CopyReshapeFill) {
  Tensor<float> x = iota<float>({2, 6}), y({3, 4});
  pfrt_tensor tx = x.desc(), ty = y.desc();
  ok(pfrt_reshape(ctx, &tx, &ty));
  EXPECT_EQ(y.data, x.data);
  ok(pfrt_fill(ctx, &ty, -0.5));
  for (float v : y.data)
    EXPECT_EQ(v, -0.5f);
  ok(pfrt_copy(ctx, &tx, &ty));
  EXPECT_EQ(y.data, x.data);
  ok(pfrt_copy(ctx, &tx, &tx)); // onto itself
  Tensor<int64_t> big({3});
  pfrt_tensor tb = big.desc();
  ok(pfrt_fill(ctx, &tb, 9007199254740992.0)); // 2^53
  EXPECT_EQ(big[2], 9007199254740992LL);
  Tensor<uint16_t> h({2});
  pfrt_tensor th = h.desc(PFRT_F16);
  ok(pfrt_fill(ctx, &th, 1.0));
  EXPECT_EQ(h[1], 0x3c00);
}

TEST_F(DataMovementTest, ReadScalar) {
  double v = 0;
  Tensor<float> f({1, 1});
  f[0] = -2.5f;
  pfrt_tensor tf = f.desc();
  ok(pfrt_read_scalar(ctx, &tf, &v));
  EXPECT_EQ(v, -2.5);
  Tensor<int64_t> step(Dims{});
  step[0] = 9007199254740992LL; // 2^53, exact as a double
  pfrt_tensor ts = step.desc();
  ok(pfrt_read_scalar(ctx, &ts, &v));
  EXPECT_EQ(v, 9007199254740992.0);
  Tensor<int8_t> small({1});
  small[0] = -7;
  pfrt_tensor ti = small.desc(PFRT_I8);
  ok(pfrt_read_scalar(ctx, &ti, &v));
  EXPECT_EQ(v, -7.0);
  Tensor<uint8_t> flag({1});
  flag[0] = 1;
  pfrt_tensor tb = flag.desc(PFRT_BOOL);
  ok(pfrt_read_scalar(ctx, &tb, &v));
  EXPECT_EQ(v, 1.0);

  Tensor<float> two({2});
  pfrt_tensor tt = two.desc();
  EXPECT_EQ(pfrt_read_scalar(ctx, &tt, &v), PFRT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("pfrt_read_scalar: x [2] has 2 elements"),
            std::string::npos)
      << pfrt_last_error(ctx);
  Tensor<uint16_t> half({1});
  pfrt_tensor th = half.desc(PFRT_F16);
  EXPECT_EQ(pfrt_read_scalar(ctx, &th, &v), PFRT_UNSUPPORTED);
  EXPECT_EQ(pfrt_read_scalar(ctx, &tf, nullptr), PFRT_INVALID_ARGUMENT);
}

} // namespace
