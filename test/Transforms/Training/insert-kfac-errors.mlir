// RUN: pf-opt %s --pf-insert-kfac=skip=dense -split-input-file -verify-diagnostics

pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// Every candidate is skipped by name.
// expected-error @+1 {{pf-insert-kfac: no linear layer of an encoder block with a named [out, in] weight to precondition}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x5xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

pf.param @w : tensor<4x4xf32>
func.func @bad_factor(%x: tensor<6x3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{factor 'w' is 4x4 but the rows have 3 features}}
  pf.kfac.update_factor @w from %x step %s : tensor<6x3xf32>, tensor<i64>
  return
}

// -----

pf.param @a : tensor<4x4xf32>
pf.param @b : tensor<5x5xf32>
func.func @bad_every(%s: tensor<i64>) {
  // expected-error @+1 {{every must be >= 1, got 0}}
  %o = pf.kfac.refresh_inverses(@a, @b) into (@a, @b) step %s {every = 0 : i64} : tensor<i64> -> tensor<i32>
  return
}
