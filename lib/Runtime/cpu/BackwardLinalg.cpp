//===- BackwardLinalg.cpp - Gradients of linear and matmul (GEMMs) ---------===//
//
// linear': over all rows at once, so each gradient is one GEMM (OpenBLAS
// threads over the big dimension); the bias gradient is a column sum.
// matmul': per batch, with the batches an operand was broadcast along
// summed into its gradient by GEMMs with beta = 1 in a fixed order. The
// common cases (an unbatched weight-like operand) flatten into one GEMM.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Blas.h"
#include "Kernels.h"
#include "Matmul.h"
#include "Parallel.h"
#include "Training.h"

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

/// Maps a linear index over the output batch to an operand's batch index.
struct BatchMap {
  Shape out;
  int64_t strides[PFRT_MAX_RANK] = {}; // operand strides aligned to out, 0
                                       // where broadcast
  BatchMap(const Shape &outBatch, const Shape &operand) : out(outBatch) {
    int64_t natural[PFRT_MAX_RANK];
    contiguousStrides(operand, natural);
    const int32_t shift = out.rank - operand.rank;
    for (int32_t d = 0; d < out.rank; ++d) {
      const int32_t j = d - shift;
      strides[d] = (j >= 0 && operand.dims[j] != 1) ? natural[j] : 0;
    }
  }
  int64_t operator()(int64_t linear) const {
    int64_t index = 0;
    for (int32_t d = out.rank - 1; d >= 0; --d) {
      index += (linear % out.dims[d]) * strides[d];
      linear /= out.dims[d];
    }
    return index;
  }
};

/// The output batches that read operand batch k: out linear index =
/// kept.offset(k) + reduced.offset(r) for r < reduced.count().
struct Groups {
  StridedIndex kept, reduced;
  Groups(const Shape &outBatch, const Shape &operand) {
    int64_t outStrides[PFRT_MAX_RANK];
    contiguousStrides(outBatch, outStrides);
    const int32_t shift = outBatch.rank - operand.rank;
    for (int32_t d = 0; d < outBatch.rank; ++d) {
      const int32_t j = d - shift;
      const bool broadcast = j < 0 || operand.dims[j] == 1;
      if (outBatch.dims[d] == 1)
        continue;
      (broadcast ? reduced : kept).push(outBatch.dims[d], outStrides[d]);
    }
  }
};

/// grad[k] = (acc ? grad[k] : 0) + sum over the out batches o reading
/// operand batch k of gemm(o); `one(o, dst, beta, threads)` runs the GEMM
/// of out batch o into dst with the given beta.
template <class T, class One>
void groupedGemms(const pfrt_context *ctx, const Groups &groups,
                  int64_t gradSize, T *grad, bool acc, int64_t work,
                  One &&one) {
  const int64_t count = groups.kept.count(), members = groups.reduced.count();
  auto group = [&](int64_t k, int threads) {
    T *dst = grad + k * gradSize;
    for (int64_t r = 0; r < members; ++r)
      one(groups.kept.offset(k) + groups.reduced.offset(r), dst,
          (acc || r > 0) ? 1.0 : 0.0, threads);
    if (members == 0 && !acc) // an empty output batch dimension
      for (int64_t i = 0; i < gradSize; ++i)
        dst[i] = T(0);
  };
  const int threads = ctx->numThreads;
  if (threads > 1 && count > 1 && work < kSmallGemm) {
    setBlasThreads(1); // once, before the team; 0 below leaves it alone
#pragma omp parallel num_threads(threads)
    {
      DenormalsAreZero ftz;
#pragma omp for schedule(static)
      for (int64_t k = 0; k < count; ++k)
        group(k, 0);
    }
    return;
  }
  for (int64_t k = 0; k < count; ++k)
    group(k, threads);
}

template <class T>
void matmulGrads(const pfrt_context *ctx, const MatmulOperand &lhs,
                 const MatmulOperand &rhs, const Shape &batch, const T *a,
                 const T *b, const T *dy, T *ga, T *gb, bool accA,
                 bool accB) {
  const int64_t m = lhs.rows, k = lhs.cols, n = rhs.cols;
  const int64_t outBatches = batch.numel();
  const int64_t aBatches = lhs.batch.numel(), bBatches = rhs.batch.numel();
  const BatchMap mapA(batch, lhs.batch), mapB(batch, rhs.batch);
  if (ga) {
    Gemm g; // ga[M,K] = dy[M,N] . b[K,N]^T
    g.transB = true;
    g.m = m;
    g.n = k;
    g.k = n;
    if (bBatches == 1 && aBatches == outBatches) {
      g.m = m * outBatches; // one GEMM over all rows
      g.beta = accA ? 1 : 0;
      gemm(ctx, g, dy, b, ga);
    } else {
      groupedGemms(ctx, Groups(batch, lhs.batch), m * k, ga, accA, m * n * k,
                   [&](int64_t o, T *dst, double beta, int threads) {
                     Gemm h = g;
                     h.beta = beta;
                     gemmWith(threads, h, dy + o * m * n,
                              b + mapB(o) * k * n, dst);
                   });
    }
  }
  if (gb) {
    Gemm g; // gb[K,N] = a[M,K]^T . dy[M,N]
    g.transA = true;
    g.m = k;
    g.n = n;
    g.k = m;
    if (bBatches == 1 && aBatches == outBatches) {
      g.k = m * outBatches; // sum over all batches in the contraction
      g.beta = accB ? 1 : 0;
      gemm(ctx, g, a, dy, gb);
    } else {
      groupedGemms(ctx, Groups(batch, rhs.batch), k * n, gb, accB, m * n * k,
                   [&](int64_t o, T *dst, double beta, int threads) {
                     Gemm h = g;
                     h.beta = beta;
                     gemmWith(threads, h, a + mapA(o) * m * k,
                              dy + o * m * n, dst);
                   });
    }
  }
}

} // namespace

