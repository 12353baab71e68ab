//===- IndexingTest.cpp - gather_nd, scatter_nd, cumsum, trilu, reduce max/min,
//                        is_nan / is_inf -------------------------------------===//

#include "RuntimeTestUtil.h"

#include <cmath>
#include <limits>

using namespace pfrt_test;

namespace {

using IndexingTest = RuntimeTest;

TEST_F(IndexingTest, GatherNDSlicesAndElements) {
  // data [2, 2, 3]; tuples of length 1 pick [2, 3] slices, of length 3 elements.
  Tensor<float> data({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor<int64_t> rows({2, 1}, {1, -2}); // -2 is row 0
  Tensor<float> out({2, 2, 3});
  pfrt_tensor td = data.desc(), ti = rows.desc(), to = out.desc();
  ok(pfrt_gather_nd(ctx, &td, &ti, 0, &to));
  EXPECT_EQ(out.data, (std::vector<float>{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5}));

  Tensor<int32_t> points({2, 3}, {1, 0, 2, 0, 1, -1});
  Tensor<float> picked({2});
  pfrt_tensor tp = points.desc(), tk = picked.desc();
  ok(pfrt_gather_nd(ctx, &td, &tp, 0, &tk));
  EXPECT_EQ(picked.data, (std::vector<float>{8, 5}));
}

TEST_F(IndexingTest, GatherNDBatchDims) {
  // batch_dims 1: each batch indexes its own [2, 3] matrix.
  Tensor<float> data({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor<int64_t> idx({2, 1, 2}, {1, 2, 0, 0});
  Tensor<float> out({2, 1});
  pfrt_tensor td = data.desc(), ti = idx.desc(), to = out.desc();
  ok(pfrt_gather_nd(ctx, &td, &ti, 1, &to));
  EXPECT_EQ(out.data, (std::vector<float>{5, 6}));
}

TEST_F(IndexingTest, GatherNDErrors) {
  Tensor<float> data({2, 3}), out({1});
  Tensor<int64_t> bad({1, 2}, {0, 3}), wide({1, 3}, {0, 0, 0});
  Tensor<float> fidx({1, 2});
  pfrt_tensor td = data.desc(), tb = bad.desc(), tw = wide.desc(), to = out.desc(),
              tf = fidx.desc();
  fails(pfrt_gather_nd(ctx, &td, &tb, 0, &to), PFRT_INVALID_ARGUMENT, "pfrt_gather_nd");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("index 3"), std::string::npos);
  fails(pfrt_gather_nd(ctx, &td, &tw, 0, &to), PFRT_INVALID_ARGUMENT, "pfrt_gather_nd");
  fails(pfrt_gather_nd(ctx, &td, &tf, 0, &to), PFRT_UNSUPPORTED, "pfrt_gather_nd");
  fails(pfrt_gather_nd(ctx, &td, &tb, 2, &to), PFRT_INVALID_ARGUMENT, "pfrt_gather_nd");
}

TEST_F(IndexingTest, ScatterNDReductions) {
  Tensor<float> data({4}, {1, 2, 3, 4});
  Tensor<int64_t> idx({3, 1}, {1, 3, 1}); // 1 repeats
  Tensor<float> upd({3}, {10, 20, 30});
  struct Case {
    int32_t reduction;
    std::vector<float> want;
  };
  const Case cases[] = {
      {PFRT_SCATTER_NONE, {1, 30, 3, 20}}, // the last update of 1 wins
      {PFRT_SCATTER_ADD, {1, 42, 3, 24}},
      {PFRT_SCATTER_MUL, {1, 600, 3, 80}},
      {PFRT_SCATTER_MAX, {1, 30, 3, 20}},
      {PFRT_SCATTER_MIN, {1, 2, 3, 4}},
  };
  for (const Case &c : cases) {
    Tensor<float> out({4});
    pfrt_tensor td = data.desc(), ti = idx.desc(), tu = upd.desc(), to = out.desc();
    ok(pfrt_scatter_nd(ctx, &td, &ti, &tu, c.reduction, &to));
    EXPECT_EQ(out.data, c.want) << "reduction " << c.reduction;
  }
}

TEST_F(IndexingTest, ScatterNDSlicesInPlace) {
  // out is data itself; tuples of length 1 replace whole rows.
  Tensor<int64_t> data({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor<int32_t> idx({1, 1}, {-1});
  Tensor<int64_t> upd({1, 2}, {7, 8});
  pfrt_tensor td = data.desc(), ti = idx.desc(), tu = upd.desc();
  ok(pfrt_scatter_nd(ctx, &td, &ti, &tu, PFRT_SCATTER_ADD, &td));
  EXPECT_EQ(data.data, (std::vector<int64_t>{0, 1, 2, 3, 11, 13}));
}

TEST_F(IndexingTest, ScatterNDErrors) {
  Tensor<float> data({4}), out({4}), upd({1}), upd2({2});
  Tensor<int64_t> idx({1, 1}, {4});
  Tensor<int64_t> ok1({1, 1}, {0});
  pfrt_tensor td = data.desc(), to = out.desc(), tu = upd.desc(), tu2 = upd2.desc(),
              ti = idx.desc(), tk = ok1.desc();
  fails(pfrt_scatter_nd(ctx, &td, &ti, &tu, PFRT_SCATTER_NONE, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_scatter_nd"); // index 4 of 4
  fails(pfrt_scatter_nd(ctx, &td, &tk, &tu2, PFRT_SCATTER_NONE, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_scatter_nd"); // updates shape
  fails(pfrt_scatter_nd(ctx, &td, &tk, &tu, 9, &to), PFRT_INVALID_ARGUMENT, "pfrt_scatter_nd");
  Tensor<uint8_t> b({4}), bu({1});
  pfrt_tensor tb = b.desc(), tbu = bu.desc();
  fails(pfrt_scatter_nd(ctx, &tb, &tk, &tbu, PFRT_SCATTER_ADD, &tb), PFRT_UNSUPPORTED,
        "pfrt_scatter_nd");
  ok(pfrt_scatter_nd(ctx, &tb, &tk, &tbu, PFRT_SCATTER_NONE, &tb)); // bytes move
}

TEST_F(IndexingTest, CumSumModes) {
  Tensor<double> x({2, 3}, {1, 2, 3, 4, 5, 6});
  struct Case {
    int64_t axis;
    int32_t exclusive, reverse;
    std::vector<double> want;
  };
  const Case cases[] = {
      {1, 0, 0, {1, 3, 6, 4, 9, 15}},
      {-1, 1, 0, {0, 1, 3, 0, 4, 9}},
      {1, 0, 1, {6, 5, 3, 15, 11, 6}},
      {1, 1, 1, {5, 3, 0, 11, 6, 0}},
      {0, 0, 0, {1, 2, 3, 5, 7, 9}},
      {0, 1, 1, {4, 5, 6, 0, 0, 0}},
  };
  for (const Case &c : cases) {
    Tensor<double> out({2, 3});
    pfrt_tensor tx = x.desc(), to = out.desc();
    ok(pfrt_cumsum(ctx, &tx, c.axis, c.exclusive, c.reverse, &to));
    EXPECT_EQ(out.data, c.want) << c.axis << " " << c.exclusive << c.reverse;
  }
  // In place, integers.
  Tensor<int32_t> y({4}, {1, 1, 1, 1});
  pfrt_tensor ty = y.desc();
  ok(pfrt_cumsum(ctx, &ty, 0, 1, 0, &ty));
  EXPECT_EQ(y.data, (std::vector<int32_t>{0, 1, 2, 3}));
  fails(pfrt_cumsum(ctx, &ty, 1, 0, 0, &ty), PFRT_INVALID_ARGUMENT, "pfrt_cumsum");
}

TEST_F(IndexingTest, TriluDiagonals) {
  Tensor<float> x({2, 3, 3});
  for (int64_t i = 0; i < x.size(); ++i)
    x[i] = float(i + 1);
  for (int32_t upper : {0, 1})
    for (int64_t k : {-4, -1, 0, 2, 5}) {
      Tensor<float> out({2, 3, 3});
      pfrt_tensor tx = x.desc(), to = out.desc();
      ok(pfrt_trilu(ctx, &tx, k, upper, &to));
      for (int64_t e = 0; e < x.size(); ++e) {
        int64_t i = (e / 3) % 3, j = e % 3;
        bool keep = upper ? j - i >= k : j - i <= k;
        EXPECT_EQ(out[e], keep ? x[e] : 0.0f) << "upper " << upper << " k " << k << " @" << e;
      }
    }
  Tensor<float> v({3});
  pfrt_tensor tv = v.desc();
  fails(pfrt_trilu(ctx, &tv, 0, 1, &tv), PFRT_INVALID_ARGUMENT, "pfrt_trilu");
}

TEST_F(IndexingTest, ReduceMaxMin) {
  Tensor<float> x({2, 3}, {1, 5, -2, 4, NAN, 0});
  Tensor<float> rowMax({2, 1}), colMin({3});
  const int64_t row[] = {1}, col[] = {0};
  pfrt_tensor tx = x.desc(), tr = rowMax.desc(), tc = colMin.desc();
  ok(pfrt_reduce_max(ctx, &tx, row, 1, 1, &tr));
  EXPECT_EQ(rowMax[0], 5.0f);
  EXPECT_TRUE(std::isnan(rowMax[1])); // NaN propagates
  ok(pfrt_reduce_min(ctx, &tx, col, 1, 0, &tc));
  EXPECT_EQ(colMin[0], 1.0f);
  EXPECT_TRUE(std::isnan(colMin[1]));
  EXPECT_EQ(colMin[2], -2.0f);
  Tensor<int64_t> y({2, 2}, {3, -7, 9, 2});
  Tensor<int64_t> ymin(Dims{});
  pfrt_tensor ty = y.desc(), tym = ymin.desc();
  ok(pfrt_reduce_min(ctx, &ty, nullptr, 0, 0, &tym));
  EXPECT_EQ(ymin[0], -7);
  // Empty reduced set: -inf for max, the highest integer for min.
  Tensor<float> e({2, 0}), emax({2});
  pfrt_tensor te = e.desc(), tem = emax.desc();
  ok(pfrt_reduce_max(ctx, &te, row, 1, 0, &tem));
  EXPECT_EQ(emax[0], -INFINITY);
  Tensor<int32_t> ei({0}), eimin(Dims{});
  pfrt_tensor tei = ei.desc(), teim = eimin.desc();
  ok(pfrt_reduce_min(ctx, &tei, nullptr, 0, 0, &teim));
  EXPECT_EQ(eimin[0], std::numeric_limits<int32_t>::max());
  // Bools: max is any, min is all.
  Tensor<uint8_t> b({2, 2}, {0, 1, 1, 1}), bmax({2}), bmin({2});
  pfrt_tensor tb = b.desc(), tbx = bmax.desc(), tbn = bmin.desc();
  ok(pfrt_reduce_max(ctx, &tb, row, 1, 0, &tbx));
  ok(pfrt_reduce_min(ctx, &tb, row, 1, 0, &tbn));
  EXPECT_EQ(bmax.data, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(bmin.data, (std::vector<uint8_t>{0, 1}));
  // A kept last block (reduce over axis 0 of a wide matrix).
  Tensor<double> w = random<double>({3, 700});
  Tensor<double> wmax({700});
  pfrt_tensor tw = w.desc(), twm = wmax.desc();
  ok(pfrt_reduce_max(ctx, &tw, col, 1, 0, &twm));
  for (int64_t j = 0; j < 700; ++j)
    EXPECT_EQ(wmax[j], std::max({w[j], w[700 + j], w[1400 + j]})) << j;
  Tensor<float> wrong({2});
  pfrt_tensor two = wrong.desc();
  fails(pfrt_reduce_max(ctx, &tx, col, 1, 1, &two), PFRT_INVALID_ARGUMENT, "pfrt_reduce_max");
}

TEST_F(IndexingTest, IsNaNIsInf) {
  Tensor<double> x({5}, {1, NAN, INFINITY, -INFINITY, 0});
  Tensor<uint8_t> nan({5}), inf({5}), neg({5}), pos({5});
  pfrt_tensor tx = x.desc(), tn = nan.desc(), ti = inf.desc(), tneg = neg.desc(),
              tpos = pos.desc();
  ok(pfrt_is_nan(ctx, &tx, &tn));
  ok(pfrt_is_inf(ctx, &tx, 1, 1, &ti));
  ok(pfrt_is_inf(ctx, &tx, 1, 0, &tneg));
  ok(pfrt_is_inf(ctx, &tx, 0, 1, &tpos));
  EXPECT_EQ(nan.data, (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(inf.data, (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(neg.data, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(pos.data, (std::vector<uint8_t>{0, 0, 1, 0, 0}));
  // f16 bits: 1.0, NaN, +inf, -inf.
  Tensor<uint16_t> h({4}, {0x3c00, 0x7e00, 0x7c00, 0xfc00});
  Tensor<uint8_t> hn({4}), hi({4});
  pfrt_tensor th = h.desc(PFRT_F16), thn = hn.desc(), thi = hi.desc();
  ok(pfrt_is_nan(ctx, &th, &thn));
  ok(pfrt_is_inf(ctx, &th, 1, 1, &thi));
  EXPECT_EQ(hn.data, (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(hi.data, (std::vector<uint8_t>{0, 0, 1, 1}));
  Tensor<int32_t> n({5});
  pfrt_tensor tint = n.desc();
  fails(pfrt_is_nan(ctx, &tint, &tn), PFRT_UNSUPPORTED, "pfrt_is_nan");
  fails(pfrt_is_inf(ctx, &tx, 1, 1, &tx), PFRT_INVALID_ARGUMENT, "pfrt_is_inf");
}

} // namespace
