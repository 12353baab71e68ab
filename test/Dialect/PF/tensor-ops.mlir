// Round trip of the ONNX-subset tensor ops: custom form -> parse -> custom form,
// and generic form -> parse -> custom form. Every op is verified on the way,
// so the declared result types below must agree with the inferred ones.
// RUN: pf-opt %s | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

//===--- Constants and identity -------------------------------------------===//

// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %[[S:.*]] = pf.constant dense<[2, 3]> : tensor<2xi64>
// CHECK-NEXT: %[[F:.*]] = pf.constant dense<1.500000e+00> : tensor<f32>
// CHECK-NEXT: %[[B:.*]] = pf.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT: %[[I:.*]] = pf.identity %[[S]] : (tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: return %[[S]], %[[F]], %[[B]], %[[I]]
// GENERIC-LABEL: sym_name = "constants"
// GENERIC: "pf.constant"() <{value = dense<[2, 3]> : tensor<2xi64>}> : () -> tensor<2xi64>
// GENERIC: "pf.identity"(%{{.*}}) : (tensor<2xi64>) -> tensor<2xi64>
func.func @constants() -> (tensor<2xi64>, tensor<f32>, tensor<2xi1>, tensor<2xi64>) {
  %s = pf.constant dense<[2, 3]> : tensor<2xi64>
  %f = pf.constant dense<1.5> : tensor<f32>
  %b = pf.constant dense<[true, false]> : tensor<2xi1>
  %i = pf.identity %s : (tensor<2xi64>) -> tensor<2xi64>
  return %s, %f, %b, %i : tensor<2xi64>, tensor<f32>, tensor<2xi1>, tensor<2xi64>
}

// A constant whose data lives in a resource blob (how weights are stored).
// CHECK-LABEL: func.func @resource_constant
// CHECK-NEXT: pf.constant dense_resource<blob_two> : tensor<2xf32>
func.func @resource_constant() -> tensor<2xf32> {
  %c = pf.constant dense_resource<blob_two> : tensor<2xf32>
  return %c : tensor<2xf32>
}

//===--- Elementwise -------------------------------------------------------===//

