// Errors of pf-insert-kfac, each verified at the op it names. Cases that
// need their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-insert-kfac -verify-diagnostics
// RUN: pf-opt %t/skip-all.mlir --pf-insert-kfac=skip=dense -verify-diagnostics
// RUN: pf-opt %t/decay.mlir --pf-insert-kfac=decay=1.5 -verify-diagnostics
// RUN: pf-opt %t/factor-every.mlir --pf-insert-kfac=factor-every=0 -verify-diagnostics
// RUN: pf-opt %t/skip-regex.mlir "--pf-insert-kfac=skip=(" -verify-diagnostics
// RUN: pf-opt %t/no-head.mlir --pf-insert-kfac=layers=encoder-and-head -verify-diagnostics

//--- errors.mlir
// expected-error @+1 {{pf-insert-kfac: no function with a body}}
module {
  func.func private @declared(tensor<6x4xf32>) -> tensor<6x5xf32>
}

// -----

// A linear outside the encoder blocks (the head) is no K-FAC layer.
pf.param @"cls.predictions.transform.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-insert-kfac: no linear layer of an encoder block to precondition (blocks come from weight names like 'layer.<i>.' or 'h.<i>.', or from the graph's structure: pf-find-encoder-blocks)}}
func.func @head_only(%x: tensor<6x4xf32>) -> tensor<6x5xf32> {
  %w = pf.param_ref @"cls.predictions.transform.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// One weight read in both layouts has no single layout to precondition in.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
func.func @mixed_layouts(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  // expected-error @+1 {{pf-insert-kfac: 'bert.encoder.layer.0.dense.weight' is read as [in, out] by one linear layer and as [out, in] by another}}
  %z = pf.linear %y, %w {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  return %z : tensor<6x4xf32>
}

// -----

// The ops pf-insert-kfac makes verify their operands (checked at parse time).
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

//--- skip-all.mlir
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// Every candidate is skipped by name.
// expected-error @+1 {{pf-insert-kfac: no linear layer of an encoder block to precondition (blocks come from weight names like 'layer.<i>.' or 'h.<i>.', or from the graph's structure: pf-find-encoder-blocks)}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x5xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

//--- decay.mlir
// expected-error @+1 {{pf-insert-kfac: decay must be in [0, 1), got 1.5}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- factor-every.mlir
// expected-error @+1 {{pf-insert-kfac: factor-every must be >= 1}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- skip-regex.mlir
// expected-error @+1 {{pf-insert-kfac: skip is not a valid regular expression: parentheses not balanced}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  return %x : tensor<6x4xf32>
}

//--- no-head.mlir
// layers=encoder-and-head on a model without a masked-LM head is refused.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
// expected-error @+1 {{pf-insert-kfac: layers=encoder-and-head, but the model has no masked-LM head transform}}
func.func @no_head(%x: tensor<6x4xf32>) -> tensor<6x5xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}
