// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// scaled_masked_softmax: (ctx, x, mask, scale, out); no mask is a null pointer.
func.func @main(%x: tensor<2x4x8x8xf32>, %m: tensor<2x1x1x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %p = pf.scaled_masked_softmax %x, %m {scale = 0.125 : f64} : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
  %q = pf.scaled_masked_softmax %x : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %p, %q : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[M:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[P:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[SCALE:.*]] = arith.constant 1.250000e-01 : f64
// CHECK: call @pfrt_softmax_scaled_masked(%[[CTX]], %[[X]], %[[M]], %[[SCALE]], %[[P]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, f64, !llvm.ptr) -> i32
// CHECK: %[[Q:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[NOMASK:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: call @pfrt_softmax_scaled_masked(%[[CTX]], %[[X]], %[[NOMASK]], %[[ONE]], %[[Q]])

// -----

// add_layer_norm: (ctx, x, residual, scale, bias, axis, epsilon, out).
func.func @main(%x: tensor<2x8xf32>, %r: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = pf.add_layer_norm %x, %r, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[R:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[S:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[AXIS:.*]] = arith.constant 1 : i64
// CHECK: %[[EPS:.*]] = arith.constant 9.9999997473787516E-6 : f64
// CHECK: call @pfrt_add_layer_norm(%[[CTX]], %[[X]], %[[R]], %[[S]], %[[B]], %[[AXIS]], %[[EPS]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, f64, !llvm.ptr) -> i32

// -----

// permuted_matmul: the permutations as constant arrays, the identity (an
// absent one) as a null pointer.
func.func @main(%p: tensor<2x4x16x16xf32>, %v: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %c = pf.permuted_matmul %p, %v {rhs_perm = array<i64: 0, 2, 1, 3>, result_perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x16xf32>, tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
  return %c : tensor<2x16x4x8xf32>
}
// CHECK-DAG: llvm.mlir.global internal constant @[[PERM:__pf_ints_[0-9]+]](dense<[0, 2, 1, 3]> : tensor<4xi64>)
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[P:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[V:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[C:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[IDENTITY:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[RP:.*]] = llvm.mlir.addressof @[[PERM]] : !llvm.ptr
// CHECK: %[[OP:.*]] = llvm.mlir.addressof @[[PERM]] : !llvm.ptr
// CHECK: call @pfrt_matmul_permuted(%[[CTX]], %[[P]], %[[IDENTITY]], %[[V]], %[[RP]], %[[OP]], %[[C]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// linear_gelu: (ctx, x, w, bias, w_transposed, approximation, out); tanh is 1.
func.func @main(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = pf.linear_gelu %x, %w, %b {approximate = "tanh", transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[W:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[TRANSPOSED:.*]] = arith.constant 1 : i32
// CHECK: %[[TANH:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_linear_gelu(%[[CTX]], %[[X]], %[[W]], %[[B]], %[[TRANSPOSED]], %[[TANH]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