extern "C" {

pfrt_status pfrt_linear_backward_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                     const pfrt_tensor *w,
                                     const pfrt_tensor *grad_out,
                                     int32_t w_transposed, int32_t accumulate_x,
                                     int32_t accumulate_params,
                                     const pfrt_tensor *grad_x,
                                     const pfrt_tensor *grad_w,
                                     const pfrt_tensor *grad_bias) {
  Call call(ctx, "pfrt_linear_backward");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("w", w));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("w", w, x->dtype));
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("w", w, 2, 2));
  const bool transposed = w_transposed != 0;
  const int64_t in = x->shape[x->rank - 1];
  const int64_t wIn = w->shape[transposed ? 1 : 0];
  const int64_t out = w->shape[transposed ? 0 : 1];
  if (wIn != in)
    return call.fail(PFRT_INVALID_ARGUMENT, "x has %lld input features but w "
                     "%s (%s) expects %lld", static_cast<long long>(in),
                     ShapeStr(Shape::of(*w)).c_str(),
                     transposed ? "[out, in]" : "[in, out]",
                     static_cast<long long>(wIn));
  Shape dyShape = Shape::of(*x);
  dyShape.dims[dyShape.rank - 1] = out;
  PFRT_TRY(call.shapeIs("grad_out", grad_out, dyShape));
  if (grad_x)
    PFRT_TRY(floatLike(call, "grad_x", grad_x, x->dtype, Shape::of(*x)));
  if (grad_w)
    PFRT_TRY(floatLike(call, "grad_w", grad_w, x->dtype, Shape::of(*w)));
  if (grad_bias) {
    Shape biasShape;
    biasShape.push(out);
    PFRT_TRY(floatLike(call, "grad_bias", grad_bias, x->dtype, biasShape));
  }
  const int64_t rows = product(Shape::of(*x), 0, x->rank - 1);
  if (exceedsBlasInt(rows, in, out))
    return call.fail(PFRT_UNSUPPORTED, "GEMM dimensions %lld x %lld x %lld "
                     "exceed the BLAS int range", static_cast<long long>(rows),
                     static_cast<long long>(in), static_cast<long long>(out));
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x->data);
    const T *pw = static_cast<const T *>(w->data);
    const T *pd = static_cast<const T *>(grad_out->data);
    if (grad_x) {
      Gemm g; // dx[rows, in] = dy[rows, out] . op(w), op(w) [out, in]
      g.m = rows;
      g.n = in;
      g.k = out;
      g.transB = !transposed;
      g.beta = accumulate_x ? 1 : 0;
      gemm(ctx, g, pd, pw, static_cast<T *>(grad_x->data));
    }
    if (grad_w) {
      Gemm g; // [in, out]: x^T . dy;  [out, in]: dy^T . x
      g.transA = true;
      g.m = transposed ? out : in;
      g.n = transposed ? in : out;
      g.k = rows;
      g.beta = accumulate_params ? 1 : 0;
      gemm(ctx, g, transposed ? pd : px, transposed ? px : pd,
           static_cast<T *>(grad_w->data));
    }
  });
  if (grad_bias) {
    bool isReduced[PFRT_MAX_RANK] = {};
    for (int32_t d = 0; d + 1 < grad_out->rank; ++d)
      isReduced[d] = true;
    reduceSumInto(ctx, *grad_out, isReduced, grad_bias->data, 1.0,
                  accumulate_params != 0);
  }
  return PFRT_OK;
}

pfrt_status pfrt_matmul_backward_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                                     const pfrt_tensor *b,
                                     const pfrt_tensor *grad_out,
                                     int32_t accumulate_a, int32_t accumulate_b,
                                     const pfrt_tensor *grad_a,
                                     const pfrt_tensor *grad_b) {
  Call call(ctx, "pfrt_matmul_backward");
  PFRT_TRY(call.begin());
  MatmulBackwardShapes shapes;
  PFRT_TRY(checkMatmulBackward(call, a, b, grad_out, grad_a, grad_b, shapes));
  const MatmulOperand &lhs = shapes.lhs, &rhs = shapes.rhs;
  const Shape &batch = shapes.batch;
  visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    matmulGrads(ctx, lhs, rhs, batch, static_cast<const T *>(a->data),
                static_cast<const T *>(b->data),
                static_cast<const T *>(grad_out->data),
                grad_a ? static_cast<T *>(grad_a->data) : nullptr,
                grad_b ? static_cast<T *>(grad_b->data) : nullptr,
                accumulate_a != 0, accumulate_b != 0);
  });
  return PFRT_OK;
}

} // extern "C"
