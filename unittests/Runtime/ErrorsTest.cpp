//===- ErrorsTest.cpp - Every validation path returns a status + message ---===//
//
// The runtime never aborts on bad input: each case below must come back
// with the documented status and a message naming the function.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace pfrt_test;

namespace {

class ErrorsTest : public RuntimeTest {
protected:
  Tensor<float> a = random<float>({2, 3}), b = random<float>({2, 3}),
                out = Tensor<float>({2, 3});
  pfrt_tensor ta = a.desc(), tb = b.desc(), to = out.desc();
};

TEST_F(ErrorsTest, MalformedDescriptors) {
  fails(pfrt_add(ctx, nullptr, &tb, &to), PFRT_INVALID_ARGUMENT, "pfrt_add");
  fails(pfrt_add(ctx, &ta, &tb, nullptr), PFRT_INVALID_ARGUMENT, "pfrt_add");

  pfrt_tensor noData = ta;
  noData.data = nullptr;
  fails(pfrt_add(ctx, &noData, &tb, &to), PFRT_INVALID_ARGUMENT, "pfrt_add");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("NULL data"),
            std::string::npos);

  pfrt_tensor badRank = ta;
  badRank.rank = PFRT_MAX_RANK + 1;
  fails(pfrt_exp(ctx, &badRank, &to), PFRT_INVALID_ARGUMENT, "pfrt_exp");
  badRank.rank = -1;
  fails(pfrt_exp(ctx, &badRank, &to), PFRT_INVALID_ARGUMENT, "pfrt_exp");

  pfrt_tensor unknown = ta;
  unknown.dtype = 0; // a zero-initialized descriptor is never f32
  fails(pfrt_exp(ctx, &unknown, &to), PFRT_INVALID_ARGUMENT, "pfrt_exp");

  pfrt_tensor negative = ta;
  negative.shape[1] = -3;
  fails(pfrt_copy(ctx, &negative, &to), PFRT_INVALID_ARGUMENT, "pfrt_copy");

  pfrt_tensor huge = ta;
  huge.rank = 4;
  for (int i = 0; i < 4; ++i)
    huge.shape[i] = int64_t(1) << 20;
  fails(pfrt_copy(ctx, &huge, &to), PFRT_INVALID_ARGUMENT, "pfrt_copy");
}

