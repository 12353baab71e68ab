// Errors of pf-build-gradients, each verified at the op it names. Cases that
// need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir --split-input-file --pf-build-gradients --verify-diagnostics
// RUN: pf-opt %t/seed.mlir --split-input-file "--pf-build-gradients=seed=1" --verify-diagnostics
// RUN: pf-opt %t/inputs.mlir --split-input-file --pf-build-gradients=wrt=inputs --verify-diagnostics
// RUN: pf-opt %t/function.mlir --pf-build-gradients=function=nope --verify-diagnostics
// RUN: pf-opt %t/wrt.mlir --pf-build-gradients=wrt=weights --verify-diagnostics

//--- errors.mlir
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

// expected-error @+1 {{pf-build-gradients: no function with a body}}
module {
  func.func private @declared(tensor<2x3xf32>) -> tensor<f32>
}

// -----

// expected-error @+1 {{pf-build-gradients: expected a single-block function}}
func.func @two_blocks(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
^unreachable:
  return %x : tensor<2xf32>
}

// -----

// The objective must be a float tensor of static shape.
// expected-error @+1 {{pf-build-gradients: the objective (result 0) must be a statically shaped float tensor, got 'tensor<2xi64>'}}
func.func @integer_objective(%x: tensor<2xi64>) -> tensor<2xi64> {
  return %x : tensor<2xi64>
}

// -----

// expected-error @+1 {{pf-build-gradients: the objective (result 0) must be a statically shaped float tensor, got 'tensor<?xf32>'}}
func.func @dynamic_objective(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}

//--- seed.mlir
// seed names the objective among the results.
// expected-error @+1 {{pf-build-gradients: seed 1 is not a result index (the function has 1 results)}}
func.func @one_result(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{pf-build-gradients: the objective (result 1) must be a statically shaped float tensor, got 'tensor<2xi64>'}}
func.func @second_result(%x: tensor<2xf32>, %i: tensor<2xi64>) -> (tensor<2xf32>, tensor<2xi64>) {
  return %x, %i : tensor<2xf32>, tensor<2xi64>
}

//--- inputs.mlir
// An input the objective does not reach gets a zero gradient, which needs a
// static shape.
// expected-error @+1 {{pf-build-gradients: 'x' needs a static shape}}
func.func @unreached(%x: tensor<?x3xf32> {pf.name = "x"}, %y: tensor<2x3xf32> {pf.name = "y"}) -> tensor<f32> {
  %l = pf.reduce_sum %y {keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A result without a gradient of its own gets zeros, which need a static
// shape (here the logits gradient the loss op also returns).
func.func @dynamic_other_result(%y: tensor<?x5xf32> {pf.name = "y"}, %labels: tensor<?xi64>) -> tensor<f32> {
  // expected-error @+1 {{pf-build-gradients: result needs a static shape}}
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<?x5xf32>, tensor<?xi64>) -> (tensor<f32>, tensor<?x5xf32>, tensor<i64>)
  return %loss : tensor<f32>
}

// -----

// ScatterND differentiates for reductions none and add only.
func.func @scatter_nd_max(%x: tensor<4xf32> {pf.name = "x"}, %u: tensor<1xf32> {pf.name = "u"}) -> tensor<f32> {
  %i = pf.constant dense<[[1]]> : tensor<1x1xi64>
  // expected-error @+2 {{gradient: 'pf.scatter_nd' with reduction 'max' is not supported (only none and add)}}
  // expected-error @+1 {{pf-build-gradients: could not build the gradient of 'pf.scatter_nd'}}
  %s = pf.scatter_nd %x, %i, %u reduction max : (tensor<4xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<4xf32>
  %l = pf.reduce_sum %s {keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- function.mlir
// expected-error @+1 {{pf-build-gradients: no function with a body named 'nope'}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

//--- wrt.mlir
// expected-error @+1 {{pf-build-gradients: wrt must be params, inputs or all, got 'weights'}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
