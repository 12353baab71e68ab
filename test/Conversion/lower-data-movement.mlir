// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Views (ViewOpInterface) and constants call nothing: each result is a table
// entry over its source's buffer (0 here), with its own shape.
func.func @main(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %s = pf.constant dense<[1, 6]> : tensor<2xi64>
  %r = pf.reshape %x, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<1x6xf32>
  %q = pf.squeeze %r {axes = array<i64: 0>} : (tensor<1x6xf32>) -> tensor<6xf32>
  %u = pf.unsqueeze %q {axes = array<i64: 0>} : (tensor<6xf32>) -> tensor<1x6xf32>
  %i = pf.identity %u : (tensor<1x6xf32>) -> tensor<1x6xf32>
  %e = pf.exp %i : (tensor<1x6xf32>) -> tensor<1x6xf32>
  %s2 = pf.constant dense<[6]> : tensor<1xi64>
  %o = pf.reshape %e, %s2 : (tensor<1x6xf32>, tensor<1xi64>) -> tensor<6xf32>
  return %o : tensor<6xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: op_names = ["pf.constant", "pf.reshape", "pf.squeeze", "pf.unsqueeze", "pf.identity", "pf.exp", "pf.constant", "pf.reshape"]
// CHECK-SAME: tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [2, 3]>, #pf.tensor<buffer = 1, dtype = 7, shape = [2]>, #pf.tensor<buffer = 0, dtype = 1, shape = [1, 6]>, #pf.tensor<buffer = 0, dtype = 1, shape = [6]>, #pf.tensor<buffer = 0, dtype = 1, shape = [1, 6]>, #pf.tensor<buffer = 0, dtype = 1, shape = [1, 6]>, #pf.tensor<buffer = 2, dtype = 1, shape = [1, 6]>, #pf.tensor<buffer = 3, dtype = 7, shape = [1]>, #pf.tensor<buffer = 2, dtype = 1, shape = [6]>]
// CHECK-NOT: call @pfrt_reshape
// CHECK-NOT: call @pfrt_copy
// CHECK: %[[ID:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: %[[E:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: call @pfrt_exp(%[[CTX]], %[[ID]], %[[E]])
// CHECK-NOT: call @pfrt_

// -----

// transpose: the permutation as a constant global (reversed axes without one).
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<2x4x3xf32>) {
  %0 = pf.transpose %x : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %1 = pf.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  return %0, %1 : tensor<4x3x2xf32>, tensor<2x4x3xf32>
}
// CHECK-DAG: llvm.mlir.global internal constant @[[P1:__pf_ints_[0-9]+]](dense<[0, 2, 1]> : tensor<3xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[P0:__pf_ints_[0-9]+]](dense<[2, 1, 0]> : tensor<3xi64>)
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[Y0:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[PERM0:.*]] = llvm.mlir.addressof @[[P0]] : !llvm.ptr
// CHECK: %[[RANK:.*]] = arith.constant 3 : i32
// CHECK: call @pfrt_transpose(%[[CTX]], %[[X]], %[[PERM0]], %[[RANK]], %[[Y0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: %[[PERM1:.*]] = llvm.mlir.addressof @[[P1]] : !llvm.ptr
// CHECK: call @pfrt_transpose(%[[CTX]], %[[X]], %[[PERM1]]

// -----

