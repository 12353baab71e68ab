//===- Linalg.cu - GEMMs (cuBLAS) and K-FAC (SYRK, Cholesky, syevd) --------===//
//
// pf tensors are row-major; cuBLAS is column-major. A row-major C = A B is
// the column-major C^T = B^T A^T, so every GEMM here swaps its operands
// (rowMajorGemm) instead of transposing data. Symmetric K-FAC matrices read
// the same either way; only "which triangle" flips (mirrorUpperToLower).
// Eigenvectors are the exception: syevd returns them column-major (row k
// of the row-major buffer), so pfrt_kfac_eigen transposes them into place.
//
//===----------------------------------------------------------------------===//

#include "../common/TensorChecks.h"
#include "GemmPrecision.h"
#include "KfacMath.h"
#include "Launch.h"

#include <type_traits>
#include <vector>

namespace pfrt::cuda {
namespace {

//===------------------------- cuBLAS by dtype --------------------------===//

/// Which GEMMs may use the context's faster precision
/// (pfrt_context_set_gemm_precision): the model's matmul, gemm and linear
/// (forward and backward); K-FAC's stay exact.
enum class GemmUse { Model, Exact };

/// cuBLAS's compute type of an f32 model GEMM, or none: exact f32.
bool fastCompute(const Call &call, GemmUse use, cublasComputeType_t &type) {
  return use == GemmUse::Model && modelGemmCompute(call, type);
}

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta,
                    cublasOperation_t tb, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb,
                    float beta, float *c, int ldc) {
  return lib().cublasSgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta,
                    cublasOperation_t tb, int m, int n, int k, double alpha,
                    const double *a, int lda, const double *b, int ldb,
                    double beta, double *c, int ldc) {
  return lib().cublasDgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}
cublasStatus_t gemmBatched(cublasHandle_t h, int m, int n, int k,
                           const float *a, int lda, long long sa,
                           const float *b, int ldb, long long sb, float *c,
                           int ldc, long long sc, int batch) {
  const float one = 1, zero = 0;
  return lib().cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                   a, lda, sa, b, ldb, sb, &zero, c, ldc, sc,
                                   batch);
}
cublasStatus_t gemmBatched(cublasHandle_t h, int m, int n, int k,
                           const double *a, int lda, long long sa,
                           const double *b, int ldb, long long sb, double *c,
                           int ldc, long long sc, int batch) {
  const double one = 1, zero = 0;
  return lib().cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                   a, lda, sa, b, ldb, sb, &zero, c, ldc, sc,
                                   batch);
}
cublasStatus_t syrk(cublasHandle_t h, int n, int k, float alpha,
                    const float *a, int lda, float beta, float *c, int ldc) {
  return lib().cublasSsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &alpha, a,
                     lda, &beta, c, ldc);
}
cublasStatus_t syrk(cublasHandle_t h, int n, int k, double alpha,
                    const double *a, int lda, double beta, double *c, int ldc) {
  return lib().cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &alpha, a,
                     lda, &beta, c, ldc);
}

