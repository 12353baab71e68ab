// RUN: pf-opt %s -split-input-file --pf-split-microbatches=microbatches=3 | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-split-microbatches=microbatches=2 --pf-insert-kfac="decay=0.95" --pf-build-gradients | FileCheck %s --check-prefix=KFAC
// RUN: pf-opt %s -split-input-file --pf-split-microbatches=microbatches=2 --pf-insert-kfac="decay=0.95" | FileCheck %s --check-prefix=KFAC-COUNT --implicit-check-not="kfac.A :"
// RUN: pf-opt %s -split-input-file --pf-split-microbatches=microbatches=2 --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="damping=1e-3 refresh-warmup=0 kl-clip=0" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: pf-opt %s -split-input-file --pf-split-microbatches=microbatches=1 | FileCheck %s --check-prefix=ONE
// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-split-microbatches=microbatches=2 | FileCheck %s --check-prefix=GRADS

pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
func.func @main(%x: tensor<2x3x4xf32> {pf.name = "x"}, %labels: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3x5xf32>, tensor<i64>)
  return %loss : tensor<f32>
}

// The batch arguments grow threefold and are sliced into micro-batches; the
// body runs once per slice; the loss is the count-weighted mean, summed as
// the micro-batches go.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<6x3x4xf32> {pf.name = "x"}, %[[L:.*]]: tensor<6x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) attributes {pf.microbatches = 3 : i64}
// CHECK-DAG: %[[X0:.*]] = pf.slice %[[X]], {{.*}} -> tensor<2x3x4xf32>
// CHECK-DAG: %[[X1:.*]] = pf.slice %[[X]], {{.*}} -> tensor<2x3x4xf32>
// CHECK-DAG: %[[X2:.*]] = pf.slice %[[X]], {{.*}} -> tensor<2x3x4xf32>
// CHECK-DAG: %[[L0:.*]] = pf.slice %[[L]], {{.*}} -> tensor<2x3xi64>
// CHECK-DAG: %[[L1:.*]] = pf.slice %[[L]], {{.*}} -> tensor<2x3xi64>
// CHECK-DAG: %[[L2:.*]] = pf.slice %[[L]], {{.*}} -> tensor<2x3xi64>
// CHECK: %[[Y0:.*]] = pf.linear %[[X0]]
// CHECK: %[[LOSS0:.*]], %{{.*}}, %[[C0:.*]] = pf.softmax_cross_entropy %[[Y0]], %[[L0]]
// CHECK: %[[W0:.*]] = pf.cast %[[C0]]
// CHECK: %[[T0:.*]] = pf.mul %[[LOSS0]], %[[W0]]
// CHECK: %[[Y1:.*]] = pf.linear %[[X1]]
// CHECK: %[[LOSS1:.*]], %{{.*}}, %[[C1:.*]] = pf.softmax_cross_entropy %[[Y1]], %[[L1]]
// CHECK: %[[W1:.*]] = pf.cast %[[C1]]
// CHECK: %[[T1:.*]] = pf.mul %[[LOSS1]], %[[W1]]
// CHECK: pf.add %[[T0]], %[[T1]]
// CHECK: %[[Y2:.*]] = pf.linear %[[X2]]
// CHECK: pf.softmax_cross_entropy %[[Y2]], %[[L2]]
// CHECK: pf.where
// CHECK: %[[MEAN:.*]] = pf.div
// CHECK: return %[[MEAN]] : tensor<f32>

// One set of factors, updated once per micro-batch; B is scaled by the sum of
// the micro-batches' token counts.
// KFAC-COUNT: pf.param @bert.encoder.layer.0.dense.weight.kfac.A :
// KFAC: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from
// KFAC: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from
// KFAC: pf.mul %grad_logits_1
// KFAC-NEXT: %[[TOTAL:.*]] = pf.add %count, %count_2 : (tensor<i64>, tensor<i64>) -> tensor<i64>
// KFAC-NEXT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.B from {{.*}} count %[[TOTAL]]
// KFAC: %[[TOTAL2:.*]] = pf.add %count, %count_2 : (tensor<i64>, tensor<i64>) -> tensor<i64>
// KFAC-NEXT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.B from {{.*}} count %[[TOTAL2]]

