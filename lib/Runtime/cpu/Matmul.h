//===- Matmul.h - numpy-matmul operands shared by forward and backward -*- C++ -*-===//
#ifndef PF_RUNTIME_CPU_MATMUL_H
#define PF_RUNTIME_CPU_MATMUL_H

#include "../common/Call.h"
#include "../common/Shape.h"

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

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_MATMUL_H
