// RUN: pf-opt %s --pf-add-masked-lm-loss="predictions=2" | FileCheck %s
// RUN: pf-opt %s --pf-add-masked-lm-loss="predictions=2" --pf-build-gradients | FileCheck %s --check-prefix=GRAD
// RUN: not pf-opt %s --pf-add-masked-lm-loss="predictions=5" 2>&1 | FileCheck %s --check-prefix=LONG
// RUN: not pf-opt %s --pf-add-masked-lm-loss="predictions=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not pf-opt %s --pf-add-masked-lm-loss="predictions=2 keep-outputs=true" 2>&1 | FileCheck %s --check-prefix=KEEP

// predictions=P: the decoder (the pf.linear making the logits) runs only on
// its input at the mlm_positions argument [batch, P]; the labels are
// [batch, P]; the full decoder is gone.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[H:.*]]: tensor<2x4x3xf32> {pf.name = "hidden"}, %[[POS:.*]]: tensor<2x2xi64> {pf.name = "mlm_positions"}, %[[L:.*]]: tensor<2x2xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"})
// CHECK: %[[D:.*]] = pf.linear %[[H]]
// CHECK: %[[T:.*]] = pf.tanh %[[D]]
// CHECK: %[[IDX:.*]] = pf.unsqueeze %[[POS]] {axes = array<i64: 2>} : (tensor<2x2xi64>) -> tensor<2x2x1xi64>
// CHECK: %[[ROWS:.*]] = pf.gather_nd %[[T]], %[[IDX]] {batch_dims = 1 : i64} : (tensor<2x4x3xf32>, tensor<2x2x1xi64>) -> tensor<2x2x3xf32>
// CHECK: %[[LOGITS:.*]] = pf.linear %[[ROWS]], %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x2x3xf32>, tensor<7x3xf32>, tensor<7xf32>) -> tensor<2x2x7xf32>
// CHECK-NOT: pf.linear
// CHECK-NOT: tensor<2x4x7xf32>
// CHECK: pf.softmax_cross_entropy %[[LOGITS]], %[[L]] : (tensor<2x2x7xf32>, tensor<2x2xi64>)
// The decoder's input gets its gradient back by a scatter-add at the positions.
// GRAD: pf.scatter_nd %{{.*}} reduction add
// LONG: error: pf-add-masked-lm-loss: predictions=5 exceeds the sequence length 4
// NEGATIVE: error: pf-add-masked-lm-loss: predictions must be >= 0, got -1
// KEEP: error: pf-add-masked-lm-loss: predictions=2 does not go with keep-outputs (the full logits are not computed)
pf.param @dense.weight : tensor<3x3xf32>
pf.param @decoder.weight : tensor<7x3xf32>
pf.param @decoder.bias : tensor<7xf32>
func.func @main(%h: tensor<2x4x3xf32> {pf.name = "hidden"}) -> (tensor<2x4x7xf32> {pf.name = "logits"}) {
  %dw = pf.param_ref @dense.weight : tensor<3x3xf32>
  %d = pf.linear %h, %dw {transpose_weight} : (tensor<2x4x3xf32>, tensor<3x3xf32>) -> tensor<2x4x3xf32>
  %t = pf.tanh %d : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %w = pf.param_ref @decoder.weight : tensor<7x3xf32>
  %b = pf.param_ref @decoder.bias : tensor<7xf32>
  %y = pf.linear %t, %w, %b {transpose_weight} : (tensor<2x4x3xf32>, tensor<7x3xf32>, tensor<7xf32>) -> tensor<2x4x7xf32>
  return %y : tensor<2x4x7xf32>
}
