// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Backward kernels overwrite their outputs (accumulate flags 0); layer_norm_grad
// passes no saved statistics (the kernel recomputes them).
func.func @main(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %dy: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %dx, %dscale, %dbias = pf.layer_norm_grad %x, %s, %dy {axis = 1 : i64, epsilon = 1.0e-12 : f32} : tensor<2x3xf32>, tensor<3xf32>
  return %dx, %dscale, %dbias : tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[S:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[DY:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[DX:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[DS:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[DB:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: %[[NOMEAN:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NOINV:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[EPS:.*]] = arith.constant 9.999999960041972E-13 : f64
// CHECK: %[[ACCX:.*]] = arith.constant 0 : i32
// CHECK: %[[ACCP:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_layer_norm_backward(%[[CTX]], %[[X]], %[[S]], %[[NOMEAN]], %[[NOINV]], %[[DY]], %{{.*}}, %[[EPS]], %[[ACCX]], %[[ACCP]], %[[DX]], %[[DS]], %[[DB]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, f64, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// -----

func.func @main(%x: tensor<2x3xf32>, %dy: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = pf.gelu_grad %x, %dy {approximate = "tanh"} : tensor<2x3xf32>
  %1 = pf.softmax_grad %y, %dy {axis = 1 : i64} : tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[DY:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[Y:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[G0:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[TANH:.*]] = arith.constant 1 : i32
// CHECK: %[[ACC:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_gelu_backward(%[[CTX]], %[[X]], %[[DY]], %[[TANH]], %[[ACC]], %[[G0]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK: %[[G1:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[AXIS:.*]] = arith.constant 1 : i64
// CHECK: call @pfrt_softmax_backward(%[[CTX]], %[[Y]], %[[DY]], %[[AXIS]], %{{.*}}, %[[G1]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, !llvm.ptr) -> i32

// -----

func.func @main(%ids: tensor<2x5xi64>, %g: tensor<2x5x3xf32>) -> tensor<10x3xf32> {
  %0 = pf.gather_grad %ids, %g : (tensor<2x5xi64>, tensor<2x5x3xf32>) -> tensor<10x3xf32>
  return %0 : tensor<10x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[IDS:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[G:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[DT:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_gather_backward(%[[CTX]], %[[IDS]], %[[G]], %{{.*}}, %{{.*}}, %[[DT]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, !llvm.ptr) -> i32

// -----

// Clipping copies the gradients into the results, then clips those in place
// through consecutive table entries (4, 5) viewing them; the norm is not kept.
func.func @main(%a: tensor<4xf32>, %b: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<3x2xf32>) {
  %c:2 = pf.clip_by_global_norm %a, %b {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<3x2xf32>
  return %c#0, %c#1 : tensor<4xf32>, tensor<3x2xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: #pf.tensor<buffer = 2, dtype = 1, shape = [4]>, #pf.tensor<buffer = 3, dtype = 1, shape = [3, 2]>]
// CHECK: %[[A:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[CA:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[CB:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_copy(%[[CTX]], %[[A]], %[[CA]])
// CHECK: call @pfrt_copy(%[[CTX]], %[[B]], %[[CB]])
// CHECK: %[[VIEWS:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[N:.*]] = arith.constant 2 : i32
// CHECK: %[[MAX:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[NONORM:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @pfrt_clip_by_global_norm(%[[CTX]], %[[VIEWS]], %[[N]], %[[MAX]], %[[NONORM]]) : (!llvm.ptr, !llvm.ptr, i32, f64, !llvm.ptr) -> i32

// -----

// SGD with a momentum buffer and LAMB (NVLAMB, bias correction on): the
// parameters and their state by symbol, lr and step read at run time.
pf.param @w : tensor<4x3xf32>
pf.param @w.mom : tensor<4x3xf32>
pf.param @w.m : tensor<4x3xf32>
pf.param @w.v : tensor<4x3xf32>
func.func @main(%g: tensor<4x3xf32>, %lr: tensor<f64>, %step: tensor<i64>) {
  pf.sgd_update @w momentum_buffer @w.mom grad %g lr %lr {momentum = 0.9 : f64, nesterov} : tensor<4x3xf32>, tensor<f64>
  pf.lamb_update @w(@w.m, @w.v) grad %g lr %lr step %step {max_trust_ratio = 10.0 : f64} : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  return
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[G:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[LR:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: call @pfrt_read_scalar(%[[CTX]], %[[LR]], %[[SLOT:[0-9a-z_]+]])
// CHECK: %[[LRV:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: %[[STEP:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_read_scalar(%[[CTX]], %[[STEP]], %[[SLOT]])
// CHECK: %[[STEPF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: %[[W:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[MOM:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[MOMENTUM:.*]] = arith.constant 9.000000e-01 : f64
// CHECK: %[[NESTEROV:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_sgd_step(%[[CTX]], %[[W]], %[[G]], %[[MOM]], %[[LRV]], %[[MOMENTUM]], %{{.*}}, %[[NESTEROV]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, f64, i32) -> i32
// CHECK: %[[STEPV:.*]] = arith.fptosi %[[STEPF]] : f64 to i64
// CHECK: %[[BIASCORR:.*]] = arith.constant 1 : i32
// CHECK: %[[NVLAMB:.*]] = arith.constant 1 : i32
// CHECK: %[[TRUST:.*]] = arith.constant 1.000000e+01 : f64
// CHECK: call @pfrt_lamb_step(%[[CTX]], %{{.*}}, %[[G]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[STEPV]], %[[BIASCORR]], %[[NVLAMB]], %[[TRUST]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, f64, f64, f64, i64, i32, i32, f64) -> i32
