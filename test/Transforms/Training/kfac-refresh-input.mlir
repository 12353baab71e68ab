// RUN: pf-opt %s --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="refresh-input=true kl-clip=0 graft=none" | FileCheck %s
// RUN: pf-opt %s --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="refresh-input=true kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: not pf-opt %s --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="refresh-input=true bubbles=true" 2>&1 | FileCheck %s --check-prefix=BUBBLES

// refresh-input: the host decides the refresh steps (pf-train's interval
// schedules). The step takes an i64 `kfac_refresh_due` and every refresh
// runs when it is non-zero, whatever refresh-every and refresh-warmup say.
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32> = dense<0.1> : tensor<5x4xf32>
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[DUE:[a-z0-9]+]]: tensor<i64> {pf.name = "kfac_refresh_due"}
// CHECK: pf.kfac.refresh_inverses({{.*}}) into ({{.*}}) step %{{.*}} due(%[[DUE]] : tensor<i64>)

// The due flag is read (pfrt_read_scalar) and decides the branch alone: no
// warm-up comparison with the step.
// LOWER-LABEL: func.func @pf_main
// LOWER: %[[DE:.*]] = llvm.getelementptr %arg1[2]
// LOWER: call @pfrt_read_scalar(%arg0, %[[DE]], %[[SLOT:[0-9a-z_]+]])
// LOWER-NOT: arith.cmpi sle
// LOWER: call @pfrt_kfac_damped_inverses

// BUBBLES: error: pf-kfac-precondition: refresh-input and bubbles both decide the refreshes: take one
