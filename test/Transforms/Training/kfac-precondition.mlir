// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=4 damping=1e-3 refresh-warmup=0 kl-clip=0 graft=none" | FileCheck %s --check-prefix=PRECOND
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="damping=1e-3 refresh-warmup=0 kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=3 refresh-warmup=20 damping=1e-3 kl-clip=0 graft=none" | FileCheck %s --check-prefix=WARMUP
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="refresh-every=3 refresh-warmup=20 damping=1e-3 kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=WARMUP-LOWER
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="damping=0.01 retries=2 kl-clip=0.001 export-factors=true refresh-warmup=0 graft=none" | FileCheck %s --check-prefix=OPTS
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition | FileCheck %s --check-prefix=GRAFT
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="graft=gradient kl-clip=0" --pf-lower-to-runtime | FileCheck %s --check-prefix=GRAFT-LOWER
// RUN: not pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="graft=adam" 2>&1 | FileCheck %s --check-prefix=GRAFT-BAD
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="basis=eigen damping=0.01 kl-clip=0 graft=none export-factors=true" | FileCheck %s --check-prefix=EIGEN
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="basis=eigen kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=EIGEN-LOWER
// RUN: not pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="basis=eigen damping=0" 2>&1 | FileCheck %s --check-prefix=EIGEN-BAD
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="damping-input=true kl-clip=0 graft=none" | FileCheck %s --check-prefix=DAMPING-INPUT
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="damping-input=true basis=eigen damping=0 kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=DAMPING-INPUT-LOWER
// RUN: pf-opt %s -split-input-file --pf-insert-kfac --pf-build-gradients --pf-kfac-precondition="curvature-input=true kl-clip=0 graft=none" | FileCheck %s --check-prefix=CURVATURE-INPUT
// Errors: kfac-precondition-errors.mlir.

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

// The backward pass updates B from the output gradient; the gradients of the
// weight and the bias are preconditioned together.
// PRECOND-LABEL: func.func @main({{.*}}) -> ({{.*}}{pf.name = "grad/bert.encoder.layer.0.dense.weight"}{{.*}}{pf.name = "kfac/issues"})
// PRECOND: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.B from
// PRECOND: %[[OUT:.*]] = pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A, @bert.encoder.layer.0.dense.weight.kfac.B) into (@bert.encoder.layer.0.dense.weight.kfac.A_inv, @bert.encoder.layer.0.dense.weight.kfac.B_inv) step %{{.*}} {every = 4 : i64}
// PRECOND: pf.kfac.precondition
// PRECOND: return {{.*}}, %[[OUT]] :

// Fresh inverses for the first 20 steps, then every 3.
// WARMUP-LABEL: func.func @main(
// WARMUP: pf.kfac.refresh_inverses{{.*}}{every = 3 : i64, warmup = 20 : i64}
// WARMUP-LOWER: %[[PHASE:.*]] = arith.remsi %{{.*}}, %c3_i64
// WARMUP-LOWER: %[[DUE:.*]] = arith.cmpi eq, %[[PHASE]]
// WARMUP-LOWER: %[[EARLY:.*]] = arith.cmpi sle, %{{.*}}, %c20_i64 : i64
// WARMUP-LOWER: %[[EITHER:.*]] = arith.ori %[[DUE]], %[[EARLY]] : i1
// WARMUP-LOWER: cf.cond_br %[[EITHER]]
// WARMUP-LOWER: call @pfrt_kfac_damped_inverses

// LOWER: call @pfrt_kfac_factor
// LOWER: call @pfrt_kfac_factor
// LOWER: arith.remsi
// LOWER: cf.cond_br
// LOWER: call @pfrt_kfac_damped_inverses
// LOWER: call @pfrt_kfac_precondition

