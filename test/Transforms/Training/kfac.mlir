// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" | FileCheck %s --check-prefix=INSERT
// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=4 damping=1e-3 refresh-warmup=0 kl-clip=0" | FileCheck %s --check-prefix=PRECOND
// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="damping=1e-3 refresh-warmup=0 kl-clip=0" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=3 refresh-warmup=20 damping=1e-3 kl-clip=0" | FileCheck %s --check-prefix=WARMUP
// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=3 refresh-warmup=20 damping=1e-3 kl-clip=0" --pf-lower-to-runtime | FileCheck %s --check-prefix=WARMUP-LOWER
// RUN: not pf-opt %s --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="refresh-warmup=-1" 2>&1 | FileCheck %s --check-prefix=WARMUP-BAD
// RUN: pf-opt %s --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="kl-clip=0.001 damping=1e-3 refresh-warmup=0" --pf-add-optimizer="optimizer=adamw kfac-optimizer=sgd kfac-lr-scale=10" | FileCheck %s --check-prefix=HYBRID
// RUN: not pf-opt %s --pf-kfac-precondition 2>&1 | FileCheck %s --check-prefix=NO-INSERT
// RUN: not pf-opt %s --pf-insert-kfac=decay=1.5 2>&1 | FileCheck %s --check-prefix=DECAY

pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
pf.param @"cls.predictions.transform.dense.weight" : tensor<5x5xf32>
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %h = pf.param_ref @"cls.predictions.transform.dense.weight" : tensor<5x5xf32>
  %z = pf.linear %y, %h {transpose_weight} : (tensor<6x5xf32>, tensor<5x5xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %z {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// Only the encoder block's linear gets factors; the head keeps its optimizer.
// INSERT-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {pf.kfac_bias = "bert.encoder.layer.0.dense.bias", pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
// INSERT-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B : tensor<5x5xf32>
// INSERT-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A_inv : tensor<4x4xf32>
// INSERT-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B_inv : tensor<5x5xf32>
// INSERT-NOT: cls.predictions.transform.dense.weight.kfac
// INSERT: func.func @main(%[[X:.*]]: tensor<6x4xf32> {pf.name = "x"}, %[[STEP:.*]]: tensor<i64> {pf.name = "step"})
// INSERT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %[[X]] step %[[STEP]]
// INSERT: %[[Y:.*]] = pf.linear %[[X]]
// INSERT: %[[C:.*]] = pf.kfac.capture_output %[[Y]] into @bert.encoder.layer.0.dense.weight.kfac.B step %[[STEP]] {scale = 3.600000e+01 : f64}
// INSERT: pf.linear %[[C]]


// The backward pass updates B from the output gradient; the gradients of the
// weight and the bias are preconditioned together.
// PRECOND: func.func @main({{.*}}) -> ({{.*}}{pf.name = "grad/bert.encoder.layer.0.dense.weight"}{{.*}}{pf.name = "kfac/issues"})
// PRECOND: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.B from
// PRECOND: %[[OUT:.*]] = pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A, @bert.encoder.layer.0.dense.weight.kfac.B) into (@bert.encoder.layer.0.dense.weight.kfac.A_inv, @bert.encoder.layer.0.dense.weight.kfac.B_inv) step %{{.*}} {every = 4 : i64}
// PRECOND: pf.kfac.precondition
// PRECOND: return {{.*}}, %[[OUT]] :

// Fresh inverses for the first 20 steps, then every 3.
// WARMUP: pf.kfac.refresh_inverses{{.*}}{every = 3 : i64, warmup = 20 : i64}
// WARMUP-LOWER: %[[PHASE:.*]] = arith.remsi %{{.*}}, %c3_i64
// WARMUP-LOWER: %[[DUE:.*]] = arith.cmpi eq, %[[PHASE]]
// WARMUP-LOWER: %[[EARLY:.*]] = arith.cmpi sle, %{{.*}}, %c20_i64 : i64
// WARMUP-LOWER: %[[EITHER:.*]] = arith.ori %[[DUE]], %[[EARLY]] : i1
// WARMUP-LOWER: cf.cond_br %[[EITHER]]
// WARMUP-LOWER: call @pfrt_kfac_damped_inverses
// WARMUP-BAD: refresh-every must be >= 1, retries, refresh-warmup and damping >= 0

// LOWER: call @pfrt_kfac_factor
// LOWER: call @pfrt_kfac_factor
// LOWER: arith.remsi
// LOWER: cf.cond_br
// LOWER: call @pfrt_kfac_damped_inverses
// LOWER: call @pfrt_kfac_precondition

// K-FAC layers take SGD at 10x the learning rate after KL-clipping; the head
// keeps AdamW.
// HYBRID: %[[CLIPPED:.*]]:2 = pf.kfac.kl_clip lr %[[LR:[a-z0-9]+]]
// HYBRID: %[[SCALED:.*]] = pf.mul %[[LR]], %{{.*}} : (tensor<f64>, tensor<f64>) -> tensor<f64>
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.weight momentum_buffer @bert.encoder.layer.0.dense.weight.momentum grad %[[CLIPPED]]#0 lr %[[SCALED]]
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.bias momentum_buffer {{.*}} grad %[[CLIPPED]]#1 lr %[[SCALED]]
// HYBRID-DAG: pf.adamw_update @cls.predictions.transform.dense.weight({{.*}}) grad %{{.*}} lr %[[LR]]

// NO-INSERT: no 'step' argument; run pf-insert-kfac first
// DECAY: decay must be in [0, 1), got 1.5
