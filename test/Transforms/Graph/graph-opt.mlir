// RUN: pf-opt %s -split-input-file --pf-graph-opt | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-graph-opt="fuse=false" | FileCheck %s --check-prefix=NOFUSE
// RUN: pf-opt %s -split-input-file --pf-graph-opt="untie=false" | FileCheck %s --check-prefix=NOUNTIE

// A small imported-looking graph: an encoder block's FFN with an
// Identity-deduplicated LayerNorm weight, a dynamic-shape Reshape idiom,
// a decomposed LayerNorm, an erf GELU between two transposed-weight linears,
// and leftovers for DCE.
pf.param @"encoder.layer.0.fc1.weight" : tensor<16x8xf32> = dense<0.5> : tensor<16x8xf32>
pf.param @"encoder.layer.0.fc1.bias" : tensor<16xf32> = dense<0.0> : tensor<16xf32>
pf.param @"encoder.layer.0.fc2.weight" : tensor<8x16xf32> = dense<0.25> : tensor<8x16xf32>
pf.param @"encoder.layer.0.ln.weight" : tensor<8xf32> = dense<1.0> : tensor<8xf32>
pf.param @"encoder.layer.0.ln.bias" : tensor<8xf32> = dense<0.0> : tensor<8xf32>
pf.param @unused : tensor<4xf32>

// The dedup'd name comes back as its own parameter; the unused one goes.
// CHECK: pf.param @encoder.layer.0.fc1.weight
// CHECK-NEXT: pf.param @encoder.layer.0.fc1.bias
// CHECK-NEXT: pf.param @encoder.layer.0.fc2.weight
// CHECK-NEXT: pf.param @encoder.layer.0.ln.weight
// CHECK-NEXT: pf.param @encoder.layer.0.ln.bias
// CHECK-NEXT: pf.param @encoder.layer.0.fc2.bias : tensor<8xf32> = dense<0.000000e+00>
// CHECK-NOT: pf.param

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[W1:.*]] = pf.param_ref @encoder.layer.0.fc1.weight
// CHECK: %[[B1:.*]] = pf.param_ref @encoder.layer.0.fc1.bias
// CHECK: %[[H:.*]] = pf.linear %[[X]], %[[W1]], %[[B1]] {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[G:.*]] = pf.gelu %[[H]] : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[W2:.*]] = pf.param_ref @encoder.layer.0.fc2.weight
// CHECK: %[[B2:.*]] = pf.param_ref @encoder.layer.0.fc2.bias
// CHECK: %[[O:.*]] = pf.linear %[[G]], %[[W2]], %[[B2]] {transpose_weight} : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// The Reshape to Shape(x) folds away entirely.
// CHECK-NOT: pf.reshape
// CHECK: %[[S:.*]] = pf.add %[[O]], %[[X]]
// CHECK: %[[LW:.*]] = pf.param_ref @encoder.layer.0.ln.weight
// CHECK: %[[LB:.*]] = pf.param_ref @encoder.layer.0.ln.bias
// CHECK: %[[LN:.*]] = pf.layer_norm %[[S]], %[[LW]], %[[LB]] {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[LN]] : tensor<2x4x8xf32>

// Without fusion, shapes are still inferred and folded, and DCE still runs.
// NOFUSE-LABEL: func.func @main(
// NOFUSE-SAME: -> tensor<2x4x8xf32>
// NOFUSE-NOT: pf.linear
// NOFUSE-NOT: pf.shape
// NOFUSE-NOT: pf.exp
// NOFUSE: pf.matmul
// NOFUSE: pf.erf
// NOFUSE: pf.reduce_mean

// Without untying, the Identity folds away and both linears read the same
// parameter.
// NOUNTIE-NOT: pf.param @encoder.layer.0.fc2.bias
// NOUNTIE: %[[B:.*]] = pf.param_ref @encoder.layer.0.ln.bias
// NOUNTIE: pf.linear %{{[^,]*}}, %{{[^,]*}}, %[[B]] {transpose_weight} : (tensor<2x4x16xf32>
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<*xf32> {
  %w1 = pf.param_ref @"encoder.layer.0.fc1.weight" : tensor<16x8xf32>
  %w1t = pf.transpose %w1 {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<*xf32>
  %m1 = pf.matmul %x, %w1t : (tensor<2x4x8xf32>, tensor<*xf32>) -> tensor<*xf32>
  %b1 = pf.param_ref @"encoder.layer.0.fc1.bias" : tensor<16xf32>
  %h = pf.add %m1, %b1 : (tensor<*xf32>, tensor<16xf32>) -> tensor<*xf32>
  // GELU (erf).
  %sqrt2 = pf.constant dense<1.41421354> : tensor<f32>
  %q = pf.div %h, %sqrt2 : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %e = pf.erf %q : (tensor<*xf32>) -> tensor<*xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %hm = pf.mul %h, %a : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %g = pf.mul %hm, %half : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  // Second linear; its bias is the LayerNorm bias deduplicated by the exporter.
  %w2 = pf.param_ref @"encoder.layer.0.fc2.weight" : tensor<8x16xf32>
  %w2t = pf.transpose %w2 {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<*xf32>
  %m2 = pf.matmul %g, %w2t : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %lb = pf.param_ref @"encoder.layer.0.ln.bias" : tensor<8xf32>
  %b2 = pf.identity %lb {pf.name = "encoder.layer.0.fc2.bias"} : (tensor<8xf32>) -> tensor<8xf32>
  %o = pf.add %b2, %m2 : (tensor<8xf32>, tensor<*xf32>) -> tensor<*xf32>
  // Reshape to Shape(x): folds to a constant shape.
  %sx = pf.shape %x : (tensor<2x4x8xf32>) -> tensor<3xi64>
  %r = pf.reshape %o, %sx : (tensor<*xf32>, tensor<3xi64>) -> tensor<*xf32>
  %s = pf.add %r, %x : (tensor<*xf32>, tensor<2x4x8xf32>) -> tensor<*xf32>
  // Decomposed LayerNorm.
  %mean = pf.reduce_mean %s {axes = array<i64: -1>} : (tensor<*xf32>) -> tensor<*xf32>
  %d = pf.sub %s, %mean : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %d, %two : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %var = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<*xf32>) -> tensor<*xf32>
  %eps = pf.constant dense<1.0e-12> : tensor<f32>
  %ve = pf.add %var, %eps : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %sd = pf.sqrt %ve : (tensor<*xf32>) -> tensor<*xf32>
  %n = pf.div %d, %sd : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %lw = pf.param_ref @"encoder.layer.0.ln.weight" : tensor<8xf32>
  %nw = pf.mul %n, %lw : (tensor<*xf32>, tensor<8xf32>) -> tensor<*xf32>
  %lb2 = pf.param_ref @"encoder.layer.0.ln.bias" : tensor<8xf32>
  %y = pf.add %nw, %lb2 : (tensor<*xf32>, tensor<8xf32>) -> tensor<*xf32>
  // Dead code.
  %u = pf.param_ref @unused : tensor<4xf32>
  %dead = pf.exp %u : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<*xf32>
}
