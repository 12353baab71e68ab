//===- Linalg.cpp - matmul, gemm and linear through BLAS -------------------===//
//
// All three reduce to row-major GEMMs. Shapes that flatten into one GEMM
// (a batched activation times one weight matrix) are issued as one call so
// OpenBLAS parallelizes over the big M; truly batched products of small
// matrices (attention scores) run one single-threaded GEMM per OpenMP
// thread instead, because splitting a 128x128 GEMM over many threads costs
// more than it gains.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Blas.h"
#include "FastMath.h"
#include "Kernels.h"
#include "Matmul.h"
#include "Parallel.h"

#include <cstring>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

//===----------------------------- matmul ---------------------------------===//

/// Runs `one(i, threads)` for the `count` GEMMs of shape `g`: small ones one
/// per OpenMP thread (threads == 0: single-threaded BLAS inside the team),
/// larger ones one after the other with every thread.
template <class One>
void forEachGemm(const pfrt_context *ctx, const Gemm &g, int64_t count, One &&one) {
  const int threads = ctx->numThreads;
  if (threads > 1 && count > 1 && g.m * g.n * g.k < kSmallGemm) {
    setBlasThreads(1);
#pragma omp parallel num_threads(threads)
    {
      DenormalsAreZero ftz;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i)
        one(i, 0);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    one(i, threads);
}

template <class T>
void batchedMatmul(const pfrt_context *ctx, const Gemm &g,
                   const BroadcastPlan &plan, const T *a, const T *b, T *out) {
  const int64_t count = plan.numel;
  const int64_t aSize = g.m * g.k, bSize = g.k * g.n, outSize = g.m * g.n;
  auto matrixOffsets = [&](int64_t index, int64_t &ia, int64_t &ib) {
    ia = ib = 0;
    for (int32_t d = plan.rank - 1; d >= 0; --d) {
      const int64_t i = index % plan.dims[d];
      index /= plan.dims[d];
      ia += i * plan.strides[0][d];
      ib += i * plan.strides[1][d];
    }
  };
  if (outSize == 0)
    return;
  if (g.k == 0) { // empty contraction: zeros (see gemm())
    std::memset(out, 0, sizeof(T) * outSize * count);
    return;
  }
  // threads == 0: inside the team below, one thread per GEMM.
  auto one = [&](int64_t index, int threads) {
    int64_t ia, ib;
    matrixOffsets(index, ia, ib);
    gemmWith(threads, g, a + ia * aSize, b + ib * bSize,
             out + index * outSize);
  };
  forEachGemm(ctx, g, count, one);
}

template <class T>
void runMatmul(const pfrt_context *ctx, const Gemm &g, const MatmulOperand &lhs,
               const MatmulOperand &rhs, const Shape &batch, const T *a,
               const T *b, T *out) {
  // b without (non-trivial) batch: every batch of a times one matrix is one
  // GEMM over all rows of a.
  if (rhs.batch.numel() == 1) {
    Gemm flat = g;
    flat.m = lhs.batch.numel() * g.m;
    gemm(ctx, flat, a, b, out);
    return;
  }
  Shape batches[2] = {lhs.batch, rhs.batch};
  // The plan's strides count whole matrices of a and b.
  BroadcastPlan plan = planBroadcast(batch, batches, 2);
  batchedMatmul(ctx, g, plan, a, b, out);
}

//===------------------------- matmul_permuted -----------------------------===//
//
// Attention's head split and merge are transposes around batched matmuls
// ([B,S,H,D] -> [B,H,S,D] and back). Read through the permutation, each
// (batch, head) matrix is still a BLAS matrix with a leading dimension (its
// rows H*D apart), so the product runs on the tensors as they lie and no
// transpose is copied.

/// A matmul operand seen through a permutation of a row-major tensor: the
/// logical shape and the element stride of each logical dimension.
struct PermutedOperand {
  Shape dims;
  int64_t strides[PFRT_MAX_RANK] = {};
};

/// `t` read as transpose(t, perm) (perm null: the identity).
pfrt_status permuteOperand(const Call &call, const char *name, const pfrt_tensor &t,
                           const int64_t *perm, PermutedOperand &out) {
  int64_t physical[PFRT_MAX_RANK];
  contiguousStrides(Shape::of(t), physical);
  bool seen[PFRT_MAX_RANK] = {};
  out.dims.rank = 0;
  for (int32_t i = 0; i < t.rank; ++i) {
    const int64_t p = perm ? perm[i] : i;
    if (p < 0 || p >= t.rank || seen[p])
      return call.fail(PFRT_INVALID_ARGUMENT, "%s is not a permutation of %d axes", name, t.rank);
    seen[p] = true;
    out.dims.push(t.shape[p]);
    out.strides[i] = physical[p];
  }
  return PFRT_OK;
}

/// The BLAS view of the last two logical dimensions: row-major with a
/// leading dimension (trans = false) or column-major (trans = true); false
/// when neither has unit stride.
bool blasMatrix(const PermutedOperand &op, bool &trans, int64_t &ld) {
  const int32_t r = op.dims.rank - 2, c = op.dims.rank - 1;
  const int64_t rows = op.dims.dims[r], cols = op.dims.dims[c];
  if (op.strides[c] == 1 || cols == 1) {
    trans = false;
    ld = op.strides[r] > cols ? op.strides[r] : cols;
    return op.strides[r] >= cols || rows == 1;
  }
  if (op.strides[r] == 1 || rows == 1) {
    trans = true;
    ld = op.strides[c] > rows ? op.strides[c] : rows;
    return op.strides[c] >= rows || cols == 1;
  }
  return false;
}

template <class T>
void permutedMatmul(const pfrt_context *ctx, const Gemm &g, const StridedIndex &aBatch,
                    const StridedIndex &bBatch, const StridedIndex &outBatch, const T *a,
                    const T *b, T *out) {
  const int64_t count = outBatch.count();
  auto one = [&](int64_t i, int threads) {
    gemmWith(threads, g, a + aBatch.offset(i), b + bBatch.offset(i), out + outBatch.offset(i));
  };
  forEachGemm(ctx, g, count, one);
}

//===----------------------------- linear_gelu -----------------------------===//

/// One row of gelu(y + bias), in place: pfrt_gelu's arithmetic on the sum
/// (which is rounded as the unfused linear's beta = 1 GEMM rounds it, up to
/// where the GEMM adds C).
template <class T>
inline void biasGeluRow(T *y, const T *bias, int64_t n, bool exact) {
  const T half = T(0.5), invSqrt2 = T(0.70710678118654752440);
  const T sqrt2OverPi = T(0.79788456080286535588), cubic = T(0.044715);
  if (exact) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = bias ? y[i] + bias[i] : y[i];
      y[i] = half * v * (T(1) + erfOf(v * invSqrt2));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T v = bias ? y[i] + bias[i] : y[i];
    y[i] = half * v * (T(1) + tanhOf(sqrt2OverPi * (v + cubic * v * v * v)));
  }
}

