// Comparison, bool logic and the float elementwise ops (min, max, abs, sign,
// reciprocal): inferred types (bool results, broadcasting) and constant
// folding, so that an attention-mask chain on constants becomes a constant.
// RUN: pf-opt %s --pf-infer-shapes | FileCheck %s --check-prefix=INFER
// RUN: pf-opt %s -canonicalize | FileCheck %s

// INFER-LABEL: func.func @infer
// INFER-NEXT: pf.greater {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.greater_equal {{.*}} -> tensor<2x3xi1>
// INFER-NEXT: pf.less {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.less_equal {{.*}} -> tensor<?x3xi1>
// INFER-NEXT: pf.and {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.or {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.xor {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.not {{.*}} -> tensor<4x2x3xi1>
// INFER-NEXT: pf.min {{.*}} -> tensor<4x2x3xf32>
// INFER-NEXT: pf.max {{.*}} -> tensor<2x3xf32>
// INFER-NEXT: pf.abs {{.*}} -> tensor<2x3xf32>
// INFER-NEXT: pf.sign {{.*}} -> tensor<2x3xf32>
// INFER-NEXT: pf.reciprocal {{.*}} -> tensor<2x3xf32>
func.func @infer(%a: tensor<2x3xf32>, %b: tensor<4x1x3xf32>, %s: tensor<f32>,
                 %d: tensor<?x1xi64>, %v: tensor<3xi64>)
    -> (tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = pf.greater %b, %a : (tensor<4x1x3xf32>, tensor<2x3xf32>) -> tensor<*xi1>
  %1 = pf.greater_equal %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<*xi1>
  %2 = pf.less %a, %b : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<*xi1>
  %3 = pf.less_equal %d, %v : (tensor<?x1xi64>, tensor<3xi64>) -> tensor<*xi1>
  %4 = pf.and %0, %1 : (tensor<*xi1>, tensor<*xi1>) -> tensor<*xi1>
  %5 = pf.or %4, %1 : (tensor<*xi1>, tensor<*xi1>) -> tensor<*xi1>
  %6 = pf.xor %5, %0 : (tensor<*xi1>, tensor<*xi1>) -> tensor<*xi1>
  %7 = pf.not %6 : (tensor<*xi1>) -> tensor<*xi1>
  %8 = pf.min %a, %b : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<*xf32>
  %9 = pf.max %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<*xf32>
  %10 = pf.abs %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %11 = pf.sign %10 : (tensor<*xf32>) -> tensor<*xf32>
  %12 = pf.reciprocal %11 : (tensor<*xf32>) -> tensor<*xf32>
  return %2, %3, %7, %8, %9, %12 : tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// Float comparisons: NaN compares false; -0 equals 0.
// CHECK-LABEL: func.func @compare_float
// CHECK-DAG: %[[GT:.*]] = pf.constant dense<[false, true, false, false]> : tensor<4xi1>
// CHECK-DAG: %[[GE:.*]] = pf.constant dense<[true, true, false, false]> : tensor<4xi1>
// CHECK-DAG: %[[LT:.*]] = pf.constant dense<[false, false, true, false]> : tensor<4xi1>
// CHECK-DAG: %[[LE:.*]] = pf.constant dense<[true, false, true, false]> : tensor<4xi1>
// CHECK-NOT: pf.greater
// CHECK-NOT: pf.less
// CHECK: return %[[GT]], %[[GE]], %[[LT]], %[[LE]]
func.func @compare_float() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = pf.constant dense<[-0.0, 2.0, -1.0, 0x7FC00000]> : tensor<4xf32>
  %z = pf.constant dense<0.0> : tensor<f32>
  %0 = pf.greater %a, %z : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %1 = pf.greater_equal %a, %z : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %2 = pf.less %a, %z : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %3 = pf.less_equal %a, %z : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// Integers compare as signed; broadcasting a column against a row.
// CHECK-LABEL: func.func @compare_int
// CHECK-DAG: %[[LT:.*]] = pf.constant dense<{{\[}}[false, false, false], [true, false, false]]> : tensor<2x3xi1>
// CHECK-DAG: %[[GE:.*]] = pf.constant dense<{{\[}}[true, true, true], [false, true, true]]> : tensor<2x3xi1>
// CHECK: return %[[LT]], %[[GE]]
func.func @compare_int() -> (tensor<2x3xi1>, tensor<2x3xi1>) {
  %col = pf.constant dense<[[5], [-9]]> : tensor<2x1xi64>
  %row = pf.constant dense<[-8, -9, -100]> : tensor<3xi64>
  %0 = pf.less %col, %row : (tensor<2x1xi64>, tensor<3xi64>) -> tensor<2x3xi1>
  %1 = pf.greater_equal %col, %row : (tensor<2x1xi64>, tensor<3xi64>) -> tensor<2x3xi1>
  return %0, %1 : tensor<2x3xi1>, tensor<2x3xi1>
}

// CHECK-LABEL: func.func @logic
// CHECK-DAG: %[[AND:.*]] = pf.constant dense<{{\[}}[false, true], [false, false]]> : tensor<2x2xi1>
// CHECK-DAG: %[[OR:.*]] = pf.constant dense<{{\[}}[true, true], [false, true]]> : tensor<2x2xi1>
// CHECK-DAG: %[[XOR:.*]] = pf.constant dense<{{\[}}[true, false], [false, true]]> : tensor<2x2xi1>
// CHECK-DAG: %[[NOT:.*]] = pf.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NOT: pf.and
// CHECK-NOT: pf.or
// CHECK-NOT: pf.xor
// CHECK-NOT: pf.not
// CHECK: return %[[AND]], %[[OR]], %[[XOR]], %[[NOT]]
func.func @logic() -> (tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>, tensor<2xi1>) {
  %col = pf.constant dense<[[true], [false]]> : tensor<2x1xi1>
  %row = pf.constant dense<[false, true]> : tensor<2xi1>
  %0 = pf.and %col, %row : (tensor<2x1xi1>, tensor<2xi1>) -> tensor<2x2xi1>
  %1 = pf.or %col, %row : (tensor<2x1xi1>, tensor<2xi1>) -> tensor<2x2xi1>
  %2 = pf.xor %col, %row : (tensor<2x1xi1>, tensor<2xi1>) -> tensor<2x2xi1>
  %3 = pf.not %row : (tensor<2xi1>) -> tensor<2xi1>
  return %0, %1, %2, %3 : tensor<2x2xi1>, tensor<2x2xi1>, tensor<2x2xi1>, tensor<2xi1>
}

// The shape-only part of a Hugging Face mask: positions < length, and not
// padding; everything is constant, so all of it folds.
// CHECK-LABEL: func.func @mask_chain
// CHECK-NEXT: %[[M:.*]] = pf.constant dense<[true, true, false, false]> : tensor<4xi1>
// CHECK-NEXT: return %[[M]]
func.func @mask_chain(%x: tensor<2x4xf32>) -> tensor<4xi1> {
  %shape = pf.shape %x : (tensor<2x4xf32>) -> tensor<2xi64>
  %pos = pf.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %two = pf.constant dense<2> : tensor<i64>
  %zero = pf.constant dense<0> : tensor<i64>
  %lt = pf.less %pos, %two : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %ge = pf.greater_equal %pos, %zero : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %pad = pf.not %lt : (tensor<4xi1>) -> tensor<4xi1>
  %keep = pf.and %ge, %lt : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %both = pf.xor %keep, %pad : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %m = pf.and %both, %lt : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %m : tensor<4xi1>
}

// Min/max propagate NaN; abs, sign and reciprocal fold elementwise.
// CHECK-LABEL: func.func @float_ops
// CHECK-DAG: %[[MIN:.*]] = pf.constant dense<[-1.000000e+00, 0.000000e+00, 0x7FC00000]> : tensor<3xf32>
// CHECK-DAG: %[[MAX:.*]] = pf.constant dense<[0.000000e+00, 4.000000e+00, 0x7FC00000]> : tensor<3xf32>
// CHECK-DAG: %[[IMAX:.*]] = pf.constant dense<[3, -1]> : tensor<2xi64>
// CHECK-DAG: %[[ABS:.*]] = pf.constant dense<[1.000000e+00, 4.000000e+00, 0x7FC00000]> : tensor<3xf32>
// CHECK-DAG: %[[SIGN:.*]] = pf.constant dense<[-1.000000e+00, 1.000000e+00, 0x7FC00000]> : tensor<3xf32>
// CHECK-DAG: %[[REC:.*]] = pf.constant dense<[-1.000000e+00, 2.500000e-01, 0x7FC00000]> : tensor<3xf32>
// CHECK: return %[[MIN]], %[[MAX]], %[[IMAX]], %[[ABS]], %[[SIGN]], %[[REC]]
func.func @float_ops() -> (tensor<3xf32>, tensor<3xf32>, tensor<2xi64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a = pf.constant dense<[-1.0, 4.0, 0x7FC00000]> : tensor<3xf32>
  %z = pf.constant dense<0.0> : tensor<f32>
  %i = pf.constant dense<[3, -5]> : tensor<2xi64>
  %m1 = pf.constant dense<-1> : tensor<i64>
  %0 = pf.min %a, %z : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = pf.max %z, %a : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = pf.max %i, %m1 : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %3 = pf.abs %a : (tensor<3xf32>) -> tensor<3xf32>
  %4 = pf.sign %a : (tensor<3xf32>) -> tensor<3xf32>
  %5 = pf.reciprocal %a : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3xf32>, tensor<3xf32>, tensor<2xi64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
