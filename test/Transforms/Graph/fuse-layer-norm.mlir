// RUN: pf-opt %s -split-input-file --pf-fuse-layer-norm | FileCheck %s

pf.param @w : tensor<8xf32>
pf.param @b : tensor<8xf32>
pf.param @w2 : tensor<4x8xf32>
pf.param @w1x8 : tensor<1x8xf32>
pf.param @w1x1x1x8 : tensor<1x1x1x8xf32>

// The PyTorch export: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div,
// Mul scale, Add bias.
// CHECK-LABEL: func.func @scale_bias(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK-DAG: %[[W:.*]] = pf.param_ref @w
// CHECK-DAG: %[[B:.*]] = pf.param_ref @b
// CHECK: %[[LN:.*]] = pf.layer_norm %[[X]], %[[W]], %[[B]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: pf.reduce_mean
// CHECK-NOT: pf.sqrt
// CHECK: return %[[LN]]
func.func @scale_bias(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %eps = pf.constant dense<1.0e-12> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = pf.sqrt %a : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %w = pf.param_ref @w : tensor<8xf32>
  %y = pf.mul %n, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %b = pf.param_ref @b : tensor<8xf32>
  %z = pf.add %b, %y : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// Without scale and bias the fused op gets a ones scale. The variance uses
// Mul(d, d), epsilon comes first in the Add. (Other tests use epsilon 1e-5,
// the default, which the printer elides.)
// CHECK-LABEL: func.func @no_scale_mul_square(
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32>)
// CHECK: %[[ONES:.*]] = pf.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK: %[[LN:.*]] = pf.layer_norm %[[X]], %[[ONES]] {axis = 1 : i64, epsilon = 9.99999997E-7 : f32} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: return %[[LN]]
func.func @no_scale_mul_square(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %p = pf.mul %d, %d : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = pf.constant dense<1.0e-6> : tensor<f32>
  %a = pf.add %eps, %v : (tensor<f32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

pf.param @w : tensor<8xf32>

// Scale only (no Add after the Mul).
// CHECK-LABEL: func.func @scale_only(
// CHECK: %[[W:.*]] = pf.param_ref @w
// CHECK: %[[LN:.*]] = pf.layer_norm %arg0, %[[W]] {axis = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[LN]]
func.func @scale_only(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %w = pf.param_ref @w : tensor<8xf32>
  %y = pf.mul %w, %n : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

pf.param @w2 : tensor<4x8xf32>

// Statistics over the two trailing dims: axis 1, a 4x8 scale.
// CHECK-LABEL: func.func @two_trailing_axes(
// CHECK: %[[W:.*]] = pf.param_ref @w2
// CHECK: pf.layer_norm %arg0, %[[W]] {axis = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
func.func @two_trailing_axes(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -2, -1>} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s = pf.sqrt %a : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  %w = pf.param_ref @w2 : tensor<4x8xf32>
  %y = pf.mul %n, %w : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

pf.param @w1x8 : tensor<1x8xf32>

// A scale with a leading 1 is reshaped to the normalized shape.
// CHECK-LABEL: func.func @scale_leading_one(
// CHECK-DAG: %[[W:.*]] = pf.param_ref @w1x8 : tensor<1x8xf32>
// CHECK-DAG: %[[SHAPE:.*]] = pf.constant dense<8> : tensor<1xi64>
// CHECK: %[[R:.*]] = pf.reshape %[[W]], %[[SHAPE]] : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<8xf32>
// CHECK: pf.layer_norm %arg0, %[[R]] {axis = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
func.func @scale_leading_one(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %w = pf.param_ref @w1x8 : tensor<1x8xf32>
  %y = pf.mul %n, %w : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A multiplier of the full shape is no LayerNorm scale: fused without it, the
// Mul stays.
// CHECK-LABEL: func.func @mul_not_scale(
// CHECK: %[[LN:.*]] = pf.layer_norm %arg0, %{{.*}} {axis = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: %[[Y:.*]] = pf.mul %[[LN]], %arg1
// CHECK: return %[[Y]]
func.func @mul_not_scale(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %y = pf.mul %n, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

pf.param @w1x1x1x8 : tensor<1x1x1x8xf32>

// A scale that broadcasts the result to a higher rank cannot be absorbed
// (pf.layer_norm keeps the input's shape): fused without it, the Mul stays.
// CHECK-LABEL: func.func @scale_adds_dims(
// CHECK: %[[LN:.*]] = pf.layer_norm %arg0, %{{.*}} {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[W:.*]] = pf.param_ref @w1x1x1x8
// CHECK: %[[Y:.*]] = pf.mul %[[LN]], %[[W]] : (tensor<2x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: return %[[Y]]
func.func @scale_adds_dims(%x: tensor<2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = pf.sqrt %a : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %w = pf.param_ref @w1x1x1x8 : tensor<1x1x1x8xf32>
  %y = pf.mul %n, %w : (tensor<2x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

pf.param @w : tensor<8xf32>
pf.param @w1x1x1x8 : tensor<1x1x1x8xf32>

// Likewise for a bias that adds dims: scale fused, the Add stays.
// CHECK-LABEL: func.func @bias_adds_dims(
// CHECK: %[[W:.*]] = pf.param_ref @w :
// CHECK: %[[LN:.*]] = pf.layer_norm %arg0, %[[W]] {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[Y:.*]] = pf.add %[[LN]], %{{.*}} : (tensor<2x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: return %[[Y]]
func.func @bias_adds_dims(%x: tensor<2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = pf.sqrt %a : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %w = pf.param_ref @w : tensor<8xf32>
  %nw = pf.mul %n, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %b = pf.param_ref @w1x1x1x8 : tensor<1x1x1x8xf32>
  %y = pf.add %nw, %b : (tensor<2x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Not a LayerNorm: statistics over a leading axis.
// CHECK-LABEL: func.func @not_trailing(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @not_trailing(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = pf.sqrt %a : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// Not a LayerNorm: the middle axis of three is not a trailing block.
// CHECK-LABEL: func.func @middle_axis(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @middle_axis(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: 1>} : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: 1>} : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %s = pf.sqrt %a : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  return %n : tensor<2x4x8xf32>
}

// -----

// Not fused: epsilon is not a constant.
// CHECK-LABEL: func.func @eps_not_constant(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @eps_not_constant(%x: tensor<2x8xf32>, %eps: tensor<f32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// Not fused: the variance raises to the power 3.
// CHECK-LABEL: func.func @cube(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @cube(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %three = pf.constant dense<3.0> : tensor<f32>
  %p = pf.pow %d, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// Not fused: mean and variance reduce over different axes.
// CHECK-LABEL: func.func @axes_differ(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @axes_differ(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %d = pf.sub %x, %m : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -2, -1>} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s = pf.sqrt %a : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = pf.div %d, %s : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  return %n : tensor<2x4x8xf32>
}

// -----

// Not fused: the mean drops the reduced dim (keepdims = false).
// CHECK-LABEL: func.func @no_keepdims(
// CHECK-NOT: pf.layer_norm
// CHECK: pf.div
func.func @no_keepdims(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = pf.reduce_mean %x {axes = array<i64: -1>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %d = pf.sub %x, %m : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %eps = pf.constant dense<1.0e-5> : tensor<f32>
  %a = pf.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = pf.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = pf.div %d, %s : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}

// -----

pf.param @w : tensor<8xf32>
pf.param @b : tensor<8xf32>

// ONNX LayerNormalization whose mean and inv-std outputs nobody reads.
// CHECK-LABEL: func.func @layer_normalization_unused_stats(
// CHECK: %[[W:.*]] = pf.param_ref @w
// CHECK: %[[B:.*]] = pf.param_ref @b
// CHECK: %[[LN:.*]] = pf.layer_norm %arg0, %[[W]], %[[B]] {epsilon = 9.99999996E-13 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: pf.layer_normalization
// CHECK: return %[[LN]]
func.func @layer_normalization_unused_stats(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = pf.param_ref @w : tensor<8xf32>
  %b = pf.param_ref @b : tensor<8xf32>
  %y, %mean, %inv = pf.layer_normalization %x, %w, %b {epsilon = 1.0e-12 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y : tensor<2x8xf32>
}

// -----

pf.param @w : tensor<8xf32>

// With a statistics output in use it stays.
// CHECK-LABEL: func.func @layer_normalization_used_stats(
// CHECK: %{{[^,]*}}, %[[MEAN:[^,]*]], %{{[^ ]*}} = pf.layer_normalization %arg0
// CHECK-NOT: pf.layer_norm
// CHECK: return %{{[^,]*}}, %[[MEAN]]
func.func @layer_normalization_used_stats(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>) {
  %w = pf.param_ref @w : tensor<8xf32>
  %y, %mean, %inv = pf.layer_normalization %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %mean : tensor<2x8xf32>, tensor<2x1xf32>
}
