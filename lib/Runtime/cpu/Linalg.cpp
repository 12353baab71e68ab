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
#include "Kernels.h"
#include "Matmul.h"
#include "Parallel.h"

#include <cstring>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

//===----------------------------- matmul ---------------------------------===//


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

} // extern "C"