// The damping and retries go to the refresh; KL-clipping bounds the weight
// and bias updates together by the learning rate (a new lr argument); the
// factors and inverses are exported as results after kfac/issues.
// OPTS-LABEL: func.func @main(
// OPTS-SAME: %{{.*}}: tensor<i64> {pf.name = "step"}, %[[LR:.*]]: tensor<f64> {pf.name = "lr"})
// OPTS-SAME: {pf.name = "kfac/issues"}, tensor<4x4xf32> {pf.name = "kfac/A/bert.encoder.layer.0.dense.weight"}, tensor<5x5xf32> {pf.name = "kfac/B/bert.encoder.layer.0.dense.weight"}, tensor<4x4xf32> {pf.name = "kfac/A_inv/bert.encoder.layer.0.dense.weight"}, tensor<5x5xf32> {pf.name = "kfac/B_inv/bert.encoder.layer.0.dense.weight"})
// OPTS: %[[ISSUES:.*]] = pf.kfac.refresh_inverses({{.*}}) into ({{.*}}) step %{{.*}} {damping = 1.000000e-02 : f64, retries = 2 : i64}
// OPTS: %[[U:.*]], %[[V:.*]] = pf.kfac.precondition %[[GW:[0-9]+]], %{{.*}}, %{{.*}}, %[[GB:[0-9]+]] :
// OPTS-DAG: %[[A:.*]] = pf.param_ref @bert.encoder.layer.0.dense.weight.kfac.A :
// OPTS-DAG: %[[B:.*]] = pf.param_ref @bert.encoder.layer.0.dense.weight.kfac.B :
// OPTS: %[[CLIP:.*]]:2 = pf.kfac.kl_clip lr %[[LR]] : tensor<f64> updates(%[[U]], %[[V]] : {{.*}}) gradients(%[[GW]], %[[GB]] : {{.*}}) {kappa = 1.000000e-03 : f64}
// OPTS: return %{{.*}}, %[[CLIP]]#0, %[[CLIP]]#1, %{{.*}}, %[[ISSUES]], %[[A]], %[[B]], %{{.*}}, %{{.*}} :

// Grafting (the default, graft=auto: gradient in the pass alone): the
// layer's weight and bias updates rescaled together to their gradients'
// norm, before the KL-clip.
// GRAFT-LABEL: func.func @main(
// GRAFT: %[[U:.*]], %[[V:.*]] = pf.kfac.precondition %[[GW:[0-9]+]], %{{.*}}, %{{.*}}, %[[GB:[0-9]+]] :
// GRAFT-NEXT: %[[G:.*]]:2 = pf.kfac.graft updates(%[[U]], %[[V]] : tensor<5x4xf32>, tensor<5xf32>) gradients(%[[GW]], %[[GB]] : tensor<5x4xf32>, tensor<5xf32>) -> tensor<5x4xf32>, tensor<5xf32>
// GRAFT: pf.kfac.kl_clip lr %{{.*}} : tensor<f64> updates(%[[G]]#0, %[[G]]#1 :
// Lowered: ‖u‖² and ‖g‖² by pfrt_dot, s = sqrt(g/u) (1 when u = 0), pfrt_scale.
// GRAFT-LOWER-LABEL: func.func @pf_main(
// GRAFT-LOWER: call @pfrt_kfac_precondition
// GRAFT-LOWER-COUNT-4: call @pfrt_dot
// GRAFT-LOWER: %[[RATIO:.*]] = arith.divf
// GRAFT-LOWER: %[[ROOT:.*]] = llvm.intr.sqrt(%[[RATIO]])
// GRAFT-LOWER: %[[ZERO:.*]] = arith.cmpf oeq
// GRAFT-LOWER: %[[S:.*]] = arith.select %[[ZERO]], %{{.*}}, %[[ROOT]]
// GRAFT-LOWER-COUNT-2: call @pfrt_scale({{.*}}%[[S]]
// GRAFT-BAD: graft must be auto, none or gradient, got 'adam'

// The eigenbasis: the inverses give way to eigenvectors and eigenvalues of
// each factor, refreshed by an eigendecomposition; the damping goes to the
// preconditioning (on the Kronecker product's eigenvalues).
// EIGEN-NOT: kfac.A_inv
// EIGEN-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A_vectors : tensor<4x4xf32> = dense<0.000000e+00>
// EIGEN-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A_values : tensor<4xf32> = dense<0.000000e+00>
// EIGEN-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B_vectors : tensor<5x5xf32>
// EIGEN-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B_values : tensor<5xf32>
// EIGEN-LABEL: func.func @main(
// EIGEN-SAME: tensor<4x4xf32> {pf.name = "kfac/A_vectors/bert.encoder.layer.0.dense.weight"}, tensor<4xf32> {pf.name = "kfac/A_values/bert.encoder.layer.0.dense.weight"}, tensor<5x5xf32> {pf.name = "kfac/B_vectors/bert.encoder.layer.0.dense.weight"}, tensor<5xf32> {pf.name = "kfac/B_values/bert.encoder.layer.0.dense.weight"})
// EIGEN: pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A, @bert.encoder.layer.0.dense.weight.kfac.B) into (@bert.encoder.layer.0.dense.weight.kfac.A_vectors, @bert.encoder.layer.0.dense.weight.kfac.B_vectors) values (@bert.encoder.layer.0.dense.weight.kfac.A_values, @bert.encoder.layer.0.dense.weight.kfac.B_values)
// EIGEN: %[[D:.*]] = pf.constant dense<1.000000e-02> : tensor<f64>
// EIGEN: pf.kfac.precondition_eigen %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %{{.*}} : (tensor<5x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<5x5xf32>, tensor<5xf32>, tensor<f64>, tensor<5xf32>) -> (tensor<5x4xf32>, tensor<5xf32>)
// EIGEN-NOT: pf.kfac.precondition %
// EIGEN-LOWER-LABEL: func.func @pf_main(
// EIGEN-LOWER: call @pfrt_kfac_eigen_refresh
// EIGEN-LOWER: call @pfrt_kfac_precondition_eigen
// EIGEN-LOWER-NOT: call @pfrt_kfac_damped_inverses
// EIGEN-BAD: basis=eigen needs damping > 0

