// RUN: pf-opt %s -split-input-file --pf-fuse-add-layer-norm | FileCheck %s

// A residual connection and its LayerNorm.
// CHECK-LABEL: func.func @residual(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[R:[^:]*]]: tensor<2x4x8xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = pf.add_layer_norm %[[X]], %[[R]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @residual(%x: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %s = pf.add %x, %r : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = pf.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-12 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Left alone: a sum that broadcasts (the embeddings' position rows); a sum
// with another user.
// CHECK-LABEL: func.func @unfused(
// CHECK-NOT: pf.add_layer_norm
// CHECK: return
func.func @unfused(%x: tensor<2x4x8xf32>, %p: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %s = pf.add %x, %p : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %y = pf.layer_norm %s, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %t = pf.add %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %z = pf.layer_norm %t, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y, %z, %t : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
