//===- MatmulBackward.cu - The gradients of numpy-style matmul (cuBLAS) ----===//
//
// grad_a[o] = dy[o] . b[o]^T and grad_b[o] = a[o]^T . dy[o] for every output
// batch o, summed into the operand batch that o read (cpu/BackwardLinalg.cpp
// does the same on the CPU, with the same checks and messages: cpu/Matmul.h
// is shared). The shapes that matter get one cuBLAS call each:
//  - the other operand unbatched and this one batched like the output (a
//    linear layer written as matmul): one GEMM over all rows, or over all
//    rows as the contraction for the weight;
//  - this operand batched like the output (attention's two matmuls): one
//    strided batched GEMM, the other operand's stride 0 when it is shared;
// and the rest (an operand broadcast along some batch dimensions) one GEMM
// per output batch, added in a fixed order with beta = 1, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "../common/TensorChecks.h"
#include "../cpu/Matmul.h"
#include "GemmPrecision.h"
#include "Launch.h"

#include <type_traits>

namespace pfrt::cuda {
namespace {

using cpu::MatmulOperand;

/// One row-major GEMM operand: its data, row length and the elements from
/// one batch to the next (0: one matrix for every batch).
template <class T>
struct GemmOperand {
  const T *data;
  int64_t ld, stride;
};

/// Row-major C[i] = op(A[i]) op(B[i]) + beta C[i] for i < count, with op(A)
/// [m, k] and op(B) [k, n], as the column-major C^T = op(B)^T op(A)^T.
template <class T>
pfrt_status batchedGemm(const Call &call, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                        GemmOperand<T> a, GemmOperand<T> b, double beta, T *c, int64_t ldc,
                        int64_t strideC, int64_t count) {
  if (m == 0 || n == 0 || count == 0)
    return PFRT_OK;
  auto ld = [](int64_t v) { return int(v > 0 ? v : 1); }; // cuBLAS wants >= 1
  const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasHandle_t h = stateOf(call.context()).blas;
  if constexpr (std::is_same_v<T, float>) {
    const float one = 1, fb = float(beta);
    cublasComputeType_t compute;
    if (modelGemmCompute(call, compute))
      return check(call,
                   lib().cublasGemmStridedBatchedEx(
                       h, opB, opA, int(n), int(m), int(k), &one, b.data, CUDA_R_32F, ld(b.ld),
                       b.stride, a.data, CUDA_R_32F, ld(a.ld), a.stride, &fb, c, CUDA_R_32F,
                       ld(ldc), strideC, int(count), compute, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx");
    return check(call,
                 lib().cublasSgemmStridedBatched(h, opB, opA, int(n), int(m), int(k), &one, b.data,
                                                 ld(b.ld), b.stride, a.data, ld(a.ld), a.stride,
                                                 &fb, c, ld(ldc), strideC, int(count)),
                 "cublasSgemmStridedBatched");
  } else {
    const double one = 1;
    return check(call,
                 lib().cublasDgemmStridedBatched(h, opB, opA, int(n), int(m), int(k), &one, b.data,
                                                 ld(b.ld), b.stride, a.data, ld(a.ld), a.stride,
                                                 &beta, c, ld(ldc), strideC, int(count)),
                 "cublasDgemmStridedBatched");
  }
}

/// Operand batch index (in matrices) of each output batch: the output's
/// batch dimensions with the operand's strides, 0 where it was broadcast.
StridedIndex operandBatches(const Shape &outBatch, const Shape &operand) {
  int64_t natural[PFRT_MAX_RANK];
  contiguousStrides(operand, natural);
  StridedIndex map;
  const int32_t shift = outBatch.rank - operand.rank;
  for (int32_t d = 0; d < outBatch.rank; ++d) {
    const int32_t j = d - shift;
    map.push(outBatch.dims[d], (j >= 0 && operand.dims[j] != 1) ? natural[j] : 0);
  }
  return map;
}

/// The element stride between an operand's matrices when it steps with the
/// output's batches uniformly: `matrix` when its batch is the output's, 0
/// when it has one matrix; false for a partial broadcast.
bool uniformStride(const Shape &operand, const Shape &outBatch, int64_t matrix, int64_t &stride) {
  if (operand.numel() == 1) {
    stride = 0;
    return true;
  }
  if (operand.numel() != outBatch.numel())
    return false;
  stride = matrix; // equal counts and broadcastable: the same batches
  return true;
}

/// How the output batches feed the gradient of one operand: gradient
/// batch g sums the output batches kept.offset(g) + reduced.offset(r).
struct GradientGroups {
  StridedIndex kept, reduced;
  GradientGroups(const Shape &outBatch, const Shape &operand) {
    int64_t strides[PFRT_MAX_RANK];
    contiguousStrides(outBatch, strides);
    const int32_t shift = outBatch.rank - operand.rank;
    for (int32_t d = 0; d < outBatch.rank; ++d) {
      if (outBatch.dims[d] == 1)
        continue;
      const int32_t j = d - shift;
      const bool broadcast = j < 0 || operand.dims[j] == 1;
      (broadcast ? reduced : kept).push(outBatch.dims[d], strides[d]);
    }
  }
};

/// One side's gradient: grad[g] (+)= the sum over the output batches o
/// feeding gradient batch g of op(X[o]) op(Y[o]) ([rows, cols], contraction
/// `inner`), where X and Y are each dy (one matrix per output batch) or the
/// other operand (its batch shape broadcast to the output's).
template <class T>
struct SideGradient {
  bool transX, transY;
  int64_t rows, cols, inner;
  GemmOperand<T> x, y;  ///< strides: elements per matrix
  Shape xBatch, yBatch; ///< their batch shapes
  T *grad;
  bool accumulate;
};

/// The general case: one GEMM per output batch, beta = 1 after the first
/// contribution to a gradient batch (or from the start when accumulating).
template <class T>
pfrt_status groupedGradient(const Call &call, const SideGradient<T> &s, const Shape &outBatch,
                            const Shape &gradBatch) {
  const GradientGroups groups(outBatch, gradBatch);
  const StridedIndex xOf = operandBatches(outBatch, s.xBatch);
  const StridedIndex yOf = operandBatches(outBatch, s.yBatch);
  const int64_t size = s.rows * s.cols, members = groups.reduced.count();
  for (int64_t g = 0; g < groups.kept.count(); ++g) {
    T *dst = s.grad + g * size;
    for (int64_t r = 0; r < members; ++r) {
      const int64_t o = groups.kept.offset(g) + groups.reduced.offset(r);
      GemmOperand<T> x = s.x, y = s.y;
      x.data += xOf.offset(o) * s.x.stride;
      y.data += yOf.offset(o) * s.y.stride;
      const double beta = (s.accumulate || r > 0) ? 1.0 : 0.0;
      PFRT_TRY(batchedGemm<T>(call, s.transX, s.transY, s.rows, s.cols, s.inner, x, y, beta, dst,
                              s.cols, 0, 1));
    }
  }
  return PFRT_OK;
}

/// grad = the side's gradient with the fewest cuBLAS calls: one strided
/// batched GEMM when the gradient has a matrix per output batch and X and
/// Y step uniformly, else groupedGradient.
template <class T>
pfrt_status sideGradient(const Call &call, const SideGradient<T> &s, const Shape &outBatch,
                         const Shape &gradBatch) {
  const int64_t size = s.rows * s.cols, outBatches = outBatch.numel();
  if (size == 0 || gradBatch.numel() == 0)
    return PFRT_OK;
  if (s.inner == 0 || outBatches == 0) { // nothing to sum: 0
    if (s.accumulate)
      return PFRT_OK;
    return check(
        call,
        cudaMemsetAsync(s.grad, 0, gradBatch.numel() * size * sizeof(T), streamOf(call.context())),
        "cudaMemsetAsync");
  }
  GemmOperand<T> x = s.x, y = s.y;
  if (gradBatch.numel() == outBatches && uniformStride(s.xBatch, outBatch, s.x.stride, x.stride) &&
      uniformStride(s.yBatch, outBatch, s.y.stride, y.stride))
    return batchedGemm<T>(call, s.transX, s.transY, s.rows, s.cols, s.inner, x, y,
                          s.accumulate ? 1.0 : 0.0, s.grad, s.cols, size, outBatches);
  return groupedGradient(call, s, outBatch, gradBatch);
}

template <class T>
pfrt_status matmulGrads(const Call &call, const MatmulOperand &lhs, const MatmulOperand &rhs,
                        const Shape &batch, const T *a, const T *b, const T *dy, T *ga, T *gb,
                        bool accA, bool accB) {
  const int64_t m = lhs.rows, k = lhs.cols, n = rhs.cols;
  const int64_t outBatches = batch.numel();
  // A weight-like b (one matrix) and an a batched like the output (the
  // CPU's fast case): all rows of a and dy as one matrix, so each gradient
  // is one GEMM (for gb the batches join the contraction).
  const bool flat = rhs.batch.numel() == 1 && lhs.batch.numel() == outBatches;
  const Shape one;
  if (ga) { // ga[M, K] = dy[M, N] . b[K, N]^T
    SideGradient<T> s{false,         true,  m,         k,  n,   {dy, n, m * n},
                      {b, n, k * n}, batch, rhs.batch, ga, accA};
    if (flat) {
      s.rows = m * outBatches;
      s.xBatch = s.yBatch = one;
      PFRT_TRY(sideGradient(call, s, one, one));
    } else {
      PFRT_TRY(sideGradient(call, s, batch, lhs.batch));
    }
  }
  if (gb) { // gb[K, N] = a[M, K]^T . dy[M, N]
    SideGradient<T> s{true,           false,     k,     n,  m,   {a, k, m * k},
                      {dy, n, m * n}, lhs.batch, batch, gb, accB};
    if (flat) {
      s.inner = m * outBatches;
      s.xBatch = s.yBatch = one;
      return sideGradient(call, s, one, one);
    }
    return sideGradient(call, s, batch, rhs.batch);
  }
  return PFRT_OK;
}

pfrt_status matmulBackwardEntry(pfrt_context *ctx, const pfrt_tensor *a, const pfrt_tensor *b,
                                const pfrt_tensor *grad_out, int32_t accumulate_a,
                                int32_t accumulate_b, const pfrt_tensor *grad_a,
                                const pfrt_tensor *grad_b) {
  // The CPU backend's checks, in its order and with its messages.
  Call call(ctx, "pfrt_matmul_backward");
  PFRT_TRY(beginCuda(call));
  cpu::MatmulBackwardShapes shapes;
  PFRT_TRY(cpu::checkMatmulBackward(call, a, b, grad_out, grad_a, grad_b, shapes));
  const cpu::MatmulOperand &lhs = shapes.lhs, &rhs = shapes.rhs;
  const Shape &batch = shapes.batch;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return matmulGrads<T>(call, lhs, rhs, batch, dataAs<const T>(a), dataAs<const T>(b),
                          dataAs<const T>(grad_out), grad_a ? dataAs<T>(grad_a) : nullptr,
                          grad_b ? dataAs<T>(grad_b) : nullptr, accumulate_a != 0,
                          accumulate_b != 0);
  };
  return a->dtype == PFRT_F32 ? run(float()) : run(double());
}

} // namespace

void registerMatmulBackward(KernelTable &t) { t.pfrt_matmul_backward = matmulBackwardEntry; }

} // namespace pfrt::cuda
