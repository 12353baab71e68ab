// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-clip-gradients=max-norm=0.5 | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-clip-gradients --pf-kfac-precondition="damping=1e-3 refresh-warmup=0 kl-clip=0" | FileCheck %s --check-prefix=KFAC
// RUN: pf-opt %s -split-input-file --pf-build-gradients=wrt=all --pf-clip-gradients=max-norm=2 | FileCheck %s --check-prefix=ALL
// Errors: clip-gradients-errors.mlir.

pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// Both parameter gradients are clipped together.
// CHECK-LABEL: func.func @main(
// CHECK: %[[C:.*]]:2 = pf.clip_by_global_norm %{{.*}}, %{{.*}} {max_norm = 5.000000e-01 : f64} : tensor<5x4xf32>, tensor<5xf32>
// CHECK: return %{{.*}}, %[[C]]#0, %[[C]]#1

// The true gradients are clipped, then preconditioned.
// KFAC-LABEL: func.func @main(
// KFAC: %[[C:.*]]:2 = pf.clip_by_global_norm
// KFAC: pf.kfac.precondition %[[C]]#0, %{{.*}}, %{{.*}}, %[[C]]#1

// The gradient of an input is no parameter's: it is returned unclipped.
// ALL-LABEL: func.func @main(
// ALL-SAME: -> (tensor<f32> {pf.name = "objective"}, tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<5xf32> {pf.name = "grad/bert.encoder.layer.0.dense.bias"}, tensor<6x4xf32> {pf.name = "grad/x"})
// ALL: %[[DX:.*]] = pf.linear %{{.*}}, %{{.*}} : (tensor<6x5xf32>, tensor<5x4xf32>) -> tensor<6x4xf32>
// ALL: %[[C:.*]]:2 = pf.clip_by_global_norm %{{.*}}, %{{.*}} {max_norm = 2.000000e+00 : f64} : tensor<5x4xf32>, tensor<5xf32>
// ALL: return %{{.*}}, %[[C]]#0, %[[C]]#1, %[[DX]] :
