// Constant folding of the tensor ops (the canonicalizer runs the folders) and
// shape refinement by pf-infer-shapes, which folds as it refines.
// RUN: pf-opt %s -canonicalize | FileCheck %s
// RUN: pf-opt %s --pf-infer-shapes | FileCheck %s --check-prefix=INFER

//===--- Shape arithmetic ---------------------------------------------------===//

// CHECK-LABEL: func.func @shape_static
// CHECK-NEXT: %[[C:.*]] = pf.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-NEXT: %[[T:.*]] = pf.constant dense<[3, 4]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]], %[[T]]
func.func @shape_static(%x: tensor<2x3x4xf32>) -> (tensor<3xi64>, tensor<2xi64>) {
  %0 = pf.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %1 = pf.shape %x {start = -2} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  return %0, %1 : tensor<3xi64>, tensor<2xi64>
}

// The shape of a dynamic tensor is not a constant.
// CHECK-LABEL: func.func @shape_dynamic
// CHECK-NEXT: pf.shape
func.func @shape_dynamic(%x: tensor<?x4xf32>) -> tensor<2xi64> {
  %0 = pf.shape %x : (tensor<?x4xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @gather
// CHECK-DAG: %[[S:.*]] = pf.constant dense<30> : tensor<i64>
// CHECK-DAG: %[[N:.*]] = pf.constant dense<[40, 10]> : tensor<2xi64>
// CHECK-DAG: %[[M:.*]] = pf.constant dense<{{\[}}[2, 1], [5, 4]]> : tensor<2x2xi64>
// CHECK-NOT: pf.gather
// CHECK: return %[[S]], %[[N]], %[[M]]
func.func @gather() -> (tensor<i64>, tensor<2xi64>, tensor<2x2xi64>) {
  %d = pf.constant dense<[10, 20, 30, 40]> : tensor<4xi64>
  %i = pf.constant dense<2> : tensor<i64>
  %j = pf.constant dense<[-1, 0]> : tensor<2xi64>
  %m = pf.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %k = pf.constant dense<[1, 0]> : tensor<2xi64>
  %0 = pf.gather %d, %i : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %1 = pf.gather %d, %j : (tensor<4xi64>, tensor<2xi64>) -> tensor<2xi64>
  %2 = pf.gather %m, %k {axis = 1} : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %0, %1, %2 : tensor<i64>, tensor<2xi64>, tensor<2x2xi64>
}

// An index out of range is left for the runtime check.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: pf.gather
func.func @gather_out_of_range() -> tensor<i64> {
  %d = pf.constant dense<[10, 20, 30, 40]> : tensor<4xi64>
  %i = pf.constant dense<4> : tensor<i64>
  %0 = pf.gather %d, %i : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// CHECK-LABEL: func.func @unsqueeze_squeeze_reshape
// CHECK-DAG: %[[U:.*]] = pf.constant dense<7> : tensor<1xi64>
// CHECK-DAG: %[[S:.*]] = pf.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-DAG: %[[R:.*]] = pf.constant dense<{{\[}}[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NOT: pf.unsqueeze
// CHECK-NOT: pf.squeeze
// CHECK-NOT: pf.reshape
// CHECK: return %[[U]], %[[S]], %[[R]]
func.func @unsqueeze_squeeze_reshape() -> (tensor<1xi64>, tensor<2xi64>, tensor<3x2xi64>) {
  %s = pf.constant dense<7> : tensor<i64>
  %m = pf.constant dense<[[1, 2]]> : tensor<1x2xi64>
  %v = pf.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %shape = pf.constant dense<[-1, 2]> : tensor<2xi64>
  %0 = pf.unsqueeze %s {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %1 = pf.squeeze %m : (tensor<1x2xi64>) -> tensor<2xi64>
  %2 = pf.reshape %v, %shape : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<3x2xi64>
  return %0, %1, %2 : tensor<1xi64>, tensor<2xi64>, tensor<3x2xi64>
}

// CHECK-LABEL: func.func @concat
// CHECK-DAG: %[[A:.*]] = pf.constant dense<[1, 2, 3, -1]> : tensor<4xi64>
// CHECK-DAG: %[[B:.*]] = pf.constant dense<{{\[}}[1, 2, 9], [3, 4, 9]]> : tensor<2x3xi64>
// CHECK-NOT: pf.concat
// CHECK: return %[[A]], %[[B]]
func.func @concat() -> (tensor<4xi64>, tensor<2x3xi64>) {
  %a = pf.constant dense<[1, 2]> : tensor<2xi64>
  %b = pf.constant dense<3> : tensor<1xi64>
  %c = pf.constant dense<-1> : tensor<1xi64>
  %m = pf.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %n = pf.constant dense<9> : tensor<2x1xi64>
  %0 = pf.concat %a, %b, %c {axis = 0} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %1 = pf.concat %m, %n {axis = -1} : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  return %0, %1 : tensor<4xi64>, tensor<2x3xi64>
}

// Slice with negative starts, clamped ends and negative steps.
// CHECK-LABEL: func.func @slice
// CHECK-DAG: %[[A:.*]] = pf.constant dense<[3, 4]> : tensor<2xi64>
// CHECK-DAG: %[[B:.*]] = pf.constant dense<[5, 3, 1]> : tensor<3xi64>
// CHECK-DAG: %[[C:.*]] = pf.constant dense<[5, 4, 3, 2, 1, 0]> : tensor<6xi64>
// CHECK-DAG: %[[D:.*]] = pf.constant dense<{{\[}}[6, 4], [3, 1]]> : tensor<2x2xi64>
// CHECK-NOT: pf.slice
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @slice() -> (tensor<2xi64>, tensor<3xi64>, tensor<6xi64>, tensor<2x2xi64>) {
  %v = pf.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
  %m = pf.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %s0 = pf.constant dense<-3> : tensor<1xi64>
  %e0 = pf.constant dense<-1> : tensor<1xi64>
  %s1 = pf.constant dense<100> : tensor<1xi64>
  %e1 = pf.constant dense<0> : tensor<1xi64>
  %st1 = pf.constant dense<-2> : tensor<1xi64>
  %min = pf.constant dense<-9223372036854775807> : tensor<1xi64>
  %neg1 = pf.constant dense<-1> : tensor<1xi64>
  %zero = pf.constant dense<0> : tensor<1xi64>
  %s3 = pf.constant dense<[-1, 5]> : tensor<2xi64>
  %e3 = pf.constant dense<[-10, -100]> : tensor<2xi64>
  %a3 = pf.constant dense<[1, 0]> : tensor<2xi64>
  %st3 = pf.constant dense<[-2, -1]> : tensor<2xi64>
  // [3, 5): 3, 4
  %0 = pf.slice %v, %s0, %e0 {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<6xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  // from 100 (clamped to 5) down to 0 exclusive, step -2: 5, 3, 1
  %1 = pf.slice %v, %s1, %e1, %zero, %st1 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<6xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  // the whole vector reversed
  %2 = pf.slice %v, %neg1, %min, %zero, %neg1 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<6xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<6xi64>
  // columns 2, 0 (step -2 from -1) and rows 1, 0 (step -1 from 5, clamped)
  %3 = pf.slice %m, %s3, %e3, %a3, %st3 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %0, %1, %2, %3 : tensor<2xi64>, tensor<3xi64>, tensor<6xi64>, tensor<2x2xi64>
}

//===--- Elementwise --------------------------------------------------------===//

// CHECK-LABEL: func.func @arith_int
// CHECK-DAG: %[[ADD:.*]] = pf.constant dense<{{\[}}[11, 12], [13, 14]]> : tensor<2x2xi64>
// CHECK-DAG: %[[SUB:.*]] = pf.constant dense<[-9, -18]> : tensor<2xi64>
// CHECK-DAG: %[[MUL:.*]] = pf.constant dense<[10, 40]> : tensor<2xi64>
// CHECK-DAG: %[[DIV:.*]] = pf.constant dense<[3, -3]> : tensor<2xi64>
// CHECK-DAG: %[[EQ:.*]] = pf.constant dense<[false, true]> : tensor<2xi1>
// CHECK-DAG: %[[NEG:.*]] = pf.constant dense<[-1, 2]> : tensor<2xi64>
// CHECK-NOT: pf.add
// CHECK-NOT: pf.sub
// CHECK-NOT: pf.mul
// CHECK-NOT: pf.div
// CHECK-NOT: pf.equal
// CHECK-NOT: pf.neg
// CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[EQ]], %[[NEG]]
func.func @arith_int() -> (tensor<2x2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi1>, tensor<2xi64>) {
  %a = pf.constant dense<[1, 2]> : tensor<2xi64>
  %col = pf.constant dense<[[10], [12]]> : tensor<2x1xi64>
  %b = pf.constant dense<[10, 20]> : tensor<2xi64>
  %c = pf.constant dense<[7, -7]> : tensor<2xi64>
  %two = pf.constant dense<2> : tensor<i64>
  %n = pf.constant dense<[1, -2]> : tensor<2xi64>
  %e = pf.constant dense<[11, 20]> : tensor<2xi64>
  // broadcast [2] + [2, 1] -> [2, 2]
  %0 = pf.add %a, %col : (tensor<2xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
  %1 = pf.sub %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %2 = pf.mul %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  // integer division truncates toward zero
  %3 = pf.div %c, %two : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %4 = pf.equal %b, %e : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
  %5 = pf.neg %n : (tensor<2xi64>) -> tensor<2xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<2x2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi1>, tensor<2xi64>
}

// Integer division by zero is left to run time.
// CHECK-LABEL: func.func @div_by_zero
// CHECK: pf.div
func.func @div_by_zero() -> tensor<2xi64> {
  %a = pf.constant dense<[1, 2]> : tensor<2xi64>
  %z = pf.constant dense<[1, 0]> : tensor<2xi64>
  %0 = pf.div %a, %z : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @arith_float
// CHECK-DAG: %[[ADD:.*]] = pf.constant dense<[1.500000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[DIV:.*]] = pf.constant dense<[5.000000e-01, 0x7F800000]> : tensor<2xf32>
// CHECK-DAG: %[[EQ:.*]] = pf.constant dense<[true, false]> : tensor<2xi1>
// CHECK-DAG: %[[NEG:.*]] = pf.constant dense<[-1.000000e+00, -0.000000e+00]> : tensor<2xf32>
// CHECK: return %[[ADD]], %[[DIV]], %[[EQ]], %[[NEG]]
func.func @arith_float() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xf32>) {
  %a = pf.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %h = pf.constant dense<0.5> : tensor<f32>
  %b = pf.constant dense<[2.0, 0.0]> : tensor<2xf32>
  %c = pf.constant dense<[1.0, 2.5]> : tensor<2xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %0 = pf.add %c, %h : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  // 1 / 2 and 1 / 0 = +inf
  %1 = pf.div %one, %b : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = pf.equal %a, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xi1>
  %3 = pf.neg %a : (tensor<2xf32>) -> tensor<2xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xf32>
}

// Pow has no folder.
// CHECK-LABEL: func.func @pow_not_folded
// CHECK: pf.pow
func.func @pow_not_folded() -> tensor<2xf32> {
  %a = pf.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %0 = pf.pow %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// Results larger than 65536 elements are never built (splat inputs or not).
// CHECK-LABEL: func.func @too_large
// CHECK: pf.add
func.func @too_large() -> tensor<300x300xf32> {
  %a = pf.constant dense<1.0> : tensor<300x300xf32>
  %0 = pf.add %a, %a : (tensor<300x300xf32>, tensor<300x300xf32>) -> tensor<300x300xf32>
  return %0 : tensor<300x300xf32>
}

// Complex elements are not folded (and do not crash the folders).
// CHECK-LABEL: func.func @complex_not_folded
// CHECK: pf.neg
// CHECK: pf.cast
func.func @complex_not_folded() -> (tensor<2xcomplex<f32>>, tensor<2xf32>) {
  %c = pf.constant dense<[(1.0, 2.0), (3.0, 4.0)]> : tensor<2xcomplex<f32>>
  %0 = pf.neg %c : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
  %1 = pf.cast %c {to = f32} : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  return %0, %1 : tensor<2xcomplex<f32>>, tensor<2xf32>
}

// CHECK-LABEL: func.func @where
// CHECK-NEXT: %[[W:.*]] = pf.constant dense<{{\[}}[1.000000e+00, 0.000000e+00], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[W]]
func.func @where() -> tensor<2x2xf32> {
  %c = pf.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %x = pf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %y = pf.constant dense<0.0> : tensor<f32>
  %0 = pf.where %c, %x, %y : (tensor<2x2xi1>, tensor<2xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// Casts: int to float, float to int (toward zero), and to bool, where any
// nonzero value is true (not a truncation to the low bit).
// CHECK-LABEL: func.func @cast
// CHECK-DAG: %[[F:.*]] = pf.constant dense<[0.000000e+00, 2.000000e+00, -3.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[I:.*]] = pf.constant dense<[1, -2, 0]> : tensor<3xi32>
// CHECK-DAG: %[[B:.*]] = pf.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-DAG: %[[BF:.*]] = pf.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[U:.*]] = pf.constant dense<[1.000000e+00, 0.000000e+00, 1.000000e+00]> : tensor<3xf16>
// CHECK-NOT: pf.cast
// CHECK: return %[[F]], %[[I]], %[[B]], %[[BF]], %[[U]]
func.func @cast() -> (tensor<3xf32>, tensor<3xi32>, tensor<3xi1>, tensor<3xi1>, tensor<3xf16>) {
  %i = pf.constant dense<[0, 2, -3]> : tensor<3xi64>
  %f = pf.constant dense<[1.9, -2.5, 0.0]> : tensor<3xf32>
  %g = pf.constant dense<[0.5, 0.0, -1.0]> : tensor<3xf32>
  %0 = pf.cast %i {to = f32} : (tensor<3xi64>) -> tensor<3xf32>
  %1 = pf.cast %f {to = i32} : (tensor<3xf32>) -> tensor<3xi32>
  %2 = pf.cast %i {to = i1} : (tensor<3xi64>) -> tensor<3xi1>
  %3 = pf.cast %g {to = i1} : (tensor<3xf32>) -> tensor<3xi1>
  // i1 converts as unsigned: true is 1.0, not -1.0
  %4 = pf.cast %3 {to = f16} : (tensor<3xi1>) -> tensor<3xf16>
  return %0, %1, %2, %3, %4 : tensor<3xf32>, tensor<3xi32>, tensor<3xi1>, tensor<3xi1>, tensor<3xf16>
}

// CHECK-LABEL: func.func @expand_constant_of_shape
// CHECK-DAG: %[[E:.*]] = pf.constant dense<{{\[}}[1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>
// CHECK-DAG: %[[Z:.*]] = pf.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-DAG: %[[V:.*]] = pf.constant dense<7> : tensor<2x3xi64>
// CHECK-NOT: pf.expand
// CHECK-NOT: pf.constant_of_shape
// CHECK: return %[[E]], %[[Z]], %[[V]]
func.func @expand_constant_of_shape() -> (tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xi64>) {
  %col = pf.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %shape = pf.constant dense<[2, 3]> : tensor<2xi64>
  %0 = pf.expand %col, %shape : (tensor<2x1xi64>, tensor<2xi64>) -> tensor<2x3xi64>
  %1 = pf.constant_of_shape %shape : (tensor<2xi64>) -> tensor<2x3xf32>
  %2 = pf.constant_of_shape %shape {value = dense<7> : tensor<1xi64>} : (tensor<2xi64>) -> tensor<2x3xi64>
  return %0, %1, %2 : tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xi64>
}

// A value held in a resource blob is not read by the folder.
// CHECK-LABEL: func.func @constant_of_shape_resource
// CHECK: pf.constant_of_shape
func.func @constant_of_shape_resource() -> tensor<2xf32> {
  %shape = pf.constant dense<2> : tensor<1xi64>
  %0 = pf.constant_of_shape %shape {value = dense_resource<one_f32> : tensor<1xf32>} : (tensor<1xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @transpose
// CHECK-DAG: %[[P:.*]] = pf.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: %[[Q:.*]] = pf.constant dense<{{\[}}{{\[}}[1, 3]], {{\[}}[2, 4]]]> : tensor<2x1x2xi64>
// CHECK-NOT: pf.transpose
// CHECK: return %[[P]], %[[P]], %[[Q]]
func.func @transpose() -> (tensor<3x2xi64>, tensor<3x2xi64>, tensor<2x1x2xi64>) {
  %m = pf.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %t = pf.constant dense<[[[1, 2]], [[3, 4]]]> : tensor<2x1x2xi64>
  %0 = pf.transpose %m : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %1 = pf.transpose %m {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %2 = pf.transpose %t {perm = array<i64: 2, 1, 0>} : (tensor<2x1x2xi64>) -> tensor<2x1x2xi64>
  return %0, %1, %2 : tensor<3x2xi64>, tensor<3x2xi64>, tensor<2x1x2xi64>
}

//===--- Identities on non-constant values ------------------------------------===//

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[D:.*]]: tensor<?x3xf32>)
// CHECK-NEXT: %[[T:.*]] = pf.transpose %[[X]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[ID:.*]] = pf.identity %[[D]] : (tensor<?x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[T]], %[[ID]]
func.func @identities(%x: tensor<2x3xf32>, %d: tensor<?x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>) {
  %shape = pf.constant dense<[2, 3]> : tensor<2xi64>
  %0 = pf.identity %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = pf.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = pf.reshape %x, %shape : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %3 = pf.squeeze %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = pf.expand %x, %shape : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %5 = pf.concat %x {axis = 0} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = pf.cast %x {to = f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // a real transpose stays
  %7 = pf.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // an identity that refines the type is not a no-op
  %8 = pf.identity %d : (tensor<?x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
      tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>
}

// Equal unranked types do not make a squeeze a no-op: it still drops a dim.
// CHECK-LABEL: func.func @squeeze_unranked
// CHECK-NEXT: %[[S:.*]] = pf.squeeze %{{.*}} {axes = array<i64: 0>} : (tensor<*xf32>) -> tensor<*xf32>
// CHECK-NEXT: %[[T:.*]] = pf.squeeze %{{.*}} : (tensor<*xf32>) -> tensor<*xf32>
// CHECK-NEXT: return %[[S]], %[[T]]
func.func @squeeze_unranked(%x: tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = pf.squeeze %x {axes = array<i64: 0>} : (tensor<*xf32>) -> tensor<*xf32>
  %1 = pf.squeeze %x : (tensor<*xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

//===--- The exporter's dynamic-shape chain -----------------------------------===//

// x.view(x.size(0), -1) as exported: Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape. The canonicalizer folds the shape to a constant; pf-infer-shapes
// then also knows the static result type and updates the signature.
// CHECK-LABEL: func.func @exporter_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>) -> tensor<?x?xf32>
// CHECK-NEXT: %[[S:.*]] = pf.constant dense<[2, -1]> : tensor<2xi64>
// CHECK-NEXT: %[[R:.*]] = pf.reshape %[[X]], %[[S]] : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
// CHECK-NEXT: return %[[R]]
// INFER-LABEL: func.func @exporter_chain
// INFER-SAME: (%[[X:.*]]: tensor<2x3x4xf32>) -> tensor<2x12xf32>
// INFER-NEXT: %[[S:.*]] = pf.constant dense<[2, -1]> : tensor<2xi64>
// INFER-NEXT: %[[R:.*]] = pf.reshape %[[X]], %[[S]] : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
// INFER-NEXT: return %[[R]] : tensor<2x12xf32>
func.func @exporter_chain(%x: tensor<2x3x4xf32>) -> tensor<?x?xf32> {
  %shape = pf.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %zero = pf.constant dense<0> : tensor<i64>
  %batch = pf.gather %shape, %zero : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %batch1 = pf.unsqueeze %batch {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %minus1 = pf.constant dense<-1> : tensor<1xi64>
  %target = pf.concat %batch1, %minus1 {axis = 0} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = pf.reshape %x, %target : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// The same chain on unranked intermediate types, as an importer without shape
// information writes it: pf-infer-shapes refines every result.
// INFER-LABEL: func.func @refine_unranked
// INFER-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<12x5xf32>) -> (tensor<2x5xf32>, tensor<3xi64>)
// INFER: pf.reshape %[[X]], %{{.*}} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
// INFER-NEXT: pf.matmul %{{.*}}, %[[W]] : (tensor<2x12xf32>, tensor<12x5xf32>) -> tensor<2x5xf32>
// INFER-NEXT: %[[G:.*]] = pf.gelu %{{.*}} : (tensor<2x5xf32>) -> tensor<2x5xf32>
// INFER-NEXT: return %[[G]], %{{.*}} : tensor<2x5xf32>, tensor<3xi64>
func.func @refine_unranked(%x: tensor<2x3x4xf32>, %w: tensor<12x5xf32>) -> (tensor<*xf32>, tensor<?xi64>) {
  %shape = pf.shape %x : (tensor<2x3x4xf32>) -> tensor<?xi64>
  %zero = pf.constant dense<0> : tensor<i64>
  %batch = pf.gather %shape, %zero : (tensor<?xi64>, tensor<i64>) -> tensor<*xi64>
  %batch1 = pf.unsqueeze %batch {axes = array<i64: 0>} : (tensor<*xi64>) -> tensor<*xi64>
  %minus1 = pf.constant dense<-1> : tensor<1xi64>
  %target = pf.concat %batch1, %minus1 {axis = 0} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %r = pf.reshape %x, %target : (tensor<2x3x4xf32>, tensor<*xi64>) -> tensor<*xf32>
  %m = pf.matmul %r, %w : (tensor<*xf32>, tensor<12x5xf32>) -> tensor<*xf32>
  %g = pf.gelu %m : (tensor<*xf32>) -> tensor<*xf32>
  return %g, %shape : tensor<*xf32>, tensor<?xi64>
}

// Dynamic dimensions that the operands do fix are refined; a dynamic input
// dimension stays dynamic.
// INFER-LABEL: func.func @refine_dynamic
// INFER-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[D:.*]]: tensor<?x8xf32>) -> (tensor<4x8xf32>, tensor<?x8xf32>, tensor<8x4xf32>)
// INFER-NEXT: pf.add %[[A]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// INFER-NEXT: pf.mul %[[D]], %[[B]] : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// INFER-NEXT: pf.transpose %{{.*}} : (tensor<4x8xf32>) -> tensor<8x4xf32>
func.func @refine_dynamic(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %d: tensor<?x8xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %0 = pf.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x?xf32>
  %1 = pf.mul %d, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x?xf32>
  %2 = pf.transpose %0 : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0, %1, %2 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

//===--- Unit operands ------------------------------------------------------===//

// x * 1, 1 * x, x / 1 and x - (+0) are x itself when x has the result's type
// (exact for every x): the autodiff's scaling of the logits' gradient by one
// used to be a pass over 31M elements.
// CHECK-LABEL: func.func @unit_operands
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[I:.*]]: tensor<3xi64>)
// CHECK-NOT: pf.mul
// CHECK-NOT: pf.div
// CHECK-NOT: pf.sub
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[I]]
func.func @unit_operands(%x: tensor<4x8xf32>, %i: tensor<3xi64>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>) {
  %one = pf.constant dense<1.0> : tensor<f32>
  %zero = pf.constant dense<0.0> : tensor<f32>
  %ione = pf.constant dense<1> : tensor<i64>
  %0 = pf.mul %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = pf.mul %one, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = pf.div %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = pf.sub %x, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = pf.mul %i, %ione : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>
}

// Kept: the unit broadcasts x to a larger shape, x - (-0) turns -0 into +0,
// 1 / x and 0 - x are not x, and a scale other than one.
// CHECK-LABEL: func.func @unit_operands_kept
// CHECK: pf.mul {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: pf.sub
// CHECK-NEXT: pf.div
// CHECK-NEXT: pf.sub
// CHECK-NEXT: pf.mul
// CHECK-NEXT: return
func.func @unit_operands_kept(%x: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %ones = pf.constant dense<1.0> : tensor<4x8xf32>
  %nzero = pf.constant dense<-0.0> : tensor<f32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %zero = pf.constant dense<0.0> : tensor<f32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %0 = pf.mul %x, %ones : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = pf.sub %x, %nzero : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = pf.div %one, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = pf.sub %zero, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = pf.mul %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

{-#
  dialect_resources: {
    builtin: {
      one_f32: "0x040000000000803F"
    }
  }
#-}