/// Row-major C [M, N] = alpha op(A) op(B) + beta C with op(A) [M, K] and
/// op(B) [K, N]; lda/ldb/ldc are the row lengths of the stored matrices.
template <class T>
pfrt_status rowMajorGemm(const Call &call, bool transA, bool transB, int64_t m, int64_t n,
                         int64_t k, double alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
                         double beta, T *c, int64_t ldc, GemmUse use = GemmUse::Exact) {
  if (m == 0 || n == 0)
    return PFRT_OK;
  if (!fitsInt({m, n, k, lda, ldb, ldc}))
    return call.fail(PFRT_UNSUPPORTED, "a GEMM of %lld x %lld x %lld exceeds "
                     "cuBLAS's int dimensions", static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  // cuBLAS wants lda >= 1 even for empty operands.
  auto ld = [](int64_t v) { return int(v > 0 ? v : 1); };
  cublasComputeType_t compute;
  if (std::is_same_v<T, float> && fastCompute(call, use, compute)) {
    const float fa = float(alpha), fb = float(beta);
    return check(call,
                 lib().cublasGemmEx(stateOf(call.context()).blas,
                                    transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    transA ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &fa,
                                    b, CUDA_R_32F, ld(ldb), a, CUDA_R_32F, ld(lda), &fb, c,
                                    CUDA_R_32F, ld(ldc), compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
  return check(call,
               gemm(stateOf(call.context()).blas, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    transA ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k),
                    T(alpha), b, ld(ldb), a, ld(lda), T(beta), c, ld(ldc)),
               "cublas gemm");
}

//===------------------------------ Helpers ------------------------------===//

/// Row-major mirror of the upper triangle into the lower one (a
/// column-major LOWER result of syrk/potri is row-major UPPER).
template <class T> __global__ void mirrorUpperToLower(int64_t n, int64_t ld, T *a) {
  PFRT_GRID_STRIDE(e, n * n) {
    const int64_t i = e / n, j = e % n;
    if (i > j)
      a[i * ld + j] = a[j * ld + i];
  }
}

/// out[r, j] (+)= sum over rows of x[r, j]: column sums in row order.
template <class T>
__global__ void columnSumKernel(int64_t rows, int64_t cols, bool accumulate,
                                const T *x, T *out) {
  PFRT_GRID_STRIDE(j, cols) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r)
      s += double(x[r * cols + j]);
    out[j] = accumulate ? out[j] + T(s) : T(s);
  }
}

/// The ones column of a factor with bias: F[d, j] = F[j, d] = combine(sum_r
/// x[r, j]) for j < d, F[d, d] = combine(n).
template <class T>
__global__ void factorBiasKernel(int64_t n, int64_t d, double alpha,
                                 double beta, const T *x, T *f) {
  const int64_t dp = d + 1;
  PFRT_GRID_STRIDE(j, dp) {
    double s = 0;
    if (j < d)
      for (int64_t r = 0; r < n; ++r)
        s += double(x[r * d + j]);
    else
      s = double(n);
    const T v = T(combineFactor(beta, double(f[d * dp + j]), alpha, s));
    f[d * dp + j] = v;
    f[j * dp + d] = v;
  }
}

template <class T>
__global__ void addDiagonalKernel(int64_t n, double damping, T *a) {
  PFRT_GRID_STRIDE(i, n) {
    a[i * n + i] = T(dampedDiagonal(double(a[i * n + i]), damping));
  }
}

/// Sum of the diagonal of an n x n matrix, by one block.
template <class T>
__global__ void traceKernel(int64_t n, const T *a, double *out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += double(a[i * n + i]);
  s = blockSum(s);
  if (threadIdx.x == 0)
    *out = s;
}

/// *flag = 0 when some element is NaN or Inf (flag starts at 1).
template <class T>
__global__ void finiteKernel(int64_t n, const T *x, int *flag) {
  PFRT_GRID_STRIDE(i, n) {
    if (!isfinite(double(x[i])))
      *flag = 0;
  }
}
/// f16 as bits: an all-ones exponent is Inf or NaN.
__global__ void finiteHalfKernel(int64_t n, const uint16_t *x, int *flag) {
  PFRT_GRID_STRIDE(i, n) {
    if ((x[i] & 0x7c00u) == 0x7c00u)
      *flag = 0;
  }
}

/// Whether every element of a float tensor is finite (waits for the GPU).
pfrt_status allFiniteOnDevice(const Call &call, int32_t dtype, const void *data,
                              int64_t n, bool &finite) {
  finite = true;
  if (n == 0 || (dtype != PFRT_F32 && dtype != PFRT_F64 && dtype != PFRT_F16))
    return PFRT_OK;
  State &st = stateOf(call.context());
  int *flag = st.deviceInfo; // one int of device memory owned by the context
  const int one = 1;
  PFRT_TRY(check(call, cudaMemcpyAsync(flag, &one, sizeof(int),
                                       cudaMemcpyHostToDevice, st.stream),
                 "cudaMemcpyAsync"));
  if (dtype == PFRT_F32)
    finiteKernel<<<blocksFor(n), kThreads, 0, st.stream>>>(
        n, static_cast<const float *>(data), flag);
  else if (dtype == PFRT_F64)
    finiteKernel<<<blocksFor(n), kThreads, 0, st.stream>>>(
        n, static_cast<const double *>(data), flag);
  else
    finiteHalfKernel<<<blocksFor(n), kThreads, 0, st.stream>>>(
        n, static_cast<const uint16_t *>(data), flag);
  PFRT_TRY(launched(call, "finiteKernel"));
  int host = 1;
  PFRT_TRY(check(call, cudaMemcpyAsync(&host, flag, sizeof(int),
                                       cudaMemcpyDeviceToHost, st.stream),
                 "cudaMemcpyAsync"));
  PFRT_TRY(check(call, cudaStreamSynchronize(st.stream), "cudaStreamSynchronize"));
  finite = host != 0;
  return PFRT_OK;
}

//===------------------------------- GEMMs -------------------------------===//

/// Batch strides of an operand whose batch shape must be the output's or
/// all ones (cuBLAS strided batches; other broadcasts are not done yet).
bool batchStride(const Shape &batch, const Shape &outBatch, int64_t matrix,
                 int64_t &stride) {
  if (batch.numel() == 1) {
    stride = outBatch.numel() == 1 ? matrix : 0;
    return true;
  }
  Shape aligned;
  for (int32_t i = 0; i < outBatch.rank - batch.rank; ++i)
    aligned.push(1);
  for (int32_t i = 0; i < batch.rank; ++i)
    aligned.push(batch.dims[i]);
  for (int32_t i = 0; i < outBatch.rank; ++i)
    if (aligned.dims[i] != outBatch.dims[i])
      return false;
  stride = matrix;
  return true;
}

pfrt_status matmulEntry(pfrt_context *ctx, const pfrt_tensor *a,
                        const pfrt_tensor *b, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_matmul");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "a", a));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  PFRT_TRY(call.rankIn("a", a, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("b", b, 1, PFRT_MAX_RANK));
  const Shape sa = Shape::of(*a), sb = Shape::of(*b);
  const int64_t m = sa.rank >= 2 ? sa.dims[sa.rank - 2] : 1;
  const int64_t k = sa.dims[sa.rank - 1];
  const int64_t kb = sb.rank >= 2 ? sb.dims[sb.rank - 2] : sb.dims[0];
  const int64_t n = sb.rank >= 2 ? sb.dims[sb.rank - 1] : 1;
  if (k != kb)
    return call.fail(PFRT_INVALID_ARGUMENT, "a %s and b %s: inner dimensions "
                     "%lld and %lld differ", ShapeStr(sa).c_str(),
                     ShapeStr(sb).c_str(), static_cast<long long>(k),
                     static_cast<long long>(kb));
  Shape batchA, batchB, batch;
  for (int32_t i = 0; i + 2 < sa.rank; ++i)
    batchA.push(sa.dims[i]);
  for (int32_t i = 0; i + 2 < sb.rank; ++i)
    batchB.push(sb.dims[i]);
  if (!broadcastShapes(batchA, batchB, batch))
    return call.fail(PFRT_INVALID_ARGUMENT, "batch dimensions of a %s and b "
                     "%s do not broadcast", ShapeStr(sa).c_str(),
                     ShapeStr(sb).c_str());
  Shape expected = batch;
  if (sa.rank >= 2)
    expected.push(m);
  if (sb.rank >= 2)
    expected.push(n);
  PFRT_TRY(call.shapeIs("out", out, expected));
  int64_t strideA, strideB;
  if (!batchStride(batchA, batch, m * k, strideA) ||
      !batchStride(batchB, batch, k * n, strideB))
    return call.fail(PFRT_UNSUPPORTED, "batch dimensions %s and %s: the CUDA "
                     "backend broadcasts a whole batch only so far",
                     ShapeStr(batchA).c_str(), ShapeStr(batchB).c_str());
  const int64_t count = batch.numel();
  if (count == 0 || m == 0 || n == 0)
    return PFRT_OK;
  if (!fitsInt({m, n, k, count}))
    return call.fail(PFRT_UNSUPPORTED, "matmul dimensions exceed cuBLAS's int");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    cublasComputeType_t compute;
    if (std::is_same_v<T, float> && fastCompute(call, GemmUse::Model, compute)) {
      const float one = 1, zero = 0;
      return check(call,
                   lib().cublasGemmStridedBatchedEx(
                       stateOf(ctx).blas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one,
                       b->data, CUDA_R_32F, int(n), strideB, a->data, CUDA_R_32F,
                       int(k > 0 ? k : 1), strideA, &zero, out->data, CUDA_R_32F, int(n), m * n,
                       int(count), compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
    }
    // Row-major C = A B as column-major C^T = B^T A^T.
    return check(call,
                 gemmBatched(stateOf(ctx).blas, int(n), int(m), int(k),
                             dataAs<const T>(b), int(n), strideB,
                             dataAs<const T>(a), int(k > 0 ? k : 1), strideA,
                             dataAs<T>(out), int(n), m * n, int(count)),
                 "cublas gemmStridedBatched");
  };
  return a->dtype == PFRT_F32 ? run(float()) : run(double());
}

pfrt_status gemmEntry(pfrt_context *ctx, const pfrt_tensor *a,
                      const pfrt_tensor *b, const pfrt_tensor *c, double alpha,
                      double beta, int32_t trans_a, int32_t trans_b,
                      const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gemm");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.optionalTensor("c", c));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "a", a));
  PFRT_TRY(call.rankIn("a", a, 2, 2));
  PFRT_TRY(call.rankIn("b", b, 2, 2));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  const int64_t m = a->shape[trans_a ? 1 : 0], k = a->shape[trans_a ? 0 : 1];
  const int64_t kb = b->shape[trans_b ? 1 : 0], n = b->shape[trans_b ? 0 : 1];
  if (k != kb)
    return call.fail(PFRT_INVALID_ARGUMENT, "op(a) is %lld x %lld but op(b) "
                     "is %lld x %lld", static_cast<long long>(m),
                     static_cast<long long>(k), static_cast<long long>(kb),
                     static_cast<long long>(n));
  Shape expected;
  expected.push(m);
  expected.push(n);
  PFRT_TRY(call.shapeIs("out", out, expected));
  if (c) {
    PFRT_TRY(call.dtypeIs("c", c, a->dtype));
    if (!broadcastsTo(Shape::of(*c), expected))
      return call.fail(PFRT_INVALID_ARGUMENT, "c %s does not broadcast to %s",
                       ShapeStr(Shape::of(*c)).c_str(), ShapeStr(expected).c_str());
  }
  if (m == 0 || n == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    double betaUsed = 0;
    if (c && beta != 0) {
      // out = c broadcast, then the GEMM accumulates onto it.
      if (c->data != out->data || Shape::of(*c) != expected) {
        const Shape in[1] = {Shape::of(*c)};
        const BroadcastPlan plan = planBroadcast(expected, in, 1);
        broadcastCopyKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
            plan, dataAs<const T>(c), dataAs<T>(out));
        PFRT_TRY(launched(call, "broadcastCopyKernel"));
      }
      betaUsed = beta;
    }
    return rowMajorGemm<T>(call, trans_a != 0, trans_b != 0, m, n, k, alpha, dataAs<const T>(a),
                           a->shape[1], dataAs<const T>(b), b->shape[1], betaUsed, dataAs<T>(out),
                           n, GemmUse::Model);
  };
  return a->dtype == PFRT_F32 ? run(float()) : run(double());
}

/// Rows x [..., in] of a linear layer and its weight's orientation.
struct LinearDims {
  int64_t rows, in, out;
};

pfrt_status linearDims(const Call &call, const pfrt_tensor *x,
                       const pfrt_tensor *w, int32_t w_transposed,
                       LinearDims &d) {
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("w", w, 2, 2));
  PFRT_TRY(call.dtypeIs("w", w, x->dtype));
  d.in = x->shape[x->rank - 1];
  d.rows = product(Shape::of(*x), 0, x->rank - 1);
  const int64_t win = w->shape[w_transposed ? 1 : 0];
  d.out = w->shape[w_transposed ? 0 : 1];
  if (win != d.in)
    return call.fail(PFRT_INVALID_ARGUMENT, "x has %lld features but w %s "
                     "(%s) takes %lld", static_cast<long long>(d.in),
                     ShapeStr(Shape::of(*w)).c_str(),
                     w_transposed ? "[out, in]" : "[in, out]",
                     static_cast<long long>(win));
  return PFRT_OK;
}

