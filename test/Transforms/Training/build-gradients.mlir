// RUN: pf-opt %s --split-input-file --pf-build-gradients --verify-diagnostics | FileCheck %s
// RUN: pf-opt %s --split-input-file --pf-build-gradients=wrt=inputs --verify-diagnostics | FileCheck %s --check-prefix=INPUTS

// A linear layer on a parameter read twice (tied): both gradients are summed
// into one `grad/w` result; the bias gets its own; the input gets none with
// the default wrt=params (and is the only gradient with wrt=inputs).
pf.param @w : tensor<4x3xf32>
pf.param @b : tensor<4xf32>
// CHECK-LABEL: func.func @tied(
// CHECK-SAME: -> (tensor<f32> {pf.name = "loss"}, tensor<4x3xf32> {pf.name = "grad/w"}, tensor<4xf32> {pf.name = "grad/b"})
// CHECK: pf.constant dense<1.000000e+00> : tensor<f32>
// The matmul's weight gradient Aᵀ·dy; then the linear's: dW by a transposed-A
// gemm over the tokens, db by a reduce_sum over them; no dx (wrt=params).
// CHECK: %[[DWM:.*]] = pf.matmul %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NOT: pf.linear
// CHECK: %[[DW:.*]] = pf.gemm %{{.*}}, %arg0 {{{.*}}transA} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[DB:.*]] = pf.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
// CHECK: %[[SUM:.*]] = pf.add %[[DW]], %[[DWM]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK: return %{{.*}}, %[[SUM]], %[[DB]] : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>

// INPUTS-LABEL: func.func @tied(
// INPUTS-SAME: -> (tensor<f32> {pf.name = "loss"}, tensor<2x3xf32> {pf.name = "grad/x"})
// dx = dy · W for the [out, in] weight: a linear without transpose_weight.
// INPUTS: %[[DX:.*]] = pf.linear %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// INPUTS: return %{{.*}}, %[[DX]] : tensor<f32>, tensor<2x3xf32>
func.func @tied(%x: tensor<2x3xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @w : tensor<4x3xf32>
  %b = pf.param_ref @b : tensor<4xf32>
  %h = pf.linear %x, %w, %b {transpose_weight} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @w : tensor<4x3xf32>
  %y = pf.matmul %h, %w2 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = pf.reduce_sum %y {keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcasting: the gradient of the [3] operand is reduced over the broadcast
// axis and reshaped back; a non-scalar objective is summed (seed = ones).
// INPUTS-LABEL: func.func @broadcast(
// INPUTS-SAME: -> (tensor<2x3xf32>, tensor<2x3xf32> {pf.name = "grad/x"}, tensor<3xf32> {pf.name = "grad/y"})
// INPUTS: %[[ONES:.*]] = pf.constant dense<1.000000e+00> : tensor<2x3xf32>
// INPUTS: %[[R:.*]] = pf.reduce_sum %[[ONES]] {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
// INPUTS: %[[DY:.*]] = pf.reshape %[[R]], %{{.*}} : (tensor<1x3xf32>, tensor<1xi64>) -> tensor<3xf32>
// INPUTS: return %{{.*}}, %[[ONES]], %[[DY]]
func.func @broadcast(%x: tensor<2x3xf32> {pf.name = "x"}, %y: tensor<3xf32> {pf.name = "y"}) -> tensor<2x3xf32> {
  %s = pf.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}


// -----

// A gather's data gradient is a scatter-add (pf.gather_grad), for any table.
// RUN: pf-opt %s --split-input-file --pf-build-gradients | FileCheck %s --check-prefix=GATHER
pf.param @table : tensor<30000x8xf32>
func.func @big_gather(%i: tensor<600xi64> {pf.name = "i"}) -> tensor<f32> {
  %t = pf.param_ref @table : tensor<30000x8xf32>
  %g = pf.gather %t, %i : (tensor<30000x8xf32>, tensor<600xi64>) -> tensor<600x8xf32>
  %l = pf.reduce_sum %g {keepdims = false} : (tensor<600x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// GATHER-LABEL: func.func @big_gather
// GATHER: pf.gather_grad %{{.*}}, %{{.*}} : (tensor<600xi64>, tensor<600x8xf32>) -> tensor<30000x8xf32>
