// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Two updates of one factor: the first overwrites at step 1 and keeps a
// running average after (mode select 0 / 2), the second accumulates (1) its
// (1 - decay) share; each runs on due steps ((step - 1) mod every == 0)
// only. The refresh also runs on the first `warmup` steps; its kernel reports
// the outcome into a host slot that holds PFRT_KFAC_INVERTED (0) when it does
// not run, and pfrt_fill writes it to the outcome tensor (which may live in
// device memory). The step is read once, by pfrt_read_scalar.
pf.param @A : tensor<4x4xf32>
pf.param @B : tensor<2x2xf32>
pf.param @A_inv : tensor<4x4xf32>
pf.param @B_inv : tensor<2x2xf32>
func.func @main(%x: tensor<5x4xf32>, %dy: tensor<5x2xf32>, %step: tensor<i64>) -> tensor<i32> {
  pf.kfac.update_factor @A from %x step %step {every = 2 : i64} : tensor<5x4xf32>, tensor<i64>
  pf.kfac.update_factor @A from %x step %step {every = 2 : i64} : tensor<5x4xf32>, tensor<i64>
  %o = pf.kfac.refresh_inverses(@A, @B) into (@A_inv, @B_inv) step %step {every = 4 : i64, warmup = 3 : i64} : tensor<i64> -> tensor<i32>
  return %o : tensor<i32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[OUT:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[SLOT:.*]] = llvm.alloca %{{.*}} x f64
// CHECK: %[[X:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[STEPE:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: call @pfrt_read_scalar(%[[CTX]], %[[STEPE]], %[[SLOT]])
// CHECK: %[[STEPF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: %[[STEP:.*]] = arith.fptosi %[[STEPF]] : f64 to i64
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[STEP]], %{{.*}} : i64
// CHECK: %[[AVG:.*]] = arith.constant 2 : i32
// CHECK: %[[OVERWRITE:.*]] = arith.constant 0 : i32
// CHECK: %[[MODE:.*]] = arith.select %[[FIRST]], %[[OVERWRITE]], %[[AVG]] : i32
// CHECK: %[[SINCE:.*]] = arith.subi %[[STEP]], %{{.*}} : i64
// CHECK: %[[PHASE:.*]] = arith.remsi %[[SINCE]], %c2_i64 : i64
// CHECK: %[[DUE:.*]] = arith.cmpi eq, %[[PHASE]], %{{.*}} : i64
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: cf.cond_br %[[DUE]], ^[[THEN:bb[0-9]+]], ^[[JOIN:bb[0-9]+]]
// CHECK: ^[[THEN]]:
// CHECK: %[[FACTOR:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_kfac_factor(%[[CTX]], %[[X]], %{{.*}}, %[[SCALE]], %[[MODE]], %{{.*}}, %[[FACTOR]]) : (!llvm.ptr, !llvm.ptr, i32, f64, i32, f64, !llvm.ptr) -> i32
// CHECK: ^[[JOIN]]:
// CHECK: %[[ACCUMULATE:.*]] = arith.constant 1 : i32
// CHECK: %[[FULL:.*]] = arith.constant 5.000000e-01 : f64
// CHECK: %[[SHARE:.*]] = arith.constant 0.025000000000000022 : f64
// CHECK: %[[SCALE2:.*]] = arith.select %{{.*}}, %[[FULL]], %[[SHARE]] : f64
// CHECK: call @pfrt_kfac_factor(%[[CTX]], %[[X]], %{{.*}}, %[[SCALE2]], %[[ACCUMULATE]]
// CHECK: %[[PHASE3:.*]] = arith.remsi %{{.*}}, %c4_i64 : i64
// CHECK: %[[DUE3:.*]] = arith.cmpi eq, %[[PHASE3]]
// CHECK: %[[EARLY:.*]] = arith.cmpi sle, %{{.*}}, %c3_i64 : i64
// CHECK: %[[REFRESH:.*]] = arith.ori %[[DUE3]], %[[EARLY]] : i1
// CHECK-NOT: pfrt_read_scalar
// CHECK: %[[OUTE:.*]] = llvm.getelementptr %[[T]][7]
// CHECK: %[[INVERTED:.*]] = arith.constant 0 : i32
// CHECK: llvm.store %[[INVERTED]], %[[OUT]] : i32, !llvm.ptr
// CHECK: cf.cond_br %[[REFRESH]]
// CHECK: %[[DAMPING:.*]] = arith.constant 1.000000e-03 : f64
// CHECK: %[[A:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[T]][6]
// CHECK: %[[AI:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[BI:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: call @pfrt_kfac_damped_inverses(%[[CTX]], %[[A]], %[[B]], %[[DAMPING]], %{{.*}}, %[[AI]], %[[BI]], %[[OUT]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, f64, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[REPORTED:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> i32
// CHECK: %[[REPORTEDF:.*]] = arith.sitofp %[[REPORTED]] : i32 to f64
// CHECK: call @pfrt_fill(%[[CTX]], %[[OUTE]], %[[REPORTEDF]])

