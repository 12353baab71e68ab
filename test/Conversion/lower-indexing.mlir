// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s
// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s --check-prefix=GLOBAL

// GatherND, ScatterND (reduction as PFRT_SCATTER_*), IsNaN, IsInf (detect
// flags), CumSum (axis, exclusive, reverse), Trilu (k, upper) and ReduceMax/Min
// (axes array, count, keepdims) each become one pfrt call.
func.func @main(%x: tensor<2x3x4xf32>, %i: tensor<5x2xi64>, %u: tensor<5x4xf32>)
    -> (tensor<5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<2x3x4xi1>, tensor<2x3x4xf32>,
        tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<3xf32>) {
  %0 = pf.gather_nd %x, %i : (tensor<2x3x4xf32>, tensor<5x2xi64>) -> tensor<5x4xf32>
  %1 = pf.scatter_nd %x, %i, %u reduction max : (tensor<2x3x4xf32>, tensor<5x2xi64>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  %2 = pf.is_nan %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
  %3 = pf.is_inf %x {detect_negative = false} : (tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
  %4 = pf.cumsum %x {axis = -1 : i64, reverse} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = pf.trilu %x {k = -1 : i64, upper = false} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %6 = pf.reduce_max %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %7 = pf.reduce_min %x {axes = array<i64: -1, 0>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<5x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<2x3x4xi1>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-DAG: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK-DAG: %[[I:.*]] = llvm.getelementptr %[[T]][1]
// CHECK-DAG: %[[U:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[B0:.*]] = arith.constant 0 : i64
// CHECK: call @pfrt_gather_nd(%[[CTX]], %[[X]], %[[I]], %[[B0]], %[[R0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[MAX:.*]] = arith.constant 3 : i32
// CHECK: call @pfrt_scatter_nd(%[[CTX]], %[[X]], %[[I]], %[[U]], %[[MAX]], %[[R1]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: %[[R2:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_is_nan(%[[CTX]], %[[X]], %[[R2]])
// CHECK: %[[R3:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: %[[NEG:.*]] = arith.constant 0 : i32
// CHECK: %[[POS:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_is_inf(%[[CTX]], %[[X]], %[[NEG]], %[[POS]], %[[R3]]) : (!llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[R4:.*]] = llvm.getelementptr %[[T]][7]
// CHECK: %[[AX:.*]] = arith.constant -1 : i64
// CHECK: %[[EXC:.*]] = arith.constant 0 : i32
// CHECK: %[[REV:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_cumsum(%[[CTX]], %[[X]], %[[AX]], %[[EXC]], %[[REV]], %[[R4]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[R5:.*]] = llvm.getelementptr %[[T]][8]
// CHECK: %[[K:.*]] = arith.constant -1 : i64
// CHECK: %[[LOWER:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_trilu(%[[CTX]], %[[X]], %[[K]], %[[LOWER]], %[[R5]]) : (!llvm.ptr, !llvm.ptr, i64, i32, !llvm.ptr) -> i32
// CHECK: %[[R6:.*]] = llvm.getelementptr %[[T]][9]
// CHECK: %[[AXES:.*]] = llvm.mlir.addressof @__pf_ints_0 : !llvm.ptr
// CHECK: %[[N:.*]] = arith.constant 1 : i32
// CHECK: %[[KEEP:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_reduce_max(%[[CTX]], %[[X]], %[[AXES]], %[[N]], %[[KEEP]], %[[R6]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[R7:.*]] = llvm.getelementptr %[[T]][10]
// CHECK: %[[AXES2:.*]] = llvm.mlir.addressof @__pf_ints_1 : !llvm.ptr
// CHECK: %[[N2:.*]] = arith.constant 2 : i32
// CHECK: %[[DROP:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_reduce_min(%[[CTX]], %[[X]], %[[AXES2]], %[[N2]], %[[DROP]], %[[R7]])
// CHECK-DAG: func.func private @pfrt_gather_nd(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_scatter_nd(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// The axes arrays are constant globals.
// GLOBAL-DAG: llvm.mlir.global internal constant @__pf_ints_0(dense<1> : tensor<1xi64>)
// GLOBAL-DAG: llvm.mlir.global internal constant @__pf_ints_1(dense<[-1, 0]> : tensor<2xi64>)
// GLOBAL: func.func @pf_main