/// x's shape with the last dimension replaced by `last`.
Shape withLast(const pfrt_tensor *x, int64_t last) {
  Shape s = Shape::of(*x);
  s.dims[s.rank - 1] = last;
  return s;
}

pfrt_status linearEntry(pfrt_context *ctx, const pfrt_tensor *x,
                        const pfrt_tensor *w, const pfrt_tensor *bias,
                        int32_t w_transposed, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_linear");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("w", w));
  PFRT_TRY(call.optionalTensor("bias", bias));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "x", x));
  LinearDims d;
  PFRT_TRY(linearDims(call, x, w, w_transposed, d));
  Shape biasShape;
  biasShape.push(d.out);
  if (bias)
    PFRT_TRY(floatLike(call, "bias", bias, x->dtype, biasShape));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, withLast(x, d.out)));
  if (d.rows == 0 || d.out == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    if (bias) { // out rows = bias, then the GEMM adds x W (beta 1)
      Shape outShape;
      outShape.push(d.rows);
      outShape.push(d.out);
      const BroadcastPlan plan = planBroadcast(outShape, &biasShape, 1);
      broadcastCopyKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
          plan, dataAs<const T>(bias), dataAs<T>(out));
      PFRT_TRY(launched(call, "broadcastCopyKernel"));
    }
    return rowMajorGemm<T>(call, false, w_transposed != 0, d.rows, d.out, d.in, 1.0,
                           dataAs<const T>(x), d.in, dataAs<const T>(w), w->shape[1],
                           bias ? 1.0 : 0.0, dataAs<T>(out), d.out, GemmUse::Model);
  };
  return x->dtype == PFRT_F32 ? run(float()) : run(double());
}

pfrt_status linearBackwardEntry(pfrt_context *ctx, const pfrt_tensor *x,
                                const pfrt_tensor *w,
                                const pfrt_tensor *grad_out,
                                int32_t w_transposed, int32_t accumulate_x,
                                int32_t accumulate_params,
                                const pfrt_tensor *grad_x,
                                const pfrt_tensor *grad_w,
                                const pfrt_tensor *grad_bias) {
  Call call(ctx, "pfrt_linear_backward");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("w", w));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(floatDtype(call, "x", x));
  LinearDims d;
  PFRT_TRY(linearDims(call, x, w, w_transposed, d));
  PFRT_TRY(floatLike(call, "grad_out", grad_out, x->dtype, withLast(x, d.out)));
  if (grad_x)
    PFRT_TRY(floatLike(call, "grad_x", grad_x, x->dtype, Shape::of(*x)));
  if (grad_w)
    PFRT_TRY(floatLike(call, "grad_w", grad_w, x->dtype, Shape::of(*w)));
  Shape biasShape;
  biasShape.push(d.out);
  if (grad_bias)
    PFRT_TRY(floatLike(call, "grad_bias", grad_bias, x->dtype, biasShape));
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    const T *xd = dataAs<const T>(x), *wd = dataAs<const T>(w),
            *dy = dataAs<const T>(grad_out);
    const bool wt = w_transposed != 0;
    if (grad_x) // dy [R, out] . w^T (w [in, out]) or dy . w (w [out, in])
      PFRT_TRY(rowMajorGemm<T>(call, false, !wt, d.rows, d.in, d.out, 1.0, dy, d.out, wd,
                               w->shape[1], accumulate_x ? 1.0 : 0.0, dataAs<T>(grad_x), d.in,
                               GemmUse::Model));
    const double beta = accumulate_params ? 1.0 : 0.0;
    if (grad_w && wt) // dy^T [out, R] . x [R, in]
      PFRT_TRY(rowMajorGemm<T>(call, true, false, d.out, d.in, d.rows, 1.0, dy, d.out, xd, d.in,
                               beta, dataAs<T>(grad_w), d.in, GemmUse::Model));
    else if (grad_w) // x^T [in, R] . dy [R, out]
      PFRT_TRY(rowMajorGemm<T>(call, true, false, d.in, d.out, d.rows, 1.0, xd, d.in, dy, d.out,
                               beta, dataAs<T>(grad_w), d.out, GemmUse::Model));
    if (grad_bias && d.out > 0) {
      columnSumKernel<<<blocksFor(d.out), kThreads, 0, streamOf(ctx)>>>(
          d.rows, d.out, accumulate_params != 0, dy, dataAs<T>(grad_bias));
      PFRT_TRY(launched(call, "columnSumKernel"));
    }
    return PFRT_OK;
  };
  return x->dtype == PFRT_F32 ? run(float()) : run(double());
}

//===------------------------------- K-FAC -------------------------------===//

pfrt_status kfacFactorEntry(pfrt_context *ctx, const pfrt_tensor *x,
                            int32_t bias_column, double scale, int32_t mode,
                            double decay, const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_factor");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  const int64_t d = x->shape[x->rank - 1];
  const int64_t n = product(Shape::of(*x), 0, x->rank - 1);
  const bool bias = bias_column != 0;
  const int64_t dp = d + (bias ? 1 : 0);
  Shape fShape;
  fShape.push(dp);
  fShape.push(dp);
  PFRT_TRY(floatLike(call, "factor", factor, x->dtype, fShape));
  if (mode < PFRT_KFAC_OVERWRITE || mode > PFRT_KFAC_RUNNING_AVERAGE)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown mode %d", mode);
  if (!isfinite(scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "scale %g is not finite", scale);
  if (mode == PFRT_KFAC_RUNNING_AVERAGE && !(decay >= 0 && decay <= 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "decay %g is outside [0, 1]", decay);
  if (!fitsInt({dp, n}))
    return call.fail(PFRT_UNSUPPORTED, "x of %lld rows x %lld exceeds "
                     "cuBLAS's int", static_cast<long long>(n),
                     static_cast<long long>(d));
  // The same alpha/beta as the CPU backend's SYRK.
  const FactorUpdateCoefficients update = factorUpdateCoefficients(n, scale, mode, decay);
  const double alpha = update.alpha, beta = update.beta;
  if (dp == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    T *f = dataAs<T>(factor);
    const T *xd = dataAs<const T>(x);
    cudaStream_t s = streamOf(ctx);
    if (d > 0) {
      // Row-major x [n, d] is column-major x^T [d, n]: x^T x = Y Y^T.
      PFRT_TRY(check(call,
                     syrk(stateOf(ctx).blas, int(d), int(n), T(alpha), xd,
                          int(d), T(beta), f, int(dp)),
                     "cublas syrk"));
      mirrorUpperToLower<<<blocksFor(d * d), kThreads, 0, s>>>(d, dp, f);
      PFRT_TRY(launched(call, "mirrorUpperToLower"));
    }
    if (bias) {
      factorBiasKernel<<<blocksFor(dp), kThreads, 0, s>>>(n, d, alpha, beta, xd, f);
      PFRT_TRY(launched(call, "factorBiasKernel"));
    }
    return PFRT_OK;
  };
  return x->dtype == PFRT_F32 ? run(float()) : run(double());
}

pfrt_status kfacPiEntry(pfrt_context *ctx, const pfrt_tensor *a,
                        const pfrt_tensor *b, double *pi) {
  Call call(ctx, "pfrt_kfac_pi");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.pointer("pi", pi));
  PFRT_TRY(checkSquare(call, "a", a, 0));
  PFRT_TRY(checkSquare(call, "b", b, 0));
  double *traces = nullptr;
  PFRT_TRY(scratch(call, 2 * sizeof(double), reinterpret_cast<void **>(&traces)));
  cudaStream_t s = streamOf(ctx);
  for (int i = 0; i < 2; ++i) {
    const pfrt_tensor *t = i == 0 ? a : b;
    if (t->dtype == PFRT_F32)
      traceKernel<<<1, kThreads, 0, s>>>(t->shape[0], dataAs<const float>(t), traces + i);
    else
      traceKernel<<<1, kThreads, 0, s>>>(t->shape[0], dataAs<const double>(t), traces + i);
    PFRT_TRY(launched(call, "traceKernel"));
  }
  double host[2];
  PFRT_TRY(check(call, cudaMemcpyAsync(host, traces, sizeof(host),
                                       cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync"));
  PFRT_TRY(check(call, cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  if (!isfinite(host[0]) || !isfinite(host[1]))
    return call.fail(PFRT_NUMERIC, "a factor trace is not finite (tr a = %g, "
                     "tr b = %g)", host[0], host[1]);
  *pi = kfacPi(host[0], a->shape[0], host[1], b->shape[0]);
  return PFRT_OK;
}

cusolverStatus_t potrfBufferSize(cusolverDnHandle_t h, int n, float *a, int *lwork) {
  return lib().cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, lwork);
}
cusolverStatus_t potrfBufferSize(cusolverDnHandle_t h, int n, double *a, int *lwork) {
  return lib().cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, lwork);
}
cusolverStatus_t potriBufferSize(cusolverDnHandle_t h, int n, float *a, int *lwork) {
  return lib().cusolverDnSpotri_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, lwork);
}
cusolverStatus_t potriBufferSize(cusolverDnHandle_t h, int n, double *a, int *lwork) {
  return lib().cusolverDnDpotri_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, lwork);
}
cusolverStatus_t potrf(cusolverDnHandle_t h, int n, float *a, float *w, int lwork, int *info) {
  return lib().cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, n, w, lwork, info);
}
cusolverStatus_t potrf(cusolverDnHandle_t h, int n, double *a, double *w, int lwork, int *info) {
  return lib().cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, n, w, lwork, info);
}
cusolverStatus_t potri(cusolverDnHandle_t h, int n, float *a, float *w, int lwork, int *info) {
  return lib().cusolverDnSpotri(h, CUBLAS_FILL_MODE_LOWER, n, a, n, w, lwork, info);
}
cusolverStatus_t potri(cusolverDnHandle_t h, int n, double *a, double *w, int lwork, int *info) {
  return lib().cusolverDnDpotri(h, CUBLAS_FILL_MODE_LOWER, n, a, n, w, lwork, info);
}

