// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 | FileCheck %s
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=2 | FileCheck %s --check-prefix=TWO
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true | FileCheck %s --check-prefix=TAGS

// A toy encoder: embeddings, three blocks of one linear each, a residual from
// block 0 to block 2 (it crosses two cuts) and the tied decoder.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
pf.param @"cls.predictions.bias" : tensor<100xf32>

func.func @main(%ids: tensor<4x8xi64> {pf.name = "input_ids"}) -> (tensor<4x8x100xf32> {pf.name = "logits"}) {
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

// Three stages, one block each. The residual x1 is relayed through stage 1
// (act/3 in and out) and saved there for nothing but the relay's sake: stage 1
// saves its own input for its weight gradient.
// CHECK-NOT: func.func @main
// CHECK-LABEL: func.func @stage0_forward(%arg0: tensor<4x8xi64> {pf.name = "input_ids"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "act/3"}, tensor<4x8x16xf32> {pf.name = "saved/1"})
// CHECK-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64}
// Each stage reads only its own parameters (the tied embedding: stages 0 and 2).
// CHECK-NOT: func.func
// CHECK: pf.param_ref @bert.embeddings.word_embeddings.weight
// CHECK-NOT: func.func
// CHECK: pf.param_ref @bert.encoder.layer.0.dense.weight
// CHECK-NOT: func.func
// CHECK: %[[X1:.*]] = pf.linear
// CHECK: return %[[X1]], %{{.*}} :

// The backward reads the graph input (gather_grad's indices), what its forward
// saved and the gradient of its output from stage 1; it returns the gradients
// of its parameters, with the first partial gradient of the tied embedding.
// CHECK-LABEL: func.func @stage0_backward(%arg0: tensor<4x8xi64> {pf.name = "input_ids"}, %arg1: tensor<4x8x16xf32> {pf.name = "saved/1"}, %arg2: tensor<4x8x16xf32> {pf.name = "grad_act/34"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// The tags of pf-build-gradients are gone.
// CHECK-NOT: pf.grad_
// CHECK: %[[GE:.*]] = pf.gather_grad %arg0, %{{.*}}
// CHECK: return %{{.*}}, %[[GE]]

// CHECK-LABEL: func.func @stage1_forward(%arg0: tensor<4x8x16xf32> {pf.name = "act/3"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "act/3"}, tensor<4x8x16xf32> {pf.name = "act/5"}, tensor<4x8x16xf32> {pf.name = "saved/3"})
// CHECK-SAME: pf.blocks = array<i64: 1>, pf.stage = 1 : i64
// CHECK-NOT: pf.param_ref @bert.encoder.layer.{{[02]}}
// CHECK: %[[X2:.*]] = pf.linear %arg0
// CHECK: return %arg0, %[[X2]], %arg0

// The gradient of x1 is the sum of the residual's part (from stage 2) and the
// linear's: the sum runs on stage 1, the earliest stage that has both parts.
// CHECK-LABEL: func.func @stage1_backward(%arg0: tensor<4x8x16xf32> {pf.name = "saved/3"}, %arg1: tensor<4x8x16xf32> {pf.name = "grad_act/15"}, %arg2: tensor<4x8x16xf32> {pf.name = "grad_act/22"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/34"}, tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"})
// CHECK: %[[DX:.*]] = pf.linear %arg2
// CHECK: %[[DW:.*]] = pf.gemm
// CHECK: %[[SUM:.*]] = pf.add %arg1, %[[DX]]
// CHECK: return %[[SUM]], %[[DW]]

// The last stage computes the loss in its forward and returns it there.
// CHECK-LABEL: func.func @stage2_forward(%arg0: tensor<4x8xi64> {pf.name = "labels"}, %arg1: tensor<4x8x16xf32> {pf.name = "act/3"}, %arg2: tensor<4x8x16xf32> {pf.name = "act/5"})
// CHECK-SAME: {pf.name = "saved/11#1"}, tensor<f32> {pf.name = "loss"})
// CHECK: %[[LOSS:.*]], %[[DLOGITS:.*]], %{{.*}} = pf.softmax_cross_entropy
// CHECK: return {{.*}}%[[DLOGITS]], %[[LOSS]]

// CHECK-LABEL: func.func @stage2_backward(
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/15"}, tensor<4x8x16xf32> {pf.name = "grad_act/22"}, tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.2.dense.weight"}, tensor<100xf32> {pf.name = "grad/cls.predictions.bias"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// CHECK: pf.param_ref @bert.embeddings.word_embeddings.weight
// CHECK-NOT: func.func
// CHECK: %[[GD:.*]] = pf.gemm
// CHECK-NOT: func.func
// CHECK: return {{.*}}, %[[GD]] :

// Two stages: blocks 0 and 1 in the first (the head makes block 2 the
// heaviest), so only the last forward's inputs cross.
// TWO-LABEL: func.func @stage0_forward(
// TWO-SAME: -> (tensor<4x8x16xf32> {pf.name = "act/3"}, tensor<4x8x16xf32> {pf.name = "act/5"}, tensor<4x8x16xf32> {pf.name = "saved/1"}, tensor<4x8x16xf32> {pf.name = "saved/3"})
// TWO-SAME: pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64
// TWO-LABEL: func.func @stage0_backward(
// TWO-SAME: {pf.name = "grad_act/15"}, %arg4: tensor<4x8x16xf32> {pf.name = "grad_act/22"})
// TWO-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// TWO-LABEL: func.func @stage1_forward(
// TWO-SAME: pf.blocks = array<i64: 2>, pf.stage = 1 : i64
// TWO-LABEL: func.func @stage1_backward(
// TWO-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/15"}, tensor<4x8x16xf32> {pf.name = "grad_act/22"},
// TWO-NOT: func.func

// What pf-split-stages reads: each differentiated forward op has an id, the ops
// of its gradient rule name it, sums of partial gradients are marked.
// TAGS: pf.gather %{{.*}}, %arg0 {pf.grad_id = [[GATHER:[0-9]+]] : i64}
// TAGS: pf.linear %{{.*}} {pf.grad_id = [[L0:[0-9]+]] : i64, transpose_weight}
// TAGS: pf.gemm {{.*}}pf.grad_of = [[L0]] : i64
// TAGS: pf.gather_grad %arg0, %{{.*}} {pf.grad_of = [[GATHER]] : i64}
// TAGS: pf.add %{{.*}}, %{{.*}} {pf.grad_sum}