// -----

// precondition of [out, in] weights (w_transposed = 1) with a bias gradient.
func.func @main(%g: tensor<2x3xf32>, %gb: tensor<2xf32>, %ai: tensor<3x3xf32>, %bi: tensor<2x2xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
  %u:2 = pf.kfac.precondition %g, %ai, %bi, %gb : (tensor<2x3xf32>, tensor<3x3xf32>, tensor<2x2xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2xf32>)
  return %u#0, %u#1 : tensor<2x3xf32>, tensor<2xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[G:.*]] = llvm.getelementptr %[[T]][0]
// CHECK: %[[GB:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[AI:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[BI:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: %[[UW:.*]] = llvm.getelementptr %[[T]][4]
// CHECK: %[[UB:.*]] = llvm.getelementptr %[[T]][5]
// CHECK: %[[TRANSPOSED:.*]] = arith.constant 1 : i32
// CHECK: call @pfrt_kfac_precondition(%[[CTX]], %[[AI]], %[[BI]], %[[G]], %[[GB]], %[[TRANSPOSED]], %[[UW]], %[[UB]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr) -> i32

// -----

// precondition of [in, out] weights (weight_in_out: w_transposed = 0).
func.func @main(%g: tensor<3x2xf32>, %ai: tensor<3x3xf32>, %bi: tensor<2x2xf32>) -> tensor<3x2xf32> {
  %u = pf.kfac.precondition %g, %ai, %bi {weight_in_out} : (tensor<3x2xf32>, tensor<3x3xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  return %u : tensor<3x2xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK: %[[IN_OUT:.*]] = arith.constant 0 : i32
// CHECK: call @pfrt_kfac_precondition(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[IN_OUT]], %{{.*}}, %{{.*}})

// -----

// KL clipping: pfrt_dot into a stack slot (checked before it is read), then
// nu = min(1, sqrt(kappa / (lr^2 sum))) scales each update.
func.func @main(%lr: tensor<f64>, %u: tensor<2x3xf32>, %g: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = pf.kfac.kl_clip lr %lr : tensor<f64> updates(%u : tensor<2x3xf32>) gradients(%g : tensor<2x3xf32>) {kappa = 0.001 : f64} -> tensor<2x3xf32>
  return %c : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK: %[[SLOT:.*]] = llvm.alloca %{{.*}} x f64 : (i64) -> !llvm.ptr
// CHECK: %[[U:.*]] = llvm.getelementptr %[[T]][1]
// CHECK: %[[G:.*]] = llvm.getelementptr %[[T]][2]
// CHECK: %[[DOT:.*]] = call @pfrt_dot(%[[CTX]], %[[U]], %[[G]], %[[SLOT]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: cf.cond_br
// CHECK: llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: llvm.intr.sqrt
// CHECK: %[[NU:.*]] = arith.select
// CHECK: %[[C:.*]] = llvm.getelementptr %[[T]][3]
// CHECK: call @pfrt_scale(%[[CTX]], %[[U]], %[[NU]], %[[C]]) : (!llvm.ptr, !llvm.ptr, f64, !llvm.ptr) -> i32

// -----

// capture_output is a view: no kernel, its result aliases the input's buffer
// (copied into the output buffer at the end).
pf.param @B : tensor<3x3xf32>
func.func @main(%y: tensor<4x3xf32>, %step: tensor<i64>) -> tensor<4x3xf32> {
  %c = pf.kfac.capture_output %y into @B step %step : tensor<4x3xf32>, tensor<i64>
  return %c : tensor<4x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: (%[[CTX:[^:]*]]: !llvm.ptr, %[[T:[^:]*]]: !llvm.ptr) -> i64
// CHECK-SAME: tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [4, 3]>, #pf.tensor<buffer = 1, dtype = 7, shape = []>, #pf.tensor<buffer = 2, dtype = 1, shape = [3, 3]>, #pf.tensor<buffer = 0, dtype = 1, shape = [4, 3]>
// CHECK-NOT: call @pfrt_kfac
// CHECK: call @pfrt_copy
