// Verifier and type-inference diagnostics of the comparison, logic and
// float elementwise ops.
// RUN: pf-opt %s -split-input-file -verify-diagnostics

func.func @and_on_floats(%a: tensor<3xf32>) {
  // expected-error @+1 {{'pf.and' op operand #0 must be tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = pf.and %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return
}

// -----

func.func @not_on_ints(%a: tensor<3xi64>) {
  // expected-error @+1 {{'pf.not' op operand #0 must be tensor of 1-bit signless integer values, but got 'tensor<3xi64>'}}
  %0 = pf.not %a : (tensor<3xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @greater_on_bools(%a: tensor<3xi1>) {
  // expected-error @+1 {{'pf.greater' op operand #0 must be tensor of floating-point or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = pf.greater %a, %a : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  return
}

// -----

func.func @less_not_bool(%a: tensor<3xf32>) {
  // expected-error @+1 {{'pf.less' op result #0 must be tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = pf.less %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @less_equal_element_mismatch(%a: tensor<3xi64>, %b: tensor<3xi32>) {
  // expected-error @+2 {{operands have different element types: 'i64' and 'i32'}}
  // expected-error @+1 {{'pf.less_equal' op failed to infer returned types}}
  %0 = pf.less_equal %a, %b : (tensor<3xi64>, tensor<3xi32>) -> tensor<3xi1>
  return
}

// -----

func.func @xor_shape_mismatch(%a: tensor<3xi1>, %b: tensor<2xi1>) {
  // expected-error @+2 {{operand shapes do not broadcast}}
  // expected-error @+1 {{'pf.xor' op failed to infer returned types}}
  %0 = pf.xor %a, %b : (tensor<3xi1>, tensor<2xi1>) -> tensor<3xi1>
  return
}

// -----

func.func @max_element_mismatch(%a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+2 {{operands have different element types: 'f32' and 'f64'}}
  // expected-error @+1 {{'pf.max' op failed to infer returned types}}
  %0 = pf.max %a, %b : (tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return
}

// -----

func.func @abs_int(%a: tensor<3xi32>) {
  // expected-error @+1 {{'pf.abs' op operand #0 must be tensor of floating-point values, but got 'tensor<3xi32>'}}
  %0 = pf.abs %a : (tensor<3xi32>) -> tensor<3xi32>
  return
}
