// Verifier and type-inference diagnostics of GatherND, ScatterND, IsNaN,
// CumSum, Trilu and ReduceMax.
// RUN: pf-opt %s -split-input-file -verify-diagnostics

func.func @gather_nd_tuple_too_long(%x: tensor<2x3xf32>, %i: tensor<4x3xi64>) {
  // expected-error @+2 {{gather_nd: the last dimension of indices (3) must be in [1, 2]}}
  // expected-error @+1 {{'pf.gather_nd' op failed to infer returned types}}
  %0 = pf.gather_nd %x, %i : (tensor<2x3xf32>, tensor<4x3xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_nd_batch_mismatch(%x: tensor<2x3xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+2 {{gather_nd: batch dimension 0 differs: 2 in data, 3 in indices}}
  // expected-error @+1 {{'pf.gather_nd' op failed to infer returned types}}
  %0 = pf.gather_nd %x, %i {batch_dims = 1 : i64} : (tensor<2x3xf32>, tensor<3x1xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_nd_negative_batch(%x: tensor<2x3xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{'pf.gather_nd' op attribute 'batch_dims' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = pf.gather_nd %x, %i {batch_dims = -1 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_nd_float_indices(%x: tensor<2x3xf32>, %i: tensor<2x1xf32>) {
  // expected-error @+1 {{'pf.gather_nd' op operand #1 must be tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x1xf32>'}}
  %0 = pf.gather_nd %x, %i : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_nd_updates_shape(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+2 {{scatter_nd: updates have shape [2, 4], expected [2, 3]}}
  // expected-error @+1 {{'pf.scatter_nd' op failed to infer returned types}}
  %0 = pf.scatter_nd %x, %i, %u : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @scatter_nd_updates_type(%x: tensor<4xf32>, %i: tensor<2x1xi64>, %u: tensor<2xf64>) {
  // expected-error @+2 {{scatter_nd: updates have element type 'f64', data has 'f32'}}
  // expected-error @+1 {{'pf.scatter_nd' op failed to infer returned types}}
  %0 = pf.scatter_nd %x, %i, %u : (tensor<4xf32>, tensor<2x1xi64>, tensor<2xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_nd_bad_reduction(%x: tensor<4xf32>, %i: tensor<2x1xi64>, %u: tensor<2xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'reduction' [none, add, mul, max, min]}}
  %0 = pf.scatter_nd %x, %i, %u reduction sum : (tensor<4xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @is_nan_on_ints(%x: tensor<3xi64>) {
  // expected-error @+1 {{'pf.is_nan' op operand #0 must be tensor of floating-point values, but got 'tensor<3xi64>'}}
  %0 = pf.is_nan %x : (tensor<3xi64>) -> tensor<3xi1>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{cumsum: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.cumsum' op failed to infer returned types}}
  %0 = pf.cumsum %x {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @trilu_vector(%x: tensor<3xf32>) {
  // expected-error @+2 {{trilu: the input must have rank >= 2, got rank 1}}
  // expected-error @+1 {{'pf.trilu' op failed to infer returned types}}
  %0 = pf.trilu %x : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @reduce_max_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{reduce: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.reduce_max' op failed to infer returned types}}
  %0 = pf.reduce_max %x {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
