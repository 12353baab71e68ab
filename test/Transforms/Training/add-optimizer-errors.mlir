// Errors of pf-add-optimizer, each verified at the op it names. Cases that
// need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-add-optimizer -verify-diagnostics
// Bad values of optimizer and kfac-optimizer are rejected when the options
// are parsed, before any op: test/option-errors.test.

//--- errors.mlir
// expected-error @+1 {{pf-add-optimizer: no function with a body}}
module {
  func.func private @declared(tensor<5x4xf32>) -> tensor<5x4xf32>
}

// -----

// A gradient of something that is no parameter is left alone; with no
// parameter gradient at all there is nothing to update.
pf.param @w : tensor<5x4xf32>
// expected-error @+1 {{pf-add-optimizer: no result named grad/<parameter>; run pf-build-gradients first}}
func.func @no_gradients(%g: tensor<5x4xf32>) -> (tensor<5x4xf32> {pf.name = "grad/x"}) {
  return %g : tensor<5x4xf32>
}


// -----

// A split step (pf-split-stages) whose stage 0 computes no parameter's
// gradient: a cut that left it only parameter-free ops.
pf.param @w : tensor<5x4xf32>
// expected-error @+1 {{pf-add-optimizer: stage 0 has no parameter to update (its backward returns no grad/<parameter>): pf-split-stages gave it only parameter-free ops}}
func.func @stage0_backward(%g: tensor<5x4xf32>) -> (tensor<5x4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 0 : i64} {
  return %g : tensor<5x4xf32>
}
func.func @stage1_backward(%g: tensor<5x4xf32>) -> (tensor<5x4xf32> {pf.name = "grad_act/3"}, tensor<5x4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 1 : i64} {
  return %g, %g : tensor<5x4xf32>, tensor<5x4xf32>
}
