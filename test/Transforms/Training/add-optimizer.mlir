// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" --pf-build-gradients --pf-kfac-precondition="kl-clip=0.001 damping=1e-3 refresh-warmup=0" --pf-add-optimizer="optimizer=adamw kfac-optimizer=sgd kfac-lr-scale=10" | FileCheck %s --check-prefix=HYBRID
// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-add-optimizer="optimizer=sgd momentum=0.5 nesterov=true weight-decay=0.1" | FileCheck %s --check-prefix=SGD
// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-add-optimizer="optimizer=sgd momentum=0 weight-decay=0.1" | FileCheck %s --check-prefix=PLAIN-SGD
// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-add-optimizer="optimizer=adamw beta1=0.8 beta2=0.5 eps=1e-8 weight-decay=0.1 keep-gradients=true" | FileCheck %s --check-prefix=ADAMW
// RUN: pf-opt %s -split-input-file --pf-build-gradients --pf-add-optimizer="optimizer=lamb beta1=0.8 beta2=0.5 eps=1e-8 weight-decay=0.1" | FileCheck %s --check-prefix=LAMB
// Errors: add-optimizer-errors.mlir.

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

// K-FAC layers take SGD at 10x the learning rate after KL-clipping; the head
// keeps AdamW.
// HYBRID-LABEL: func.func @main(
// HYBRID: %[[CLIPPED:.*]]:2 = pf.kfac.kl_clip lr %[[LR:[a-z0-9]+]]
// HYBRID: %[[SCALED:.*]] = pf.mul %[[LR]], %{{.*}} : (tensor<f64>, tensor<f64>) -> tensor<f64>
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.weight momentum_buffer @bert.encoder.layer.0.dense.weight.momentum grad %[[CLIPPED]]#0 lr %[[SCALED]]
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.bias momentum_buffer {{.*}} grad %[[CLIPPED]]#1 lr %[[SCALED]]
// HYBRID-DAG: pf.adamw_update @cls.predictions.transform.dense.weight({{.*}}) grad %{{.*}} lr %[[LR]]
// SGD-LABEL: func.func @main(
// PLAIN-SGD-LABEL: func.func @main(
// ADAMW-LABEL: func.func @main(
// LAMB-LABEL: func.func @main(

// -----

// SGD with momentum: one zero-initialized buffer per parameter, next to it;
// lr and step become arguments; the gradients are consumed (no grad/ results
// left). Weight decay skips biases and LayerNorm parameters (BERT's recipe).
// SGD: pf.param @bert.encoder.layer.0.dense.weight : tensor<5x4xf32>
// SGD-NEXT: pf.param @bert.encoder.layer.0.dense.weight.momentum : tensor<5x4xf32> = dense<0.000000e+00> : tensor<5x4xf32>
// SGD-NEXT: pf.param @bert.encoder.layer.0.dense.bias : tensor<5xf32>
// SGD-NEXT: pf.param @bert.encoder.layer.0.dense.bias.momentum : tensor<5xf32> = dense<0.000000e+00> : tensor<5xf32>
// SGD-NEXT: pf.param @bert.encoder.layer.0.LayerNorm.weight : tensor<5xf32>
// SGD-NEXT: pf.param @bert.encoder.layer.0.LayerNorm.weight.momentum : tensor<5xf32> = dense<0.000000e+00> : tensor<5xf32>
// SGD-LABEL: func.func @layers(
// SGD-SAME: %{{.*}}: tensor<6x4xf32> {pf.name = "x"}, %[[LR:.*]]: tensor<f64> {pf.name = "lr"}, %{{.*}}: tensor<i64> {pf.name = "step"}) -> (tensor<f32> {pf.name = "objective"})
// SGD: pf.sgd_update @bert.encoder.layer.0.dense.weight momentum_buffer @bert.encoder.layer.0.dense.weight.momentum grad %{{.*}} lr %[[LR]] {momentum = 5.000000e-01 : f64, nesterov, weight_decay = 1.000000e-01 : f64}
// SGD-NEXT: pf.sgd_update @bert.encoder.layer.0.dense.bias momentum_buffer @bert.encoder.layer.0.dense.bias.momentum grad %{{.*}} lr %[[LR]] {momentum = 5.000000e-01 : f64, nesterov} :
// SGD-NEXT: pf.sgd_update @bert.encoder.layer.0.LayerNorm.weight momentum_buffer @bert.encoder.layer.0.LayerNorm.weight.momentum grad %{{.*}} lr %[[LR]] {momentum = 5.000000e-01 : f64, nesterov} :
// SGD-NEXT: return %{{.*}} : tensor<f32>

