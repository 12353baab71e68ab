// Verifier and type-inference diagnostics of every pf op. Errors from
// inferReturnTypes are followed by the InferTypeOpInterface verifier's
// "failed to infer returned types".
// RUN: pf-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Constants and identity
//===----------------------------------------------------------------------===//

func.func @constant_not_elements() {
  // expected-error @+1 {{invalid properties}}
  %0 = "pf.constant"() <{value = 1 : i64}> : () -> tensor<i64>
  return
}

// -----

func.func @constant_wrong_type() {
  // expected-error @+2 {{'pf.constant' op inferred type(s) 'tensor<2xi64>' are incompatible with return type(s) of operation 'tensor<3xi64>'}}
  // expected-error @+1 {{'pf.constant' op failed to infer returned types}}
  %0 = "pf.constant"() <{value = dense<1> : tensor<2xi64>}> : () -> tensor<3xi64>
  return
}

// -----

func.func @identity_wrong_type(%x: tensor<2xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = pf.identity %x : (tensor<2xf32>) -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast: 'tensor<2x3xf32>', 'tensor<4xf32>'}}
  // expected-error @+1 {{'pf.add' op failed to infer returned types}}
  %0 = pf.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// The declared result contradicts the inferred 2x3.
func.func @add_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'pf.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{'pf.add' op failed to infer returned types}}
  %0 = pf.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

// A rank the inference knows better is a contradiction too.
func.func @add_wrong_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = pf.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<?xf32>
  return
}

// -----

func.func @sub_element_mismatch(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+2 {{operands have different element types: 'f32' and 'f16'}}
  // expected-error @+1 {{'pf.sub' op failed to infer returned types}}
  %0 = pf.sub %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return
}

// -----

func.func @mul_wrong_element(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<3xf16>'}}
  // expected-error @+1 {{'pf.mul' op failed to infer returned types}}
  %0 = pf.mul %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf16>
  return
}

// -----

func.func @div_no_broadcast(%a: tensor<4x2x3xf32>, %b: tensor<5x1x3xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast}}
  // expected-error @+1 {{'pf.div' op failed to infer returned types}}
  %0 = pf.div %a, %b : (tensor<4x2x3xf32>, tensor<5x1x3xf32>) -> tensor<4x2x3xf32>
  return
}

// -----

