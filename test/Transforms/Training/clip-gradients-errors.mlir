// Errors of pf-clip-gradients, each verified at the op it names. Cases that
// need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-clip-gradients -verify-diagnostics
// RUN: pf-opt %t/zero.mlir --pf-build-gradients --pf-clip-gradients=max-norm=0 -verify-diagnostics

//--- errors.mlir
// Before pf-build-gradients there is nothing to clip.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-clip-gradients: no grad/<parameter> result; run pf-build-gradients first}}
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A grad/ result that names no parameter does not count.
// expected-error @+1 {{pf-clip-gradients: no grad/<parameter> result; run pf-build-gradients first}}
func.func @input_gradient_only(%g: tensor<6x4xf32>) -> (tensor<6x4xf32> {pf.name = "grad/x"}) {
  return %g : tensor<6x4xf32>
}

// -----

// expected-error @+1 {{pf-clip-gradients: no function with a body}}
module {
  func.func private @declared(tensor<6x4xf32>) -> tensor<f32>
}

//--- zero.mlir
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-clip-gradients: max-norm must be > 0, got 0}}
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
