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

// -----

// The data gradient of a gather with a large table is not built yet.
pf.param @table : tensor<30000x8xf32>
func.func @big_gather(%x: tensor<4x8xf32> {pf.name = "x"}) -> tensor<f32> {
  %i = pf.constant dense<7> : tensor<600xi64>
  %t = pf.param_ref @table : tensor<30000x8xf32>
  // expected-error @+2 {{only built for axis 0 with (rows x indices) <= 16777216}}
  // expected-error @+1 {{could not build the gradient of 'pf.gather'}}
  %g = pf.gather %t, %i : (tensor<30000x8xf32>, tensor<600xi64>) -> tensor<600x8xf32>
  %l = pf.reduce_sum %g {keepdims = false} : (tensor<600x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
