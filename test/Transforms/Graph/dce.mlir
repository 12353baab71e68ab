// RUN: pf-opt %s --pf-dce | FileCheck %s

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
