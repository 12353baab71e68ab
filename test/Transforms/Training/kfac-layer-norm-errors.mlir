// Errors of LayerNorm K-FAC: the pass option without an eligible LayerNorm,
// and the ops' verifiers.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/no-layer-norm.mlir --pf-insert-kfac=layer-norm=diagonal -verify-diagnostics
// RUN: pf-opt %t/ops.mlir -split-input-file -verify-diagnostics

//--- no-layer-norm.mlir
// A LayerNorm without a shift parameter is no candidate.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.0.LayerNorm.weight" : tensor<4xf32>
// expected-error @+1 {{pf-insert-kfac: layer-norm=diagonal, but no pf.layer_norm normalizes the last dimension with a named f32 scale and shift parameter}}
func.func @main(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %g = pf.param_ref @"bert.encoder.layer.0.LayerNorm.weight" : tensor<4xf32>
  %z = pf.layer_norm %y, %g {axis = 1 : i64} : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  return %z : tensor<6x4xf32>
}

//--- ops.mlir
pf.param @f : tensor<4x4xf32>
func.func @bad_factor(%x: tensor<6x4xf32>, %dy: tensor<6x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{factor 'f' must be [4, 3] (2x2 blocks) or [4, 2] (their diagonal), got 'tensor<4x4xf32>'}}
  pf.kfac.update_layer_norm_factor @f from %x, %dy step %s {epsilon = 1.0e-5 : f64} : tensor<6x4xf32>, tensor<6x4xf32>, tensor<i64>
  return
}

// -----

pf.param @f : tensor<4x3xf32>
func.func @bad_decay(%x: tensor<6x4xf32>, %dy: tensor<6x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{decay must be in [0, 1), got 1.5}}
  pf.kfac.update_layer_norm_factor @f from %x, %dy step %s {epsilon = 1.0e-5 : f64, decay = 1.5 : f64} : tensor<6x4xf32>, tensor<6x4xf32>, tensor<i64>
  return
}

// -----

pf.param @f : tensor<4x3xf32>
func.func @bad_grad(%x: tensor<6x4xf32>, %dy: tensor<6x5xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{input and output_grad types differ}}
  pf.kfac.update_layer_norm_factor @f from %x, %dy step %s {epsilon = 1.0e-5 : f64} : tensor<6x4xf32>, tensor<6x5xf32>, tensor<i64>
  return
}

// -----

func.func @bad_precondition(%f: tensor<4x4xf32>, %d: tensor<f64>, %g: tensor<4xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{the factor must be [h, 3] (2x2 blocks) or [h, 2] (their diagonal)}}
  %s, %b = pf.kfac.precondition_layer_norm %f, %d, %g, %g : (tensor<4x4xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @bad_width(%f: tensor<4x3xf32>, %d: tensor<f64>, %g: tensor<5xf32>) {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{the gradients must be [h] for a factor}}
  %s, %b = pf.kfac.precondition_layer_norm %f, %d, %g, %g : (tensor<4x3xf32>, tensor<f64>, tensor<5xf32>, tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>)
  return
}
