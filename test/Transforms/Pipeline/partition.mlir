// RUN: pf-opt %s -split-input-file --pf-partition="stages=2 microbatches=4" | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-partition="stages=3" | FileCheck %s --check-prefix=THREE
// Errors: partition-errors.mlir.

// A toy encoder: embeddings, three blocks of one linear each, a head. The
// blocks cost the same, so two stages split them 2 + 1 (the head joins the last
// block) and every value that crosses the cut is sent once.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
pf.param @"cls.predictions.bias" : tensor<100xf32>

func.func @main(%ids: tensor<4x8xi64>) -> tensor<4x8x100xf32> {
  %emb = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
  %x0 = pf.gather %emb, %ids : (tensor<100x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
  %w0 = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
  %x1 = pf.linear %x0, %w0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
  %x2 = pf.linear %x1, %w1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %w2 = pf.param_ref @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
  %x3 = pf.linear %x2, %w2 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r = pf.add %x3, %x1 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"cls.predictions.bias" : tensor<100xf32>
  %logits = pf.linear %r, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<100x16xf32>, tensor<100xf32>) -> tensor<4x8x100xf32>
  return %logits : tensor<4x8x100xf32>
}

// CHECK-LABEL: func.func @main
// CHECK: %[[OUT:.*]] = pf.pipeline stages(2) microbatches(4) (%arg0 : tensor<4x8xi64>) {
// CHECK: pf.stage 0 (%{{.*}} : tensor<4x8xi64>) attributes {blocks = array<i64: 0, 1>} {
// CHECK:   pf.gather
// CHECK:   %[[X1:.*]] = pf.linear
// CHECK:   pf.send %[[X1]] to 1 tag [[T1:[0-9]+]]
// CHECK:   %[[X2:.*]] = pf.linear %[[X1]]
// CHECK:   pf.send %[[X2]] to 1 tag [[T2:[0-9]+]]
// CHECK: %[[S1:.*]] = pf.stage 1 attributes {blocks = array<i64: 2>} {
// CHECK-DAG: pf.recv from 0 tag [[T2]] : tensor<4x8x16xf32>
// CHECK-DAG: pf.recv from 0 tag [[T1]] : tensor<4x8x16xf32>
// The tied decoder weight is read again in the last stage.
// CHECK-DAG: pf.param_ref @bert.embeddings.word_embeddings.weight
// The block each op belongs to is recorded for pf-schedule.
// CHECK:   %[[L:.*]] = pf.linear {{.*}} {pf.block = 2 : i64, transpose_weight}
// CHECK:   pf.yield %[[L]] : tensor<4x8x100xf32>
// CHECK: pf.yield %[[S1]]
// CHECK: return %[[OUT]]

// THREE-LABEL: func.func @main
// THREE: pf.stage 0 {{.*}}blocks = array<i64: 0>
// THREE: pf.stage 1 {{.*}}blocks = array<i64: 1>
// THREE: pf.stage 2 {{.*}}blocks = array<i64: 2>