/// cuSOLVER's info after a factorization (waits for the GPU).
pfrt_status readInfo(const Call &call, int &info) {
  State &st = stateOf(call.context());
  PFRT_TRY(check(call, cudaMemcpyAsync(&info, st.deviceInfo, sizeof(int),
                                       cudaMemcpyDeviceToHost, st.stream),
                 "cudaMemcpyAsync"));
  return check(call, cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
}

pfrt_status kfacInverseEntry(pfrt_context *ctx, const pfrt_tensor *factor,
                             double damping, const pfrt_tensor *inverse) {
  Call call(ctx, "pfrt_kfac_inverse");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkSquare(call, "factor", factor, 0));
  PFRT_TRY(floatLike(call, "inverse", inverse, factor->dtype, Shape::of(*factor)));
  if (!(damping >= 0) || !isfinite(damping))
    return call.fail(PFRT_INVALID_ARGUMENT, "damping %g must be finite and >= 0",
                     damping);
  const int64_t n = factor->shape[0];
  if (n == 0)
    return PFRT_OK;
  if (!fitsInt({n * n}))
    return call.fail(PFRT_UNSUPPORTED, "a %lld x %lld factor exceeds "
                     "cuSOLVER's int", static_cast<long long>(n),
                     static_cast<long long>(n));
  bool finite;
  PFRT_TRY(allFiniteOnDevice(call, factor->dtype, factor->data, n * n, finite));
  if (!finite)
    return call.fail(PFRT_NUMERIC, "the factor contains NaN or Inf; the "
                     "inverse was left unchanged");
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    State &st = stateOf(ctx);
    // Workspace: the matrix being inverted, then cuSOLVER's buffer; the
    // inverse is written only once everything succeeded.
    int lwork = 0, lworkPotri = 0;
    T *work0 = nullptr; // the size queries need the dtype, not the data
    PFRT_TRY(check(call, potrfBufferSize(st.solver, int(n), work0, &lwork),
                   "potrf_bufferSize"));
    PFRT_TRY(check(call, potriBufferSize(st.solver, int(n), work0, &lworkPotri),
                   "potri_bufferSize"));
    lwork = lwork > lworkPotri ? lwork : lworkPotri;
    void *ws = nullptr;
    PFRT_TRY(scratch(call, sizeof(T) * size_t(n * n + (lwork > 0 ? lwork : 1)), &ws));
    T *work = static_cast<T *>(ws), *buffer = work + n * n;
    PFRT_TRY(check(call, cudaMemcpyAsync(work, factor->data, sizeof(T) * n * n,
                                         cudaMemcpyDeviceToDevice, st.stream),
                   "cudaMemcpyAsync"));
    addDiagonalKernel<<<blocksFor(n), kThreads, 0, st.stream>>>(n, damping, work);
    PFRT_TRY(launched(call, "addDiagonalKernel"));
    int info = 0;
    PFRT_TRY(check(call, potrf(st.solver, int(n), work, buffer, lwork, st.deviceInfo),
                   "cusolverDn potrf"));
    PFRT_TRY(readInfo(call, info));
    if (info > 0)
      return call.fail(PFRT_NUMERIC, "factor + %g I is not positive definite "
                       "(Cholesky failed at leading minor %d of %lld); the "
                       "inverse was left unchanged", damping, info,
                       static_cast<long long>(n));
    if (info == 0) {
      PFRT_TRY(check(call, potri(st.solver, int(n), work, buffer, lwork, st.deviceInfo),
                     "cusolverDn potri"));
      PFRT_TRY(readInfo(call, info));
    }
    if (info > 0)
      return call.fail(PFRT_NUMERIC, "factor + %g I is singular (potri found "
                       "a zero pivot at %d of %lld); the inverse was left "
                       "unchanged", damping, info, static_cast<long long>(n));
    if (info < 0)
      return call.fail(PFRT_INTERNAL, "cuSOLVER returned info %d", info);
    mirrorUpperToLower<<<blocksFor(n * n), kThreads, 0, st.stream>>>(n, n, work);
    PFRT_TRY(launched(call, "mirrorUpperToLower"));
    PFRT_TRY(allFiniteOnDevice(call, factor->dtype, work, n * n, finite));
    if (!finite)
      return call.fail(PFRT_NUMERIC, "the inverse of factor + %g I overflowed "
                       "(ill-conditioned); the inverse was left unchanged",
                       damping);
    return check(call, cudaMemcpyAsync(inverse->data, work, sizeof(T) * n * n,
                                       cudaMemcpyDeviceToDevice, st.stream),
                 "cudaMemcpyAsync");
  };
  return factor->dtype == PFRT_F32 ? run(float()) : run(double());
}

pfrt_status allFiniteEntry(pfrt_context *ctx, const pfrt_tensor *t,
                           int32_t *result) {
  Call call(ctx, "pfrt_all_finite");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("t", t));
  PFRT_TRY(call.pointer("result", result));
  bool finite;
  PFRT_TRY(allFiniteOnDevice(call, t->dtype, t->data, Shape::of(*t).numel(), finite));
  *result = finite ? 1 : 0;
  return PFRT_OK;
}