func.func @pow_no_broadcast(%a: tensor<3xf32>, %b: tensor<2xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast}}
  // expected-error @+1 {{'pf.pow' op failed to infer returned types}}
  %0 = pf.pow %a, %b : (tensor<3xf32>, tensor<2xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @equal_not_bool(%a: tensor<3xf32>) {
  // expected-error @+1 {{'pf.equal' op result #0 must be tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = pf.equal %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @equal_element_mismatch(%a: tensor<3xi64>, %b: tensor<3xi32>) {
  // expected-error @+2 {{operands have different element types: 'i64' and 'i32'}}
  // expected-error @+1 {{'pf.equal' op failed to infer returned types}}
  %0 = pf.equal %a, %b : (tensor<3xi64>, tensor<3xi32>) -> tensor<3xi1>
  return
}

// -----

func.func @sqrt_int(%a: tensor<3xi32>) {
  // expected-error @+1 {{'pf.sqrt' op operand #0 must be tensor of floating-point values, but got 'tensor<3xi32>'}}
  %0 = pf.sqrt %a : (tensor<3xi32>) -> tensor<3xi32>
  return
}

// -----

func.func @erf_wrong_shape(%a: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'pf.erf' op failed to infer returned types}}
  %0 = pf.erf %a : (tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @tanh_int(%a: tensor<3xi64>) {
  // expected-error @+1 {{'pf.tanh' op operand #0 must be tensor of floating-point values}}
  %0 = pf.tanh %a : (tensor<3xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @exp_wrong_element(%a: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<3xf64>'}}
  // expected-error @+1 {{'pf.exp' op failed to infer returned types}}
  %0 = pf.exp %a : (tensor<3xf32>) -> tensor<3xf64>
  return
}

// -----

func.func @neg_wrong_shape(%a: tensor<3xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xi64>' are incompatible with return type(s) of operation 'tensor<1xi64>'}}
  // expected-error @+1 {{'pf.neg' op failed to infer returned types}}
  %0 = pf.neg %a : (tensor<3xi64>) -> tensor<1xi64>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<3xf32>, %x: tensor<3xf32>) {
  // expected-error @+1 {{'pf.where' op operand #0 must be tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = pf.where %c, %x, %x : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @where_branch_mismatch(%c: tensor<3xi1>, %x: tensor<3xf32>, %y: tensor<3xi64>) {
  // expected-error @+2 {{x and y have different element types}}
  // expected-error @+1 {{'pf.where' op failed to infer returned types}}
  %0 = pf.where %c, %x, %y : (tensor<3xi1>, tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @where_no_broadcast(%c: tensor<2xi1>, %x: tensor<3xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast}}
  // expected-error @+1 {{'pf.where' op failed to infer returned types}}
  %0 = pf.where %c, %x, %x : (tensor<2xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @cast_to_index(%x: tensor<3xf32>) {
  // expected-error @+2 {{cast target must be an integer or float type, got 'index'}}
  // expected-error @+1 {{'pf.cast' op failed to infer returned types}}
  %0 = pf.cast %x {to = index} : (tensor<3xf32>) -> tensor<3xindex>
  return
}

// -----

func.func @cast_result_mismatch(%x: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf16>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'pf.cast' op failed to infer returned types}}
  %0 = pf.cast %x {to = f16} : (tensor<3xf32>) -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_contraction(%a: tensor<4x5xf32>, %b: tensor<6x7xf32>) {
  // expected-error @+2 {{matmul contraction dimensions differ: 5 vs 6}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<4x5xf32>, tensor<6x7xf32>) -> tensor<4x7xf32>
  return
}

// -----

func.func @matmul_vector_contraction(%a: tensor<5xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{matmul contraction dimensions differ: 5 vs 4}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<5xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x5xf32>, %b: tensor<3x5x6xf32>) {
  // expected-error @+2 {{matmul batch dimensions do not broadcast}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<2x4x5xf32>, tensor<3x5x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{matmul operands must have rank >= 1}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<f32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_element(%a: tensor<4x5xf32>, %b: tensor<5x6xf16>) {
  // expected-error @+2 {{matmul operands have different element types}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<4x5xf32>, tensor<5x6xf16>) -> tensor<4x6xf32>
  return
}

// -----

// The vector rhs drops the last dimension: 4, not 4x1.
func.func @matmul_vector_result(%a: tensor<4x5xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{'pf.matmul' op failed to infer returned types}}
  %0 = pf.matmul %a, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @gemm_rank(%a: tensor<2x4x5xf32>, %b: tensor<5x6xf32>) {
  // expected-error @+2 {{gemm operands must be 2-D}}
  // expected-error @+1 {{'pf.gemm' op failed to infer returned types}}
  %0 = pf.gemm %a, %b : (tensor<2x4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

// Without transB, B is [K, N]: 6 vs 5.
func.func @gemm_contraction(%a: tensor<4x5xf32>, %b: tensor<6x5xf32>) {
  // expected-error @+2 {{gemm contraction dimensions differ: 5 vs 6}}
  // expected-error @+1 {{'pf.gemm' op failed to infer returned types}}
  %0 = pf.gemm %a, %b : (tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

// C broadcasts to [M, N] only one way: it may not make the result larger.
func.func @gemm_c_grows_result(%a: tensor<1x4xf32>, %b: tensor<4x3xf32>, %c: tensor<5x3xf32>) {
  // expected-error @+2 {{gemm C of type 'tensor<5x3xf32>' does not broadcast to [M, N]}}
  // expected-error @+1 {{'pf.gemm' op failed to infer returned types}}
  %0 = pf.gemm %a, %b, %c : (tensor<1x4xf32>, tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @gemm_c_rank(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>, %c: tensor<1x4x6xf32>) {
  // expected-error @+2 {{gemm C of type 'tensor<1x4x6xf32>' does not broadcast to [M, N]}}
  // expected-error @+1 {{'pf.gemm' op failed to infer returned types}}
  %0 = pf.gemm %a, %b, %c : (tensor<4x5xf32>, tensor<5x6xf32>, tensor<1x4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @gemm_element(%a: tensor<4x5xf32>, %b: tensor<5x6xbf16>) {
  // expected-error @+2 {{gemm operands have different element types}}
  // expected-error @+1 {{'pf.gemm' op failed to infer returned types}}
  %0 = pf.gemm %a, %b : (tensor<4x5xf32>, tensor<5x6xbf16>) -> tensor<4x6xf32>
  return
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

// -----

func.func @shape_not_i64(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'pf.shape' op result #0 must be tensor of 64-bit signless integer values, but got 'tensor<2xi32>'}}
  %0 = pf.shape %x : (tensor<2x3xf32>) -> tensor<2xi32>
  return
}

// -----

func.func @shape_wrong_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2xi64>' are incompatible with return type(s) of operation 'tensor<3xi64>'}}
  // expected-error @+1 {{'pf.shape' op failed to infer returned types}}
  %0 = pf.shape %x {start = 1} : (tensor<2x3x4xf32>) -> tensor<3xi64>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  %s = pf.constant dense<[4, 2]> : tensor<2xi64>
  // expected-error @+2 {{reshape: element count changes from 6 to 8}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @reshape_not_divisible(%x: tensor<2x3xf32>) {
  %s = pf.constant dense<[4, -1]> : tensor<2xi64>
  // expected-error @+2 {{reshape: cannot reshape 6 elements into a shape with 4 x ?}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @reshape_two_inferred(%x: tensor<2x3xf32>) {
  %s = pf.constant dense<[-1, -1]> : tensor<2xi64>
  // expected-error @+2 {{reshape: more than one -1 in the target shape}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @reshape_copy_missing_dim(%x: tensor<6xf32>) {
  %s = pf.constant dense<[3, 0]> : tensor<2xi64>
  // expected-error @+2 {{reshape: 0 at position 1 copies an input dimension that does not exist}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<6xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @reshape_negative_dim(%x: tensor<6xf32>) {
  %s = pf.constant dense<[-2, 3]> : tensor<2xi64>
  // expected-error @+2 {{reshape: invalid dimension -2}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<6xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @reshape_shape_rank(%x: tensor<6xf32>, %s: tensor<1x2xi64>) {
  // expected-error @+2 {{reshape: shape operand must be 1-D}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<6xf32>, tensor<1x2xi64>) -> tensor<?x?xf32>
  return
}

// -----

// A scalar shape (an ONNX input of rank 0, found by the onnx fuzzer) has no
// length to read.
func.func @constant_of_shape_scalar_shape(%s: tensor<i64>) {
  // expected-error @+2 {{constant_of_shape: shape operand must be 1-D, got 'tensor<i64>'}}
  // expected-error @+1 {{'pf.constant_of_shape' op failed to infer returned types}}
  %0 = pf.constant_of_shape %s : (tensor<i64>) -> tensor<*xf32>
  return
}

// -----

// A non-constant shape of 2 entries still fixes the rank.
func.func @reshape_rank_from_shape_type(%x: tensor<6xf32>, %s: tensor<2xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?xf32>' are incompatible with return type(s) of operation 'tensor<?xf32>'}}
  // expected-error @+1 {{'pf.reshape' op failed to infer returned types}}
  %0 = pf.reshape %x, %s : (tensor<6xf32>, tensor<2xi64>) -> tensor<?xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{transpose: perm is not a permutation}}
  // expected-error @+1 {{'pf.transpose' op failed to infer returned types}}
  %0 = pf.transpose %x {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

func.func @transpose_perm_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{transpose: perm is not a permutation}}
  // expected-error @+1 {{'pf.transpose' op failed to infer returned types}}
  %0 = pf.transpose %x {perm = array<i64: 2, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_perm_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{transpose: perm has 2 entries for a rank-3 input}}
  // expected-error @+1 {{'pf.transpose' op failed to infer returned types}}
  %0 = pf.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @transpose_wrong_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3x4xf32>'}}
  // expected-error @+1 {{'pf.transpose' op failed to infer returned types}}
  %0 = pf.transpose %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @unsqueeze_repeated_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{unsqueeze: invalid or repeated axis -4}}
  // expected-error @+1 {{'pf.unsqueeze' op failed to infer returned types}}
  %0 = pf.unsqueeze %x {axes = array<i64: 0, -4>} : (tensor<2x3xf32>) -> tensor<1x1x2x3xf32>
  return
}

// -----

func.func @unsqueeze_axis_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{unsqueeze: invalid or repeated axis 3}}
  // expected-error @+1 {{'pf.unsqueeze' op failed to infer returned types}}
  %0 = pf.unsqueeze %x {axes = array<i64: 3>} : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  return
}

// -----

func.func @squeeze_not_one(%x: tensor<1x3xf32>) {
  // expected-error @+2 {{squeeze: dimension 1 has size 3, not 1}}
  // expected-error @+1 {{'pf.squeeze' op failed to infer returned types}}
  %0 = pf.squeeze %x {axes = array<i64: -1>} : (tensor<1x3xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @squeeze_axis_out_of_range(%x: tensor<1x3xf32>) {
  // expected-error @+2 {{squeeze: axis 2 out of range}}
  // expected-error @+1 {{'pf.squeeze' op failed to infer returned types}}
  %0 = pf.squeeze %x {axes = array<i64: 2>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

// Without axes every static 1 goes.
func.func @squeeze_all_wrong_result(%x: tensor<1x3x1xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<3x1xf32>'}}
  // expected-error @+1 {{'pf.squeeze' op failed to infer returned types}}
  %0 = pf.squeeze %x : (tensor<1x3x1xf32>) -> tensor<3x1xf32>
  return
}

// -----

func.func @concat_rank_mismatch(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{concat inputs have different ranks}}
  // expected-error @+1 {{'pf.concat' op failed to infer returned types}}
  %0 = pf.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return
}

// -----

func.func @concat_dim_mismatch(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{concat inputs differ in dimension 1: 3 vs 4}}
  // expected-error @+1 {{'pf.concat' op failed to infer returned types}}
  %0 = pf.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{concat: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.concat' op failed to infer returned types}}
  %0 = pf.concat %a, %a {axis = 2} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_element(%a: tensor<2x3xf32>, %b: tensor<2x3xi64>) {
  // expected-error @+2 {{concat inputs have different element types}}
  // expected-error @+1 {{'pf.concat' op failed to infer returned types}}
  %0 = pf.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{concat needs at least one input}}
  // expected-error @+1 {{'pf.concat' op failed to infer returned types}}
  %0 = pf.concat {axis = 0} : () -> tensor<2xf32>
  return
}

// -----

func.func @slice_length_mismatch(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<[0, 1]> : tensor<2xi64>
  %e = pf.constant dense<[4]> : tensor<1xi64>
  // expected-error @+2 {{slice: starts and ends differ in length (2 vs 1)}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %e {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<8x6xf32>, tensor<2xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @slice_axes_length(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<[0, 1]> : tensor<2xi64>
  %a = pf.constant dense<[1]> : tensor<1xi64>
  // expected-error @+2 {{slice: axes and starts differ in length (1 vs 2)}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %s, %a {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<8x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @slice_axis_out_of_range(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<0> : tensor<1xi64>
  %a = pf.constant dense<-3> : tensor<1xi64>
  // expected-error @+2 {{slice: axis -3 out of range for rank 2}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %s, %a {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @slice_repeated_axis(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<[0, 1]> : tensor<2xi64>
  %a = pf.constant dense<[1, -1]> : tensor<2xi64>
  // expected-error @+2 {{slice: axis -1 is repeated}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %s, %a {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<8x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<0> : tensor<1xi64>
  %z = pf.constant dense<0> : tensor<1xi64>
  // expected-error @+2 {{slice: step must not be 0}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %s, %s, %z {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return
}

// -----

// Rows [-3, 100) of 8: 3 rows, not 5.
func.func @slice_wrong_result(%x: tensor<8x6xf32>) {
  %s = pf.constant dense<-3> : tensor<1xi64>
  %e = pf.constant dense<100> : tensor<1xi64>
  // expected-error @+2 {{inferred type(s) 'tensor<3x6xf32>' are incompatible with return type(s) of operation 'tensor<5x6xf32>'}}
  // expected-error @+1 {{'pf.slice' op failed to infer returned types}}
  %0 = pf.slice %x, %s, %e {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<5x6xf32>
  return
}

// -----

func.func @slice_segments(%x: tensor<8x6xf32>, %s: tensor<1xi64>) {
  // expected-error @+1 {{'pf.slice' op operand count (3) does not match with the total size (0) specified in attribute 'operandSegmentSizes'}}
  %0 = pf.slice %x, %s, %s : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x6xf32>
  return
}

// -----

func.func @gather_float_indices(%d: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+2 {{gather: indices must be integers}}
  // expected-error @+1 {{'pf.gather' op failed to infer returned types}}
  %0 = pf.gather %d, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_axis(%d: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{gather: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.gather' op failed to infer returned types}}
  %0 = pf.gather %d, %i {axis = 2} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<10x3xf32>
  return
}

// -----

func.func @expand_no_broadcast(%x: tensor<3xf32>) {
  %s = pf.constant dense<[2, 4]> : tensor<2xi64>
  // expected-error @+2 {{expand: input does not broadcast to the target shape}}
  // expected-error @+1 {{'pf.expand' op failed to infer returned types}}
  %0 = pf.expand %x, %s : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @expand_negative(%x: tensor<1xf32>) {
  %s = pf.constant dense<[2, -1]> : tensor<2xi64>
  // expected-error @+2 {{expand: negative dimension in the target shape}}
  // expected-error @+1 {{'pf.expand' op failed to infer returned types}}
  %0 = pf.expand %x, %s : (tensor<1xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @constant_of_shape_negative() {
  %s = pf.constant dense<[2, -3]> : tensor<2xi64>
  // expected-error @+2 {{constant_of_shape: negative dimension}}
  // expected-error @+1 {{'pf.constant_of_shape' op failed to infer returned types}}
  %0 = pf.constant_of_shape %s : (tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @constant_of_shape_value(%s: tensor<2xi64>) {
  // expected-error @+2 {{constant_of_shape: value must have one element}}
  // expected-error @+1 {{'pf.constant_of_shape' op failed to infer returned types}}
  %0 = pf.constant_of_shape %s {value = dense<[1, 2]> : tensor<2xi64>} : (tensor<2xi64>) -> tensor<?x?xi64>
  return
}

// -----

// Without a value the fill is f32 zero.
func.func @constant_of_shape_element(%s: tensor<2xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?xf32>' are incompatible with return type(s) of operation 'tensor<?x?xi64>'}}
  // expected-error @+1 {{'pf.constant_of_shape' op failed to infer returned types}}
  %0 = pf.constant_of_shape %s : (tensor<2xi64>) -> tensor<?x?xi64>
  return
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_mean_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{reduce: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.reduce_mean' op failed to infer returned types}}
  %0 = pf.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// keepdims defaults to true.
func.func @reduce_sum_keepdims(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'pf.reduce_sum' op failed to infer returned types}}
  %0 = pf.reduce_sum %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{softmax: axis 2 out of range for rank 2}}
  // expected-error @+1 {{'pf.softmax' op failed to infer returned types}}
  %0 = pf.softmax %x {axis = 2} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_normalization_scale(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{scale shape does not match the normalized dimensions}}
  // expected-error @+1 {{'pf.layer_normalization' op failed to infer returned types}}
  %0:3 = pf.layer_normalization %x, %s : (tensor<2x3x4xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  return
}

// -----

func.func @layer_normalization_axis(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{layer_normalization: axis out of range}}
  // expected-error @+1 {{'pf.layer_normalization' op failed to infer returned types}}
  %0:3 = pf.layer_normalization %x, %s {axis = 3} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  return
}

// -----

// The statistics keep the leading dims and are 1 from axis on.
func.func @layer_normalization_stats(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3x4xf32>', 'tensor<2x3x1xf32>', 'tensor<2x3x1xf32>' are incompatible with return type(s) of operation 'tensor<2x3x4xf32>', 'tensor<2x3xf32>', 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'pf.layer_normalization' op failed to infer returned types}}
  %0:3 = pf.layer_normalization %x, %s : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

//===----------------------------------------------------------------------===//
// Fused ops
//===----------------------------------------------------------------------===//

// -----

func.func @linear_weight_rank(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+2 {{linear: weight must be 2-D, got 'tensor<4xf32>'}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<2x5xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+2 {{linear: input has 5 features but the weight expects 4}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w : (tensor<2x5xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// transpose_weight: the weight is [out, in] = [8, 4]; the input has 8 features.
func.func @linear_features_transposed(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+2 {{linear: input has 8 features but the weight expects 4}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w {transpose_weight} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_bias_size(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{linear: bias must be 1-D of size 8, got 'tensor<4xf32>'}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w, %b : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_bias_rank(%x: tensor<2x4xf32>, %w: tensor<?x?xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+2 {{linear: bias must be 1-D, got 'tensor<1x8xf32>'}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w, %b : (tensor<2x4xf32>, tensor<?x?xf32>, tensor<1x8xf32>) -> tensor<2x?xf32>
  return
}

// -----

func.func @linear_element(%x: tensor<2x4xf32>, %w: tensor<4x8xbf16>) {
  // expected-error @+2 {{linear: operands have different element types}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w : (tensor<2x4xf32>, tensor<4x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_scalar_input(%x: tensor<f32>, %w: tensor<4x8xf32>) {
  // expected-error @+2 {{linear: input must have rank >= 1}}
  // expected-error @+1 {{'pf.linear' op failed to infer returned types}}
  %0 = pf.linear %x, %w : (tensor<f32>, tensor<4x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>) {
  // expected-error @+2 {{scale shape does not match the normalized dimensions}}
  // expected-error @+1 {{'pf.layer_norm' op failed to infer returned types}}
  %0 = pf.layer_norm %x, %s : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{bias shape does not match the normalized dimensions}}
  // expected-error @+1 {{'pf.layer_norm' op failed to infer returned types}}
  %0 = pf.layer_norm %x, %s, %b : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<5xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{layer_norm: axis out of range}}
  // expected-error @+1 {{'pf.layer_norm' op failed to infer returned types}}
  %0 = pf.layer_norm %x, %s {axis = -4} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @gelu_approximate(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pf.gelu' op approximate must be "none" or "tanh", got "fast"}}
  %0 = pf.gelu %x {approximate = "fast"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @gelu_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'pf.gelu' op operand #0 must be tensor of floating-point values}}
  %0 = pf.gelu %x : (tensor<4xi32>) -> tensor<4xi32>
  return
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'pf.param' op type must be a statically shaped tensor, got 'tensor<?x4xf32>'}}
pf.param @dynamic : tensor<?x4xf32>

// -----

// expected-error @+1 {{'pf.param' op type must be a statically shaped tensor, got 'f32'}}
pf.param @scalar : f32

// -----

// expected-error @+1 {{'pf.param' op value has type 'tensor<3xf32>' but the parameter is declared 'tensor<2xf32>'}}
pf.param @mismatch : tensor<2xf32> = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>

// -----

func.func @param_in_function() {
  // expected-error @+1 {{'pf.param' op expects parent op 'builtin.module'}}
  pf.param @p : tensor<2xf32>
  return
}

// -----

func.func @param_ref_missing() -> tensor<2xf32> {
  // expected-error @+1 {{'pf.param_ref' op 'missing' does not name a pf.param}}
  %0 = pf.param_ref @missing : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func private @not_a_param()

func.func @param_ref_to_function() -> tensor<2xf32> {
  // expected-error @+1 {{'pf.param_ref' op 'not_a_param' does not name a pf.param}}
  %0 = pf.param_ref @not_a_param : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

pf.param @w : tensor<4x8xf32>

func.func @param_ref_wrong_type() -> tensor<8x4xf32> {
  // expected-error @+1 {{'pf.param_ref' op type 'tensor<8x4xf32>' does not match parameter 'w' of type 'tensor<4x8xf32>'}}
  %0 = pf.param_ref @w : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

pf.param @w : tensor<4x8xf32>

func.func @param_ref_less_refined() -> tensor<?x8xf32> {
  // expected-error @+1 {{'pf.param_ref' op type 'tensor<?x8xf32>' does not match parameter 'w' of type 'tensor<4x8xf32>'}}
  %0 = pf.param_ref @w : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// Pipeline structure
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'pf.pipeline' op needs at least one stage, got 0}}
pf.pipeline stages(0) microbatches(1) {
}

// -----

// expected-error @+1 {{'pf.pipeline' op needs at least one stage, got -2}}
pf.pipeline stages(-2) microbatches(1) {
}

// -----

// expected-error @+1 {{'pf.pipeline' op needs at least one micro-batch, got -1}}
pf.pipeline stages(1) microbatches(-1) {
}

// -----

func.func @pipeline_yield_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pf.pipeline' op yields 'tensor<4xf32>' but declares results 'tensor<8xf32>'}}
  %0 = pf.pipeline stages(1) microbatches(1) (%x : tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    pf.yield %a : tensor<4xf32>
  } -> tensor<8xf32>
  return
}

// -----

func.func @pipeline_block_arguments(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pf.pipeline' op body arguments 'tensor<8xf32>' do not match operands 'tensor<4xf32>'}}
  pf.pipeline stages(1) microbatches(1) (%x : tensor<4xf32>) {
  ^bb0(%a: tensor<8xf32>):
  }
  return
}

// -----

// A generic-form body ending in something else than pf.yield is a
// diagnostic, not a crash.
func.func @pipeline_wrong_terminator(%x: tensor<4xf32>) {
  "pf.pipeline"() <{num_stages = 1 : i64, num_microbatches = 1 : i64}> ({
    // expected-error @+1 {{'func.return' op expects parent op 'func.func'}}
    "func.return"(%x) : (tensor<4xf32>) -> ()
  }) : () -> ()
  return
}

// -----

// expected-error @+1 {{'pf.pipeline' op expects a non-empty block}}
"pf.pipeline"() <{num_stages = 1 : i64, num_microbatches = 1 : i64}> ({
^bb0:
}) : () -> ()

// -----

pf.pipeline stages(2) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op index 2 is out of range for a pipeline of 2 stages}}
  pf.stage 2 {
  }
}

// -----

pf.pipeline stages(2) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op index must be >= 0, got -1}}
  pf.stage -1 {
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op yields 'tensor<4xf32>' but declares results none}}
  pf.stage 0 {
    %x = pf.constant dense<1.0> : tensor<4xf32>
    pf.yield %x : tensor<4xf32>
  }
}

// -----

func.func @stage_outside_pipeline() {
  // expected-error @+1 {{'pf.stage' op must be nested in a pf.pipeline}}
  pf.stage 0 {
  }
  return
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op yields no values but declares results 'tensor<4xf32>'}}
  %0 = pf.stage 0 {
  } -> tensor<4xf32>
}

// -----

// expected-error @+1 {{'pf.yield' op expects parent op to be one of 'pf.pipeline, pf.stage'}}
pf.yield

// -----

pf.pipeline stages(2) microbatches(1) {
  pf.stage 1 {
    %x = pf.recv from 0 tag 0 : tensor<4xf32>
    // expected-error @+1 {{'pf.send' op destination stage 1 is the stage itself}}
    pf.send %x to 1 tag 1 : tensor<4xf32>
  }
}

// -----

func.func @send_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{'pf.send' op destination stage must be >= 0, got -1}}
  pf.send %x to -1 tag 0 : tensor<4xf32>
  return
}

// -----

pf.pipeline stages(2) microbatches(1) {
  pf.stage 0 {
    %x = pf.constant dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{'pf.send' op destination stage 2 is out of range for 2 stages}}
    pf.send %x to 2 tag 0 : tensor<4xf32>
  }
}

// -----

pf.pipeline stages(2) microbatches(1) {
  pf.stage 0 {
    // expected-error @+1 {{'pf.recv' op source stage 0 is the stage itself}}
    %x = pf.recv from 0 tag 0 : tensor<4xf32>
  }
}

// -----

func.func @recv_negative() -> tensor<4xf32> {
  // expected-error @+1 {{'pf.recv' op source stage must be >= 0, got -3}}
  %x = pf.recv from -3 tag 0 : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

func.func @recv_unranked() {
  // expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %x = pf.recv from 0 tag 0 : tensor<*xf32>
  return
}

// -----

func.func @microbatch_not_divisible(%x: tensor<10x4xf32>) {
  // expected-error @+2 {{microbatch: dimension of size 10 does not split into 4 micro-batches}}
  // expected-error @+1 {{'pf.microbatch' op failed to infer returned types}}
  %0 = pf.microbatch %x {index = 0, count = 4} : (tensor<10x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @microbatch_index(%x: tensor<8x4xf32>) {
  // expected-error @+2 {{microbatch: index 4 is not in [0, 4)}}
  // expected-error @+1 {{'pf.microbatch' op failed to infer returned types}}
  %0 = pf.microbatch %x {index = 4, count = 4} : (tensor<8x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @microbatch_dim(%x: tensor<8x4xf32>) {
  // expected-error @+2 {{microbatch: dim 2 out of range}}
  // expected-error @+1 {{'pf.microbatch' op failed to infer returned types}}
  %0 = pf.microbatch %x {index = 0, count = 2, dim = 2} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @microbatch_wrong_result(%x: tensor<8x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<8x2xf32>'}}
  // expected-error @+1 {{'pf.microbatch' op failed to infer returned types}}
  %0 = pf.microbatch %x {index = 0, count = 2} : (tensor<8x4xf32>) -> tensor<8x2xf32>
  return
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.program' op device must be >= 0}}
  pf.program device(-1) {
  }
}

// -----

func.func @program_outside_pipeline() {
  // expected-error @+1 {{'pf.program' op expects parent op 'pf.pipeline'}}
  pf.program device(0) {
  }
  return
}

// -----

pf.pipeline stages(1) microbatches(1) {
  pf.program device(0) {
    // expected-error @+1 {{'pf.task' op unknown task kind 'lunch'}}
    pf.task "lunch" {step = 0, stage = 0, start = 0.0, end = 1.0}
  }
}

//===----------------------------------------------------------------------===//
// K-FAC
//===----------------------------------------------------------------------===//

// -----

func.func @factor_a_rank(%x: tensor<64xf32>) {
  // expected-error @+2 {{kfac: rows operand must have rank >= 2 (tokens x features), got 'tensor<64xf32>'}}
  // expected-error @+1 {{'pf.kfac.factor_a' op failed to infer returned types}}
  %0 = pf.kfac.factor_a %x : (tensor<64xf32>) -> tensor<64x64xf32>
  return
}

// -----

// bias_column makes A (in+1)x(in+1).
func.func @factor_a_bias_column(%x: tensor<8x64xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<65x65xf32>' are incompatible with return type(s) of operation 'tensor<64x64xf32>'}}
  // expected-error @+1 {{'pf.kfac.factor_a' op failed to infer returned types}}
  %0 = pf.kfac.factor_a %x {bias_column} : (tensor<8x64xf32>) -> tensor<64x64xf32>
  return
}

// -----

func.func @factor_b_rank(%g: tensor<f32>) {
  // expected-error @+2 {{kfac: rows operand must have rank >= 2}}
  // expected-error @+1 {{'pf.kfac.factor_b' op failed to infer returned types}}
  %0 = pf.kfac.factor_b %g : (tensor<f32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @factor_b_int(%g: tensor<8x4xi32>) {
  // expected-error @+1 {{'pf.kfac.factor_b' op operand #0 must be tensor of floating-point values}}
  %0 = pf.kfac.factor_b %g : (tensor<8x4xi32>) -> tensor<4x4xi32>
  return
}

// -----

func.func @pi_not_square(%a: tensor<4x5xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+2 {{factor A must be a square matrix, got 'tensor<4x5xf32>'}}
  // expected-error @+1 {{'pf.kfac.pi' op failed to infer returned types}}
  %0 = pf.kfac.pi %a, %b : (tensor<4x5xf32>, tensor<3x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @pi_not_scalar(%a: tensor<4x4xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'pf.kfac.pi' op result #0 must be 0D tensor of floating-point values, but got 'tensor<1xf32>'}}
  %0 = pf.kfac.pi %a, %b : (tensor<4x4xf32>, tensor<3x3xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @inverse_side(%f: tensor<4x4xf32>, %pi: tensor<f32>) {
  // expected-error @+1 {{'pf.kfac.inverse' op side must be "A" or "B", got "C"}}
  %0 = pf.kfac.inverse %f, %pi {side = "C"} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @inverse_negative_damping(%f: tensor<4x4xf32>, %pi: tensor<f32>) {
  // expected-error @+1 {{'pf.kfac.inverse' op damping must be >= 0, got -1.000000e-03}}
  %0 = pf.kfac.inverse %f, %pi {side = "A", damping = -1.0e-3} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @inverse_not_square(%f: tensor<4x3xf32>, %pi: tensor<f32>) {
  // expected-error @+2 {{factor must be a square matrix, got 'tensor<4x3xf32>'}}
  // expected-error @+1 {{'pf.kfac.inverse' op failed to infer returned types}}
  %0 = pf.kfac.inverse %f, %pi {side = "A"} : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @inverse_missing_side(%f: tensor<4x4xf32>, %pi: tensor<f32>) {
  // expected-error @+1 {{'pf.kfac.inverse' op requires attribute 'side'}}
  %0 = pf.kfac.inverse %f, %pi : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @precondition_b_size(%g: tensor<32x64xf32>, %a: tensor<64x64xf32>, %b: tensor<16x16xf32>) {
  // expected-error @+2 {{kfac.precondition: B inverse is 16x16 but the gradient has 32 outputs}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<16x16xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @precondition_eigen_damping(%g: tensor<32x64xf32>, %qa: tensor<64x64xf32>, %la: tensor<64xf32>, %qb: tensor<32x32xf32>, %lb: tensor<32xf32>) {
  %d = pf.constant dense<0.0> : tensor<f64>
  // expected-error @+1 {{'pf.kfac.precondition_eigen' op damping must be finite and > 0 (the product's eigenvalues may be 0), got 0}}
  %0 = pf.kfac.precondition_eigen %g, %qa, %la, %qb, %lb, %d : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>) -> tensor<32x64xf32>
  return
}

// -----

func.func @precondition_eigen_values(%g: tensor<32x64xf32>, %qa: tensor<64x64xf32>, %la: tensor<63xf32>, %qb: tensor<32x32xf32>, %lb: tensor<32xf32>, %d: tensor<f64>) {
  // expected-error @+2 {{kfac.precondition_eigen: A eigenvalues must be 1-D with one value per eigenvector, got 'tensor<63xf32>' for 'tensor<64x64xf32>'}}
  // expected-error @+1 {{'pf.kfac.precondition_eigen' op failed to infer returned types}}
  %0 = pf.kfac.precondition_eigen %g, %qa, %la, %qb, %lb, %d : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<63xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>) -> tensor<32x64xf32>
  return
}

// -----

func.func @precondition_eigen_b_size(%g: tensor<32x64xf32>, %qa: tensor<64x64xf32>, %la: tensor<64xf32>, %qb: tensor<16x16xf32>, %lb: tensor<16xf32>, %d: tensor<f64>) {
  // expected-error @+2 {{kfac.precondition_eigen: B eigenvectors is 16x16 but the gradient has 32 outputs}}
  // expected-error @+1 {{'pf.kfac.precondition_eigen' op failed to infer returned types}}
  %0 = pf.kfac.precondition_eigen %g, %qa, %la, %qb, %lb, %d : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<f64>) -> tensor<32x64xf32>
  return
}

// -----

pf.param @e.A : tensor<4x4xf32>
pf.param @e.B : tensor<3x3xf32>
pf.param @e.A_vectors : tensor<4x4xf32>
pf.param @e.B_vectors : tensor<3x3xf32>
pf.param @e.A_values : tensor<3xf32>
pf.param @e.B_values : tensor<3xf32>
func.func @refresh_eigen_values_size(%step: tensor<i64>) -> tensor<i32> {
  // expected-error @+1 {{'pf.kfac.refresh_inverses' op a_values 'e.A_values' must be a 1-D pf.param of 4 values, got 'tensor<3xf32>'}}
  %0 = pf.kfac.refresh_inverses(@e.A, @e.B) into (@e.A_vectors, @e.B_vectors) values (@e.A_values, @e.B_values) step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

pf.param @f.A : tensor<4x4xf32>
pf.param @f.B : tensor<3x3xf32>
pf.param @f.A_values : tensor<4xf32>
func.func @refresh_eigen_one_side(%step: tensor<i64>) -> tensor<i32> {
  // expected-error @+1 {{'pf.kfac.refresh_inverses' op a_values and b_values go together (the eigenbasis of both factors)}}
  %0 = "pf.kfac.refresh_inverses"(%step) <{factor_a = @f.A, factor_b = @f.B, a_inverse = @f.A, b_inverse = @f.B, a_values = @f.A_values, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<i64>) -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

func.func @precondition_a_size(%g: tensor<32x64xf32>, %a: tensor<63x63xf32>, %b: tensor<32x32xf32>) {
  // expected-error @+2 {{kfac.precondition: A inverse is 63x63 but the gradient has 64 inputs}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b : (tensor<32x64xf32>, tensor<63x63xf32>, tensor<32x32xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @precondition_bias_column(%g: tensor<32x64xf32>, %a: tensor<65x65xf32>, %b: tensor<32x32xf32>) {
  // expected-error @+2 {{kfac.precondition: A inverse has a bias column but no bias gradient is given}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @precondition_bias_size(%g: tensor<32x64xf32>, %a: tensor<65x65xf32>, %b: tensor<32x32xf32>,
                                  %gb: tensor<64xf32>) {
  // expected-error @+2 {{kfac.precondition: bias gradient must be 1-D of the gradient's output size, got 'tensor<64xf32>'}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0:2 = pf.kfac.precondition %g, %a, %b, %gb : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>, tensor<64xf32>) -> (tensor<32x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @precondition_grad_rank(%g: tensor<2x32x64xf32>, %a: tensor<?x?xf32>, %b: tensor<32x32xf32>) {
  // expected-error @+2 {{kfac.precondition: weight gradient must be 2-D [out, in], got 'tensor<2x32x64xf32>'}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b : (tensor<2x32x64xf32>, tensor<?x?xf32>, tensor<32x32xf32>) -> tensor<2x32x64xf32>
  return
}

// -----

func.func @precondition_not_square(%g: tensor<32x64xf32>, %a: tensor<64x65xf32>, %b: tensor<32x32xf32>) {
  // expected-error @+2 {{A inverse must be a square matrix, got 'tensor<64x65xf32>'}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b : (tensor<32x64xf32>, tensor<64x65xf32>, tensor<32x32xf32>) -> tensor<32x64xf32>
  return
}

// -----

// With a bias gradient there are two results.
func.func @precondition_result_count(%g: tensor<32x64xf32>, %a: tensor<65x65xf32>, %b: tensor<32x32xf32>,
                                     %gb: tensor<32xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<32x64xf32>', 'tensor<32xf32>' are incompatible with return type(s) of operation 'tensor<32x64xf32>'}}
  // expected-error @+1 {{'pf.kfac.precondition' op failed to infer returned types}}
  %0 = pf.kfac.precondition %g, %a, %b, %gb : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @graft_type_mismatch(%u: tensor<5x4xf32>, %g: tensor<4x5xf32>) {
  // expected-error @+1 {{'pf.kfac.graft' op update, gradient and result types differ: 'tensor<5x4xf32>', 'tensor<4x5xf32>', 'tensor<5x4xf32>'}}
  %0 = pf.kfac.graft updates(%u : tensor<5x4xf32>) gradients(%g : tensor<4x5xf32>) -> tensor<5x4xf32>
  return
}

// -----

func.func @graft_missing_gradient(%u: tensor<5x4xf32>, %v: tensor<5xf32>, %g: tensor<5x4xf32>) {
  // expected-error @+1 {{'pf.kfac.graft' op needs one gradient and one result per update}}
  %0:2 = pf.kfac.graft updates(%u, %v : tensor<5x4xf32>, tensor<5xf32>) gradients(%g : tensor<5x4xf32>) -> tensor<5x4xf32>, tensor<5xf32>
  return
}
