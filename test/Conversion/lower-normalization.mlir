// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// layer_norm: no statistics outputs (null pointers); epsilon as f64.
func.func @main(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = pf.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[S:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[NOMEAN:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NOINV:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[AXIS:.*]] = arith.constant 1 : i64
// CHECK: %[[EPS:.*]] = arith.constant 9.9999997473787516E-6 : f64
// CHECK: call @pfrt_layer_norm(%[[CTX]], %[[X]], %[[S]], %[[B]], %[[AXIS]], %[[EPS]], %[[Y]], %[[NOMEAN]], %[[NOINV]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, f64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// layer_normalization: the statistics are outputs; no bias is a null pointer.
func.func @main(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>) {
  %y, %mean, %inv = pf.layer_normalization %x, %s {axis = -1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %mean, %inv : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[S:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[MEAN:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[INV:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[AXIS:.*]] = arith.constant -1 : i64
// CHECK: call @pfrt_layer_norm(%[[CTX]], %[[X]], %[[S]], %[[NOBIAS]], %[[AXIS]], %{{.*}}, %[[Y]], %[[MEAN]], %[[INV]])

// -----

// softmax: (ctx, x, axis, out).
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = pf.softmax %x {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[AXIS:.*]] = arith.constant 1 : i64
// CHECK: call @pfrt_softmax(%[[CTX]], %[[X]], %[[AXIS]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32

// -----

// Reductions: axes as a constant global (all axes when none are given),
// their count and keepdims.
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x1x1xf32>, tensor<2xf32>, tensor<f32>) {
  %0 = pf.reduce_mean %x {axes = array<i64: -2, -1>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %1 = pf.reduce_sum %x {axes = array<i64: 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2xf32>
  %2 = pf.reduce_sum %x {keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<2x1x1xf32>, tensor<2xf32>, tensor<f32>
}
// CHECK-DAG: llvm.mlir.global internal constant @[[G0:__pf_ints_[0-9]+]](dense<[-2, -1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[G1:__pf_ints_[0-9]+]](dense<[1, 2]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[G2:__pf_ints_[0-9]+]](dense<[0, 1, 2]> : tensor<3xi64>)
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[Y0:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[AXES0:.*]] = llvm.mlir.addressof @[[G0]] : !llvm.ptr
// CHECK: %[[N0:.*]] = arith.constant 2 : i32
// CHECK: %[[KEEP:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_reduce_mean(%[[CTX]], %[[X]], %[[AXES0]], %[[N0]], %[[KEEP]], %[[Y0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[Y1:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[AXES1:.*]] = llvm.mlir.addressof @[[G1]] : !llvm.ptr
// CHECK: %[[DROP:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_reduce_sum(%[[CTX]], %[[X]], %[[AXES1]], %{{.*}}, %[[DROP]], %[[Y1]])
// CHECK: %[[AXES2:.*]] = llvm.mlir.addressof @[[G2]] : !llvm.ptr
// CHECK: %[[N2:.*]] = arith.constant 3 : i32
// CHECK: call @pfrt_reduce_sum(%[[CTX]], %[[X]], %[[AXES2]], %[[N2]]

// -----

// noop_with_empty_axes and no axes: a copy.
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = pf.reduce_sum %x {noop_with_empty_axes} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: call @pfrt_copy(%[[CTX]], %[[X]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NOT: pfrt_reduce_sum
