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