PFRT_VECTOR_CLONES void biasGeluRowF32(float *y, const float *bias, int64_t n, bool exact) {
  biasGeluRow(y, bias, n, exact);
}

void biasGeluRowOf(float *y, const float *bias, int64_t n, bool exact) {
  biasGeluRowF32(y, bias, n, exact);
}
void biasGeluRowOf(double *y, const double *bias, int64_t n, bool exact) {
  biasGeluRow(y, bias, n, exact);
}

} // namespace

extern "C" {

pfrt_status pfrt_matmul_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                            const pfrt_tensor *b, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_matmul");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  PFRT_TRY(call.rankIn("a", a, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("b", b, 1, PFRT_MAX_RANK));
  MatmulOperand lhs = splitMatmulOperand(*a, true), rhs = splitMatmulOperand(*b, false);
  Shape batch, expected;
  PFRT_TRY(matmulShapes(call, *a, *b, lhs, rhs, batch, expected));
  PFRT_TRY(call.shapeIs("out", out, expected));
  Gemm g;
  g.m = lhs.rows;
  g.n = rhs.cols;
  g.k = lhs.cols;
  Gemm flat = g;
  flat.m *= lhs.batch.numel();
  PFRT_TRY(checkBlasDims(call, flat));
  visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    runMatmul(ctx, g, lhs, rhs, batch, static_cast<const T *>(a->data),
              static_cast<const T *>(b->data), static_cast<T *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_gemm_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                          const pfrt_tensor *b, const pfrt_tensor *c, double alpha,
                          double beta, int32_t trans_a, int32_t trans_b,
                          const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gemm");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.optionalTensor("c", c));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  PFRT_TRY(call.rankIn("a", a, 2, 2));
  PFRT_TRY(call.rankIn("b", b, 2, 2));
  Gemm g;
  g.transA = trans_a != 0;
  g.transB = trans_b != 0;
  g.m = a->shape[g.transA ? 1 : 0];
  g.k = a->shape[g.transA ? 0 : 1];
  const int64_t kb = b->shape[g.transB ? 1 : 0];
  g.n = b->shape[g.transB ? 0 : 1];
  if (kb != g.k)
    return call.fail(PFRT_INVALID_ARGUMENT, "contraction dimensions differ: "
                     "op(a) has K = %lld, op(b) has K = %lld",
                     static_cast<long long>(g.k), static_cast<long long>(kb));
  Shape outShape;
  outShape.push(g.m);
  outShape.push(g.n);
  PFRT_TRY(call.shapeIs("out", out, outShape));
  PFRT_TRY(checkBlasDims(call, g));
  if (c) {
    PFRT_TRY(call.dtypeIs("c", c, a->dtype));
    if (!broadcastsTo(Shape::of(*c), outShape))
      return call.fail(PFRT_INVALID_ARGUMENT, "c of shape %s does not "
                       "broadcast to %s", ShapeStr(Shape::of(*c)).c_str(),
                       ShapeStr(outShape).c_str());
  }
  g.alpha = alpha;
  g.beta = 0;
  if (c && beta != 0) {
    // out = c (broadcast) first, then the GEMM accumulates onto it.
    broadcastCopy(ctx, *c, outShape, out->data);
    g.beta = beta;
  }
  visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm(ctx, g, static_cast<const T *>(a->data),
         static_cast<const T *>(b->data), static_cast<T *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_linear_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                            const pfrt_tensor *w, const pfrt_tensor *bias,
                            int32_t w_transposed, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_linear");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("w", w));
  PFRT_TRY(call.optionalTensor("bias", bias));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("w", w, x->dtype));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("w", w, 2, 2));
  Gemm g;
  g.transB = w_transposed != 0;
  g.k = x->shape[x->rank - 1];
  const int64_t wIn = w->shape[g.transB ? 1 : 0];
  g.n = w->shape[g.transB ? 0 : 1];
  if (wIn != g.k)
    return call.fail(PFRT_INVALID_ARGUMENT, "x has %lld input features but w "
                     "%s (%s) expects %lld", static_cast<long long>(g.k),
                     ShapeStr(Shape::of(*w)).c_str(),
                     g.transB ? "[out, in]" : "[in, out]",
                     static_cast<long long>(wIn));
  Shape outShape = Shape::of(*x);
  outShape.dims[outShape.rank - 1] = g.n;
  PFRT_TRY(call.shapeIs("out", out, outShape));
  g.m = product(Shape::of(*x), 0, x->rank - 1);
  PFRT_TRY(checkBlasDims(call, g));
  if (bias) {
    PFRT_TRY(call.dtypeIs("bias", bias, x->dtype));
    Shape biasShape;
    biasShape.push(g.n);
    PFRT_TRY(call.shapeIs("bias", bias, biasShape));
    broadcastCopy(ctx, *bias, outShape, out->data);
    g.beta = 1;
  }
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm(ctx, g, static_cast<const T *>(x->data),
         static_cast<const T *>(w->data), static_cast<T *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_matmul_permuted_cpu(pfrt_context *ctx, const pfrt_tensor *a, const int64_t *a_perm,
                                     const pfrt_tensor *b, const int64_t *b_perm,
                                     const int64_t *out_perm, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_matmul_permuted");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  PFRT_TRY(call.rankIn("a", a, 2, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("b", b, a->rank, a->rank));
  PFRT_TRY(call.rankIn("out", out, a->rank, a->rank));
  PermutedOperand lhs, rhs, product;
  PFRT_TRY(permuteOperand(call, "a_perm", *a, a_perm, lhs));
  PFRT_TRY(permuteOperand(call, "b_perm", *b, b_perm, rhs));
  const int32_t rank = a->rank;
  Shape batch;
  for (int32_t i = 0; i + 2 < rank; ++i)
    batch.push(lhs.dims.dims[i]);
  for (int32_t i = 0; i + 2 < rank; ++i)
    if (rhs.dims.dims[i] != batch.dims[i])
      return call.fail(PFRT_INVALID_ARGUMENT,
                       "batch dimensions differ: a_perm(a) %s, "
                       "b_perm(b) %s",
                       ShapeStr(lhs.dims).c_str(), ShapeStr(rhs.dims).c_str());
  Gemm g;
  g.m = lhs.dims.dims[rank - 2];
  g.k = lhs.dims.dims[rank - 1];
  g.n = rhs.dims.dims[rank - 1];
  if (rhs.dims.dims[rank - 2] != g.k)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "contraction dimensions differ: a_perm(a) %s, "
                     "b_perm(b) %s",
                     ShapeStr(lhs.dims).c_str(), ShapeStr(rhs.dims).c_str());
  // out = out_perm(C): out's axis i is C's axis out_perm[i].
  Shape logical = batch;
  logical.push(g.m);
  logical.push(g.n);
  Shape expected;
  int64_t physical[PFRT_MAX_RANK];
  contiguousStrides(Shape::of(*out), physical);
  bool seen[PFRT_MAX_RANK] = {};
  product.dims = logical;
  for (int32_t i = 0; i < rank; ++i) {
    const int64_t p = out_perm ? out_perm[i] : i;
    if (p < 0 || p >= rank || seen[p])
      return call.fail(PFRT_INVALID_ARGUMENT, "out_perm is not a permutation of %d axes", rank);
    seen[p] = true;
    expected.push(logical.dims[p]);
    product.strides[p] = physical[i];
  }
  PFRT_TRY(call.shapeIs("out", out, expected));
  bool outTrans = false;
  int64_t ldc = 0;
  if (!blasMatrix(lhs, g.transA, g.lda) || !blasMatrix(rhs, g.transB, g.ldb) ||
      !blasMatrix(product, outTrans, ldc) || outTrans)
    return call.fail(PFRT_UNSUPPORTED,
                     "the permutations leave a matrix without a unit-stride "
                     "dimension (a_perm(a) or b_perm(b)) or the product's columns strided");
  g.ldc = ldc;
  PFRT_TRY(checkBlasDims(call, g));
  if (exceedsBlasInt(g.lda, g.ldb, g.ldc))
    return call.fail(PFRT_UNSUPPORTED, "leading dimensions exceed the BLAS int range");
  if (expected.numel() == 0)
    return PFRT_OK;
  StridedIndex aBatch, bBatch, outBatch;
  for (int32_t i = 0; i + 2 < rank; ++i) {
    aBatch.push(batch.dims[i], lhs.strides[i]);
    bBatch.push(batch.dims[i], rhs.strides[i]);
    outBatch.push(batch.dims[i], product.strides[i]);
  }
  visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    permutedMatmul(ctx, g, aBatch, bBatch, outBatch, static_cast<const T *>(a->data),
                   static_cast<const T *>(b->data), static_cast<T *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_linear_gelu_cpu(pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *w,
                                 const pfrt_tensor *bias, int32_t w_transposed,
                                 int32_t approximation, const pfrt_tensor *out) {
  if (approximation != PFRT_GELU_EXACT && approximation != PFRT_GELU_TANH) {
    Call call(ctx, "pfrt_linear_gelu");
    PFRT_TRY(call.begin());
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown GELU approximation %d", approximation);
  }
  // The product alone (pfrt_linear checks every argument), then the bias
  // and the GELU in one pass over each row.
  if (bias) {
    Call call(ctx, "pfrt_linear_gelu");
    PFRT_TRY(call.begin());
    PFRT_TRY(call.tensor("bias", bias));
    PFRT_TRY(call.tensor("w", w));
    PFRT_TRY(call.rankIn("w", w, 2, 2));
    PFRT_TRY(call.dtypeIs("bias", bias, w->dtype));
    Shape biasShape;
    biasShape.push(w->shape[w_transposed ? 0 : 1]);
    PFRT_TRY(call.shapeIs("bias", bias, biasShape));
  }
  PFRT_TRY(pfrt_linear_cpu(ctx, x, w, nullptr, w_transposed, out));
  const int64_t n = out->shape[out->rank - 1];
  const int64_t rows = n ? Shape::of(*out).numel() / n : 0;
  const bool exact = approximation == PFRT_GELU_EXACT;
  visitFloat(out->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *y = static_cast<T *>(out->data);
    const T *b = bias ? static_cast<const T *>(bias->data) : nullptr;
    parallelFor(ctx, rows, 8 * n, [&](int64_t r) { biasGeluRowOf(y + r * n, b, n, exact); });
  });
  return PFRT_OK;
}

} // extern "C"
