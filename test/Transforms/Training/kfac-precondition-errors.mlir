// Errors of pf-kfac-precondition, each verified at the op it names. Cases
// that need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-kfac-precondition -verify-diagnostics
// RUN: pf-opt %t/refresh-warmup.mlir --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition=refresh-warmup=-1 -verify-diagnostics
// RUN: pf-opt %t/refresh-every.mlir --pf-kfac-precondition=refresh-every=0 -verify-diagnostics
// RUN: pf-opt %t/damping.mlir --pf-kfac-precondition=damping=-1 -verify-diagnostics
// RUN: pf-opt %t/kl-clip.mlir --pf-kfac-precondition=kl-clip=-1 -verify-diagnostics
// RUN: pf-opt %t/raw-gradients-split.mlir --pf-kfac-precondition=raw-gradients=true -verify-diagnostics

//--- errors.mlir
// expected-error @+1 {{pf-kfac-precondition: no function with a body}}
module {
  func.func private @declared(tensor<6x4xf32>) -> tensor<6x5xf32>
}

// -----

// Before pf-insert-kfac there is no step argument.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-kfac-precondition: no 'step' argument; run pf-insert-kfac first}}
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> tensor<6x5xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// Factors exist but no gradient of their weight is returned (pf-build-gradients
// has not run).
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.weight.kfac.A" : tensor<4x4xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
// expected-error @+1 {{pf-kfac-precondition: no grad/<weight> result of a layer pf-insert-kfac prepared; run pf-insert-kfac and pf-build-gradients first}}
func.func @no_gradients(%x: tensor<6x4xf32>, %step: tensor<i64> {pf.name = "step"}) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- refresh-warmup.mlir
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-kfac-precondition: refresh-every must be >= 1, retries, refresh-warmup and damping >= 0}}
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

//--- refresh-every.mlir
// expected-error @+1 {{pf-kfac-precondition: refresh-every must be >= 1, retries, refresh-warmup and damping >= 0}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- damping.mlir
// expected-error @+1 {{pf-kfac-precondition: refresh-every must be >= 1, retries, refresh-warmup and damping >= 0}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- kl-clip.mlir
// kl-clip is checked once the layers are found.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.weight.kfac.A" : tensor<4x4xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
pf.param @"bert.encoder.layer.0.dense.weight.kfac.B" : tensor<5x5xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
pf.param @"bert.encoder.layer.0.dense.weight.kfac.A_inv" : tensor<4x4xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
pf.param @"bert.encoder.layer.0.dense.weight.kfac.B_inv" : tensor<5x5xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
// expected-error @+1 {{pf-kfac-precondition: kl-clip must be >= 0}}
func.func @main(%g: tensor<5x4xf32>, %step: tensor<i64> {pf.name = "step"}) -> (tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}) {
  return %g : tensor<5x4xf32>
}

//--- raw-gradients-split.mlir
// The host's quadratic model (pf-train --kfac-damping-schedule adaptive) is
// single-process: a split module (stage<s>_backward) is refused.
// expected-error @+1 {{pf-kfac-precondition: raw-gradients is single-process K-FAC (the host's quadratic model of the loss): not on a split module}}
module {
  func.func @stage0_backward(%g: tensor<5x4xf32>) -> tensor<5x4xf32> {
    return %g : tensor<5x4xf32>
  }
}
