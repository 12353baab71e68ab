// Type inference of every op with an inferred result type: results are
// declared unranked (or dynamic where the op requires a rank) and
// pf-infer-shapes replaces them by the inferred types, which are checked here.
// RUN: pf-opt %s --pf-infer-shapes | FileCheck %s

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: -> (tensor<2x3xf32>, tensor<4x2x3xf32>,
// CHECK-NEXT: pf.add {{.*}} -> tensor<4x2x3xf32>
// CHECK-NEXT: pf.sub {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.mul {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.div {{.*}} -> tensor<?x3xf32>
// CHECK-NEXT: pf.pow {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.equal {{.*}} -> tensor<4x2x3xi1>
// CHECK-NEXT: pf.sqrt {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.erf {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.tanh {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.exp {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.neg {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: pf.where {{.*}} -> tensor<4x2x3xf32>
// CHECK-NEXT: pf.cast {{.*}} -> tensor<2x3xbf16>
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<4x1x3xf32>, %v: tensor<3xf32>,
                       %d: tensor<?x1xf32>, %c: tensor<4x1x1xi1>, %s: tensor<f32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi1>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xbf16>) {
  %0 = pf.identity %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %1 = pf.add %a, %b : (tensor<2x3xf32>, tensor<4x1x3xf32>) -> tensor<*xf32>
  %2 = pf.sub %a, %v : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
  // ? against 2 is 2 (either ? is 2 or it is 1 and broadcasts); 1 against 3 is 3
  %3 = pf.mul %d, %a : (tensor<?x1xf32>, tensor<2x3xf32>) -> tensor<*xf32>
  // ? against a missing dimension stays ?
  %4 = pf.div %d, %v : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<*xf32>
  %5 = pf.pow %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<*xf32>
  %6 = pf.equal %b, %a : (tensor<4x1x3xf32>, tensor<2x3xf32>) -> tensor<*xi1>
  %7 = pf.sqrt %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %8 = pf.erf %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %9 = pf.tanh %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %10 = pf.exp %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %11 = pf.neg %a : (tensor<2x3xf32>) -> tensor<*xf32>
  %12 = pf.where %c, %a, %s : (tensor<4x1x1xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<*xf32>
  %13 = pf.cast %a {to = bf16} : (tensor<2x3xf32>) -> tensor<*xbf16>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi1>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xbf16>
}

// CHECK-LABEL: func.func @linear_algebra
// CHECK-NEXT: pf.matmul {{.*}} -> tensor<8x3x4x6xf32>
// CHECK-NEXT: pf.matmul {{.*}} -> tensor<2x6xf32>
// CHECK-NEXT: pf.matmul {{.*}} -> tensor<8x3x4xf32>
// CHECK-NEXT: pf.matmul {{.*}} -> tensor<f32>
// CHECK-NEXT: pf.matmul {{.*}} -> tensor<?x4x6xf32>
// CHECK-NEXT: pf.gemm {{.*}} -> tensor<4x6xf32>
// CHECK-NEXT: pf.gemm {{.*}} -> tensor<4x6xf32>
// CHECK-NEXT: pf.gemm {{.*}} -> tensor<?x?xf32>
func.func @linear_algebra(%a: tensor<8x1x4x5xf32>, %b: tensor<3x5x6xf32>, %v: tensor<5xf32>,
                          %b3: tensor<2x5x6xf32>, %d: tensor<?x4x5xf32>, %m: tensor<4x5xf32>,
                          %mt: tensor<5x4xf32>, %n: tensor<5x6xf32>, %nt: tensor<6x5xf32>,
                          %v6: tensor<6xf32>, %u: tensor<*xf32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = pf.matmul %a, %b : (tensor<8x1x4x5xf32>, tensor<3x5x6xf32>) -> tensor<*xf32>
  %1 = pf.matmul %v, %b3 : (tensor<5xf32>, tensor<2x5x6xf32>) -> tensor<*xf32>
  // refined from the (refined) %0
  %2 = pf.matmul %0, %v6 : (tensor<*xf32>, tensor<6xf32>) -> tensor<*xf32>
  %3 = pf.matmul %v, %v : (tensor<5xf32>, tensor<5xf32>) -> tensor<*xf32>
  %4 = pf.matmul %d, %n : (tensor<?x4x5xf32>, tensor<5x6xf32>) -> tensor<*xf32>
  %5 = pf.gemm %mt, %nt {transA, transB} : (tensor<5x4xf32>, tensor<6x5xf32>) -> tensor<*xf32>
  %6 = pf.gemm %m, %n, %v6 : (tensor<4x5xf32>, tensor<5x6xf32>, tensor<6xf32>) -> tensor<*xf32>
  %7 = pf.gemm %u, %n : (tensor<*xf32>, tensor<5x6xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// Shape and ConstantOfShape fold to constants here: their types show in the
// updated signature.
// CHECK-LABEL: func.func @shapes
// CHECK-SAME: -> (tensor<3xi64>, tensor<1xi64>, tensor<6x4xf32>, tensor<?x2x2xf32>, tensor<?x?x?xf32>,
// CHECK-SAME: tensor<5x2x3x4xf32>, tensor<3x1xi64>, tensor<?x?xf32>)
// CHECK: pf.reshape {{.*}} -> tensor<6x4xf32>
// CHECK-NEXT: pf.reshape {{.*}} -> tensor<?x2x2xf32>
// CHECK-NEXT: pf.reshape {{.*}} -> tensor<?x?x?xf32>
// CHECK-NEXT: pf.transpose {{.*}} -> tensor<4x2x3xf32>
// CHECK-NEXT: pf.transpose {{.*}} -> tensor<4x3x2xf32>
// CHECK-NEXT: pf.unsqueeze {{.*}} -> tensor<1x2x3x4x1xf32>
// CHECK-NEXT: pf.squeeze {{.*}} -> tensor<3xf32>
// CHECK-NEXT: pf.squeeze {{.*}} -> tensor<3x1xf32>
// CHECK-NEXT: pf.squeeze {{.*}} -> tensor<*xf32>
// CHECK-NEXT: pf.concat {{.*}} -> tensor<2x5x4xf32>
// CHECK-NEXT: pf.concat {{.*}} -> tensor<2x?x4xf32>
// CHECK-NEXT: pf.slice {{.*}} -> tensor<2x1x4xf32>
// CHECK-NEXT: pf.slice {{.*}} -> tensor<2x3x2xf32>
// CHECK-NEXT: pf.slice {{.*}} -> tensor<2x3x?xf32>
// CHECK-NEXT: pf.slice {{.*}} -> tensor<?x3x4xf32>
// CHECK-NEXT: pf.gather {{.*}} -> tensor<2x5x7x4xf32>
// CHECK-NEXT: pf.expand {{.*}} -> tensor<5x2x3x4xf32>
// CHECK-NEXT: pf.constant_of_shape {{.*}} -> tensor<?x?xf32>
func.func @shapes(%x: tensor<2x3x4xf32>, %d: tensor<?x4x2xf32>, %ones: tensor<1x3x1xf32>,
                  %q: tensor<1x?xf32>, %y: tensor<2x2x4xf32>, %yd: tensor<2x?x4xf32>,
                  %i: tensor<5x7xi32>, %s: tensor<3xi64>, %s2: tensor<2xi64>, %n: tensor<1xi64>)
    -> (tensor<?xi64>, tensor<?xi64>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xf32>) {
  %c_6_m1 = pf.constant dense<[6, -1]> : tensor<2xi64>
  %c_m1_2_0 = pf.constant dense<[-1, 2, 0]> : tensor<3xi64>
  %c1 = pf.constant dense<1> : tensor<1xi64>
  %c2 = pf.constant dense<2> : tensor<1xi64>
  %cm1 = pf.constant dense<-1> : tensor<1xi64>
  %cm2 = pf.constant dense<-2> : tensor<1xi64>
  %c_0 = pf.constant dense<0> : tensor<1xi64>
  %c_5_1_1_1 = pf.constant dense<[5, 1, 1, 1]> : tensor<4xi64>
  %c_3_1 = pf.constant dense<[3, 1]> : tensor<2xi64>
  %0 = pf.shape %x : (tensor<2x3x4xf32>) -> tensor<?xi64>
  %1 = pf.shape %x {start = 1, end = -1} : (tensor<2x3x4xf32>) -> tensor<?xi64>
  %2 = pf.reshape %x, %c_6_m1 : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  // 0 copies input dim 2; -1 is unknown because the input is dynamic
  %3 = pf.reshape %d, %c_m1_2_0 : (tensor<?x4x2xf32>, tensor<3xi64>) -> tensor<*xf32>
  %4 = pf.reshape %x, %s : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<*xf32>
  %5 = pf.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %6 = pf.transpose %x : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %7 = pf.unsqueeze %x {axes = array<i64: -1, 0>} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %8 = pf.squeeze %ones : (tensor<1x3x1xf32>) -> tensor<*xf32>
  %9 = pf.squeeze %ones {axes = array<i64: 0>} : (tensor<1x3x1xf32>) -> tensor<*xf32>
  // which dims are 1 is unknown
  %10 = pf.squeeze %q : (tensor<1x?xf32>) -> tensor<*xf32>
  %11 = pf.concat %x, %y {axis = 1} : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<*xf32>
  %12 = pf.concat %x, %yd {axis = -2} : (tensor<2x3x4xf32>, tensor<2x?x4xf32>) -> tensor<*xf32>
  // axis 1, [1, 2)
  %13 = pf.slice %x, %c1, %c2, %c1 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  // last axis from -1 down to 0 exclusive, step -2: indices 3, 1
  %14 = pf.slice %x, %cm1, %c_0, %cm1, %cm2 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}
      : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  // unknown bounds on a known axis: only that axis is unknown
  %15 = pf.slice %x, %n, %n, %cm1 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  // unknown bounds without axes: the first len(starts) axes
  %16 = pf.slice %x, %n, %n {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}
      : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %17 = pf.gather %x, %i {axis = 1} : (tensor<2x3x4xf32>, tensor<5x7xi32>) -> tensor<*xf32>
  %18 = pf.expand %x, %c_5_1_1_1 : (tensor<2x3x4xf32>, tensor<4xi64>) -> tensor<*xf32>
  %19 = pf.constant_of_shape %c_3_1 {value = dense<0> : tensor<1xi64>} : (tensor<2xi64>) -> tensor<*xi64>
  %20 = pf.constant_of_shape %s2 : (tensor<2xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20 : tensor<?xi64>, tensor<?xi64>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xf32>
}

// CHECK-LABEL: func.func @normalization
// CHECK-NEXT: pf.reduce_mean {{.*}} -> tensor<2x3x1xf32>
// CHECK-NEXT: pf.reduce_mean {{.*}} -> tensor<3xf32>
// CHECK-NEXT: pf.reduce_sum {{.*}} -> tensor<1x1x1xf32>
// CHECK-NEXT: pf.reduce_sum {{.*}} -> tensor<f32>
// CHECK-NEXT: pf.reduce_sum {{.*}} -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.softmax {{.*}} -> tensor<2x3x4xf32>
// CHECK-NEXT: pf.layer_normalization {{.*}} -> (tensor<2x3x4xf16>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
// CHECK-NEXT: pf.linear {{.*}} -> tensor<2x3x8xf16>
// CHECK-NEXT: pf.linear {{.*}} -> tensor<2x3x8xf16>
// CHECK-NEXT: pf.layer_norm {{.*}} -> tensor<2x3x4xf16>
// CHECK-NEXT: pf.gelu {{.*}} -> tensor<2x3x4xf16>
func.func @normalization(%x: tensor<2x3x4xf32>, %h: tensor<2x3x4xf16>, %s: tensor<3x4xf16>,
                         %w: tensor<4x8xf16>, %wt: tensor<8x4xf16>, %b: tensor<8xf16>, %s4: tensor<4xf16>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf16>, tensor<*xf32>, tensor<*xf32>, tensor<*xf16>, tensor<*xf16>, tensor<*xf16>, tensor<*xf16>) {
  %0 = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = pf.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %2 = pf.reduce_sum %x : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %3 = pf.reduce_sum %x {keepdims = false} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %4 = pf.reduce_sum %x {noop_with_empty_axes} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %5 = pf.softmax %x : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %6:3 = pf.layer_normalization %h, %s {axis = 1}
      : (tensor<2x3x4xf16>, tensor<3x4xf16>) -> (tensor<*xf16>, tensor<*xf32>, tensor<*xf32>)
  %7 = pf.linear %h, %w, %b : (tensor<2x3x4xf16>, tensor<4x8xf16>, tensor<8xf16>) -> tensor<*xf16>
  %8 = pf.linear %h, %wt {transpose_weight} : (tensor<2x3x4xf16>, tensor<8x4xf16>) -> tensor<*xf16>
  %9 = pf.layer_norm %h, %s4 : (tensor<2x3x4xf16>, tensor<4xf16>) -> tensor<*xf16>
  %10 = pf.gelu %h : (tensor<2x3x4xf16>) -> tensor<*xf16>
  return %0, %1, %2, %3, %4, %5, %6#0, %6#1, %6#2, %7, %8, %9, %10 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf16>, tensor<*xf32>, tensor<*xf32>, tensor<*xf16>, tensor<*xf16>, tensor<*xf16>, tensor<*xf16>
}

// CHECK-LABEL: func.func @pipeline_kfac
// CHECK-NEXT: pf.microbatch {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: pf.microbatch {{.*}} -> tensor<?x4xf32>
// CHECK-NEXT: pf.kfac.factor_a {{.*}} -> tensor<17x17xf32>
// CHECK-NEXT: pf.kfac.factor_b {{.*}} -> tensor<16x16xf32>
// CHECK-NEXT: pf.kfac.factor_a {{.*}} -> tensor<4x4xf32>
// CHECK-NEXT: pf.kfac.pi {{.*}} -> tensor<f32>
// CHECK-NEXT: pf.kfac.inverse {{.*}} -> tensor<17x17xf32>
// CHECK-NEXT: pf.kfac.precondition {{.*}} -> (tensor<16x16xf32>, tensor<16xf32>)
func.func @pipeline_kfac(%x: tensor<32x16xf32>, %d: tensor<?x4xf32>, %g: tensor<16x16xf32>,
                         %gb: tensor<16xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<f32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = pf.microbatch %x {index = 3, count = 4} : (tensor<32x16xf32>) -> tensor<?x?xf32>
  %1 = pf.microbatch %d {index = 0, count = 2} : (tensor<?x4xf32>) -> tensor<?x?xf32>
  %2 = pf.kfac.factor_a %0 {bias_column} : (tensor<?x?xf32>) -> tensor<*xf32>
  %3 = pf.kfac.factor_b %0 : (tensor<?x?xf32>) -> tensor<*xf32>
  %4 = pf.kfac.factor_a %1 : (tensor<?x?xf32>) -> tensor<*xf32>
  %5 = pf.kfac.pi %2, %3 : (tensor<*xf32>, tensor<*xf32>) -> tensor<f32>
  %6 = pf.kfac.inverse %2, %5 {side = "A"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %7:2 = pf.kfac.precondition %g, %6, %3, %gb
      : (tensor<16x16xf32>, tensor<*xf32>, tensor<*xf32>, tensor<16xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0, %1, %2, %3, %4, %5, %6, %7#0, %7#1 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<f32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