// The host's per-step λ (a damping schedule): an f64 argument kfac_damping
// that the refresh (and the eigen preconditioning) read instead of the option.
// curvature-input=true (pf-train --kfac-factor-every): every factor update
// runs only when the kfac_curvature argument is non-zero.
// CURVATURE-INPUT-LABEL: func.func @main(
// CURVATURE-INPUT-SAME: %[[DUE:[a-z0-9_]+]]: tensor<i64> {pf.name = "kfac_curvature"})
// CURVATURE-INPUT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %{{.*}} step %{{.*}} due(%[[DUE]] : tensor<i64>)
// CURVATURE-INPUT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.B from %{{.*}} step %{{.*}} due(%[[DUE]] : tensor<i64>)
// DAMPING-INPUT-LABEL: func.func @main(
// DAMPING-INPUT-SAME: %[[D:[a-z0-9_]+]]: tensor<f64> {pf.name = "kfac_damping"})
// DAMPING-INPUT: pf.kfac.refresh_inverses({{.*}}) into ({{.*}}) step %{{.*}} damping(%[[D]] : tensor<f64>)
// The damping input (table entry 2) is read once, at the start.
// DAMPING-INPUT-LOWER-LABEL: func.func @pf_main(
// DAMPING-INPUT-LOWER: %[[DE:.*]] = llvm.getelementptr %arg1[2]
// DAMPING-INPUT-LOWER: call @pfrt_read_scalar(%arg0, %[[DE]], %[[SLOT:[0-9a-z_]+]])
// DAMPING-INPUT-LOWER: %[[L:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// DAMPING-INPUT-LOWER: call @pfrt_kfac_eigen_refresh
// DAMPING-INPUT-LOWER: call @pfrt_kfac_precondition_eigen({{.*}}, %[[L]],

// -----

// Two K-FAC layers, the first without a bias: its weight gradient alone is
// preconditioned; the refresh outcomes of both layers add up in kfac/issues.
// PRECOND-LABEL: func.func @two_layers(
// PRECOND-SAME: -> (tensor<f32> {pf.name = "objective"}, tensor<4x4xf32> {pf.name = "grad/bert.encoder.layer.0.q.weight"}, tensor<4x4xf32> {pf.name = "grad/bert.encoder.layer.1.q.weight"}, tensor<4xf32> {pf.name = "grad/bert.encoder.layer.1.q.bias"}, tensor<i32> {pf.name = "kfac/issues"})
// PRECOND: %[[R0:.*]] = pf.kfac.refresh_inverses(@bert.encoder.layer.0.q.weight.kfac.A, @bert.encoder.layer.0.q.weight.kfac.B)
// PRECOND: %[[P0:.*]] = pf.kfac.precondition %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PRECOND: %[[R1:.*]] = pf.kfac.refresh_inverses(@bert.encoder.layer.1.q.weight.kfac.A, @bert.encoder.layer.1.q.weight.kfac.B)
// PRECOND: %[[SUM:.*]] = pf.add %[[R0]], %[[R1]] : (tensor<i32>, tensor<i32>) -> tensor<i32>
// PRECOND: %[[W1:.*]], %[[B1:.*]] = pf.kfac.precondition
// PRECOND: return %{{.*}}, %[[P0]], %[[W1]], %[[B1]], %[[SUM]] :
// GRAFT-LABEL: func.func @two_layers(
// GRAFT: pf.kfac.graft updates(%{{.*}} : tensor<4x4xf32>) gradients(%{{.*}} : tensor<4x4xf32>) -> tensor<4x4xf32>
// GRAFT: pf.kfac.graft updates(%{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4xf32>) gradients(
// OPTS-LABEL: func.func @two_layers(
// OPTS: pf.kfac.kl_clip lr %{{.*}} : tensor<f64> updates(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>)
pf.param @"bert.encoder.layer.0.q.weight" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.q.weight" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.q.bias" : tensor<4xf32>
func.func @two_layers(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w0 = pf.param_ref @"bert.encoder.layer.0.q.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.q.weight" : tensor<4x4xf32>
  %b1 = pf.param_ref @"bert.encoder.layer.1.q.bias" : tensor<4xf32>
  %z = pf.linear %y, %w1, %b1 {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %s = pf.reduce_sum %z {keepdims = false} : (tensor<6x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
