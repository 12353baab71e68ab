// RUN: pf-opt %s --split-input-file --pf-build-gradients --verify-diagnostics

// An op on the path without a gradient rule is an error naming it.
func.func @no_rule(%x: tensor<2x3xf32> {pf.name = "x"}) -> tensor<f32> {
  %w = pf.param_ref @w : tensor<3x3xf32>
  // expected-error @+1 {{'pf.gemm' has no gradient rule}}
  %y = pf.gemm %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %l = pf.reduce_sum %y {keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
pf.param @w : tensor<3x3xf32>