// Numpy broadcasting: ranks are aligned on the right, 1s stretch, and a
// dynamic dimension takes the static size of the other side.
// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[C:.*]]: tensor<4x1x3xf32>, %[[D:.*]]: tensor<?x3xf32>, %[[U:.*]]: tensor<*xf32>)
// CHECK-NEXT: pf.add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.sub %[[C]], %[[A]] : (tensor<4x1x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: pf.mul %[[D]], %[[A]] : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.div %[[A]], %[[U]] : (tensor<2x3xf32>, tensor<*xf32>) -> tensor<*xf32>
// CHECK-NEXT: pf.pow %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.equal %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<4x1x3xf32>,
                  %d: tensor<?x3xf32>, %u: tensor<*xf32>) {
  %0 = pf.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = pf.sub %c, %a : (tensor<4x1x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
  %2 = pf.mul %d, %a : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = pf.div %a, %u : (tensor<2x3xf32>, tensor<*xf32>) -> tensor<*xf32>
  %4 = pf.pow %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = pf.equal %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  return
}

// Pow is the one binary op whose exponent may have another element type.
// A declared result may be less refined than the inferred one.
// CHECK-LABEL: func.func @binary_mixed
// CHECK-NEXT: pf.pow %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
// CHECK-NEXT: pf.add %{{.*}}, %{{.*}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<?xi64>
func.func @binary_mixed(%a: tensor<4xf32>, %e: tensor<i64>, %i: tensor<4xi64>, %j: tensor<1xi64>) {
  %0 = pf.pow %a, %e : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  %1 = pf.add %i, %j : (tensor<4xi64>, tensor<1xi64>) -> tensor<?xi64>
  return
}

// CHECK-LABEL: func.func @unary
// CHECK-NEXT: pf.sqrt %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.erf %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.tanh %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.exp %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.neg %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.neg %{{.*}} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: pf.tanh %{{.*}} : (tensor<?x3xbf16>) -> tensor<?x3xbf16>
func.func @unary(%a: tensor<2x3xf32>, %i: tensor<4xi64>, %h: tensor<?x3xbf16>) {
  %0 = pf.sqrt %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = pf.erf %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = pf.tanh %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = pf.exp %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = pf.neg %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = pf.neg %i : (tensor<4xi64>) -> tensor<4xi64>
  %6 = pf.tanh %h : (tensor<?x3xbf16>) -> tensor<?x3xbf16>
  return
}

// CHECK-LABEL: func.func @where_cast
// CHECK-NEXT: pf.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT: pf.cast %{{.*}} {to = f16} : (tensor<3xf32>) -> tensor<3xf16>
// CHECK-NEXT: pf.cast %{{.*}} {to = i64} : (tensor<*xf32>) -> tensor<*xi64>
// GENERIC-LABEL: sym_name = "where_cast"
// GENERIC: "pf.cast"(%{{.*}}) <{to = f16}> : (tensor<3xf32>) -> tensor<3xf16>
func.func @where_cast(%c: tensor<2x1xi1>, %x: tensor<3xf32>, %y: tensor<f32>, %u: tensor<*xf32>) {
  %0 = pf.where %c, %x, %y : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %1 = pf.cast %x {to = f16} : (tensor<3xf32>) -> tensor<3xf16>
  %2 = pf.cast %u {to = i64} : (tensor<*xf32>) -> tensor<*xi64>
  return
}

//===--- Linear algebra ----------------------------------------------------===//

// numpy matmul: batch dims broadcast, a 1-D lhs is a row vector and a 1-D rhs
// a column vector, and the promoted dimension is dropped.
// CHECK-LABEL: func.func @matmul
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<8x1x4x5xf32>, tensor<3x5x6xf32>) -> tensor<8x3x4x6xf32>
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<5xf32>, tensor<2x5x6xf32>) -> tensor<2x6xf32>
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<8x4x5xf32>, tensor<5xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<5xf32>, tensor<5xf32>) -> tensor<f32>
// CHECK-NEXT: pf.matmul %{{.*}}, %{{.*}} : (tensor<?x4x?xf32>, tensor<5x6xf32>) -> tensor<?x4x6xf32>
func.func @matmul(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>, %ba: tensor<8x1x4x5xf32>,
                  %bb: tensor<3x5x6xf32>, %v: tensor<5xf32>, %b3: tensor<2x5x6xf32>,
                  %a3: tensor<8x4x5xf32>, %d: tensor<?x4x?xf32>) {
  %0 = pf.matmul %a, %b : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %1 = pf.matmul %ba, %bb : (tensor<8x1x4x5xf32>, tensor<3x5x6xf32>) -> tensor<8x3x4x6xf32>
  %2 = pf.matmul %v, %b3 : (tensor<5xf32>, tensor<2x5x6xf32>) -> tensor<2x6xf32>
  %3 = pf.matmul %a3, %v : (tensor<8x4x5xf32>, tensor<5xf32>) -> tensor<8x4xf32>
  %4 = pf.matmul %v, %v : (tensor<5xf32>, tensor<5xf32>) -> tensor<f32>
  %5 = pf.matmul %d, %b : (tensor<?x4x?xf32>, tensor<5x6xf32>) -> tensor<?x4x6xf32>
  return
}

