// GatherND, ScatterND, IsNaN, IsInf, CumSum, Trilu, ReduceMax and ReduceMin:
// inferred result types and constant folds (a shape chain's max folds too).
// RUN: pf-opt %s --pf-infer-shapes | FileCheck %s --check-prefix=INFER
// RUN: pf-opt %s -canonicalize | FileCheck %s

// INFER-LABEL: func.func @infer
// INFER-NEXT: pf.gather_nd {{.*}} -> tensor<5x4xf32>
// INFER-NEXT: pf.gather_nd {{.*}} {batch_dims = 1 : i64} {{.*}} -> tensor<2x1xf32>
// INFER-NEXT: pf.scatter_nd {{.*}} reduction add {{.*}} -> tensor<2x3x4xf32>
// INFER-NEXT: pf.is_nan {{.*}} -> tensor<2x3x4xi1>
// INFER-NEXT: pf.is_inf {{.*}} {detect_negative = false} {{.*}} -> tensor<2x3x4xi1>
// INFER-NEXT: pf.cumsum {{.*}} {axis = -1 : i64, exclusive, reverse} {{.*}} -> tensor<2x3x4xf32>
// INFER-NEXT: pf.trilu {{.*}} {k = -1 : i64, upper = false} {{.*}} -> tensor<2x3x4xf32>
// INFER-NEXT: pf.reduce_max {{.*}} -> tensor<2x1x4xf32>
// INFER-NEXT: pf.reduce_min {{.*}} -> tensor<3xf32>
// INFER-NEXT: pf.reduce_max {{.*}} -> tensor<1x1x1xf32>

// CHECK-LABEL: func.func @folds
// CHECK-DAG: %[[GE:.*]] = pf.constant dense<[6, 2]> : tensor<2xi64>
// CHECK-DAG: %[[GR:.*]] = pf.constant dense<{{\[\[}}3.000000e+00, 4.000000e+00], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[SC:.*]] = pf.constant dense<[1.000000e+00, 2.200000e+01, 3.000000e+00, 4.400000e+01]> : tensor<4xf32>
// CHECK-DAG: %[[CS:.*]] = pf.constant dense<{{\[\[}}0, 1, 3], [0, 4, 9]]> : tensor<2x3xi64>
// CHECK-DAG: %[[TR:.*]] = pf.constant dense<{{\[\[}}0, 2, 3], [0, 0, 6], [0, 0, 0]]> : tensor<3x3xi64>
// CHECK-DAG: %[[MM:.*]] = pf.constant dense<4> : tensor<i64>
// CHECK-DAG: %[[RM:.*]] = pf.constant dense<[1, 4]> : tensor<2xi64>
// CHECK-DAG: %[[NAN:.*]] = pf.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[INF:.*]] = pf.constant dense<false> : tensor<3xi1>
// CHECK-DAG: %[[MAX:.*]] = pf.constant dense<7> : tensor<1xi64>
// CHECK-DAG: %[[SPLAT:.*]] = pf.constant dense<3> : tensor<1x1xi64>
// CHECK-NOT: pf.gather_nd
// CHECK-NOT: pf.reduce
// CHECK: return %[[GE]], %[[GR]], %[[SC]], %[[CS]], %[[TR]], %[[RM]], %[[MM]], %[[NAN]], %[[INF]], %[[MAX]], %[[SPLAT]]

func.func @infer(%x: tensor<2x3x4xf32>, %i: tensor<5x2xi64>, %j: tensor<2x1x2xi32>,
                 %u: tensor<5x4xf32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi1>, tensor<*xi1>,
        tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = pf.gather_nd %x, %i : (tensor<2x3x4xf32>, tensor<5x2xi64>) -> tensor<*xf32>
  %1 = pf.gather_nd %x, %j {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x1x2xi32>) -> tensor<*xf32>
  %2 = pf.scatter_nd %x, %i, %u reduction add : (tensor<2x3x4xf32>, tensor<5x2xi64>, tensor<5x4xf32>) -> tensor<*xf32>
  %3 = pf.is_nan %x : (tensor<2x3x4xf32>) -> tensor<*xi1>
  %4 = pf.is_inf %x {detect_negative = false} : (tensor<2x3x4xf32>) -> tensor<*xi1>
  %5 = pf.cumsum %x {axis = -1 : i64, exclusive, reverse} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %6 = pf.trilu %x {k = -1 : i64, upper = false} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %7 = pf.reduce_max %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %8 = pf.reduce_min %x {axes = array<i64: -1, 0>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %9 = pf.reduce_max %x : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi1>, tensor<*xi1>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

func.func @folds() -> (tensor<2xi64>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x3xi64>,
                       tensor<3x3xi64>, tensor<2xi64>, tensor<i64>, tensor<3xi1>, tensor<3xi1>,
                       tensor<1xi64>, tensor<1x1xi64>) {
  %d = pf.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %f = pf.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %v = pf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %i = pf.constant dense<[[1, -1], [0, 1]]> : tensor<2x2xi64>
  %r = pf.constant dense<[[1], [0]]> : tensor<2x1xi64>
  %s = pf.constant dense<[[3], [1], [3]]> : tensor<3x1xi64>
  %w = pf.constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  // Elements picked by (row, col) tuples; -1 is the last column.
  %0 = pf.gather_nd %d, %i : (tensor<2x3xi64>, tensor<2x2xi64>) -> tensor<2xi64>
  // Rows picked by 1-tuples: the rows swap.
  %1 = pf.gather_nd %f, %r : (tensor<2x2xf32>, tensor<2x1xi64>) -> tensor<2x2xf32>
  // Scatter-add with a repeated index: 4 + 10 + 30, 2 + 20.
  %2 = pf.scatter_nd %v, %s, %w reduction add : (tensor<4xf32>, tensor<3x1xi64>, tensor<3xf32>) -> tensor<4xf32>
  %3 = pf.cumsum %d {axis = 1 : i64, exclusive} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  %sq = pf.constant dense<[[1, 2, 3], [4, 5, 6], [7, 8, 9]]> : tensor<3x3xi64>
  %4 = pf.trilu %sq {k = 1 : i64} : (tensor<3x3xi64>) -> tensor<3x3xi64>
  %5 = pf.reduce_max %d {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xi64>) -> tensor<3xi64>
  %m = pf.reduce_min %5 {keepdims = false} : (tensor<3xi64>) -> tensor<i64>
  %6 = pf.reduce_min %d {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xi64>) -> tensor<2xi64>
  %n = pf.constant dense<[0x7FC00000, 0x7F800000, 1.0]> : tensor<3xf32>
  %7 = pf.is_nan %n : (tensor<3xf32>) -> tensor<3xi1>
  %8 = pf.is_inf %n {detect_positive = false} : (tensor<3xf32>) -> tensor<3xi1>
  // A shape chain: the largest dimension of a shape, as a 1-element vector.
  %sh = pf.constant dense<[2, 7, 5]> : tensor<3xi64>
  %9 = pf.reduce_max %sh : (tensor<3xi64>) -> tensor<1xi64>
  // A big splat reduces without visiting its elements.
  %big = pf.constant dense<3> : tensor<100000x1000xi64>
  %10 = pf.reduce_min %big : (tensor<100000x1000xi64>) -> tensor<1x1xi64>
  return %0, %1, %2, %3, %4, %6, %m, %7, %8, %9, %10 : tensor<2xi64>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x3xi64>, tensor<3x3xi64>, tensor<2xi64>, tensor<i64>, tensor<3xi1>, tensor<3xi1>, tensor<1xi64>, tensor<1x1xi64>
}
