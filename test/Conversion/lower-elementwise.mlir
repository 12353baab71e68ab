// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Broadcasting binary ops: (ctx, a, b, out), each descriptor a table entry;
// the result of one op is the entry the next one reads.
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = pf.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = pf.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = pf.mul %1, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = pf.div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = pf.pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_add(%[[CTX]], %[[A]], %[[B]], %[[R0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_sub(%[[CTX]], %[[R0]], %[[B]], %[[R1]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R2:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: call @pfrt_mul(%[[CTX]], %[[R1]], %[[B]], %[[R2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R3:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_div(%[[CTX]], %[[R2]], %[[B]], %[[R3]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R4:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: call @pfrt_pow(%[[CTX]], %[[R3]], %[[B]], %[[R4]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: func.func private @pfrt_add(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: func.func private @pfrt_pow(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// equal writes a bool tensor (dtype 9) that where reads as its condition.
func.func @main(%a: tensor<4xi64>, %b: tensor<4xi64>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %c = pf.equal %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %w = pf.where %c, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: #pf.tensor<buffer = 4, dtype = 9, shape = [4]>
// CHECK-DAG: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK-DAG: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK-DAG: %[[X:.*]] = llvm.getelementptr %[[T]][2]
// CHECK-DAG: %[[Y:.*]] = llvm.getelementptr %[[T]][3]
// CHECK-DAG: %[[C:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: call @pfrt_equal(%[[CTX]], %[[A]], %[[B]], %[[C]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[W:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_where(%[[CTX]], %[[C]], %[[X]], %[[Y]], %[[W]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// Unary ops: (ctx, x, out).
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = pf.sqrt %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = pf.erf %0 : (tensor<4xf32>) -> tensor<4xf32>
  %2 = pf.tanh %1 : (tensor<4xf32>) -> tensor<4xf32>
  %3 = pf.exp %2 : (tensor<4xf32>) -> tensor<4xf32>
  %4 = pf.neg %3 : (tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: call @pfrt_sqrt(%[[CTX]], %[[X]], %[[R0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_erf(%[[CTX]], %[[R0]], %[[R1]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R2:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_tanh(%[[CTX]], %[[R1]], %[[R2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R3:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: call @pfrt_exp(%[[CTX]], %[[R2]], %[[R3]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[R4:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_neg(%[[CTX]], %[[R3]], %[[R4]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// gelu's approximation is PFRT_GELU_EXACT (0) or PFRT_GELU_TANH (1).
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = pf.gelu %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = pf.gelu %x {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[EXACT:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_gelu(%[[CTX]], %[[X]], %[[EXACT]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: %[[TANH:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_gelu(%[[CTX]], %[[X]], %[[TANH]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
