// RUN: pf-opt %s -split-input-file --pf-fold-matmul-transposes | FileCheck %s

// Attention's scores: the heads of q read as [B,H,S,D] (rows H*D apart) and
// those of k as [B,H,D,S] (column-major): no transpose is left.
// CHECK-LABEL: func.func @scores(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x16x4x8xf32>, %[[K:[^:]*]]: tensor<2x16x4x8xf32>)
// CHECK-NEXT: %[[S:.*]] = pf.permuted_matmul %[[Q]], %[[K]] {lhs_perm = array<i64: 0, 2, 1, 3>, rhs_perm = array<i64: 0, 2, 3, 1>} : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NEXT: return %[[S]]
func.func @scores(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32> {
  %qt = pf.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %kt = pf.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x8x16xf32>
  %s = pf.matmul %qt, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Attention's context: probabilities times the heads of v, merged back to
// [B,S,H,D] by the transpose after the product, which the op writes directly.
// CHECK-LABEL: func.func @context(
// CHECK-SAME: %[[P:[^:]*]]: tensor<2x4x16x16xf32>, %[[V:[^:]*]]: tensor<2x16x4x8xf32>)
// CHECK-NEXT: %[[C:.*]] = pf.permuted_matmul %[[P]], %[[V]] {result_perm = array<i64: 0, 2, 1, 3>, rhs_perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x16xf32>, tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @context(%p: tensor<2x4x16x16xf32>, %v: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %vt = pf.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %c = pf.matmul %p, %vt : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %ct = pf.transpose %c {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  return %ct : tensor<2x16x4x8xf32>
}

// -----

// Left alone: a transpose that leaves the matrix without a unit-stride
// dimension ([4,2,3] read as [3,2,4]: strides 3 and 6); a batch that
// broadcasts (a 2-D weight); a transpose of the result that would make its
// columns strided (the product transposed in its last two dimensions).
// CHECK-LABEL: func.func @unfolded(
// CHECK-NOT: pf.permuted_matmul
// CHECK: return
func.func @unfolded(%x: tensor<4x2x3xf32>, %y: tensor<3x4x5xf32>, %w: tensor<5x4xf32>, %z: tensor<3x2x4xf32>) -> (tensor<3x2x5xf32>, tensor<3x4x4xf32>, tensor<3x5x2xf32>) {
  %xt = pf.transpose %x {perm = array<i64: 2, 1, 0>} : (tensor<4x2x3xf32>) -> tensor<3x2x4xf32>
  %a = pf.matmul %xt, %y : (tensor<3x2x4xf32>, tensor<3x4x5xf32>) -> tensor<3x2x5xf32>
  %b = pf.matmul %y, %w : (tensor<3x4x5xf32>, tensor<5x4xf32>) -> tensor<3x4x4xf32>
  %c = pf.matmul %z, %y : (tensor<3x2x4xf32>, tensor<3x4x5xf32>) -> tensor<3x2x5xf32>
  %ct = pf.transpose %c {perm = array<i64: 0, 2, 1>} : (tensor<3x2x5xf32>) -> tensor<3x5x2xf32>
  return %a, %b, %ct : tensor<3x2x5xf32>, tensor<3x4x4xf32>, tensor<3x5x2xf32>
}
