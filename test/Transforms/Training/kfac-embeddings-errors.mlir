// Errors of embedding K-FAC: the pass option without an eligible lookup or
// with a position embedding broadcast by something other than an add, and
// the ops' verifiers.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/no-table.mlir --pf-insert-kfac=embeddings=word -verify-diagnostics
// RUN: pf-opt %t/no-position.mlir --pf-insert-kfac=embeddings=word-and-position -verify-diagnostics
// RUN: pf-opt %t/broadcast.mlir --pf-insert-kfac=embeddings=word-and-position -verify-diagnostics
// RUN: pf-opt %t/ops.mlir -split-input-file -verify-diagnostics

//--- no-table.mlir
// A gather of a table that is neither named nor the decoder's is none.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
pf.param @table : tensor<10x4xf32>
// expected-error @+1 {{pf-insert-kfac: embeddings=word, but no pf.gather looks up rows (axis 0, static shapes) of a 2-D f32 parameter named '*word_embeddings*' or of the tied decoder's weight}}
func.func @main(%ids: tensor<6xi64>) -> tensor<6x4xf32> {
  %t = pf.param_ref @table : tensor<10x4xf32>
  %x = pf.gather %t, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

//--- no-position.mlir
pf.param @"word_embeddings.weight" : tensor<10x4xf32>
// expected-error @+1 {{pf-insert-kfac: embeddings=word-and-position, but no pf.gather looks up rows (axis 0, static shapes) of a 2-D f32 parameter named '*position_embeddings*' or at constant ids}}
func.func @main(%ids: tensor<6xi64>) -> tensor<6x4xf32> {
  %t = pf.param_ref @"word_embeddings.weight" : tensor<10x4xf32>
  %x = pf.gather %t, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  return %x : tensor<6x4xf32>
}

//--- broadcast.mlir
pf.param @"word_embeddings.weight" : tensor<10x4xf32>
pf.param @"position_embeddings.weight" : tensor<8x4xf32>
func.func @main(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %t = pf.param_ref @"word_embeddings.weight" : tensor<10x4xf32>
  %x = pf.gather %t, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %p = pf.param_ref @"position_embeddings.weight" : tensor<8x4xf32>
  %pid = pf.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  // expected-error @+1 {{pf-insert-kfac: the rows of 'position_embeddings.weight' are broadcast by pf.mul, not a pf.add: their per-token gradient (factor B) is not available}}
  %pe = pf.gather %p, %pid {axis = 0 : i64} : (tensor<8x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32>
  %s = pf.mul %x, %pe : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  return %s : tensor<2x3x4xf32>
}

//--- ops.mlir
pf.param @f : tensor<4x4xf32>
func.func @square_factor(%ids: tensor<6xi64>, %s: tensor<i64>) {
  // expected-error @+1 {{factor 'f' must be 1-D [vocab] (the diagonal of A), got 'tensor<4x4xf32>'}}
  pf.kfac.update_embedding_factor @f from %ids step %s : tensor<6xi64>, tensor<i64>
  return
}

// -----

pf.param @f : tensor<4xf32>
func.func @bad_decay(%ids: tensor<6xi64>, %s: tensor<i64>) {
  // expected-error @+1 {{decay must be in [0, 1), got 1.5}}
  pf.kfac.update_embedding_factor @f from %ids step %s {decay = 1.5 : f64} : tensor<6xi64>, tensor<i64>
  return
}

// -----

pf.param @a : tensor<4xf32>
pf.param @b : tensor<3x3xf32>
pf.param @a_inv : tensor<5xf32>
pf.param @b_inv : tensor<3x3xf32>
func.func @inverse_size(%s: tensor<i64>) {
  // expected-error @+1 {{a_inverse 'a_inv' must be 'tensor<4xf32>' as the diagonal factor_a 'a', got 'tensor<5xf32>'}}
  %o = pf.kfac.refresh_inverses (@a, @b) into (@a_inv, @b_inv) step %s : tensor<i64> -> tensor<i32>
  return
}

// -----

pf.param @a : tensor<4xf32>
pf.param @b : tensor<3x3xf32>
pf.param @b_inv : tensor<3x3xf32>
pf.param @av : tensor<4xf32>
pf.param @bv : tensor<3xf32>
func.func @no_eigenbasis(%s: tensor<i64>) {
  // expected-error @+1 {{a diagonal factor_a 'a' (an embedding's) has no eigenbasis (values)}}
  %o = pf.kfac.refresh_inverses (@a, @b) into (@a, @b_inv) values (@av, @bv) step %s : tensor<i64> -> tensor<i32>
  return
}

// -----

func.func @precondition_shapes(%g: tensor<10x4xf32>, %a: tensor<9xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{kfac.precondition_embedding: weight gradient 'tensor<10x4xf32>' does not match A inverse 'tensor<9xf32>' and B inverse 'tensor<4x4xf32>'}}
  %u = pf.kfac.precondition_embedding %g, %a, %b : (tensor<10x4xf32>, tensor<9xf32>, tensor<4x4xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @precondition_square_a(%g: tensor<10x4xf32>, %a: tensor<10x10xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{kfac.precondition_embedding: A inverse must be 1-D [vocab] (the diagonal)}}
  %u = pf.kfac.precondition_embedding %g, %a, %b : (tensor<10x4xf32>, tensor<10x10xf32>, tensor<4x4xf32>) -> tensor<10x4xf32>
  return
}