// CHECK-LABEL: func.func @gemm
// CHECK-NEXT: pf.gemm %{{.*}}, %{{.*}} : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: pf.gemm %{{.*}}, %{{.*}}, %{{.*}} {transB} : (tensor<4x5xf32>, tensor<6x5xf32>, tensor<6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: pf.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transA} : (tensor<5x4xf32>, tensor<5x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: pf.gemm %{{.*}}, %{{.*}} {transA, transB} : (tensor<5x4xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
// GENERIC-LABEL: sym_name = "gemm"
// GENERIC: "pf.gemm"(%{{.*}}, %{{.*}}) <{alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32}>
// GENERIC: "pf.gemm"(%{{.*}}, %{{.*}}, %{{.*}}) <{alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transB}>
func.func @gemm(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>, %bt: tensor<6x5xf32>, %c: tensor<6xf32>,
                %at: tensor<5x4xf32>, %c2: tensor<4x1xf32>) {
  %0 = pf.gemm %a, %b : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %1 = pf.gemm %a, %bt, %c {transB} : (tensor<4x5xf32>, tensor<6x5xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %2 = pf.gemm %at, %b, %c2 {alpha = 0.5 : f32, beta = 2.0 : f32, transA}
      : (tensor<5x4xf32>, tensor<5x6xf32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  %3 = pf.gemm %at, %bt {transA, transB} : (tensor<5x4xf32>, tensor<6x5xf32>) -> tensor<4x6xf32>
  return
}

//===--- Shape manipulation ------------------------------------------------===//

// CHECK-LABEL: func.func @shape
// CHECK-NEXT: pf.shape %{{.*}} : (tensor<2x?x4xf32>) -> tensor<3xi64>
// CHECK-NEXT: pf.shape %{{.*}} {start = 1 : i64} : (tensor<2x?x4xf32>) -> tensor<2xi64>
// CHECK-NEXT: pf.shape %{{.*}} {end = -1 : i64, start = -2 : i64} : (tensor<2x?x4xf32>) -> tensor<1xi64>
// CHECK-NEXT: pf.shape %{{.*}} {start = 5 : i64} : (tensor<2x?x4xf32>) -> tensor<0xi64>
// CHECK-NEXT: pf.shape %{{.*}} : (tensor<*xf32>) -> tensor<?xi64>
func.func @shape(%x: tensor<2x?x4xf32>, %u: tensor<*xf32>) {
  %0 = pf.shape %x : (tensor<2x?x4xf32>) -> tensor<3xi64>
  %1 = pf.shape %x {start = 1} : (tensor<2x?x4xf32>) -> tensor<2xi64>
  %2 = pf.shape %x {start = -2, end = -1} : (tensor<2x?x4xf32>) -> tensor<1xi64>
  %3 = pf.shape %x {start = 5} : (tensor<2x?x4xf32>) -> tensor<0xi64>
  %4 = pf.shape %u : (tensor<*xf32>) -> tensor<?xi64>
  return
}

// Reshape: 0 copies the input dimension, -1 is inferred; with allowzero a 0 is
// a real zero-sized dimension. A non-constant shape gives rank only.
// CHECK-LABEL: func.func @reshape
// CHECK: pf.reshape %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
// CHECK-NEXT: pf.reshape %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<6x1x4xf32>
// CHECK-NEXT: pf.reshape %{{.*}}, %{{.*}} {allowzero} : (tensor<0x3xf32>, tensor<2xi64>) -> tensor<3x0xf32>
// CHECK-NEXT: pf.reshape %{{.*}}, %{{.*}} : (tensor<?x3x4xf32>, tensor<2xi64>) -> tensor<?x12xf32>
// CHECK-NEXT: pf.reshape %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
// CHECK-NEXT: pf.reshape %{{.*}}, %{{.*}} : (tensor<*xf32>, tensor<2xi64>) -> tensor<?x?xf32>
func.func @reshape(%x: tensor<2x3x4xf32>, %z: tensor<0x3xf32>, %d: tensor<?x3x4xf32>,
                   %s: tensor<3xi64>, %u: tensor<*xf32>) {
  %c0 = pf.constant dense<[0, -1]> : tensor<2xi64>
  %c1 = pf.constant dense<[-1, 1, 4]> : tensor<3xi64>
  %c2 = pf.constant dense<[3, 0]> : tensor<2xi64>
  %c3 = pf.constant dense<[0, 12]> : tensor<2xi64>
  %0 = pf.reshape %x, %c0 : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  %1 = pf.reshape %x, %c1 : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<6x1x4xf32>
  %2 = pf.reshape %z, %c2 {allowzero} : (tensor<0x3xf32>, tensor<2xi64>) -> tensor<3x0xf32>
  %3 = pf.reshape %d, %c3 : (tensor<?x3x4xf32>, tensor<2xi64>) -> tensor<?x12xf32>
  %4 = pf.reshape %x, %s : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %5 = pf.reshape %u, %c0 : (tensor<*xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return
}

// CHECK-LABEL: func.func @transpose
// CHECK-NEXT: pf.transpose %{{.*}} {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: pf.transpose %{{.*}} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK-NEXT: pf.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<?x5xf32>) -> tensor<5x?xf32>
func.func @transpose(%x: tensor<2x3x4xf32>, %d: tensor<?x5xf32>) {
  %0 = pf.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = pf.transpose %x : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %2 = pf.transpose %d {perm = array<i64: 1, 0>} : (tensor<?x5xf32>) -> tensor<5x?xf32>
  return
}

// Unsqueeze axes index the output (negative ones count from its end);
// squeeze without axes drops every static 1.
// CHECK-LABEL: func.func @squeeze_unsqueeze
// CHECK-NEXT: pf.unsqueeze %{{.*}} {axes = array<i64: 0, -1>} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
// CHECK-NEXT: pf.unsqueeze %{{.*}} {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
// CHECK-NEXT: pf.squeeze %{{.*}} {axes = array<i64: -1>} : (tensor<1x2x1xf32>) -> tensor<1x2xf32>
// CHECK-NEXT: pf.squeeze %{{.*}} : (tensor<1x2x1xf32>) -> tensor<2xf32>
// CHECK-NEXT: pf.squeeze %{{.*}} {axes = array<i64: 0>} : (tensor<?x2xf32>) -> tensor<2xf32>
func.func @squeeze_unsqueeze(%x: tensor<2x3xf32>, %y: tensor<1x2x1xf32>, %d: tensor<?x2xf32>) {
  %0 = pf.unsqueeze %x {axes = array<i64: 0, -1>} : (tensor<2x3xf32>) -> tensor<1x2x3x1xf32>
  %1 = pf.unsqueeze %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1x3xf32>
  %2 = pf.squeeze %y {axes = array<i64: -1>} : (tensor<1x2x1xf32>) -> tensor<1x2xf32>
  %3 = pf.squeeze %y : (tensor<1x2x1xf32>) -> tensor<2xf32>
  %4 = pf.squeeze %d {axes = array<i64: 0>} : (tensor<?x2xf32>) -> tensor<2xf32>
  return
}

// CHECK-LABEL: func.func @concat
// CHECK-NEXT: pf.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
// CHECK-NEXT: pf.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x?xf32>, tensor<2x3xf32>) -> tensor<2x?xf32>
// CHECK-NEXT: pf.concat %{{.*}} {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %d: tensor<2x?xf32>) {
  %0 = pf.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %1 = pf.concat %a, %d, %a {axis = -1} : (tensor<2x3xf32>, tensor<2x?xf32>, tensor<2x3xf32>) -> tensor<2x?xf32>
  %2 = pf.concat %a {axis = 0} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// ONNX Slice: negative starts/ends count from the end, ends are clamped, a
// negative step walks backwards. The operand segments are part of the printed
// attribute dictionary.
// CHECK-LABEL: func.func @slice
// CHECK: pf.slice %[[X:.*]], %[[S1:.*]], %[[E3:.*]] {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x6xf32>
// CHECK-NEXT: pf.slice %[[X]], %{{.*}}, %{{.*}}, %{{.*}} {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>} : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8x3xf32>
// CHECK-NEXT: pf.slice %[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8x6xf32>
// CHECK-NEXT: pf.slice %[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<8x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: pf.slice %[[X]], %{{.*}}, %{{.*}} {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x6xf32>
// CHECK-NEXT: pf.slice %{{.*}}, %[[S1]], %[[E3]] {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (tensor<?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x6xf32>
// GENERIC-LABEL: sym_name = "slice"
// GENERIC: "pf.slice"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x6xf32>
func.func @slice(%x: tensor<8x6xf32>, %dyn: tensor<1xi64>, %d: tensor<?x6xf32>) {
  %one = pf.constant dense<1> : tensor<1xi64>
  %three = pf.constant dense<3> : tensor<1xi64>
  %neg_three = pf.constant dense<-3> : tensor<1xi64>
  %big = pf.constant dense<100> : tensor<1xi64>
  %last = pf.constant dense<-1> : tensor<1xi64>
  %min = pf.constant dense<-9223372036854775807> : tensor<1xi64>
  %neg_one = pf.constant dense<-1> : tensor<1xi64>
  %starts2 = pf.constant dense<[-1, 0]> : tensor<2xi64>
  %ends2 = pf.constant dense<[0, 6]> : tensor<2xi64>
  %axes2 = pf.constant dense<[0, 1]> : tensor<2xi64>
  %steps2 = pf.constant dense<[-3, 4]> : tensor<2xi64>
  // rows [1, 3)
  %0 = pf.slice %x, %one, %three {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x6xf32>
  // columns [-3, 100) of axis -1: the last three
  %1 = pf.slice %x, %neg_three, %big, %last {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8x3xf32>
  // all rows reversed: from -1 down to INT64_MIN + 1 with step -1
  %2 = pf.slice %x, %last, %min, %one, %neg_one {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8x6xf32>
  // rows 7, 4, 1 (step -3, end 0 exclusive) and columns 0, 4 (step 4)
  %3 = pf.slice %x, %starts2, %ends2, %axes2, %steps2 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<8x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<3x2xf32>
  // a non-constant start: only the sliced (first) dimension becomes unknown
  %4 = pf.slice %x, %dyn, %three {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<8x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x6xf32>
  %5 = pf.slice %d, %one, %three {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x6xf32>
  return
}

// Gather replaces the gathered axis by the shape of the indices (a scalar index
// removes it).
// CHECK-LABEL: func.func @gather
// CHECK-NEXT: pf.gather %{{.*}}, %{{.*}} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.gather %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<10x4xf32>, tensor<i32>) -> tensor<10xf32>
// CHECK-NEXT: pf.gather %{{.*}}, %{{.*}} {axis = -1 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<10x2x3xf32>
// GENERIC-LABEL: sym_name = "gather"
// GENERIC: "pf.gather"(%{{.*}}, %{{.*}}) <{axis = 0 : i64}> : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
func.func @gather(%d: tensor<10x4xf32>, %i: tensor<2x3xi64>, %s: tensor<i32>) {
  %0 = pf.gather %d, %i : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = pf.gather %d, %s {axis = 1} : (tensor<10x4xf32>, tensor<i32>) -> tensor<10xf32>
  %2 = pf.gather %d, %i {axis = -1} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<10x2x3xf32>
  return
}

// CHECK-LABEL: func.func @expand_constant_of_shape
// CHECK: pf.expand %{{.*}}, %{{.*}} : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.expand %{{.*}}, %{{.*}} : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<*xf32>
// CHECK-NEXT: pf.constant_of_shape %{{.*}} : (tensor<3xi64>) -> tensor<2x1x4xf32>
// CHECK-NEXT: pf.constant_of_shape %{{.*}} {value = dense<7> : tensor<1xi64>} : (tensor<3xi64>) -> tensor<2x1x4xi64>
// CHECK-NEXT: pf.constant_of_shape %{{.*}} {value = dense<true> : tensor<i1>} : (tensor<2xi64>) -> tensor<?x?xi1>
func.func @expand_constant_of_shape(%x: tensor<3x1xf32>, %s: tensor<2xi64>, %s3: tensor<3xi64>) {
  %shape = pf.constant dense<[2, 1, 4]> : tensor<3xi64>
  %0 = pf.expand %x, %shape : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  %1 = pf.expand %x, %s3 : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<*xf32>
  %2 = pf.constant_of_shape %shape : (tensor<3xi64>) -> tensor<2x1x4xf32>
  %3 = pf.constant_of_shape %shape {value = dense<7> : tensor<1xi64>} : (tensor<3xi64>) -> tensor<2x1x4xi64>
  %4 = pf.constant_of_shape %s {value = dense<true> : tensor<i1>} : (tensor<2xi64>) -> tensor<?x?xi1>
  return
}

//===--- Reductions and normalization --------------------------------------===//

// CHECK-LABEL: func.func @reduce
// CHECK-NEXT: pf.reduce_mean %{{.*}} {axes = array<i64: -1>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK-NEXT: pf.reduce_mean %{{.*}} {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK-NEXT: pf.reduce_sum %{{.*}} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
// CHECK-NEXT: pf.reduce_sum %{{.*}} {keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
// CHECK-NEXT: pf.reduce_sum %{{.*}} {axes = array<i64>, noop_with_empty_axes} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// GENERIC-LABEL: sym_name = "reduce"
// GENERIC: "pf.reduce_mean"(%{{.*}}) <{axes = array<i64: -1>, keepdims = true}>
func.func @reduce(%x: tensor<2x3x4xf32>) {
  %0 = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %1 = pf.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %2 = pf.reduce_sum %x : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
  %3 = pf.reduce_sum %x {keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  %4 = pf.reduce_sum %x {axes = array<i64>, noop_with_empty_axes} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func.func @normalization
// CHECK-NEXT: pf.softmax %{{.*}} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.softmax %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %output{{.*}}, %mean{{.*}}, %inv_std_dev{{.*}} = pf.layer_normalization %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
// CHECK-NEXT: %output{{.*}}, %mean{{.*}}, %inv_std_dev{{.*}} = pf.layer_normalization %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
// CHECK-NEXT: %output{{.*}}, %mean{{.*}}, %inv_std_dev{{.*}} = pf.layer_normalization %{{.*}}, %{{.*}} : (tensor<2x3x4xf16>, tensor<4xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
// GENERIC-LABEL: sym_name = "normalization"
// GENERIC: "pf.softmax"(%{{.*}}) <{axis = -1 : i64}>
// GENERIC: "pf.layer_normalization"(%{{.*}}, %{{.*}}, %{{.*}}) <{axis = -1 : i64, epsilon = 9.99999974E-6 : f32}>
func.func @normalization(%x: tensor<2x3x4xf32>, %s: tensor<4xf32>, %s2: tensor<3x4xf32>,
                         %h: tensor<2x3x4xf16>, %sh: tensor<4xf16>) {
  %0 = pf.softmax %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = pf.softmax %x {axis = 1} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2:3 = pf.layer_normalization %x, %s, %s
      : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %3:3 = pf.layer_normalization %x, %s2 {axis = 1, epsilon = 1.0e-12 : f32}
      : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  %4:3 = pf.layer_normalization %h, %sh
      : (tensor<2x3x4xf16>, tensor<4xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  return
}

{-#
  dialect_resources: {
    builtin: {
      blob_two: "0x040000000000803F00000040"
    }
  }
#-}