pfrt_status kfacPreconditionEntry(pfrt_context *ctx, const pfrt_tensor *a_inv,
                                  const pfrt_tensor *b_inv,
                                  const pfrt_tensor *grad_w,
                                  const pfrt_tensor *grad_b,
                                  int32_t w_transposed,
                                  const pfrt_tensor *out_w,
                                  const pfrt_tensor *out_b) {
  Call call(ctx, "pfrt_kfac_precondition");
  PFRT_TRY(beginCuda(call));
  PreconditionDims dims;
  PFRT_TRY(checkPrecondition(call, a_inv, b_inv, grad_w, grad_b, w_transposed,
                             out_w, out_b, dims));
  const bool wt = dims.transposed, joint = dims.joint;
  const int64_t out = dims.out, in = dims.in, ia = dims.ia;
  if (in == 0 && !joint)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    const size_t sz = sizeof(T);
    cudaStream_t s = streamOf(ctx);
    // J: the gradient with the bias joined when A has its column: wt:
    // J [out, ia] = [grad_w | grad_b]; else J [ia, out] = [grad_w; grad_b].
    const int64_t rows = wt ? out : ia, cols = wt ? ia : out;
    void *ws = nullptr;
    PFRT_TRY(scratch(call, 2 * sz * size_t(rows * cols > 0 ? rows * cols : 1), &ws));
    T *j = static_cast<T *>(ws), *tmp = j + rows * cols;
    if (wt) {
      PFRT_TRY(check(call, cudaMemcpy2DAsync(j, ia * sz, grad_w->data, in * sz,
                                             in * sz, out, cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpy2DAsync"));
      if (joint)
        PFRT_TRY(check(call, cudaMemcpy2DAsync(j + in, ia * sz, grad_b->data, sz,
                                               sz, out, cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpy2DAsync"));
    } else {
      PFRT_TRY(check(call, cudaMemcpyAsync(j, grad_w->data, in * out * sz,
                                           cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync"));
      if (joint)
        PFRT_TRY(check(call, cudaMemcpyAsync(j + in * out, grad_b->data, out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
    }
    const T *ai = dataAs<const T>(a_inv), *bi = dataAs<const T>(b_inv);
    // wt: result = B^-1 J A^-1; else A^-1 J B^-1; both through tmp.
    const T *left = wt ? bi : ai, *right = wt ? ai : bi;
    PFRT_TRY(rowMajorGemm<T>(call, false, false, rows, cols, rows, 1.0, left,
                             rows, j, cols, 0.0, tmp, cols));
    PFRT_TRY(rowMajorGemm<T>(call, false, false, rows, cols, cols, 1.0, tmp,
                             cols, right, cols, 0.0, j, cols));
    if (wt) {
      PFRT_TRY(check(call, cudaMemcpy2DAsync(out_w->data, in * sz, j, ia * sz,
                                             in * sz, out, cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpy2DAsync"));
      if (joint)
        PFRT_TRY(check(call, cudaMemcpy2DAsync(out_b->data, sz, j + in, ia * sz,
                                               sz, out, cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpy2DAsync"));
    } else {
      PFRT_TRY(check(call, cudaMemcpyAsync(out_w->data, j, in * out * sz,
                                           cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync"));
      if (joint)
        PFRT_TRY(check(call, cudaMemcpyAsync(out_b->data, j + in * out, out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
    }
    if (grad_b && !joint) { // out_b = B^-1 grad_b, as an [out, 1] GEMM
      PFRT_TRY(check(call, cudaMemcpyAsync(tmp, grad_b->data, out * sz,
                                           cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync"));
      PFRT_TRY(rowMajorGemm<T>(call, false, false, out, 1, out, 1.0, bi, out,
                               tmp, 1, 0.0, dataAs<T>(out_b), 1));
    }
    return PFRT_OK;
  };
  return dims.dtype == PFRT_F32 ? run(float()) : run(double());
}

//===---------------------- K-FAC in the eigenbasis ----------------------===//

/// The row-major results of syevd: q holds eigenvector k in its row k
/// (cuSOLVER's column-major column k), so vectors[i, k] = q[k, i]; values
/// are the ascending eigenvalues with round-off negatives set to 0.
template <class T>
__global__ void eigenOutputKernel(int64_t n, const T *q, const T *w, T *vectors,
                                  T *values) {
  PFRT_GRID_STRIDE(e, n * n) {
    const int64_t i = e / n, k = e % n;
    vectors[e] = q[k * n + i];
    if (e < n)
      values[e] = w[e] > T(0) ? w[e] : T(0);
  }
}

/// v[i, c] /= lLeft[i] lRight[c] + damping for v rows x cols, in double as
/// on the CPU; a NULL lRight is the scalar 1 (the separate bias).
template <class T>
__global__ void eigenDivideKernel(int64_t rows, int64_t cols, const T *lLeft,
                                  const T *lRight, double damping, T *v) {
  PFRT_GRID_STRIDE(e, rows * cols) {
    const int64_t i = e / cols, c = e % cols;
    const double right = lRight ? double(lRight[c]) : 1.0;
    v[e] = T(double(v[e]) / (double(lLeft[i]) * right + damping));
  }
}

/// A cuSOLVER 64-bit API parameter object for one call.
struct SolverParams {
  cusolverDnParams_t params = nullptr;
  SolverParams() = default;
  SolverParams(const SolverParams &) = delete;
  SolverParams &operator=(const SolverParams &) = delete;
  ~SolverParams() {
    if (params)
      lib().cusolverDnDestroyParams(params);
  }
};

template <class T> constexpr cudaDataType cudaTypeOf() {
  return sizeof(T) == sizeof(float) ? CUDA_R_32F : CUDA_R_64F;
}

pfrt_status kfacEigenEntry(pfrt_context *ctx, const pfrt_tensor *factor,
                           const pfrt_tensor *vectors, const pfrt_tensor *values) {
  Call call(ctx, "pfrt_kfac_eigen");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkEigen(call, factor, vectors, values));
  const int64_t n = factor->shape[0];
  if (n == 0)
    return PFRT_OK;
  bool finite;
  PFRT_TRY(allFiniteOnDevice(call, factor->dtype, factor->data, n * n, finite));
  if (!finite)
    return call.fail(PFRT_NUMERIC, "the factor contains NaN or Inf; its "
                     "eigendecomposition was left unchanged");
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    State &st = stateOf(ctx);
    constexpr cudaDataType type = cudaTypeOf<T>();
    SolverParams p;
    PFRT_TRY(check(call, lib().cusolverDnCreateParams(&p.params),
                   "cusolverDnCreateParams"));
    // CUBLAS_FILL_MODE_UPPER of the column-major view is the row-major lower
    // triangle, as the CPU's LAPACK 'U'. The query reads the caller's
    // buffers' types only (no data is written).
    size_t deviceBytes = 0, hostBytes = 0;
    PFRT_TRY(check(call,
                   lib().cusolverDnXsyevd_bufferSize(
                       st.solver, p.params, CUSOLVER_EIG_MODE_VECTOR,
                       CUBLAS_FILL_MODE_UPPER, n, type, factor->data, n, type,
                       values->data, type, &deviceBytes, &hostBytes),
                   "syevd_bufferSize"));
    // Workspace: the matrix being decomposed and its eigenvalues, then
    // cuSOLVER's buffer (256-byte aligned); vectors and values are written
    // only once everything succeeded.
    const size_t matrixBytes = sizeof(T) * size_t(n * n + n);
    const size_t bufferOffset = (matrixBytes + 255) / 256 * 256;
    void *ws = nullptr;
    PFRT_TRY(scratch(call, bufferOffset + (deviceBytes > 0 ? deviceBytes : 1), &ws));
    T *q = static_cast<T *>(ws), *w = q + n * n;
    void *buffer = static_cast<char *>(ws) + bufferOffset;
    std::vector<unsigned char> hostBuffer(hostBytes > 0 ? hostBytes : 1);
    PFRT_TRY(check(call, cudaMemcpyAsync(q, factor->data, sizeof(T) * n * n,
                                         cudaMemcpyDeviceToDevice, st.stream),
                   "cudaMemcpyAsync"));
    PFRT_TRY(check(call,
                   lib().cusolverDnXsyevd(st.solver, p.params, CUSOLVER_EIG_MODE_VECTOR,
                                          CUBLAS_FILL_MODE_UPPER, n, type, q, n, type, w,
                                          type, buffer, deviceBytes, hostBuffer.data(),
                                          hostBytes, st.deviceInfo),
                   "cusolverDn syevd"));
    int info = 0;
    PFRT_TRY(readInfo(call, info));
    if (info > 0)
      return call.fail(PFRT_NUMERIC, "the eigensolver did not converge (syevd info %d "
                       "of %lld); the eigendecomposition was left unchanged", info,
                       static_cast<long long>(n));
    if (info < 0)
      return call.fail(PFRT_INTERNAL, "cuSOLVER returned info %d", info);
    PFRT_TRY(allFiniteOnDevice(call, factor->dtype, q, n * n + n, finite));
    if (!finite)
      return call.fail(PFRT_NUMERIC, "the eigendecomposition is not finite; it was "
                       "left unchanged");
    eigenOutputKernel<<<blocksFor(n * n), kThreads, 0, st.stream>>>(
        n, q, w, dataAs<T>(vectors), dataAs<T>(values));
    return launched(call, "eigenOutputKernel");
  };
  return factor->dtype == PFRT_F32 ? run(float()) : run(double());
}

/// out = L ((L^T J R) / (lL lR^T + damping)) R^T for J rows x cols, L rows x
/// rows with eigenvalues lL, R cols x cols with eigenvalues lR; a NULL R and
/// lR are the scalar 1 (the separate bias: out = L ((L^T J) / (lL +
/// damping))). `t` and `v` are rows x cols each; J is read by the first
/// GEMM only, so out may be J.
template <class T>
pfrt_status eigenSandwich(const Call &call, const T *l, const T *lL, const T *j,
                          const T *r, const T *lR, int64_t rows, int64_t cols,
                          double damping, T *t, T *v, T *out) {
  PFRT_TRY(rowMajorGemm<T>(call, true, false, rows, cols, rows, 1.0, l, rows, j,
                           cols, 0.0, t, cols)); // t = L^T J
  T *scaled = t;
  if (r) {
    PFRT_TRY(rowMajorGemm<T>(call, false, false, rows, cols, cols, 1.0, t, cols,
                             r, cols, 0.0, v, cols)); // v = t R
    scaled = v;
  }
  eigenDivideKernel<<<blocksFor(rows * cols), kThreads, 0, streamOf(call.context())>>>(
      rows, cols, lL, lR, damping, scaled);
  PFRT_TRY(launched(call, "eigenDivideKernel"));
  if (!r) // out = L t
    return rowMajorGemm<T>(call, false, false, rows, cols, rows, 1.0, l, rows, t,
                           cols, 0.0, out, cols);
  PFRT_TRY(rowMajorGemm<T>(call, false, false, rows, cols, rows, 1.0, l, rows, v,
                           cols, 0.0, t, cols)); // t = L v
  return rowMajorGemm<T>(call, false, true, rows, cols, cols, 1.0, t, cols, r, cols,
                         0.0, out, cols); // out = t R^T
}

/// Row-major 2-D device copy of `height` rows of `width` elements; nothing
/// when either is 0 (cudaMemcpy2D wants a nonzero extent).
pfrt_status copyRows(const Call &call, void *dst, int64_t dstPitch, const void *src,
                     int64_t srcPitch, int64_t width, int64_t height, size_t elem) {
  if (width == 0 || height == 0)
    return PFRT_OK;
  return check(call,
               cudaMemcpy2DAsync(dst, size_t(dstPitch) * elem, src, size_t(srcPitch) * elem,
                                 size_t(width) * elem, size_t(height),
                                 cudaMemcpyDeviceToDevice, streamOf(call.context())),
               "cudaMemcpy2DAsync");
}

pfrt_status kfacPreconditionEigenEntry(
    pfrt_context *ctx, const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
    const pfrt_tensor *b_vectors, const pfrt_tensor *b_values, double damping,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_b, int32_t w_transposed,
    const pfrt_tensor *out_w, const pfrt_tensor *out_b) {
  Call call(ctx, "pfrt_kfac_precondition_eigen");
  PFRT_TRY(beginCuda(call));
  PreconditionDims dims;
  PFRT_TRY(checkPreconditionEigen(call, a_vectors, a_values, b_vectors, b_values, damping,
                                  grad_w, grad_b, w_transposed, out_w, out_b, dims));
  const bool wt = dims.transposed, joint = dims.joint;
  const int64_t out = dims.out, in = dims.in, ia = dims.ia;
  // As in pfrt_kfac_precondition: J = rows x cols between L and R, [out,
  // ia] between Qb and Qa or [ia, out] between Qa and Qb.
  const int64_t rows = wt ? out : ia, cols = wt ? ia : out;
  const int64_t size = rows * cols;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    const size_t sz = sizeof(T);
    cudaStream_t s = streamOf(ctx);
    const T *qa = dataAs<const T>(a_vectors), *la = dataAs<const T>(a_values);
    const T *qb = dataAs<const T>(b_vectors), *lb = dataAs<const T>(b_values);
    const T *left = wt ? qb : qa, *right = wt ? qa : qb;
    const T *lLeft = wt ? lb : la, *lRight = wt ? la : lb;
    // Three gradients: J (the joined gradient, then the result), t and v;
    // the separate bias reuses t and v once the weight is done.
    void *ws = nullptr;
    const int64_t each = size > out ? size : out;
    PFRT_TRY(scratch(call, 3 * sz * size_t(each > 0 ? each : 1), &ws));
    T *j = static_cast<T *>(ws), *t = j + each, *v = t + each;
    if (!joint) {
      // grad_w is read by the first GEMM only, so out_w may be grad_w.
      PFRT_TRY(eigenSandwich<T>(call, left, lLeft, dataAs<const T>(grad_w), right,
                                lRight, rows, cols, damping, t, v, dataAs<T>(out_w)));
      if (grad_b) // a separate bias: its A factor is the scalar 1
        PFRT_TRY(eigenSandwich<T>(call, qb, lb, dataAs<const T>(grad_b), nullptr,
                                  nullptr, out, 1, damping, t, v, dataAs<T>(out_b)));
      return PFRT_OK;
    }
    // Joint: J = [grad_w | grad_b] ([out, in+1]) or [grad_w; grad_b] ([in+1, out]).
    if (wt) {
      PFRT_TRY(copyRows(call, j, ia, grad_w->data, in, in, out, sz));
      PFRT_TRY(copyRows(call, j + in, ia, grad_b->data, 1, 1, out, sz));
    } else {
      if (in * out > 0)
        PFRT_TRY(check(call, cudaMemcpyAsync(j, grad_w->data, in * out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
      if (out > 0)
        PFRT_TRY(check(call, cudaMemcpyAsync(j + in * out, grad_b->data, out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
    }
    PFRT_TRY(eigenSandwich<T>(call, left, lLeft, j, right, lRight, rows, cols, damping,
                              t, v, j));
    if (wt) {
      PFRT_TRY(copyRows(call, out_w->data, in, j, ia, in, out, sz));
      PFRT_TRY(copyRows(call, out_b->data, 1, j + in, ia, 1, out, sz));
    } else {
      if (in * out > 0)
        PFRT_TRY(check(call, cudaMemcpyAsync(out_w->data, j, in * out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
      if (out > 0)
        PFRT_TRY(check(call, cudaMemcpyAsync(out_b->data, j + in * out, out * sz,
                                             cudaMemcpyDeviceToDevice, s),
                       "cudaMemcpyAsync"));
    }
    return PFRT_OK;
  };
  return dims.dtype == PFRT_F32 ? run(float()) : run(double());
}

//===--------------------- K-FAC: LayerNorm scale and shift ----------------===//

/// Each row's mean and 1/sqrt(var + epsilon) (biased variance, as the
/// forward), a block per row, into stats [rows, 2].
template <typename T>
__global__ void layerNormRowStats(int64_t rows, int64_t h, double epsilon, const T *x,
                                  double *stats) {
  PFRT_BLOCK_STRIDE(row, rows) {
    const T *xr = x + row * h;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
      sum += double(xr[j]);
    const double mean = blockSum(sum) / double(h);
    double squares = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
      squares += (double(xr[j]) - mean) * (double(xr[j]) - mean);
    const double var = blockSum(squares) / double(h);
    if (threadIdx.x == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = 1.0 / ::sqrt(var + epsilon);
    }
  }
}

/// A thread per feature: its sums over the rows (KfacMath.h), then its row
/// of the factor combined with the old one.
template <typename T>
__global__ void layerNormFactorKernel(int64_t rows, int64_t h, int64_t columns, double alpha,
                                      double beta, const T *x, const T *dy, const double *stats,
                                      T *f) {
  PFRT_GRID_STRIDE(j, h) {
    LayerNormFisherSums sums;
    for (int64_t r = 0; r < rows; ++r)
      addLayerNormFisher(sums, double(dy[r * h + j]),
                         layerNormHat(double(x[r * h + j]), stats[2 * r], stats[2 * r + 1]));
    for (int64_t c = 0; c < columns; ++c) {
      T &entry = f[j * columns + c];
      entry = T(combineFactor(beta, double(entry), alpha, layerNormFactorColumn(sums, columns, c)));
    }
  }
}

/// A thread per feature: the damped 2x2 (or diagonal) solve.
template <typename T>
__global__ void layerNormPreconditionKernel(int64_t h, int64_t columns, double damping, const T *f,
                                            const T *gradScale, const T *gradBias, T *outScale,
                                            T *outBias) {
  PFRT_GRID_STRIDE(j, h) {
    const T *row = f + j * columns;
    double u0, u1;
    solveLayerNormBlock(double(row[0]), columns == 3 ? double(row[1]) : 0.0,
                        double(row[columns - 1]), damping, columns == 2, double(gradScale[j]),
                        double(gradBias[j]), u0, u1);
    outScale[j] = T(u0);
    outBias[j] = T(u1);
  }
}

pfrt_status kfacLayerNormFactorEntry(pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *dy,
                                     double epsilon, double scale, int32_t mode, double decay,
                                     const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_layer_norm_factor");
  PFRT_TRY(beginCuda(call));
  LayerNormFactorDims d;
  PFRT_TRY(checkLayerNormFactor(call, x, dy, epsilon, scale, mode, decay, factor, d));
  // The same alpha/beta as pfrt_kfac_factor's.
  const FactorUpdateCoefficients update = factorUpdateCoefficients(d.rows, scale, mode, decay);
  const double alpha = update.alpha, beta = update.beta;
  if (d.width == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    cudaStream_t s = streamOf(ctx);
    double *stats = nullptr;
    if (d.rows > 0) {
      PFRT_TRY(
          scratch(call, 2 * sizeof(double) * size_t(d.rows), reinterpret_cast<void **>(&stats)));
      layerNormRowStats<<<blocksForRows(d.rows), kThreads, 0, s>>>(d.rows, d.width, epsilon,
                                                                   dataAs<const T>(x), stats);
      PFRT_TRY(launched(call, "layerNormRowStats"));
    }
    layerNormFactorKernel<<<blocksFor(d.width), kThreads, 0, s>>>(
        d.rows, d.width, d.columns, alpha, beta, dataAs<const T>(x), dataAs<const T>(dy), stats,
        dataAs<T>(factor));
    return launched(call, "layerNormFactorKernel");
  };
  return x->dtype == PFRT_F32 ? run(float()) : run(double());
}

pfrt_status kfacPreconditionLayerNormEntry(pfrt_context *ctx, const pfrt_tensor *factor,
                                           double damping, const pfrt_tensor *grad_scale,
                                           const pfrt_tensor *grad_bias,
                                           const pfrt_tensor *out_scale,
                                           const pfrt_tensor *out_bias) {
  Call call(ctx, "pfrt_kfac_precondition_layer_norm");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkLayerNormPrecondition(call, factor, damping, grad_scale, grad_bias, out_scale,
                                      out_bias));
  const int64_t h = factor->shape[0], columns = factor->shape[1];
  if (h == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    layerNormPreconditionKernel<<<blocksFor(h), kThreads, 0, streamOf(ctx)>>>(
        h, columns, damping, dataAs<const T>(factor), dataAs<const T>(grad_scale),
        dataAs<const T>(grad_bias), dataAs<T>(out_scale), dataAs<T>(out_bias));
    return launched(call, "layerNormPreconditionKernel");
  };
  return factor->dtype == PFRT_F32 ? run(float()) : run(double());
}

//===------------------------------ K-FAC: embeddings ----------------------===//

/// Counts the ids per row into counts [vocab] (doubles: exact in any order
/// below 2^53); *firstBad gets the smallest index of an id out of range.
template <typename I>
__global__ void countIdsKernel(int64_t n, int64_t vocab, const I *ids, double *counts,
                               unsigned long long *firstBad) {
  PFRT_GRID_STRIDE(i, n) {
    const int64_t row = embeddingIdRow(int64_t(ids[i]), vocab);
    if (row < 0)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
    else
      atomicAdd(counts + row, 1.0);
  }
}

template <typename T>
__global__ void combineCountsKernel(int64_t vocab, double alpha, double beta, const double *counts,
                                    T *f) {
  PFRT_GRID_STRIDE(v, vocab) { f[v] = T(combineFactor(beta, double(f[v]), alpha, counts[v])); }
}

/// (sum, smallest) of a [n] by one block into out[0], out[1].
template <typename T>
__global__ void sumAndMinKernel(int64_t n, const T *a, double *out) {
  double s = 0, largestNegated = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    s += double(a[i]);
    largestNegated = fmax(largestNegated, -double(a[i]));
  }
  s = blockSum(s);
  largestNegated = blockMaxNan(largestNegated);
  if (threadIdx.x == 0) {
    out[0] = s;
    out[1] = n > 0 ? -largestNegated : 0.0;
  }
}

template <typename T>
__global__ void embeddingInverseKernel(int64_t vocab, double damping, const T *a, T *inverse) {
  PFRT_GRID_STRIDE(v, vocab) { inverse[v] = T(embeddingInverseEntry(double(a[v]), damping)); }
}

/// out[r, c] = in[r, c] · scale[r] (byRow) or · scale[c].
template <typename T>
__global__ void scaleRowsOrColumnsKernel(int64_t rows, int64_t cols, bool byRow, const T *scale,
                                         const T *in, T *out) {
  PFRT_GRID_STRIDE(i, rows * cols) {
    out[i] = T(double(in[i]) * double(scale[byRow ? i / cols : i % cols]));
  }
}

pfrt_status kfacEmbeddingFactorEntry(pfrt_context *ctx, const pfrt_tensor *ids, double scale,
                                     int32_t mode, double decay, const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_embedding_factor");
  PFRT_TRY(beginCuda(call));
  EmbeddingFactorDims d;
  PFRT_TRY(checkEmbeddingFactor(call, ids, scale, mode, decay, factor, d));
  const FactorUpdateCoefficients update = factorUpdateCoefficients(d.ids, scale, mode, decay);
  if (d.vocab == 0 && d.ids == 0)
    return PFRT_OK;
  cudaStream_t s = streamOf(ctx);
  void *ws = nullptr;
  PFRT_TRY(scratch(call, sizeof(double) * size_t(d.vocab) + sizeof(unsigned long long), &ws));
  double *counts = static_cast<double *>(ws);
  auto *firstBad = reinterpret_cast<unsigned long long *>(counts + d.vocab);
  PFRT_TRY(check(call, cudaMemsetAsync(counts, 0, sizeof(double) * size_t(d.vocab), s),
                 "cudaMemsetAsync"));
  PFRT_TRY(check(call, cudaMemsetAsync(firstBad, 0xff, sizeof(unsigned long long), s),
                 "cudaMemsetAsync"));
  if (d.ids > 0) {
    if (ids->dtype == PFRT_I64)
      countIdsKernel<<<blocksFor(d.ids), kThreads, 0, s>>>(
          d.ids, d.vocab, dataAs<const int64_t>(ids), counts, firstBad);
    else
      countIdsKernel<<<blocksFor(d.ids), kThreads, 0, s>>>(
          d.ids, d.vocab, dataAs<const int32_t>(ids), counts, firstBad);
    PFRT_TRY(launched(call, "countIdsKernel"));
  }
  unsigned long long bad = 0;
  PFRT_TRY(check(call, cudaMemcpyAsync(&bad, firstBad, sizeof(bad), cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync"));
  PFRT_TRY(check(call, cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  if (bad != ~0ull) {
    int64_t id = 0;
    const size_t size = ids->dtype == PFRT_I64 ? sizeof(int64_t) : sizeof(int32_t);
    int32_t narrow = 0;
    PFRT_TRY(check(
        call,
        cudaMemcpy(ids->dtype == PFRT_I64 ? static_cast<void *>(&id) : static_cast<void *>(&narrow),
                   static_cast<const char *>(ids->data) + bad * size, size, cudaMemcpyDeviceToHost),
        "cudaMemcpy"));
    if (ids->dtype != PFRT_I64)
      id = narrow;
    return call.fail(PFRT_INVALID_ARGUMENT, "ids[%lld] = %lld is outside [-%lld, %lld)",
                     static_cast<long long>(bad), static_cast<long long>(id),
                     static_cast<long long>(d.vocab), static_cast<long long>(d.vocab));
  }
  if (d.vocab == 0)
    return PFRT_OK;
  if (factor->dtype == PFRT_F32)
    combineCountsKernel<<<blocksFor(d.vocab), kThreads, 0, s>>>(d.vocab, update.alpha, update.beta,
                                                                counts, dataAs<float>(factor));
  else
    combineCountsKernel<<<blocksFor(d.vocab), kThreads, 0, s>>>(d.vocab, update.alpha, update.beta,
                                                                counts, dataAs<double>(factor));
  return launched(call, "combineCountsKernel");
}

pfrt_status kfacEmbeddingInversesEntry(pfrt_context *ctx, const pfrt_tensor *a,
                                       const pfrt_tensor *b, double damping, int32_t retries,
                                       const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
                                       int32_t *outcome) {
  Call call(ctx, "pfrt_kfac_embedding_inverses");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkEmbeddingInverses(call, a, b, damping, retries, a_inv, b_inv));
  const int64_t vocab = a->shape[0], h = b->shape[0];
  cudaStream_t s = streamOf(ctx);
  double *sums = nullptr;
  PFRT_TRY(scratch(call, 3 * sizeof(double), reinterpret_cast<void **>(&sums)));
  if (a->dtype == PFRT_F32) {
    sumAndMinKernel<<<1, kThreads, 0, s>>>(vocab, dataAs<const float>(a), sums);
    traceKernel<<<1, kThreads, 0, s>>>(h, dataAs<const float>(b), sums + 2);
  } else {
    sumAndMinKernel<<<1, kThreads, 0, s>>>(vocab, dataAs<const double>(a), sums);
    traceKernel<<<1, kThreads, 0, s>>>(h, dataAs<const double>(b), sums + 2);
  }
  PFRT_TRY(launched(call, "sumAndMinKernel"));
  double host[3];
  PFRT_TRY(check(call, cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync"));
  PFRT_TRY(check(call, cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  const double sumA = host[0], smallest = host[1], traceB = host[2];
  if (!isfinite(sumA) || !isfinite(traceB)) {
    if (outcome)
      *outcome = PFRT_KFAC_KEPT_PREVIOUS;
    (void)call.fail(PFRT_NUMERIC,
                    "a factor trace is not finite (sum a = %g, tr b = %g); the "
                    "inverses were left unchanged",
                    sumA, traceB);
    return PFRT_OK;
  }
  const double pi = kfacPi(sumA, vocab, traceB, h);
  const double root = ::sqrt(damping);
  int32_t outcomeA = PFRT_KFAC_INVERTED;
  const double dampingA = embeddingDiagonalDamping(smallest, root * pi, retries, outcomeA);
  if (outcomeA == PFRT_KFAC_KEPT_PREVIOUS) {
    (void)call.fail(PFRT_NUMERIC,
                    "factor A + %g has an entry <= 0 (smallest %g); its "
                    "inverse was left unchanged",
                    dampingA, smallest);
  } else if (vocab > 0) {
    if (a->dtype == PFRT_F32)
      embeddingInverseKernel<<<blocksFor(vocab), kThreads, 0, s>>>(
          vocab, dampingA, dataAs<const float>(a), dataAs<float>(a_inv));
    else
      embeddingInverseKernel<<<blocksFor(vocab), kThreads, 0, s>>>(
          vocab, dampingA, dataAs<const double>(a), dataAs<double>(a_inv));
    PFRT_TRY(launched(call, "embeddingInverseKernel"));
  }
  // B as pfrt_kfac_damped_inverses' composed refresh: the dispatching
  // pfrt_kfac_inverse, retried with tenfold damping.
  int32_t outcomeB = PFRT_KFAC_KEPT_PREVIOUS;
  double dampingB = root / pi;
  for (int32_t attempt = 0; attempt <= retries; ++attempt) {
    const pfrt_status status = pfrt_kfac_inverse(ctx, b, dampingB, b_inv);
    if (status == PFRT_OK) {
      outcomeB = attempt == 0 ? PFRT_KFAC_INVERTED : PFRT_KFAC_MORE_DAMPING;
      break;
    }
    if (status != PFRT_NUMERIC)
      return status;
    dampingB = dampingB > 0 ? dampingB * 10 : 1e-6;
  }
  if (outcome)
    *outcome = outcomeA > outcomeB ? outcomeA : outcomeB;
  return PFRT_OK;
}

pfrt_status kfacPreconditionEmbeddingEntry(pfrt_context *ctx, const pfrt_tensor *a_inv,
                                           const pfrt_tensor *b_inv, const pfrt_tensor *grad_w,
                                           int32_t w_transposed, const pfrt_tensor *out_w) {
  Call call(ctx, "pfrt_kfac_precondition_embedding");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkEmbeddingPrecondition(call, a_inv, b_inv, grad_w, w_transposed, out_w));
  const bool transposed = w_transposed != 0;
  const int64_t vocab = a_inv->shape[0], h = b_inv->shape[0];
  if (vocab == 0 || h == 0)
    return PFRT_OK;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    cudaStream_t s = streamOf(ctx);
    void *ws = nullptr;
    PFRT_TRY(scratch(call, sizeof(T) * size_t(vocab * h), &ws));
    T *t = static_cast<T *>(ws);
    const T *pa = dataAs<const T>(a_inv), *pb = dataAs<const T>(b_inv),
            *g = dataAs<const T>(grad_w);
    T *out = dataAs<T>(out_w);
    if (!transposed) {
      // t = diag(a_inv) G, out = t B^-1.
      scaleRowsOrColumnsKernel<<<blocksFor(vocab * h), kThreads, 0, s>>>(vocab, h, true, pa, g, t);
      PFRT_TRY(launched(call, "scaleRowsOrColumnsKernel"));
      return rowMajorGemm<T>(call, false, false, vocab, h, h, 1.0, t, h, pb, h, 0.0, out, h);
    }
    // t = B^-1 G ([h, vocab]), out = t diag(a_inv).
    PFRT_TRY(rowMajorGemm<T>(call, false, false, h, vocab, h, 1.0, pb, h, g, vocab, 0.0, t, vocab));
    scaleRowsOrColumnsKernel<<<blocksFor(vocab * h), kThreads, 0, s>>>(h, vocab, false, pa, t, out);
    return launched(call, "scaleRowsOrColumnsKernel");
  };
  return a_inv->dtype == PFRT_F32 ? run(float()) : run(double());
}

} // namespace

void registerLinalg(KernelTable &t) {
  t.pfrt_matmul = matmulEntry;
  t.pfrt_gemm = gemmEntry;
  t.pfrt_linear = linearEntry;
  t.pfrt_linear_backward = linearBackwardEntry;
  t.pfrt_kfac_factor = kfacFactorEntry;
  t.pfrt_kfac_pi = kfacPiEntry;
  t.pfrt_kfac_inverse = kfacInverseEntry;
  t.pfrt_all_finite = allFiniteEntry;
  t.pfrt_kfac_precondition = kfacPreconditionEntry;
  // The pi-damped refresh composed of the dispatching pfrt_kfac_pi and
  // pfrt_kfac_inverse (common/KfacRefresh.cpp), which then run on the GPU.
  // Not the CPU's own: that one runs LAPACK on host memory.
  t.pfrt_kfac_damped_inverses = pfrt::kfacDampedInversesComposed;
  t.pfrt_kfac_eigen = kfacEigenEntry;
  t.pfrt_kfac_precondition_eigen = kfacPreconditionEigenEntry;
  // Likewise the eigen refresh, composed of the dispatching pfrt_kfac_eigen.
  t.pfrt_kfac_eigen_refresh = pfrt::kfacEigenRefreshComposed;
  t.pfrt_kfac_layer_norm_factor = kfacLayerNormFactorEntry;
  t.pfrt_kfac_precondition_layer_norm = kfacPreconditionLayerNormEntry;
  t.pfrt_kfac_embedding_factor = kfacEmbeddingFactorEntry;
  t.pfrt_kfac_embedding_inverses = kfacEmbeddingInversesEntry;
  t.pfrt_kfac_precondition_embedding = kfacPreconditionEmbeddingEntry;
}

} // namespace pfrt::cuda
