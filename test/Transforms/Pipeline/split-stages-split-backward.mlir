// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" | FileCheck %s
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" | FileCheck %s --check-prefix=TWO
// The default writes the fused backward only.
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 | FileCheck %s --check-prefix=FUSED

// pf-split-stages{split-backward=true}: each stage's backward as an input half
// (the slice of the backward that its grad_act/* results need) and a weight
// half (the rest). The toy encoder of split-stages.mlir: embeddings, three
// blocks of one linear each, a residual from block 0 to block 2, the tied
// decoder.

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

// The forwards are those of the fused split.
// CHECK-LABEL: func.func @stage0_forward(%arg0: tensor<4x8xi64> {pf.name = "input_ids"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "act/3"}, tensor<4x8x16xf32> {pf.name = "saved/1"})

// Stage 0 sends no gradient: its input half is empty and the whole backward
// (the embedding's gradient included) is weight work, reading the saved input
// and the gradient from stage 1 by their names.
// CHECK-LABEL: func.func @stage0_backward_input() attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64} {
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK-LABEL: func.func @stage0_backward_weight(%arg0: tensor<4x8xi64> {pf.name = "input_ids"}, %arg1: tensor<4x8x16xf32> {pf.name = "saved/1"}, %arg2: tensor<4x8x16xf32> {pf.name = "grad_act/34"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// CHECK-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64}
// CHECK: %[[DW0:.*]] = pf.gemm
// CHECK: %[[GE:.*]] = pf.gather_grad %arg0
// CHECK: return %[[DW0]], %[[GE]]

// Stage 1: the input half sums the residual's part and the linear's input
// gradient; it does not read the saved input, which only the weight gradient
// needs. The weight half reads grad_act/22 (also read by the input half: the
// host keeps it until the weight half ran).
// CHECK-LABEL: func.func @stage1_backward_input(%arg0: tensor<4x8x16xf32> {pf.name = "grad_act/15"}, %arg1: tensor<4x8x16xf32> {pf.name = "grad_act/22"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/34"})
// CHECK-NOT: pf.gemm
// CHECK: %[[DX:.*]] = pf.linear %arg1
// CHECK: %[[SUM:.*]] = pf.add %arg0, %[[DX]]
// CHECK-NEXT: return %[[SUM]]
// CHECK-LABEL: func.func @stage1_backward_weight(%arg0: tensor<4x8x16xf32> {pf.name = "saved/3"}, %arg1: tensor<4x8x16xf32> {pf.name = "grad_act/22"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"})
// CHECK-NOT: pf.linear
// CHECK: %[[DW1:.*]] = pf.gemm
// CHECK-NEXT: return %[[DW1]]

// The last stage: the input half computes the loss gradient and the
// gradients it sends, and returns what the weight half needs of them as
// wsaved/<id> (the logits' gradient, the residual's gradient, which is also
// sent as grad_act/15). The weight half returns every grad/*, the decoder's
// part of the tied embedding included.
// CHECK-LABEL: func.func @stage2_backward_input(%arg0: tensor<4x8x100xf32> {pf.name = "saved/11#1"})
// CHECK-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/15"}, tensor<4x8x16xf32> {pf.name = "grad_act/22"}, tensor<4x8x100xf32> {pf.name = "wsaved/14"}, tensor<4x8x16xf32> {pf.name = "wsaved/15"})
// CHECK: %[[DLOGITS:.*]] = pf.mul %arg0
// CHECK: %[[DR:.*]] = pf.linear %[[DLOGITS]]
// CHECK: %[[DX2:.*]] = pf.linear %[[DR]]
// CHECK-NEXT: return %[[DR]], %[[DX2]], %[[DLOGITS]], %[[DR]]
// CHECK-LABEL: func.func @stage2_backward_weight(%arg0: tensor<4x8x16xf32> {pf.name = "saved/5"}, %arg1: tensor<4x8x16xf32> {pf.name = "saved/8"}, %arg2: tensor<4x8x100xf32> {pf.name = "wsaved/14"}, %arg3: tensor<4x8x16xf32> {pf.name = "wsaved/15"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.2.dense.weight"}, tensor<100xf32> {pf.name = "grad/cls.predictions.bias"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// CHECK-NOT: pf.linear
// CHECK: %[[DEMB:.*]] = pf.gemm
// CHECK: %[[DB:.*]] = pf.reduce_sum %arg2
// CHECK: %[[DW2:.*]] = pf.gemm
// CHECK-NEXT: return %[[DW2]], %[[DB]], %[[DEMB]]
// CHECK-NOT: func.func

// Two stages (blocks 0 and 1 on stage 0): stage 0's weight half takes both
// gradients from stage 1; stage 1's input half sends them.
// TWO-LABEL: func.func @stage0_backward_input() attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64}
// TWO-LABEL: func.func @stage0_backward_weight(
// TWO-SAME: {pf.name = "grad_act/15"}, %arg4: tensor<4x8x16xf32> {pf.name = "grad_act/22"})
// TWO-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}, tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// TWO-LABEL: func.func @stage1_backward_input(
// TWO-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/15"}, tensor<4x8x16xf32> {pf.name = "grad_act/22"}, tensor<4x8x100xf32> {pf.name = "wsaved/14"}, tensor<4x8x16xf32> {pf.name = "wsaved/15"})
// TWO-LABEL: func.func @stage1_backward_weight(
// TWO-NOT: func.func

// FUSED-NOT: _backward_input
// FUSED-NOT: _backward_weight
// FUSED: func.func @stage2_backward(
