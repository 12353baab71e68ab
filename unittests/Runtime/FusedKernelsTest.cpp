//===- FusedKernelsTest.cpp - the inference fusions against unfused kernels ===//
//
// pfrt_softmax_scaled_masked, pfrt_add_layer_norm, pfrt_matmul_permuted and
// pfrt_linear_gelu are checked against the kernel sequences they replace
// (div/mul + add + softmax, add + layer_norm, transposes + matmul +
// transpose, linear + gelu), at BERT's shapes and at odd ones.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <limits>

using namespace pfrt_test;

namespace {

using FusedKernelsTest = RuntimeTest;

/// softmax(x * scale + mask) by the unfused kernels: mul by a scalar, add,
/// softmax over the last axis.
template <class T>
Tensor<T> unfusedSoftmax(pfrt_context *ctx, Tensor<T> &x, Tensor<T> *mask, T scale) {
  Tensor<T> s({}, {scale}), scaled(x.dims), out(x.dims);
  pfrt_tensor tx = x.desc(), ts = s.desc(), tsc = scaled.desc(), to = out.desc();
  EXPECT_EQ(pfrt_mul(ctx, &tx, &ts, &tsc), PFRT_OK);
  if (mask) {
    pfrt_tensor tm = mask->desc();
    EXPECT_EQ(pfrt_add(ctx, &tsc, &tm, &tsc), PFRT_OK);
  }
  EXPECT_EQ(pfrt_softmax(ctx, &tsc, -1, &to), PFRT_OK);
  return out;
}

TEST_F(FusedKernelsTest, ScaledMaskedSoftmaxMatchesUnfusedAtBertShapes) {
  // [B, H, S, S] scores, the [B, 1, 1, S] mask with -10000 on padding.
  Tensor<float> x = random<float>({2, 3, 128, 128}, -20, 20, 1);
  Tensor<float> mask({2, 1, 1, 128});
  for (int64_t i = 0; i < mask.size(); ++i)
    mask[i] = (i % 128) >= 100 + 10 * (i / 128) ? -10000.0f : 0.0f;
  Tensor<float> out(x.dims);
  pfrt_tensor tx = x.desc(), tm = mask.desc(), to = out.desc();
  ok(pfrt_softmax_scaled_masked(ctx, &tx, &tm, 0.125, &to));
  Tensor<float> ref = unfusedSoftmax(ctx, x, &mask, 0.125f);
  // Same row arithmetic; only the order of the row sum may differ (wider
  // vectors).
  EXPECT_LT(maxAbsDiff(out.data, ref.data), 1e-6);
  // Masked keys get nothing.
  EXPECT_EQ(out[127], 0.0f);
}

TEST_F(FusedKernelsTest, ScaledMaskedSoftmaxBroadcastsAndOmitsTheMask) {
  // A mask of lower rank varying along the rows and the columns ([S, S]
  // against [B, S, S]), one constant per row ([B, S, 1]), and none; f64 too.
  Tensor<double> x = random<double>({3, 5, 7}, -3, 3, 2);
  Tensor<double> rowsCols = random<double>({5, 7}, -2, 2, 3);
  Tensor<double> perRow = random<double>({3, 5, 1}, -2, 2, 4);
  for (Tensor<double> *mask : {&rowsCols, &perRow, static_cast<Tensor<double> *>(nullptr)}) {
    Tensor<double> out(x.dims);
    pfrt_tensor tx = x.desc(), to = out.desc();
    pfrt_tensor tm = mask ? mask->desc() : pfrt_tensor{};
    ok(pfrt_softmax_scaled_masked(ctx, &tx, mask ? &tm : nullptr, 0.3, &to));
    Tensor<double> ref = unfusedSoftmax(ctx, x, mask, 0.3);
    EXPECT_LT(maxAbsDiff(out.data, ref.data), 1e-15);
  }
}

TEST_F(FusedKernelsTest, ScaledMaskedSoftmaxRejectsBadArguments) {
  Tensor<float> x = random<float>({2, 4}, -1, 1, 5), out({2, 4}), mask({3, 4});
  pfrt_tensor tx = x.desc(), to = out.desc(), tm = mask.desc();
  fails(pfrt_softmax_scaled_masked(ctx, &tx, &tm, 1.0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_softmax_scaled_masked");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("does not broadcast"), std::string::npos);
  fails(pfrt_softmax_scaled_masked(ctx, &tx, nullptr, std::numeric_limits<double>::infinity(), &to),
        PFRT_INVALID_ARGUMENT, "pfrt_softmax_scaled_masked");
  Tensor<double> maskF64({4});
  pfrt_tensor td = maskF64.desc();
  fails(pfrt_softmax_scaled_masked(ctx, &tx, &td, 1.0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_softmax_scaled_masked");
}

TEST_F(FusedKernelsTest, AddLayerNormMatchesAddThenLayerNorm) {
  Tensor<float> x = random<float>({4, 33, 768}, -3, 3, 6);
  Tensor<float> r = random<float>({4, 33, 768}, -3, 3, 7);
  Tensor<float> g = random<float>({768}, 0.5, 1.5, 8), b = random<float>({768}, -1, 1, 9);
  Tensor<float> out(x.dims), sum(x.dims), ref(x.dims);
  pfrt_tensor tx = x.desc(), tr = r.desc(), tg = g.desc(), tb = b.desc(), to = out.desc(),
              ts = sum.desc(), tref = ref.desc();
  ok(pfrt_add_layer_norm(ctx, &tx, &tr, &tg, &tb, -1, 1e-12, &to));
  ok(pfrt_add(ctx, &tx, &tr, &ts));
  ok(pfrt_layer_norm(ctx, &ts, &tg, &tb, -1, 1e-12, &tref, nullptr, nullptr));
  EXPECT_LT(maxAbsDiff(out.data, ref.data), 1e-5);
  // In place over x, without a bias, f64.
  Tensor<double> xd = random<double>({6, 10}, -1, 1, 10), rd = random<double>({6, 10}, -1, 1, 11);
  Tensor<double> gd = random<double>({10}, 0.5, 1.5, 12), sumd(xd.dims), refd(xd.dims);
  pfrt_tensor txd = xd.desc(), trd = rd.desc(), tgd = gd.desc(), tsd = sumd.desc(),
              trefd = refd.desc();
  ok(pfrt_add(ctx, &txd, &trd, &tsd));
  ok(pfrt_layer_norm(ctx, &tsd, &tgd, nullptr, 1, 1e-5, &trefd, nullptr, nullptr));
  ok(pfrt_add_layer_norm(ctx, &txd, &trd, &tgd, nullptr, 1, 1e-5, &txd));
  EXPECT_LT(maxAbsDiff(xd.data, refd.data), 1e-14);
  Tensor<float> short_r({4, 33, 767});
  pfrt_tensor tsr = short_r.desc();
  fails(pfrt_add_layer_norm(ctx, &tx, &tsr, &tg, &tb, -1, 1e-12, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_add_layer_norm");
}

/// transpose(x, perm) by the transpose kernel.
template <class T>
Tensor<T> transposed(pfrt_context *ctx, Tensor<T> &x, const Dims &perm) {
  Dims dims;
  for (int64_t p : perm)
    dims.push_back(x.dims[p]);
  Tensor<T> out(dims);
  pfrt_tensor tx = x.desc(), to = out.desc();
  EXPECT_EQ(pfrt_transpose(ctx, &tx, perm.data(), int32_t(perm.size()), &to), PFRT_OK);
  return out;
}

TEST_F(FusedKernelsTest, PermutedMatmulIsAttentionWithoutTransposes) {
  // BERT-base's heads at batch 2: q, k, v are [B, S, H, D].
  const int64_t B = 2, S = 128, H = 12, D = 64;
  Tensor<float> q = random<float>({B, S, H, D}, -1, 1, 13);
  Tensor<float> k = random<float>({B, S, H, D}, -1, 1, 14);
  Tensor<float> v = random<float>({B, S, H, D}, -1, 1, 15);
  const Dims split = {0, 2, 1, 3}, splitT = {0, 2, 3, 1};
  // Scores: q as [B,H,S,D] times k as [B,H,D,S].
  Tensor<float> scores({B, H, S, S});
  pfrt_tensor tq = q.desc(), tk = k.desc(), ts = scores.desc();
  ok(pfrt_matmul_permuted(ctx, &tq, split.data(), &tk, splitT.data(), nullptr, &ts));
  Tensor<float> qt = transposed(ctx, q, split), kt = transposed(ctx, k, splitT);
  Tensor<float> ref({B, H, S, S});
  pfrt_tensor tqt = qt.desc(), tkt = kt.desc(), tref = ref.desc();
  ok(pfrt_matmul(ctx, &tqt, &tkt, &tref));
  EXPECT_LT(maxAbsDiff(scores.data, ref.data), 1e-4);
  // Context: scores times v as [B,H,S,D], written back as [B,S,H,D].
  Tensor<float> context({B, S, H, D});
  pfrt_tensor tv = v.desc(), tc = context.desc();
  ok(pfrt_matmul_permuted(ctx, &ts, nullptr, &tv, split.data(), split.data(), &tc));
  Tensor<float> vt = transposed(ctx, v, split), product({B, H, S, D});
  pfrt_tensor tvt = vt.desc(), tp = product.desc();
  ok(pfrt_matmul(ctx, &ts, &tvt, &tp));
  Tensor<float> merged = transposed(ctx, product, split);
  EXPECT_LT(maxAbsDiff(context.data, merged.data), 1e-3);
}

TEST_F(FusedKernelsTest, PermutedMatmulSmallDoubleAndRefusals) {
  // Rank 3, f64, a column-major lhs ([K, B, M] read as [B, M, K]).
  Tensor<double> a = random<double>({40, 3, 30}, -1, 1, 16);
  Tensor<double> b = random<double>({3, 40, 50}, -1, 1, 17);
  const Dims aPerm = {1, 2, 0};
  Tensor<double> out({3, 30, 50});
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
  ok(pfrt_matmul_permuted(ctx, &ta, aPerm.data(), &tb, nullptr, nullptr, &to));
  Tensor<double> at = transposed(ctx, a, aPerm), ref({3, 30, 50});
  pfrt_tensor tat = at.desc(), tref = ref.desc();
  ok(pfrt_matmul(ctx, &tat, &tb, &tref));
  EXPECT_LT(maxAbsDiff(out.data, ref.data), 1e-12);
  // [4,2,3] read as [3,2,4]: neither matrix dimension has unit stride.
  Tensor<float> x = random<float>({4, 2, 3}, -1, 1, 18), y = random<float>({3, 4, 5}), z({3, 2, 5});
  const Dims bad = {2, 1, 0};
  pfrt_tensor tx = x.desc(), ty = y.desc(), tz = z.desc();
  fails(pfrt_matmul_permuted(ctx, &tx, bad.data(), &ty, nullptr, nullptr, &tz), PFRT_UNSUPPORTED,
        "pfrt_matmul_permuted");
  const Dims notPerm = {0, 0, 1};
  fails(pfrt_matmul_permuted(ctx, &tx, notPerm.data(), &ty, nullptr, nullptr, &tz),
        PFRT_INVALID_ARGUMENT, "pfrt_matmul_permuted");
  Tensor<float> wrong({3, 2, 4});
  pfrt_tensor tw = wrong.desc();
  fails(pfrt_matmul_permuted(ctx, &tx, nullptr, &ty, nullptr, nullptr, &tw), PFRT_INVALID_ARGUMENT,
        "pfrt_matmul_permuted");
}

TEST_F(FusedKernelsTest, LinearGeluMatchesLinearThenGelu) {
  // BERT's intermediate layer at 64 tokens: [64, 768] x W[3072, 768]^T + b.
  Tensor<float> x = random<float>({2, 32, 768}, -1, 1, 19);
  Tensor<float> w = random<float>({3072, 768}, -0.05, 0.05, 20);
  Tensor<float> b = random<float>({3072}, -1, 1, 21);
  for (int32_t approximation : {PFRT_GELU_EXACT, PFRT_GELU_TANH}) {
    Tensor<float> out({2, 32, 3072}), linear({2, 32, 3072}), ref({2, 32, 3072});
    pfrt_tensor tx = x.desc(), tw = w.desc(), tb = b.desc(), to = out.desc(), tl = linear.desc(),
                tr = ref.desc();
    ok(pfrt_linear_gelu(ctx, &tx, &tw, &tb, 1, approximation, &to));
    ok(pfrt_linear(ctx, &tx, &tw, &tb, 1, &tl));
    ok(pfrt_gelu(ctx, &tl, approximation, &tr));
    // The bias joins the product at another point of the GEMM's sum.
    EXPECT_LT(maxAbsDiff(out.data, ref.data), 1e-5) << approximation;
  }
  // f64, no bias, [in, out] weight: exactly the unfused result.
  Tensor<double> xd = random<double>({5, 7}, -2, 2, 22), wd = random<double>({7, 3}, -1, 1, 23);
  Tensor<double> outd({5, 3}), refd({5, 3});
  pfrt_tensor txd = xd.desc(), twd = wd.desc(), tod = outd.desc(), trd = refd.desc();
  ok(pfrt_linear_gelu(ctx, &txd, &twd, nullptr, 0, PFRT_GELU_EXACT, &tod));
  ok(pfrt_linear(ctx, &txd, &twd, nullptr, 0, &trd));
  ok(pfrt_gelu(ctx, &trd, PFRT_GELU_EXACT, &trd));
  EXPECT_EQ(maxAbsDiff(outd.data, refd.data), 0.0);
  // A bias of the wrong size, an unknown approximation.
  Tensor<float> shortBias({3071});
  pfrt_tensor tsb = shortBias.desc(), tx2 = x.desc(), tw2 = w.desc(), tb2 = b.desc();
  Tensor<float> out2({2, 32, 3072});
  pfrt_tensor to2 = out2.desc();
  fails(pfrt_linear_gelu(ctx, &tx2, &tw2, &tsb, 1, PFRT_GELU_EXACT, &to2), PFRT_INVALID_ARGUMENT,
        "pfrt_linear_gelu");
  fails(pfrt_linear_gelu(ctx, &tx2, &tw2, &tb2, 1, 7, &to2), PFRT_INVALID_ARGUMENT,
        "pfrt_linear_gelu");
}

} // namespace
