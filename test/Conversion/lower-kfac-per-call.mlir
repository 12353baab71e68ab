// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime --verify-diagnostics | FileCheck %s

// A per-call update (a pipeline stage function, one call per micro-batch):
// the micro-batch, read at run time, chooses between the first update's mode
// and scale (running average, or overwrite at step 1; scale·1/updates) and
// the later ones' (accumulate; ·(1 − decay) after step 1) — the constants of
// `updates` updates in one function. scale 2, updates 4, decay 0.5: 0.5 and
// 0.25.
pf.param @F : tensor<3x3xf32>
func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>, %m: tensor<i64>) {
  pf.kfac.update_factor @F from %x step %step microbatch(%m : tensor<i64>) {scale = 2.0 : f64, decay = 0.5 : f64, updates = 4 : i64} : tensor<4x3xf32>, tensor<i64>
  return
}
// CHECK: %[[ME:.*]] = llvm.getelementptr %arg1[2]
// CHECK: call @pfrt_read_scalar(%arg0, %[[ME]], %[[SLOT:[0-9a-z_]+]])
// CHECK: %[[MF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK-DAG: %[[HALF:.*]] = arith.constant 5.000000e-01 : f64
// CHECK-DAG: %[[QUARTER:.*]] = arith.constant 2.500000e-01 : f64
// CHECK: %[[LATER:.*]] = arith.select %{{.*}}, %[[HALF]], %[[QUARTER]] : f64
// CHECK: %[[M:.*]] = arith.fptosi %[[MF]] : f64 to i64
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[M]], %{{.*}} : i64
// CHECK: %[[MODE:.*]] = arith.select %[[FIRST]], %{{.*}}, %{{.*}} : i32
// CHECK: %[[SCALE:.*]] = arith.select %[[FIRST]], %[[HALF]], %[[LATER]] : f64
// CHECK: call @pfrt_kfac_factor(%{{.*}}, %{{.*}}, %[[SCALE]], %[[MODE]], %{{.*}}, %{{.*}})

// -----

// A per-call update must be its factor's only one in the function.
pf.param @F : tensor<3x3xf32>
func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>, %m: tensor<i64>) {
  // expected-error @below {{factor 'F' has 2 updates in one function, one of them per micro-batch call}}
  pf.kfac.update_factor @F from %x step %step microbatch(%m : tensor<i64>) {updates = 2 : i64} : tensor<4x3xf32>, tensor<i64>
  pf.kfac.update_factor @F from %x step %step : tensor<4x3xf32>, tensor<i64>
  return
}

// -----

// `updates` counts per-call updates: without a microbatch it is an error.
pf.param @F : tensor<3x3xf32>
func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>) {
  // expected-error @below {{updates 2 needs a microbatch operand (one update per call)}}
  pf.kfac.update_factor @F from %x step %step {updates = 2 : i64} : tensor<4x3xf32>, tensor<i64>
  return
}