// gather: (ctx, data, indices, axis, out).
func.func @main(%t: tensor<10x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = pf.gather %t, %ids : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[DATA:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[IDS:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[AXIS:.*]] = arith.constant 0 : i64
// CHECK: call @pfrt_gather(%[[CTX]], %[[DATA]], %[[IDS]], %[[AXIS]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32

// -----

// slice: starts, ends, axes and steps as constant arrays, then their count.
func.func @main(%x: tensor<8x6xf32>) -> tensor<2x3xf32> {
  %starts = pf.constant dense<[1, 0]> : tensor<2xi64>
  %ends = pf.constant dense<[5, 6]> : tensor<2xi64>
  %axes = pf.constant dense<[0, 1]> : tensor<2xi64>
  %steps = pf.constant dense<[2, 2]> : tensor<2xi64>
  %0 = pf.slice %x, %starts, %ends, %axes, %steps {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<8x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
// CHECK-DAG: llvm.mlir.global internal constant @[[STARTS:__pf_ints_[0-9]+]](dense<[1, 0]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[ENDS:__pf_ints_[0-9]+]](dense<[5, 6]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[AXES:__pf_ints_[0-9]+]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[STEPS:__pf_ints_[0-9]+]](dense<2> : tensor<2xi64>)
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[S:.*]] = llvm.mlir.addressof @[[STARTS]]
// CHECK: %[[E:.*]] = llvm.mlir.addressof @[[ENDS]]
// CHECK: %[[A:.*]] = llvm.mlir.addressof @[[AXES]]
// CHECK: %[[ST:.*]] = llvm.mlir.addressof @[[STEPS]]
// CHECK: %[[N:.*]] = arith.constant 2 : i32
// CHECK: call @pfrt_slice(%[[CTX]], %{{.*}}, %[[S]], %[[E]], %[[A]], %[[ST]], %[[N]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32

// -----

// concat: the inputs get consecutive table entries (3, 4) viewing their
// buffers, and the kernel takes the first.
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = pf.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [2, 3]>, #pf.tensor<buffer = 1, dtype = 1, shape = [2, 5]>, #pf.tensor<buffer = 2, dtype = 1, shape = [2, 8]>, #pf.tensor<buffer = 0, dtype = 1, shape = [2, 3]>, #pf.tensor<buffer = 1, dtype = 1, shape = [2, 5]>]
// CHECK: %[[INPUTS:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[N:.*]] = arith.constant 2 : i32
// CHECK: %[[AXIS:.*]] = arith.constant 1 : i64
// CHECK: call @pfrt_concat(%[[CTX]], %[[INPUTS]], %[[N]], %[[AXIS]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, i32, i64, !llvm.ptr) -> i32

// -----

// expand and cast: (ctx, x, out); constant_of_shape fills its output.
func.func @main(%x: tensor<3x1xf32>, %i: tensor<4xi64>) -> (tensor<3x4xf32>, tensor<4xf32>, tensor<2x2xf32>) {
  %shape = pf.constant dense<[3, 4]> : tensor<2xi64>
  %0 = pf.expand %x, %shape : (tensor<3x1xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  %1 = pf.cast %i {to = f32} : (tensor<4xi64>) -> tensor<4xf32>
  %s = pf.constant dense<[2, 2]> : tensor<2xi64>
  %2 = pf.constant_of_shape %s {value = dense<1.5> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x2xf32>
  return %0, %1, %2 : tensor<3x4xf32>, tensor<4xf32>, tensor<2x2xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[I:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[EXP:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_expand(%[[CTX]], %[[X]], %[[EXP]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[CAST:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: call @pfrt_cast(%[[CTX]], %[[I]], %[[CAST]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[FILLED:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: %[[VALUE:.*]] = arith.constant 1.500000e+00 : f64
// CHECK: call @pfrt_fill(%[[CTX]], %[[FILLED]], %[[VALUE]]) : (!llvm.ptr, !llvm.ptr, f64) -> i32

// -----

// A value returned twice is written once and copied into the second output
// after the last op; a failing copy reports op index -1 (code 0 << 32).
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = pf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %0 : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: call @pfrt_exp
// CHECK: %[[FROM:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[TO:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[STATUS:.*]] = call @pfrt_copy(%[[CTX]], %[[FROM]], %[[TO]])
// CHECK: %[[WIDE:.*]] = arith.extui %[[STATUS]] : i32 to i64
// CHECK: %[[CODE:.*]] = arith.ori %[[WIDE]], %c0_i64{{.*}} : i64
// CHECK: cf.cond_br %{{.*}}, ^[[FAIL:bb[0-9]+]](%[[CODE]] : i64), ^[[NEXT:bb[0-9]+]]
// CHECK: ^[[NEXT]]:
// CHECK: return %{{.*}} : i64
// CHECK: ^[[FAIL]](%[[C:.*]]: i64):
// CHECK: return %[[C]] : i64