// The first update of a factor decays it (mode select), the second adds to it.
// LOWER: arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// LOWER: call @pfrt_kfac_factor
// LOWER: call @pfrt_kfac_factor

// ONE-LABEL: func.func @main(%{{.*}}: tensor<2x3x4xf32> {pf.name = "x"}
// ONE-NOT: pf.slice

// After pf-build-gradients: each micro-batch's backward follows its forward,
// count_m·grad_m joins a running sum right there, and the sums are divided
// by the total count at the end.
// GRADS-LABEL: func.func @main({{.*}}) -> (tensor<f32> {pf.name = "loss"}, tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"})
// GRADS: %loss, %grad_logits, %count = pf.softmax_cross_entropy
// GRADS: %[[G0:.*]] = pf.gemm
// GRADS: %[[C0:.*]] = pf.cast %count
// GRADS: %[[T0:.*]] = pf.mul %[[G0]], %[[C0]]
// GRADS: %loss_0, %grad_logits_1, %count_2 = pf.softmax_cross_entropy
// GRADS: %[[G1:.*]] = pf.gemm
// GRADS: %[[C1:.*]] = pf.cast %count_2
// GRADS: %[[T1:.*]] = pf.mul %[[G1]], %[[C1]]
// GRADS: %[[SUM:.*]] = pf.add %[[T0]], %[[T1]]
// GRADS: %[[TOTAL:.*]] = pf.add %count, %count_2
// GRADS: %[[SAFE:.*]] = pf.where %{{.*}}, %{{.*}}, %[[TOTAL]]
// GRADS: %[[DEN:.*]] = pf.cast %[[SAFE]]
// GRADS: %[[LOSS:.*]] = pf.div %{{.*}}, %[[DEN]] : (tensor<f32>, tensor<f32>)
// GRADS: %[[GRAD:.*]] = pf.div %[[SUM]], %{{.*}} : (tensor<5x4xf32>, tensor<f32>)
// GRADS: return %[[LOSS]], %[[GRAD]]

// -----

// Outputs other than the loss and gradients are concatenated along the batch;
// a scalar argument is no batch and is shared by the micro-batches.
// CHECK-LABEL: func.func @with_logits(
// CHECK-SAME: %[[X:.*]]: tensor<6x4xf32> {pf.name = "x"}, %{{.*}}: tensor<6xi64> {pf.name = "labels"}, %[[T:.*]]: tensor<f32> {pf.name = "temperature"}) -> (tensor<f32> {pf.name = "loss"}, tensor<6x5xf32> {pf.name = "logits"})
// CHECK-COUNT-3: pf.mul %{{.*}}, %[[T]] : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
// CHECK: %[[Z:.*]] = pf.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<6x5xf32>
// CHECK: return %{{.*}}, %[[Z]] : tensor<f32>, tensor<6x5xf32>
// KFAC-COUNT: pf.param @bert.encoder.layer.0.dense.weight.kfac.A :
// ONE-LABEL: func.func @with_logits(
// ONE-SAME: %{{.*}}: tensor<2x4xf32> {pf.name = "x"}
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
func.func @with_logits(%x: tensor<2x4xf32> {pf.name = "x"}, %labels: tensor<2xi64> {pf.name = "labels"}, %t: tensor<f32> {pf.name = "temperature"}) -> (tensor<f32> {pf.name = "loss"}, tensor<2x5xf32> {pf.name = "logits"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  %z = pf.mul %y, %t : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %loss, %grad, %count = pf.softmax_cross_entropy %z, %labels : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
  return %loss, %z : tensor<f32>, tensor<2x5xf32>
}
