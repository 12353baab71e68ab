// RUN: pf-opt %s -split-input-file --pf-training="kfac=true micro-batches=2 optimizer=sgd kfac-refresh=3 clip-norm=0 kfac-damping=1e-3 kfac-decay=0.95 kfac-refresh-warmup=0 kfac-kl-clip=0" | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-training="clip-norm=0 kfac-damping=1e-3 kfac-decay=0.95 kfac-refresh-warmup=0 kfac-kl-clip=0" | FileCheck %s --check-prefix=PLAIN
// RUN: pf-opt %s -split-input-file --pf-training="kfac=true clip-norm=1 micro-batches=2 kfac-damping=1e-3 kfac-decay=0.95 kfac-refresh-warmup=0 kfac-kl-clip=0" | FileCheck %s --check-prefix=CLIP

pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
func.func @main(%x: tensor<2x3x4xf32> {pf.name = "x"}) -> (tensor<2x3x5xf32> {pf.name = "logits"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// One step over two micro-batches: loss, K-FAC factors per micro-batch,
// gradients, preconditioning, SGD in place.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %{{.*}}: tensor<4x3x4xf32> {pf.name = "x"}, %{{.*}}: tensor<4x3xi64> {pf.name = "labels"}, %{{.*}}: tensor<i64> {pf.name = "step"}, %{{.*}}: tensor<f64> {pf.name = "lr"}) -> (tensor<f32> {pf.name = "loss"}, tensor<i32> {pf.name = "kfac/issues"}) attributes {pf.microbatches = 2 : i64}
// CHECK-COUNT-2: pf.softmax_cross_entropy
// CHECK: pf.kfac.refresh_inverses{{.*}}{every = 3 : i64}
// CHECK: pf.kfac.precondition
// CHECK: pf.sgd_update
// CHECK: pf.sgd_update

// PLAIN-LABEL: func.func @main(
// PLAIN-SAME: %{{.*}}: tensor<2x3x4xf32> {pf.name = "x"}
// PLAIN-NOT: pf.kfac
// PLAIN: pf.adamw_update

// The gradients summed over the micro-batches are clipped before they are
// preconditioned.
// CLIP-LABEL: func.func @main(
// CLIP: pf.softmax_cross_entropy
// CLIP: pf.softmax_cross_entropy
// CLIP: %[[C:.*]]:2 = pf.clip_by_global_norm
// CLIP: pf.kfac.precondition %[[C]]#0, %{{.*}}, %{{.*}}, %[[C]]#1
