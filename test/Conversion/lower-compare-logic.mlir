// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Ordered comparisons share pfrt_compare(ctx, a, b, kind, out) and bool logic
// pfrt_logical(ctx, a, b, kind, out); kind is PFRT_COMPARE_* / PFRT_LOGICAL_*.
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xi1> {
  %0 = pf.greater %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %1 = pf.greater_equal %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %2 = pf.less %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %3 = pf.less_equal %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %4 = pf.and %0, %1 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %5 = pf.or %4, %2 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %6 = pf.xor %5, %3 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %7 = pf.not %6 : (tensor<2x3xi1>) -> tensor<2x3xi1>
  return %7 : tensor<2x3xi1>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: #pf.tensor<buffer = {{.*}}, dtype = 9, shape = [2, 3]>
// CHECK-DAG: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK-DAG: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[GT:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_compare(%[[CTX]], %[[A]], %[[B]], %[[GT]], %[[R0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[GE:.*]] = arith.constant 2 : i32
// CHECK: call @pfrt_compare(%[[CTX]], %[[A]], %[[B]], %[[GE]], %[[R1]])
// CHECK: %[[R2:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[LT:.*]] = arith.constant 3 : i32
// CHECK: call @pfrt_compare(%[[CTX]], %[[A]], %[[B]], %[[LT]], %[[R2]])
// CHECK: %[[R3:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: %[[LE:.*]] = arith.constant 4 : i32
// CHECK: call @pfrt_compare(%[[CTX]], %[[A]], %[[B]], %[[LE]], %[[R3]])
// CHECK: %[[R4:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: %[[AND:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_logical(%[[CTX]], %[[R0]], %[[R1]], %[[AND]], %[[R4]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: %[[R5:.*]] = llvm.getelementptr %[[T]][7]
// CHECK: %[[OR:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_logical(%[[CTX]], %[[R4]], %[[R2]], %[[OR]], %[[R5]])
// CHECK: %[[R6:.*]] = llvm.getelementptr %[[T]][8]
// CHECK: %[[XOR:.*]] = arith.constant 2 : i32
// CHECK: call @pfrt_logical(%[[CTX]], %[[R5]], %[[R3]], %[[XOR]], %[[R6]])
// CHECK: %[[R7:.*]] = llvm.getelementptr %[[T]][9]
// CHECK: call @pfrt_not(%[[CTX]], %[[R6]], %[[R7]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// Min/max: (ctx, a, b, out); abs, sign, reciprocal: (ctx, x, out).
func.func @main(%a: tensor<4xf32>, %b: tensor<f32>) -> tensor<4xf32> {
  %0 = pf.min %a, %b : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = pf.max %0, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = pf.abs %1 : (tensor<4xf32>) -> tensor<4xf32>
  %3 = pf.sign %2 : (tensor<4xf32>) -> tensor<4xf32>
  %4 = pf.reciprocal %3 : (tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-DAG: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK-DAG: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_min(%[[CTX]], %[[A]], %[[B]], %[[R0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_max(%[[CTX]], %[[R0]], %[[A]], %[[R1]])
// CHECK: %[[R2:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: call @pfrt_abs(%[[CTX]], %[[R1]], %[[R2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R3:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_sign(%[[CTX]], %[[R2]], %[[R3]])
// CHECK: %[[R4:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: call @pfrt_reciprocal(%[[CTX]], %[[R3]], %[[R4]])
