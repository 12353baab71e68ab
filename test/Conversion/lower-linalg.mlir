// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// matmul: (ctx, a, b, out).
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = pf.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_matmul(%[[CTX]], %[[A]], %[[B]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

// gemm: alpha and beta as f64, the transposes as i32 flags, no C a null
// pointer (the ONNX defaults alpha = beta = 1).
func.func @main(%a: tensor<3x2xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = pf.gemm %a, %b, %c {alpha = 2.0 : f32, beta = 0.5 : f32, transA, transB} : (tensor<3x2xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = pf.gemm %a, %b {transA, transB} : (tensor<3x2xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[C:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[Y0:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[ALPHA:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: %[[BETA:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: %[[TA:.*]] = arith.constant 1 : i32
// CHECK: %[[TB:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_gemm(%[[CTX]], %[[A]], %[[B]], %[[C]], %[[ALPHA]], %[[BETA]], %[[TA]], %[[TB]], %[[Y0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[Y1:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[NOC:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[ONE2:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: call @pfrt_gemm(%[[CTX]], %[[A]], %[[B]], %[[NOC]], %[[ONE]], %[[ONE2]], %{{.*}}, %{{.*}}, %[[Y1]])

// -----

// linear: parameters are table entries of their own (read in place).
pf.param @w : tensor<3x4xf32>
pf.param @bias : tensor<4xf32>
func.func @main(%x: tensor<2x5x3xf32>) -> tensor<2x5x4xf32> {
  %w = pf.param_ref @w : tensor<3x4xf32>
  %bias = pf.param_ref @bias : tensor<4xf32>
  %y = pf.linear %x, %w, %bias : (tensor<2x5x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  return %y : tensor<2x5x4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: #pf.buffer<kind = param, bytes = 48, name = "w">, #pf.buffer<kind = param, bytes = 16, name = "bias">
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[W:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[BIAS:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[NOTRANSPOSE:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_linear(%[[CTX]], %[[X]], %[[W]], %[[BIAS]], %[[NOTRANSPOSE]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