TEST_F(ErrorsTest, ShapeAndDtypeMismatches) {
  Tensor<float> c = random<float>({4});
  pfrt_tensor tc = c.desc();
  fails(pfrt_mul(ctx, &ta, &tc, &to), PFRT_INVALID_ARGUMENT, "pfrt_mul");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("broadcast"),
            std::string::npos);

  Tensor<float> wrong({3, 2});
  pfrt_tensor tw = wrong.desc();
  fails(pfrt_sub(ctx, &ta, &tb, &tw), PFRT_INVALID_ARGUMENT, "pfrt_sub");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("[2, 3]"),
            std::string::npos)
      << pfrt_last_error(ctx);

  Tensor<double> d({2, 3});
  pfrt_tensor td = d.desc();
  fails(pfrt_add(ctx, &ta, &td, &to), PFRT_INVALID_ARGUMENT, "pfrt_add");
  fails(pfrt_add(ctx, &ta, &tb, &td), PFRT_INVALID_ARGUMENT, "pfrt_add");
  Tensor<float> notBool({2, 3});
  pfrt_tensor tnb = notBool.desc();
  fails(pfrt_equal(ctx, &ta, &tb, &tnb), PFRT_INVALID_ARGUMENT, "pfrt_equal");
  fails(pfrt_where(ctx, &ta, &ta, &tb, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_where");
}

TEST_F(ErrorsTest, UnsupportedDtypes) {
  Tensor<uint16_t> h({2, 3});
  pfrt_tensor th = h.desc(PFRT_F16);
  fails(pfrt_add(ctx, &th, &th, &th), PFRT_UNSUPPORTED, "pfrt_add");
  fails(pfrt_softmax(ctx, &th, -1, &th), PFRT_UNSUPPORTED, "pfrt_softmax");
  fails(pfrt_matmul(ctx, &th, &th, &th), PFRT_UNSUPPORTED, "pfrt_matmul");
  Tensor<int32_t> i({2, 3});
  pfrt_tensor ti = i.desc();
  fails(pfrt_pow(ctx, &ti, &ti, &ti), PFRT_UNSUPPORTED, "pfrt_pow");
  fails(pfrt_exp(ctx, &ti, &ti), PFRT_UNSUPPORTED, "pfrt_exp");
  fails(pfrt_gelu(ctx, &ti, PFRT_GELU_EXACT, &ti), PFRT_UNSUPPORTED,
        "pfrt_gelu");
  fails(pfrt_gather(ctx, &ta, &ta, 0, &to), PFRT_UNSUPPORTED, "pfrt_gather");
  Tensor<uint8_t> bl({2, 3});
  pfrt_tensor tbl = bl.desc();
  fails(pfrt_reduce_sum(ctx, &tbl, nullptr, 0, 1, &tbl), PFRT_UNSUPPORTED,
        "pfrt_reduce_sum");
}

TEST_F(ErrorsTest, BadAxes) {
  fails(pfrt_softmax(ctx, &ta, 2, &to), PFRT_INVALID_ARGUMENT, "pfrt_softmax");
  fails(pfrt_softmax(ctx, &ta, -3, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_softmax");
  Tensor<float> scale({3});
  pfrt_tensor ts = scale.desc();
  fails(pfrt_layer_norm(ctx, &ta, &ts, nullptr, 5, 1e-5, &to, nullptr,
                        nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm");
  Tensor<int64_t> idx({1}, {0});
  pfrt_tensor tidx = idx.desc();
  fails(pfrt_gather(ctx, &ta, &tidx, 2, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_gather");
  pfrt_tensor parts[] = {ta, tb};
  fails(pfrt_concat(ctx, parts, 2, 7, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_concat");
  const int64_t axes[] = {0, -2};
  Tensor<float> r({3});
  pfrt_tensor tr = r.desc();
  fails(pfrt_reduce_sum(ctx, &ta, axes, 2, 0, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_reduce_sum");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("repeated"),
            std::string::npos);
  const int64_t far[] = {9};
  fails(pfrt_reduce_mean(ctx, &ta, far, 1, 0, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_reduce_mean");
  fails(pfrt_reduce_mean(ctx, &ta, nullptr, 1, 0, &tr), PFRT_INVALID_ARGUMENT,
        "pfrt_reduce_mean");
  const int64_t badPerm[] = {0, 0}, shortPerm[] = {1};
  Tensor<float> t32({3, 2});
  pfrt_tensor tt = t32.desc();
  fails(pfrt_transpose(ctx, &ta, badPerm, 2, &tt), PFRT_INVALID_ARGUMENT,
        "pfrt_transpose");
  fails(pfrt_transpose(ctx, &ta, shortPerm, 1, &tt), PFRT_INVALID_ARGUMENT,
        "pfrt_transpose");
}

TEST_F(ErrorsTest, GatherIndexOutOfRange) {
  Tensor<int32_t> idx({2}, {1, -3});
  pfrt_tensor tidx = idx.desc();
  Tensor<float> o({2, 3});
  pfrt_tensor tout = o.desc();
  fails(pfrt_gather(ctx, &ta, &tidx, 0, &tout), PFRT_INVALID_ARGUMENT,
        "pfrt_gather");
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("-3"), std::string::npos);
}

TEST_F(ErrorsTest, LinalgMismatches) {
  Tensor<float> k4({4, 5});
  pfrt_tensor tk = k4.desc();
  Tensor<float> o({2, 5});
  pfrt_tensor tout = o.desc();
  fails(pfrt_matmul(ctx, &ta, &tk, &tout), PFRT_INVALID_ARGUMENT,
        "pfrt_matmul");
  Tensor<float> s{Dims{}};
  pfrt_tensor tsc = s.desc();
  fails(pfrt_matmul(ctx, &tsc, &tk, &tout), PFRT_INVALID_ARGUMENT,
        "pfrt_matmul");
  Tensor<float> b1({2, 3, 4}), b2({3, 4, 5}), bo({3, 3, 5});
  pfrt_tensor t1 = b1.desc(), t2 = b2.desc(), tbo = bo.desc();
  Tensor<float> m1({2, 3, 4}), m2({2, 4, 5}), mo({2, 3, 6});
  pfrt_tensor tm1 = m1.desc(), tm2 = m2.desc(), tmo = mo.desc();
  fails(pfrt_matmul(ctx, &t1, &t2, &tbo), PFRT_INVALID_ARGUMENT,
        "pfrt_matmul"); // batch 2 vs 3
  fails(pfrt_matmul(ctx, &tm1, &tm2, &tmo), PFRT_INVALID_ARGUMENT,
        "pfrt_matmul"); // out shape
  fails(pfrt_gemm(ctx, &ta, &tk, nullptr, 1, 0, 0, 0, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_gemm");
  fails(pfrt_gemm(ctx, &t1, &tk, nullptr, 1, 0, 0, 0, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_gemm"); // rank 3
  Tensor<float> w({3, 5}), c({4});
  pfrt_tensor tw = w.desc(), tcc = c.desc();
  fails(pfrt_gemm(ctx, &ta, &tw, &tcc, 1, 1, 0, 0, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_gemm"); // c does not broadcast
  fails(pfrt_linear(ctx, &ta, &tw, nullptr, 1, &tout), PFRT_INVALID_ARGUMENT,
        "pfrt_linear"); // [out, in] would need w [5, 3]
  Tensor<float> bias({4});
  pfrt_tensor tbias = bias.desc();
  fails(pfrt_linear(ctx, &ta, &tw, &tbias, 0, &tout), PFRT_INVALID_ARGUMENT,
        "pfrt_linear");
}

TEST_F(ErrorsTest, NormalizationArguments) {
  Tensor<float> scale({2}), stats({5});
  pfrt_tensor ts = scale.desc(), tst = stats.desc();
  fails(pfrt_layer_norm(ctx, &ta, &ts, nullptr, -1, 1e-5, &to, nullptr,
                        nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm"); // scale [2] vs [3]
  Tensor<float> good({3});
  pfrt_tensor tg = good.desc();
  fails(pfrt_layer_norm(ctx, &ta, &tg, nullptr, -1, -1.0, &to, nullptr,
                        nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm"); // epsilon
  fails(pfrt_layer_norm(ctx, &ta, &tg, nullptr, -1, 1e-5, &to, &tst, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm"); // mean shape
  fails(pfrt_layer_norm(ctx, &ta, nullptr, nullptr, -1, 1e-5, &to, nullptr,
                        nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_layer_norm");
  fails(pfrt_gelu(ctx, &ta, 7, &to), PFRT_INVALID_ARGUMENT, "pfrt_gelu");
}

TEST_F(ErrorsTest, DataMovementArguments) {
  const int64_t starts[] = {0}, ends[] = {1}, zero[] = {0}, axes[] = {0, 0};
  Tensor<float> o({1, 3});
  pfrt_tensor tout = o.desc();
  fails(pfrt_slice(ctx, &ta, starts, ends, nullptr, zero, 1, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_slice"); // step 0
  const int64_t s2[] = {0, 0}, e2[] = {1, 1};
  fails(pfrt_slice(ctx, &ta, s2, e2, axes, nullptr, 2, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_slice"); // repeated axis
  fails(pfrt_slice(ctx, &ta, nullptr, ends, nullptr, nullptr, 1, &tout),
        PFRT_INVALID_ARGUMENT, "pfrt_slice");
  fails(pfrt_slice(ctx, &ta, starts, ends, nullptr, nullptr, 1, &to),
        PFRT_INVALID_ARGUMENT, "pfrt_slice"); // out shape [2, 3] vs [1, 3]

  fails(pfrt_concat(ctx, nullptr, 1, 0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_concat");
  fails(pfrt_concat(ctx, &ta, 0, 0, &to), PFRT_INVALID_ARGUMENT,
        "pfrt_concat");
  Tensor<float> wide({2, 4});
  pfrt_tensor parts[] = {ta, wide.desc()};
  Tensor<float> o2({4, 3});
  pfrt_tensor to2 = o2.desc();
  fails(pfrt_concat(ctx, parts, 2, 0, &to2), PFRT_INVALID_ARGUMENT,
        "pfrt_concat");
  pfrt_tensor same[] = {ta, tb};
  Tensor<float> o3({5, 3});
  pfrt_tensor to3 = o3.desc();
  fails(pfrt_concat(ctx, same, 2, 0, &to3), PFRT_INVALID_ARGUMENT,
        "pfrt_concat"); // 4 rows into 5

  Tensor<float> e({3, 3});
  pfrt_tensor te = e.desc();
  fails(pfrt_expand(ctx, &ta, &te), PFRT_INVALID_ARGUMENT, "pfrt_expand");
  fails(pfrt_cast(ctx, &ta, &te), PFRT_INVALID_ARGUMENT, "pfrt_cast");
  fails(pfrt_reshape(ctx, &ta, &te), PFRT_INVALID_ARGUMENT, "pfrt_reshape");
  Tensor<int32_t> i({2, 3});
  pfrt_tensor ti = i.desc();
  fails(pfrt_copy(ctx, &ta, &ti), PFRT_INVALID_ARGUMENT, "pfrt_copy");
  fails(pfrt_fill(ctx, nullptr, 1.0), PFRT_INVALID_ARGUMENT, "pfrt_fill");
}

TEST_F(ErrorsTest, MessagesAreReplacedNotAppended) {
  fails(pfrt_add(ctx, nullptr, &tb, &to), PFRT_INVALID_ARGUMENT, "pfrt_add");
  fails(pfrt_exp(ctx, nullptr, &to), PFRT_INVALID_ARGUMENT, "pfrt_exp");
  EXPECT_EQ(std::string(pfrt_last_error(ctx)).find("pfrt_add"),
            std::string::npos);
}

} // namespace
