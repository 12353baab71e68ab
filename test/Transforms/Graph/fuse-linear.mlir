// RUN: pf-opt %s -split-input-file --pf-fuse-linear | FileCheck %s

pf.param @w_in_out : tensor<8x16xf32>
pf.param @w_out_in : tensor<16x8xf32>
pf.param @b : tensor<16xf32>
pf.param @b_wrong : tensor<8xf32>
pf.param @b_2d : tensor<1x16xf32>

// MatMul with a pre-transposed [in, out] parameter, plus a bias.
// CHECK-LABEL: func.func @matmul_add(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK-DAG: %[[W:.*]] = pf.param_ref @w_in_out
// CHECK-DAG: %[[B:.*]] = pf.param_ref @b
// CHECK: %[[Y:.*]] = pf.linear %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NOT: pf.matmul
// CHECK-NOT: pf.add
// CHECK: return %[[Y]]
func.func @matmul_add(%x: tensor<2x4x8xf32>) -> tensor<2x4x16xf32> {
  %w = pf.param_ref @w_in_out : tensor<8x16xf32>
  %m = pf.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %b = pf.param_ref @b : tensor<16xf32>
  %y = pf.add %m, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

pf.param @w_out_in : tensor<16x8xf32>
pf.param @b : tensor<16xf32>

// The Hugging Face layout: Transpose of an [out, in] parameter; the linear
// reads the parameter itself with transpose_weight. The bias comes first in
// the Add, as PyTorch exports it.
// CHECK-LABEL: func.func @transposed_bias_first(
// CHECK-DAG: %[[W:.*]] = pf.param_ref @w_out_in
// CHECK-DAG: %[[B:.*]] = pf.param_ref @b
// CHECK: %[[Y:.*]] = pf.linear %arg0, %[[W]], %[[B]] {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @transposed_bias_first(%x: tensor<2x4x8xf32>) -> tensor<2x4x16xf32> {
  %w = pf.param_ref @w_out_in : tensor<16x8xf32>
  %t = pf.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = pf.matmul %x, %t : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %b = pf.param_ref @b : tensor<16xf32>
  %y = pf.add %b, %m : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

pf.param @w_out_in : tensor<16x8xf32>

// No bias; a Transpose without perm (reverse) is the same as [1, 0].
// CHECK-LABEL: func.func @no_bias(
// CHECK: %[[Y:.*]] = pf.linear %arg0, %{{.*}} {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @no_bias(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = pf.param_ref @w_out_in : tensor<16x8xf32>
  %t = pf.transpose %w : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = pf.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

// -----

pf.param @w_out_in : tensor<16x8xf32>
pf.param @b : tensor<16xf32>
pf.param @w_in_out : tensor<8x16xf32>

// Gemm with transB and C, and Gemm without transB or C.
// CHECK-LABEL: func.func @gemm(
// CHECK: %[[WT:.*]] = pf.param_ref @w_out_in
// CHECK: %[[B:.*]] = pf.param_ref @b
// CHECK: %[[Y1:.*]] = pf.linear %arg0, %[[WT]], %[[B]] {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: %[[W:.*]] = pf.param_ref @w_in_out
// CHECK: %[[Y2:.*]] = pf.linear %arg0, %[[W]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: pf.gemm
// CHECK: return %[[Y1]], %[[Y2]]
func.func @gemm(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %wt = pf.param_ref @w_out_in : tensor<16x8xf32>
  %b = pf.param_ref @b : tensor<16xf32>
  %y1 = pf.gemm %x, %wt, %b {transB} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w = pf.param_ref @w_in_out : tensor<8x16xf32>
  %y2 = pf.gemm %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %y1, %y2 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

pf.param @b : tensor<16xf32>

// Not fused: the weight is an activation (attention scores), not a parameter.
// CHECK-LABEL: func.func @activation_weight(
// CHECK-NOT: pf.linear
// CHECK: pf.matmul %arg0, %arg1
// CHECK: pf.add
func.func @activation_weight(%q: tensor<4x8xf32>, %k: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %m = pf.matmul %q, %k : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = pf.param_ref @b : tensor<16xf32>
  %y = pf.add %m, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Not fused: a Transpose of an activation.
// CHECK-LABEL: func.func @transposed_activation(
// CHECK-NOT: pf.linear
// CHECK: pf.matmul
func.func @transposed_activation(%x: tensor<4x8xf32>, %k: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %t = pf.transpose %k {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = pf.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

// -----

pf.param @w_in_out : tensor<8x16xf32>
pf.param @b_2d : tensor<1x16xf32>

// A bias of the wrong size (8, not 16) or rank (1x16) stays a separate Add;
// the MatMul alone becomes the linear.
// CHECK-LABEL: func.func @bias_wrong_size(
// CHECK: %[[L:.*]] = pf.linear %arg0, %{{[^,]*}} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = pf.add %[[L]], %{{.*}} : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
// CHECK: return %[[Y]]
func.func @bias_wrong_size(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = pf.param_ref @w_in_out : tensor<8x16xf32>
  %m = pf.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = pf.param_ref @b_2d : tensor<1x16xf32>
  %y = pf.add %m, %b : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

pf.param @w_out_in : tensor<16x8xf32>

// CHECK-LABEL: func.func @bias_wrong_features(
// CHECK: %[[L:.*]] = pf.linear %arg0, %{{[^,]*}} {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK: pf.add %[[L]], %arg1
func.func @bias_wrong_features(%x: tensor<4x8xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %w = pf.param_ref @w_out_in : tensor<16x8xf32>
  %t = pf.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %m = pf.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = pf.add %m, %b : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

pf.param @w_in_out : tensor<8x16xf32>
pf.param @b : tensor<16xf32>

// The product is read elsewhere too: the Add cannot be absorbed.
// CHECK-LABEL: func.func @product_shared(
// CHECK: %[[L:.*]] = pf.linear %arg0, %{{[^,]*}} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[Y:.*]] = pf.add %[[L]], %{{.*}}
// CHECK: return %[[Y]], %[[L]]
func.func @product_shared(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %w = pf.param_ref @w_in_out : tensor<8x16xf32>
  %m = pf.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = pf.param_ref @b : tensor<16xf32>
  %y = pf.add %m, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

pf.param @w_in_out : tensor<8x16xf32>
pf.param @b_wrong : tensor<8xf32>
pf.param @b_2d : tensor<1x16xf32>

// Not fused: Gemm with alpha != 1, with transA, or with a wrong-size C.
// CHECK-LABEL: func.func @gemm_not_linear(
// CHECK-NOT: pf.linear
// CHECK-COUNT-3: pf.gemm
// CHECK-NOT: pf.linear
func.func @gemm_not_linear(%x: tensor<4x8xf32>, %xt: tensor<8x4xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %w = pf.param_ref @w_in_out : tensor<8x16xf32>
  %y1 = pf.gemm %x, %w {alpha = 2.0 : f32} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y2 = pf.gemm %xt, %w {transA} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = pf.param_ref @b_wrong : tensor<8xf32>
  %c = pf.param_ref @b_2d : tensor<1x16xf32>
  %y3 = pf.gemm %x, %w, %c : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  return %y1, %y2, %y3 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
