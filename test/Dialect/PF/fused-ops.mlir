// Round trip of the fused ops created by the graph passes.
// RUN: pf-opt %s | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// The weight is [in, out], or [out, in] with transpose_weight; the last input
// dimension is replaced by the output features.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[WT:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<8xf32>, %[[D:.*]]: tensor<?x4xf32>, %[[U:.*]]: tensor<*xf32>)
// CHECK-NEXT: %[[W:.*]] = pf.param_ref @w : tensor<4x8xf32>
// CHECK-NEXT: pf.linear %[[X]], %[[W]] : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: pf.linear %[[X]], %[[WT]], %[[B]] {transpose_weight} : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: pf.linear %[[D]], %[[W]], %[[B]] : (tensor<?x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: pf.linear %[[U]], %[[W]] : (tensor<*xf32>, tensor<4x8xf32>) -> tensor<*xf32>
// GENERIC-LABEL: sym_name = "linear"
// GENERIC: "pf.linear"(%{{.*}}, %{{.*}}) : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// GENERIC: "pf.linear"(%{{.*}}, %{{.*}}, %{{.*}}) <{transpose_weight}> : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
pf.param @w : tensor<4x8xf32>
func.func @linear(%x: tensor<2x3x4xf32>, %wt: tensor<8x4xf32>, %b: tensor<8xf32>,
                  %d: tensor<?x4xf32>, %u: tensor<*xf32>) {
  %w = pf.param_ref @w : tensor<4x8xf32>
  %0 = pf.linear %x, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %1 = pf.linear %x, %wt, %b {transpose_weight}
      : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %2 = pf.linear %d, %w, %b : (tensor<?x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %3 = pf.linear %u, %w : (tensor<*xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  return
}

// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT: pf.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.layer_norm %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.layer_norm %{{.*}}, %{{.*}} : (tensor<2x3x4xbf16>, tensor<1xbf16>) -> tensor<2x3x4xbf16>
// GENERIC-LABEL: sym_name = "layer_norm"
// GENERIC: "pf.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) <{axis = -1 : i64, epsilon = 9.99999974E-6 : f32}>
func.func @layer_norm(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %s2: tensor<3x4xf32>,
                      %h: tensor<2x3x4xbf16>, %one: tensor<1xbf16>) {
  %0 = pf.layer_norm %x, %s, %s : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %1 = pf.layer_norm %x, %s2 {axis = 1, epsilon = 1.0e-12 : f32}
      : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  // A size-1 scale broadcasts over the normalized dimension.
  %2 = pf.layer_norm %h, %one : (tensor<2x3x4xbf16>, tensor<1xbf16>) -> tensor<2x3x4xbf16>
  return
}

// CHECK-LABEL: func.func @gelu
// CHECK-NEXT: pf.gelu %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.gelu %{{.*}} {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.gelu %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-LABEL: sym_name = "gelu"
// GENERIC: "pf.gelu"(%{{.*}}) <{approximate = "none"}>
// GENERIC: "pf.gelu"(%{{.*}}) <{approximate = "tanh"}>
func.func @gelu(%x: tensor<2x3xf32>) {
  %0 = pf.gelu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = pf.gelu %x {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = pf.gelu %x {approximate = "none"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