// Without momentum, no buffer.
// PLAIN-SGD-NOT: .momentum
// PLAIN-SGD-LABEL: func.func @layers(
// PLAIN-SGD: pf.sgd_update @bert.encoder.layer.0.dense.weight grad %{{.*}} lr %{{.*}} {momentum = 0.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}

// AdamW keeps two moments per parameter; keep-gradients keeps the grad/ results.
// ADAMW-DAG: pf.param @bert.encoder.layer.0.dense.weight.exp_avg : tensor<5x4xf32> = dense<0.000000e+00> : tensor<5x4xf32>
// ADAMW-DAG: pf.param @bert.encoder.layer.0.dense.weight.exp_avg_sq : tensor<5x4xf32> = dense<0.000000e+00> : tensor<5x4xf32>
// ADAMW-LABEL: func.func @layers(
// ADAMW-SAME: %{{.*}}: tensor<6x4xf32> {pf.name = "x"}, %[[LR:.*]]: tensor<f64> {pf.name = "lr"}, %[[STEP:.*]]: tensor<i64> {pf.name = "step"}) -> (tensor<f32> {pf.name = "objective"}, tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<5xf32> {pf.name = "grad/bert.encoder.layer.0.dense.bias"}, tensor<5xf32> {pf.name = "grad/bert.encoder.layer.0.LayerNorm.weight"})
// ADAMW: pf.adamw_update @bert.encoder.layer.0.dense.weight(@bert.encoder.layer.0.dense.weight.exp_avg, @bert.encoder.layer.0.dense.weight.exp_avg_sq) grad %[[GW:[0-9a-z_]+]] lr %[[LR]] step %[[STEP]] {beta1 = 8.000000e-01 : f64, beta2 = 5.000000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// ADAMW-NEXT: pf.adamw_update @bert.encoder.layer.0.dense.bias({{.*}}) grad %[[GB:[0-9a-z_]+]] {{.*}}weight_decay = 0.000000e+00 : f64}
// ADAMW-NEXT: pf.adamw_update @bert.encoder.layer.0.LayerNorm.weight({{.*}}) grad %[[GS:[0-9a-z_]+]] {{.*}}weight_decay = 0.000000e+00 : f64}
// ADAMW-NEXT: return %{{.*}}, %[[GW]], %[[GB]], %[[GS]] :

// LAMB keeps the same state and has its own update.
// LAMB-LABEL: func.func @layers(
// LAMB: pf.lamb_update @bert.encoder.layer.0.dense.weight(@bert.encoder.layer.0.dense.weight.exp_avg, @bert.encoder.layer.0.dense.weight.exp_avg_sq) grad %{{.*}} lr %{{.*}} step %{{.*}} {beta1 = 8.000000e-01 : f64, beta2 = 5.000000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// LAMB-NEXT: pf.lamb_update @bert.encoder.layer.0.dense.bias({{.*}}weight_decay = 0.000000e+00 : f64}
// LAMB-NEXT: pf.lamb_update @bert.encoder.layer.0.LayerNorm.weight({{.*}}weight_decay = 0.000000e+00 : f64}
// LAMB-NEXT: return %{{.*}} : tensor<f32>

// Under HYBRID the K-FAC layer takes SGD, the LayerNorm scale keeps AdamW.
// HYBRID-LABEL: func.func @layers(
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.weight momentum_buffer
// HYBRID-DAG: pf.sgd_update @bert.encoder.layer.0.dense.bias momentum_buffer
// HYBRID-DAG: pf.adamw_update @bert.encoder.layer.0.LayerNorm.weight(
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
pf.param @"bert.encoder.layer.0.LayerNorm.weight" : tensor<5xf32>
func.func @layers(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.dense.bias" : tensor<5xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %g = pf.param_ref @"bert.encoder.layer.0.LayerNorm.weight" : tensor<5xf32>
  %n = pf.layer_norm %y, %g : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %s = pf.reduce_sum %n {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
