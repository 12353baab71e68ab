// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime --verify-diagnostics

// Slice bounds must be known when the call is built.
func.func @main(%x: tensor<8xf32>, %s: tensor<1xi64>) -> tensor<2xf32> {
  %e = pf.constant dense<[4]> : tensor<1xi64>
  // expected-error @+2 {{slice bounds must be constants for the runtime lowering}}
  // expected-error @+1 {{failed to legalize operation 'pf.slice'}}
  %0 = pf.slice %x, %s, %e {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (tensor<8xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// i16 has no pfrt dtype.
// expected-error @+1 {{pf-lower-to-runtime: element type 'i16' has no runtime dtype}}
func.func @main(%x: tensor<4xi16>) -> tensor<4xi16> {
  return %x : tensor<4xi16>
}

// -----

// expected-error @+1 {{pf-lower-to-runtime: no function with a body}}
module {
  func.func private @external(tensor<4xf32>) -> tensor<4xf32>
}

// -----

// Ops without a pattern are named before anything is rewritten.
func.func @main(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'pf.kfac.factor_b' is not supported by the runtime lowering yet}}
  %b = pf.kfac.factor_b %x : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}
