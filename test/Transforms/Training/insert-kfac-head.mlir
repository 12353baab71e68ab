// layers=encoder-and-head: the masked-LM head's transform gets factors too,
// found by its weight's name or from the graph's structure; never the decoder
// (whose weight is the tied word embedding). The default leaves the head alone.
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="layers=encoder-and-head" | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-insert-kfac | FileCheck %s --check-prefix=DEFAULT
// RUN: pf-opt %s -split-input-file --pf-insert-kfac="layers=encoder-and-head skip=transform" | FileCheck %s --check-prefix=SKIP
// RUN: not pf-opt %s --pf-insert-kfac="layers=head" 2>&1 | FileCheck %s --check-prefix=BAD

// By name (Hugging Face's cls.predictions.transform.dense). The head's state
// belongs to no encoder block (no pf.encoder_block).
// CHECK-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A : tensor<4x4xf32>
// CHECK-DAG: pf.param @cls.predictions.transform.dense.weight.kfac.A : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32> {pf.kfac_bias = "cls.predictions.transform.dense.bias", pf.kfac_weight = "cls.predictions.transform.dense.weight"}
// CHECK-DAG: pf.param @cls.predictions.transform.dense.weight.kfac.B : tensor<4x4xf32>
// CHECK-DAG: pf.param @cls.predictions.transform.dense.weight.kfac.A_inv : tensor<4x4xf32>
// CHECK-DAG: pf.param @cls.predictions.transform.dense.weight.kfac.B_inv : tensor<4x4xf32>
// CHECK-NOT: word_embeddings.weight.kfac
// CHECK-LABEL: func.func @named(
// CHECK: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A
// CHECK: pf.kfac.capture_output {{.*}} into @bert.encoder.layer.0.dense.weight.kfac.B
// CHECK: pf.kfac.update_factor @cls.predictions.transform.dense.weight.kfac.A from %[[IN:[^ ]*]] step
// CHECK: %[[T:.*]] = pf.linear %[[IN]]
// CHECK: %[[TC:.*]] = pf.kfac.capture_output %[[T]] into @cls.predictions.transform.dense.weight.kfac.B step {{.*}}scale_by_loss_count
// CHECK: pf.gelu %[[TC]]
// CHECK-NOT: pf.kfac
// CHECK: return
// DEFAULT-LABEL: func.func @named(
// DEFAULT-NOT: cls.predictions.transform.dense.weight.kfac
// SKIP-LABEL: func.func @named(
// SKIP-NOT: cls.predictions.transform.dense.weight.kfac
// BAD: layers must be encoder or encoder-and-head, got 'head'
pf.param @"bert.embeddings.word_embeddings.weight" : tensor<7x4xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
pf.param @"cls.predictions.transform.dense.weight" : tensor<4x4xf32>
pf.param @"cls.predictions.transform.dense.bias" : tensor<4xf32>
pf.param @"cls.predictions.transform.LayerNorm.weight" : tensor<4xf32>
func.func @named(%x: tensor<2x3x4xf32> {pf.name = "x"}, %labels: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %tw = pf.param_ref @"cls.predictions.transform.dense.weight" : tensor<4x4xf32>
  %tb = pf.param_ref @"cls.predictions.transform.dense.bias" : tensor<4xf32>
  %t = pf.linear %y, %tw, %tb {transpose_weight} : (tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %g = pf.gelu %t : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %gamma = pf.param_ref @"cls.predictions.transform.LayerNorm.weight" : tensor<4xf32>
  %n = pf.layer_norm %g, %gamma {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %e = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<7x4xf32>
  %logits = pf.linear %n, %e {transpose_weight} : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
  %loss, %grad, %count = pf.softmax_cross_entropy %logits, %labels : (tensor<2x3x7xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3x7xf32>, tensor<i64>)
  return %loss : tensor<f32>
}

// -----

// From the structure: the linear reaching the decoder (which makes the
// loss's logits) through a GELU and a LayerNorm, whatever its weight's name.
// CHECK-DAG: pf.param @head_weight.kfac.A : tensor<4x4xf32>
// CHECK-DAG: pf.param @layers.0.w.kfac.A : tensor<4x4xf32>
// CHECK-NOT: pf.param @decoder_weight.kfac
// CHECK-LABEL: func.func @structural(
// CHECK: pf.kfac.capture_output {{.*}} into @layers.0.w.kfac.B
// CHECK: pf.kfac.capture_output {{.*}} into @head_weight.kfac.B
// CHECK-NOT: pf.kfac
// CHECK: return
// DEFAULT-LABEL: func.func @structural(
// DEFAULT-NOT: head_weight.kfac
pf.param @"layers.0.w" : tensor<4x4xf32>
pf.param @"head_weight" : tensor<4x4xf32>
pf.param @"ln_scale" : tensor<4xf32>
pf.param @"decoder_weight" : tensor<7x4xf32>
func.func @structural(%x: tensor<6x4xf32> {pf.name = "x"}, %labels: tensor<6xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
  %w = pf.param_ref @"layers.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %hw = pf.param_ref @"head_weight" : tensor<4x4xf32>
  %t = pf.linear %y, %hw {transpose_weight} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %g = pf.gelu %t : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %s = pf.param_ref @"ln_scale" : tensor<4xf32>
  %n = pf.layer_norm %g, %s {axis = 1 : i64} : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %d = pf.param_ref @"decoder_weight" : tensor<7x4xf32>
  %logits = pf.linear %n, %d {transpose_weight} : (tensor<6x4xf32>, tensor<7x4xf32>) -> tensor<6x7xf32>
  %loss, %grad, %count = pf.softmax_cross_entropy %logits, %labels : (tensor<6x7xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x7xf32>, tensor<i64>)
  return %loss : tensor<f32>
}
