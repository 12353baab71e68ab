// RUN: pf-opt %s | pf-opt | FileCheck %s

pf.param @w : tensor<4x3xf32>
pf.param @w.m : tensor<4x3xf32>
pf.param @w.v : tensor<4x3xf32>
pf.param @emb : tensor<10x3xf32>

// CHECK-LABEL: func.func @step
func.func @step(%logits: tensor<2x5x10xf32>, %labels: tensor<2x5xi64>, %g: tensor<4x3xf32>,
                %lr: tensor<f64>, %step: tensor<i64>, %ids: tensor<2x5xi64>,
                %gout: tensor<2x5x3xf32>) -> (tensor<f32>, tensor<2x5x10xf32>, tensor<10x3xf32>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pf.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : (tensor<2x5x10xf32>, tensor<2x5xi64>) -> (tensor<f32>, tensor<2x5x10xf32>, tensor<i64>)
  %loss, %dlogits, %count = pf.softmax_cross_entropy %logits, %labels {ignore_index = -1 : i64} : (tensor<2x5x10xf32>, tensor<2x5xi64>) -> (tensor<f32>, tensor<2x5x10xf32>, tensor<i64>)
  // CHECK: pf.gather_grad %{{.*}}, %{{.*}} : (tensor<2x5xi64>, tensor<2x5x3xf32>) -> tensor<10x3xf32>
  %demb = pf.gather_grad %ids, %gout : (tensor<2x5xi64>, tensor<2x5x3xf32>) -> tensor<10x3xf32>
  // CHECK: pf.adamw_update @w(@w.m, @w.v) grad %{{.*}} lr %{{.*}} step %{{.*}} {weight_decay = 0.000000e+00 : f64} : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  pf.adamw_update @w(@w.m, @w.v) grad %g lr %lr step %step {weight_decay = 0.0 : f64} : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  // CHECK: pf.lamb_update @w(@w.m, @w.v) grad
  pf.lamb_update @w(@w.m, @w.v) grad %g lr %lr step %step : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  // CHECK: pf.sgd_update @w momentum_buffer @w.m grad %{{.*}} lr %{{.*}} {nesterov}
  pf.sgd_update @w momentum_buffer @w.m grad %g lr %lr {nesterov} : tensor<4x3xf32>, tensor<f64>
  // CHECK: pf.sgd_update @w grad
  pf.sgd_update @w grad %g lr %lr : tensor<4x3xf32>, tensor<f64>
  return %loss, %dlogits, %demb : tensor<f32>, tensor<2x5x10xf32>, tensor<10x3xf32>
}

// The backward of the fused ops, one runtime kernel each.
// CHECK-LABEL: func.func @fused_backward
func.func @fused_backward(%x: tensor<2x5x3xf32>, %scale: tensor<3xf32>, %dy: tensor<2x5x3xf32>,
                          %p: tensor<2x4x5x5xf32>, %dp: tensor<2x4x5x5xf32>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = pf.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : tensor<2x5x3xf32>, tensor<3xf32>
  %dx, %dscale, %dbias = pf.layer_norm_grad %x, %scale, %dy {axis = 2 : i64, epsilon = 1.0e-12 : f32} : tensor<2x5x3xf32>, tensor<3xf32>
  // CHECK: pf.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x5x3xf32>
  %dg = pf.gelu_grad %x, %dy {approximate = "tanh"} : tensor<2x5x3xf32>
  // CHECK: pf.softmax_grad %{{.*}}, %{{.*}} {axis = 3 : i64} : tensor<2x4x5x5xf32>
  %ds = pf.softmax_grad %p, %dp {axis = 3 : i64} : tensor<2x4x5x5xf32>
  return
}
