// Errors of pf-add-optimizer, each verified at the op it names. Cases that
// need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-add-optimizer -verify-diagnostics
// RUN: pf-opt %t/kfac-optimizer.mlir --pf-add-optimizer=kfac-optimizer=adam -verify-diagnostics
// RUN: pf-opt %t/optimizer.mlir --pf-add-optimizer=optimizer=adagrad -verify-diagnostics

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

//--- kfac-optimizer.mlir
pf.param @w : tensor<5x4xf32>
// expected-error @+1 {{pf-add-optimizer: kfac-optimizer must be sgd, adamw or lamb}}
func.func @main(%g: tensor<5x4xf32>) -> (tensor<5x4xf32> {pf.name = "grad/w"}) {
  return %g : tensor<5x4xf32>
}

//--- optimizer.mlir
// An unknown optimizer is reported on the module.
// expected-error @+1 {{pf-add-optimizer: optimizer must be sgd, adamw or lamb, got 'adagrad'}}
module {
  pf.param @w : tensor<5x4xf32>
  func.func @main(%g: tensor<5x4xf32>) -> (tensor<5x4xf32> {pf.name = "grad/w"}) {
    return %g : tensor<5x4xf32>
  }
}
