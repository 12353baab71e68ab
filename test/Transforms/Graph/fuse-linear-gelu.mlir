// RUN: pf-opt %s -split-input-file --pf-fuse-linear-gelu --verify-diagnostics | FileCheck %s

// BERT's intermediate layer (the tanh form keeps its approximation).
// CHECK-LABEL: func.func @intermediate(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[B:[^:]*]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:.*]] = pf.linear_gelu %[[X]], %[[W]], %[[B]] {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[Z:.*]] = pf.linear_gelu %[[X]], %[[W]] {approximate = "tanh", transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @intermediate(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = pf.linear %x, %w, %b {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = pf.gelu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = pf.linear %x, %w {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = pf.gelu %g {approximate = "tanh"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y, %z : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Left alone: a product that is also returned.
// CHECK-LABEL: func.func @shared(
// CHECK: pf.linear
// CHECK: pf.gelu
// CHECK-NOT: pf.linear_gelu
func.func @shared(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = pf.linear %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = pf.gelu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

func.func @bad_approximation(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %y = pf.linear_gelu %x, %w {approximate = "fast"} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
