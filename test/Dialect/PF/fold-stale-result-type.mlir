// A result type declared while a shape operand was not yet a constant may
// contradict what the constant selects once the canonicalizer makes it one.
// The folders must then leave the op alone (the verifier reports it), not
// read outside the constant. Verification between passes is off so the
// output shows what the folders did.
// RUN: pf-opt %s -canonicalize --verify-each=false | FileCheck %s

// Elements [2, 4) are 2, not the declared 3.
// CHECK-LABEL: sym_name = "slice"
// CHECK: "pf.slice"
func.func @slice() -> tensor<3xf32> {
  %d = pf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = pf.constant dense<[2]> : tensor<1xi64>
  %start = pf.identity %a : (tensor<1xi64>) -> tensor<1xi64>
  %e = pf.constant dense<[4]> : tensor<1xi64>
  %r = pf.slice %d, %start, %e {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// A 3-vector does not broadcast to 2x4.
// CHECK-LABEL: sym_name = "expand"
// CHECK: "pf.expand"
func.func @expand() -> tensor<2x4xf32> {
  %d = pf.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %a = pf.constant dense<[2, 4]> : tensor<2xi64>
  %s = pf.identity %a : (tensor<2xi64>) -> tensor<2xi64>
  %r = pf.expand %d, %s : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// When the declared type does agree, the same chains fold.
// CHECK-LABEL: sym_name = "consistent"
// CHECK-DAG: %[[E:.*]] = "pf.constant"() <{value = dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [1.000000e+00, 2.000000e+00, 3.000000e+00]]> : tensor<2x3xf32>}>
// CHECK-DAG: %[[S:.*]] = "pf.constant"() <{value = dense<[3.000000e+00, 4.000000e+00]> : tensor<2xf32>}>
// CHECK-NEXT: "func.return"(%[[S]], %[[E]])
func.func @consistent() -> (tensor<2xf32>, tensor<2x3xf32>) {
  %d = pf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = pf.constant dense<[2]> : tensor<1xi64>
  %start = pf.identity %a : (tensor<1xi64>) -> tensor<1xi64>
  %e = pf.constant dense<[4]> : tensor<1xi64>
  %r = pf.slice %d, %start, %e {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xf32>
  %v = pf.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %b = pf.constant dense<[2, 3]> : tensor<2xi64>
  %shape = pf.identity %b : (tensor<2xi64>) -> tensor<2xi64>
  %x = pf.expand %v, %shape : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %r, %x : tensor<2xf32>, tensor<2x3xf32>
}
