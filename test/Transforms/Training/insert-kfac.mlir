// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.95" | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="decay=0.5 bias-column=true factor-every=2 skip=[.]k[.]" | FileCheck %s --check-prefix=OPTS

// Only the encoder block's linear gets factors; the head keeps its optimizer.
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {pf.kfac_bias = "bert.encoder.layer.0.dense.bias", pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B : tensor<5x5xf32>
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A_inv : tensor<4x4xf32>
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B_inv : tensor<5x5xf32>
// CHECK-NOT: cls.predictions.transform.dense.weight.kfac
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<6x4xf32> {pf.name = "x"}, %[[STEP:.*]]: tensor<i64> {pf.name = "step"})
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %[[X]] step %[[STEP]]
// CHECK: %[[Y:.*]] = pf.linear %[[X]]
// Without a masked-LM loss B is scaled by rows² = 6² (the gradients are of a
// mean over the 6 rows).
// CHECK: %[[C:.*]] = pf.kfac.capture_output %[[Y]] into @bert.encoder.layer.0.dense.weight.kfac.B step %[[STEP]] {scale = 3.600000e+01 : f64}
// CHECK: pf.linear %[[C]]
// OPTS-LABEL: func.func @main(
// OPTS: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A {{.*}}{bias_column, decay = 5.000000e-01 : f64, every = 2 : i64}
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

// -----

// Two linears of one block, the second without bias. With a masked-LM loss,
// B is scaled by the loss's token count at run time (scale_by_loss_count)
// instead of a constant. A is [in, in], B [out, out]; a factor names its
// layer's weight and, when there is one, its bias.
// CHECK-DAG: pf.param @bert.encoder.layer.0.q.weight.kfac.A : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {pf.kfac_bias = "bert.encoder.layer.0.q.bias", pf.kfac_weight = "bert.encoder.layer.0.q.weight"}
// CHECK-DAG: pf.param @bert.encoder.layer.0.q.weight.kfac.B : tensor<5x5xf32>
// CHECK-DAG: pf.param @bert.encoder.layer.0.k.weight.kfac.A : tensor<5x5xf32> = dense<0.000000e+00> : tensor<5x5xf32> {pf.kfac_weight = "bert.encoder.layer.0.k.weight"}
// CHECK-DAG: pf.param @bert.encoder.layer.0.k.weight.kfac.B : tensor<3x3xf32>
// CHECK-DAG: pf.param @bert.encoder.layer.0.k.weight.kfac.A_inv : tensor<5x5xf32>
// CHECK-DAG: pf.param @bert.encoder.layer.0.k.weight.kfac.B_inv : tensor<3x3xf32>
// CHECK-LABEL: func.func @two_layers(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32> {pf.name = "x"}, %{{.*}}: tensor<2x3xi64> {pf.name = "labels"}, %[[STEP:.*]]: tensor<i64> {pf.name = "step"})
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.q.weight.kfac.A from %[[X]] step %[[STEP]] :
// CHECK: %[[Q:.*]] = pf.linear %[[X]]
// CHECK: %[[QC:.*]] = pf.kfac.capture_output %[[Q]] into @bert.encoder.layer.0.q.weight.kfac.B step %[[STEP]] {{{.*}}scale_by_loss_count}
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.k.weight.kfac.A from %[[QC]] step %[[STEP]] :
// CHECK: %[[K:.*]] = pf.linear %[[QC]]
// CHECK: %[[KC:.*]] = pf.kfac.capture_output %[[K]] into @bert.encoder.layer.0.k.weight.kfac.B step %[[STEP]] {{{.*}}scale_by_loss_count}
// CHECK: pf.softmax_cross_entropy %[[KC]]

// bias-column appends a ones column to the input (A is [in+1, in+1]); every
// factor update carries the decay and the interval; skip drops the layers
// whose weight name matches.
// OPTS-DAG: pf.param @bert.encoder.layer.0.q.weight.kfac.A : tensor<5x5xf32>
// OPTS-DAG: pf.param @bert.encoder.layer.0.q.weight.kfac.A_inv : tensor<5x5xf32>
// OPTS-DAG: pf.param @bert.encoder.layer.0.q.weight.kfac.B : tensor<5x5xf32>
// OPTS-NOT: k.weight.kfac
// OPTS-LABEL: func.func @two_layers(
// OPTS: pf.kfac.update_factor @bert.encoder.layer.0.q.weight.kfac.A from %arg0 step %arg2 {bias_column, decay = 5.000000e-01 : f64, every = 2 : i64}
// OPTS: pf.kfac.capture_output %{{.*}} into @bert.encoder.layer.0.q.weight.kfac.B step %arg2 {decay = 5.000000e-01 : f64, every = 2 : i64, scale_by_loss_count}
// OPTS-NOT: pf.kfac
// OPTS: return
pf.param @"bert.encoder.layer.0.q.weight" : tensor<5x4xf32>
pf.param @"bert.encoder.layer.0.q.bias" : tensor<5xf32>
pf.param @"bert.encoder.layer.0.k.weight" : tensor<3x5xf32>
func.func @two_layers(%x: tensor<2x3x4xf32> {pf.name = "x"}, %labels: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.q.weight" : tensor<5x4xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.q.bias" : tensor<5xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %k = pf.param_ref @"bert.encoder.layer.0.k.weight" : tensor<3x5xf32>
  %z = pf.linear %y, %k {transpose_weight} : (tensor<2x3x5xf32>, tensor<3x5xf32>) -> tensor<2x3x3xf32>
  %loss, %grad, %count = pf.softmax_cross_entropy %z, %labels : (tensor<2x3x3xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3x3xf32>, tensor<i64>)
  return %loss : tensor<f32>
}

// -----

// A weight read twice (the micro-batches of one step) has one set of factors
// that both uses update.
// CHECK: pf.param @bert.encoder.layer.0.dense.weight.kfac.A :
// CHECK-NOT: kfac.A :
// CHECK-LABEL: func.func @shared(
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %arg0
// CHECK: pf.kfac.capture_output %{{.*}} into @bert.encoder.layer.0.dense.weight.kfac.B
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %arg1
// CHECK: pf.kfac.capture_output %{{.*}} into @bert.encoder.layer.0.dense.weight.kfac.B
// OPTS-LABEL: func.func @shared(
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
func.func @shared(%x0: tensor<6x4xf32>, %x1: tensor<6x4xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
  %y0 = pf.linear %x0, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %y1 = pf.linear %x1, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y0, %y1 : tensor<6x5xf32>, tensor<6x5xf32>
}

// -----

// An [in, out] weight (PyTorch's pre-transposed export) is a K-FAC layer too:
// A is [in, in] and B [out, out] as for [out, in], and the factors record the
// layout so that the gradient is preconditioned in it.
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight", pf.kfac_weight_in_out}
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.B : tensor<5x5xf32> = {{.*}}pf.kfac_weight_in_out}
// CHECK-LABEL: func.func @in_out(
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %arg0
// CHECK: pf.kfac.capture_output %{{.*}} into @bert.encoder.layer.0.dense.weight.kfac.B
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x5xf32>
func.func @in_out(%x: tensor<6x4xf32>) -> tensor<6x5xf32> {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x5xf32>
  %y = pf.linear %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}
