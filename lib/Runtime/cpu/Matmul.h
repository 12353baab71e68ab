//===- Matmul.h - numpy-matmul operands shared by forward and backward -*- C++ -*-===//
#ifndef PF_RUNTIME_CPU_MATMUL_H
#define PF_RUNTIME_CPU_MATMUL_H

#include "../common/Call.h"
#include "../common/Shape.h"
#include "../common/TensorChecks.h"

#include <climits>

namespace pfrt::cpu {

/// Work (multiply-adds) below which one GEMM is better run single-threaded
/// next to others than split across threads.
constexpr int64_t kSmallGemm = 1 << 21;

/// A matmul operand split into batch dimensions and one matrix.
struct MatmulOperand {
  Shape batch;
  int64_t rows = 0, cols = 0;
};

/// Splits a numpy-matmul operand: rank 1 is a row vector (a) or a column
/// vector (b).
inline MatmulOperand splitMatmulOperand(const pfrt_tensor &t, bool isLeft) {
  MatmulOperand op;
  if (t.rank == 1) {
    op.rows = isLeft ? 1 : t.shape[0];
    op.cols = isLeft ? t.shape[0] : 1;
    return op;
  }
  op.rows = t.shape[t.rank - 2];
  op.cols = t.shape[t.rank - 1];
  op.batch.rank = t.rank - 2;
  for (int32_t i = 0; i < op.batch.rank; ++i)
    op.batch.dims[i] = t.shape[i];
  return op;
}

/// Checks that a and b contract and their batches broadcast; sets `batch`
/// and `result` (the product's shape, 1-D operands' dimensions dropped).
inline pfrt_status matmulShapes(const Call &call, const pfrt_tensor &a, const pfrt_tensor &b,
                                const MatmulOperand &lhs, const MatmulOperand &rhs,
                                Shape &batch, Shape &result) {
  if (lhs.cols != rhs.rows)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "contraction dimensions differ: a %s has K = %lld, b %s "
                     "has K = %lld", ShapeStr(Shape::of(a)).c_str(),
                     static_cast<long long>(lhs.cols), ShapeStr(Shape::of(b)).c_str(),
                     static_cast<long long>(rhs.rows));
  if (!broadcastShapes(lhs.batch, rhs.batch, batch))
    return call.fail(PFRT_INVALID_ARGUMENT, "batch dimensions %s and %s do "
                     "not broadcast", ShapeStr(lhs.batch).c_str(),
                     ShapeStr(rhs.batch).c_str());
  result = batch;
  if (a.rank >= 2)
    result.push(lhs.rows);
  if (b.rank >= 2)
    result.push(rhs.cols);
  return PFRT_OK;
}

/// pfrt_matmul_backward's operands after the call began: the CPU and the
/// CUDA kernel share these checks and messages.
struct MatmulBackwardShapes {
  MatmulOperand lhs, rhs;
  Shape batch; // the output's batch dimensions
};

/// Checks a, b and grad_out (f32/f64 alike, contracting, grad_out of the
/// product's shape), each requested gradient of its operand's shape, and
/// that the flattened GEMM dimensions fit the BLAS int.
inline pfrt_status checkMatmulBackward(const Call &call, const pfrt_tensor *a, const pfrt_tensor *b,
                                       const pfrt_tensor *grad_out, const pfrt_tensor *grad_a,
                                       const pfrt_tensor *grad_b, MatmulBackwardShapes &shapes) {
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, a->dtype));
  PFRT_TRY(call.rankIn("a", a, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.rankIn("b", b, 1, PFRT_MAX_RANK));
  shapes.lhs = splitMatmulOperand(*a, true);
  shapes.rhs = splitMatmulOperand(*b, false);
  Shape dyShape;
  PFRT_TRY(matmulShapes(call, *a, *b, shapes.lhs, shapes.rhs, shapes.batch, dyShape));
  PFRT_TRY(call.shapeIs("grad_out", grad_out, dyShape));
  if (grad_a)
    PFRT_TRY(floatLike(call, "grad_a", grad_a, a->dtype, Shape::of(*a)));
  if (grad_b)
    PFRT_TRY(floatLike(call, "grad_b", grad_b, a->dtype, Shape::of(*b)));
  if (shapes.lhs.rows * shapes.batch.numel() > INT_MAX || shapes.rhs.cols > INT_MAX ||
      shapes.lhs.cols > INT_MAX)
    return call.fail(PFRT_UNSUPPORTED, "GEMM dimensions exceed the BLAS int range");
  return PFRT_OK;
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_MATMUL_H
