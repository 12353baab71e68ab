// LayerNorm K-FAC: pf-insert-kfac layer-norm=blocks|diagonal adds the
// factor <scale>.kfac.F ([h, 3] or [h, 2]) and a pf.kfac.capture_layer_norm
// on the LayerNorm's output, whose gradient rule updates F from the
// LayerNorm's input and output gradient; pf-kfac-precondition solves each
// feature's damped block; the lowering calls the two runtime kernels.
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=blocks | FileCheck %s --check-prefix=INSERT
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=diagonal | FileCheck %s --check-prefix=DIAG
// ONNX's default axis -1 names the same last dimension:
// RUN: sed 's/axis = 1 : i64/axis = -1 : i64/' %s | pf-opt --pf-insert-kfac=layer-norm=blocks | FileCheck %s --check-prefix=INSERT
// RUN: pf-opt %s --pf-insert-kfac | FileCheck %s --check-prefix=OFF
// RUN: not pf-opt %s --pf-insert-kfac="layer-norm=blocks skip=LayerNorm" 2>&1 | FileCheck %s --check-prefix=SKIP
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=blocks --pf-build-gradients | FileCheck %s --check-prefix=GRAD
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=blocks --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0 export-factors=true" | FileCheck %s --check-prefix=PRECOND
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=blocks --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0.001 graft=none curvature-input=true" | FileCheck %s --check-prefix=CURVATURE
// RUN: pf-opt %s --pf-insert-kfac=layer-norm=diagonal --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: not pf-opt %s --pf-insert-kfac=layer-norm=full 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pf-opt %s --pf-insert-kfac=layer-norm=blocks --pf-build-gradients --pf-kfac-precondition=bubbles=true 2>&1 | FileCheck %s --check-prefix=BUBBLES

// INSERT: pf.param @bert.encoder.layer.0.LayerNorm.weight.kfac.F : tensor<4x3xf32> = dense<0.000000e+00> : tensor<4x3xf32> {pf.kfac_bias = "bert.encoder.layer.0.LayerNorm.bias", pf.kfac_weight = "bert.encoder.layer.0.LayerNorm.weight"}
// INSERT-LABEL: func.func @main(
// INSERT: %[[IN:.*]] = pf.kfac.capture_output
// INSERT: %[[Z:.*]] = pf.layer_norm %[[IN]]
// INSERT: %[[C:.*]] = pf.kfac.capture_layer_norm %[[Z]] of %[[IN]] into @bert.encoder.layer.0.LayerNorm.weight.kfac.F step %{{.*}} {decay = 5.000000e-01 : f64, epsilon = 9.9999997473787516E-6 : f64, scale = 3.600000e+01 : f64}
// INSERT: pf.reduce_sum %[[C]]
// DIAG: pf.param @bert.encoder.layer.0.LayerNorm.weight.kfac.F : tensor<4x2xf32>
// OFF-NOT: kfac.F
// OFF-NOT: capture_layer_norm

// GRAD: %[[IN:.*]] = pf.kfac.capture_output
// GRAD: pf.kfac.update_layer_norm_factor @bert.encoder.layer.0.LayerNorm.weight.kfac.F from %[[IN]], %{{.*}} step %{{.*}} {decay = 5.000000e-01 : f64, epsilon = 9.9999997473787516E-6 : f64, scale = 3.600000e+01 : f64} : tensor<6x4xf32>, tensor<6x4xf32>, tensor<i64>
// GRAD: pf.layer_norm_grad

// PRECOND: tensor<4x3xf32> {pf.name = "kfac/F/bert.encoder.layer.0.LayerNorm.weight"}
// PRECOND: %[[F:.*]] = pf.param_ref @bert.encoder.layer.0.LayerNorm.weight.kfac.F : tensor<4x3xf32>
// PRECOND: %[[S:.*]], %[[B:.*]] = pf.kfac.precondition_layer_norm %[[F]], %{{.*}}, %[[GS:.*]], %[[GB:.*]] : (tensor<4x3xf32>, tensor<f64>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// PRECOND: %[[G:.*]]:2 = pf.kfac.graft updates(%[[S]], %[[B]] : tensor<4xf32>, tensor<4xf32>) gradients(%[[GS]], %[[GB]] : tensor<4xf32>, tensor<4xf32>)
// PRECOND: return {{.*}}%[[G]]#0, %[[G]]#1
// PRECOND-SAME: tensor<4x3xf32>

// The curvature input gates the LayerNorm's update as the linears'; the
// KL-clip sums over both.
// CURVATURE: pf.kfac.update_layer_norm_factor {{.*}} due(%[[DUE:[^ ]*]] : tensor<i64>)
// CURVATURE: pf.kfac.update_factor {{.*}} due(%[[DUE]] : tensor<i64>)
// CURVATURE: pf.kfac.precondition_layer_norm
// CURVATURE: pf.kfac.kl_clip {{.*}}updates(%{{.*}}, %{{.*}}, %{{.*}} :

// LOWER: call @pfrt_kfac_layer_norm_factor(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, i32, f64, !llvm.ptr) -> i32
// LOWER: call @pfrt_kfac_precondition_layer_norm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, f64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// SKIP: pf-insert-kfac: layer-norm=blocks, but no pf.layer_norm normalizes the last dimension
// BAD: layer-norm must be none, blocks or diagonal, got 'full'
// BUBBLES: pf-kfac-precondition: LayerNorm factors (pf-insert-kfac layer-norm=...) are single-process K-FAC for now
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.0.LayerNorm.weight" : tensor<4xf32>
pf.param @"bert.encoder.layer.0.LayerNorm.bias" : tensor<4xf32>
func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %g = pf.param_ref @"bert.encoder.layer.0.LayerNorm.weight" : tensor<4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.LayerNorm.bias" : tensor<4xf32>
  %z = pf.layer_norm %y, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %s = pf.reduce_sum %z {keepdims = false} : (tensor<6x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
