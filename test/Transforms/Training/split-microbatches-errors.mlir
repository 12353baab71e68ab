// Errors of pf-split-microbatches, each verified at the op it names. Cases
// that need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir --pf-split-microbatches=microbatches=2 -split-input-file -verify-diagnostics
// RUN: pf-opt %t/zero.mlir --pf-split-microbatches=microbatches=0 -verify-diagnostics

//--- errors.mlir
// expected-error @+1 {{pf-split-microbatches: result 0 must be the loss of a pf.softmax_cross_entropy; run pf-add-masked-lm-loss first}}
func.func @no_loss(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{pf-split-microbatches: result 1 has no batch dimension to concatenate the micro-batches along}}
func.func @scalar_result(%y: tensor<2x5xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<i64>) {
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// -----

// expected-error @+1 {{pf-split-microbatches: argument 0 has a dynamic shape 'tensor<?x5xf32>'}}
func.func @dynamic(%y: tensor<?x5xf32>, %labels: tensor<?xi64>) -> tensor<f32> {
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<?x5xf32>, tensor<?xi64>) -> (tensor<f32>, tensor<?x5xf32>, tensor<i64>)
  return %loss : tensor<f32>
}

// -----

// A gradient result is summed over the micro-batches, so it must be a float.
// expected-error @+1 {{pf-split-microbatches: gradient result 1 is not a float tensor}}
func.func @integer_gradient(%y: tensor<2x5xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2xi64> {pf.name = "grad/labels"}) {
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
  return %loss, %labels : tensor<f32>, tensor<2xi64>
}

// -----

// expected-error @+1 {{pf-split-microbatches: no function with a body}}
module {
  func.func private @declared(tensor<2x5xf32>) -> tensor<f32>
}

//--- zero.mlir
// expected-error @+1 {{pf-split-microbatches: microbatches must be >= 1, got 0}}
func.func @main(%y: tensor<2x5xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
  return %loss : tensor<f32>
}
