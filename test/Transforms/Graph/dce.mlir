// RUN: pf-opt %s -split-input-file --pf-dce | FileCheck %s

// Parameters that something still reads stay, in order; unread ones go,
// including those read only by dead ops.
// CHECK: pf.param @used : tensor<4xf32>
// CHECK-NEXT: pf.param @used_elsewhere : tensor<4xf32>
// CHECK-NOT: pf.param @
pf.param @used : tensor<4xf32>
pf.param @unread : tensor<4xf32>
pf.param @read_by_dead_op : tensor<4x4xf32>
pf.param @used_elsewhere : tensor<4xf32>

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[W:.*]] = pf.param_ref @used
// CHECK-NEXT: %[[Y:.*]] = pf.add %[[X]], %[[W]]
// CHECK-NEXT: return %[[Y]]
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = pf.param_ref @used : tensor<4xf32>
  %d = pf.param_ref @read_by_dead_op : tensor<4x4xf32>
  %dead = pf.matmul %d, %x : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dead2 = pf.exp %dead : (tensor<4xf32>) -> tensor<4xf32>
  %c = pf.constant dense<1.0> : tensor<4xf32>
  %y = pf.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// CHECK-LABEL: func.func @other(
// CHECK-NEXT: pf.param_ref @used_elsewhere
// CHECK-NEXT: return
func.func @other() -> tensor<4xf32> {
  %w = pf.param_ref @used_elsewhere : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// An in-place update has no results but writes its parameter: it stays, and
// so do the gradient it reads and the parameters it names. The unused read of
// @w and the pure op on it go.
// CHECK: pf.param @w : tensor<4xf32>
// CHECK-NEXT: pf.param @w.momentum : tensor<4xf32>
// CHECK-NOT: pf.param @
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[G:.*]]: tensor<4xf32>, %[[LR:.*]]: tensor<f64>)
// CHECK-NEXT: pf.sgd_update @w momentum_buffer @w.momentum grad %[[G]] lr %[[LR]]
// CHECK-NEXT: return
pf.param @w : tensor<4xf32>
pf.param @w.momentum : tensor<4xf32>
pf.param @stale : tensor<4xf32>
func.func @step(%g: tensor<4xf32>, %lr: tensor<f64>) {
  %w = pf.param_ref @w : tensor<4xf32>
  %s = pf.param_ref @stale : tensor<4xf32>
  %dead = pf.add %w, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  pf.sgd_update @w momentum_buffer @w.momentum grad %g lr %lr : tensor<4xf32>, tensor<f64>
  return
}
