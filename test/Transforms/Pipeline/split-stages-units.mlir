// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 grain=block" | FileCheck %s --check-prefix=BLOCK
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 grain=ends" | FileCheck %s --check-prefix=ENDS
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 grain=half" | FileCheck %s --check-prefix=HALF2
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=7 grain=half" | FileCheck %s --check-prefix=HALF7
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=7 grain=half split-backward=true" | pf-opt | FileCheck %s --check-prefix=HALF7-SPLIT
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 grain=half cost=profile profile=%S/Inputs/skewed-2-blocks.json print-costs=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2" | pf-opt --pf-verify-rank-programs | FileCheck %s --check-prefix=TRAINING
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=8 grain=half" 2>&1 | FileCheck %s --check-prefix=TOO-MANY
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=5 grain=ends" 2>&1 | FileCheck %s --check-prefix=TOO-MANY-ENDS

// A post-LN encoder of two blocks (attention stand-in, residual, LayerNorm;
// FFN, residual, LayerNorm), the embeddings (gather, LayerNorm) and the
// masked-LM head (transform, LayerNorm, the tied decoder over a vocabulary
// of 1000, the loss). The head's decoder and its loss are most of the work.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<1000x16xf32>
pf.param @"bert.embeddings.LayerNorm.weight" : tensor<16xf32>
pf.param @"bert.embeddings.LayerNorm.bias" : tensor<16xf32>
pf.param @"bert.encoder.layer.0.attention.self.query.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.0.attention.output.LayerNorm.weight" : tensor<16xf32>
pf.param @"bert.encoder.layer.0.attention.output.LayerNorm.bias" : tensor<16xf32>
pf.param @"bert.encoder.layer.0.intermediate.dense.weight" : tensor<64x16xf32>
pf.param @"bert.encoder.layer.0.output.dense.weight" : tensor<16x64xf32>
pf.param @"bert.encoder.layer.0.output.LayerNorm.weight" : tensor<16xf32>
pf.param @"bert.encoder.layer.0.output.LayerNorm.bias" : tensor<16xf32>
pf.param @"bert.encoder.layer.1.attention.self.query.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.attention.output.LayerNorm.weight" : tensor<16xf32>
pf.param @"bert.encoder.layer.1.attention.output.LayerNorm.bias" : tensor<16xf32>
pf.param @"bert.encoder.layer.1.intermediate.dense.weight" : tensor<64x16xf32>
pf.param @"bert.encoder.layer.1.output.dense.weight" : tensor<16x64xf32>
pf.param @"bert.encoder.layer.1.output.LayerNorm.weight" : tensor<16xf32>
pf.param @"bert.encoder.layer.1.output.LayerNorm.bias" : tensor<16xf32>
pf.param @"cls.predictions.transform.dense.weight" : tensor<16x16xf32>
pf.param @"cls.predictions.transform.LayerNorm.weight" : tensor<16xf32>
pf.param @"cls.predictions.transform.LayerNorm.bias" : tensor<16xf32>
pf.param @"cls.predictions.bias" : tensor<1000xf32>

func.func @main(%ids: tensor<4x8xi64> {pf.name = "input_ids"}) -> (tensor<4x8x1000xf32> {pf.name = "logits"}) {
  %emb = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<1000x16xf32>
  %x = pf.gather %emb, %ids : (tensor<1000x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
  %eg = pf.param_ref @"bert.embeddings.LayerNorm.weight" : tensor<16xf32>
  %eb = pf.param_ref @"bert.embeddings.LayerNorm.bias" : tensor<16xf32>
  %x0 = pf.layer_norm %x, %eg, %eb {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %q0 = pf.param_ref @"bert.encoder.layer.0.attention.self.query.weight" : tensor<16x16xf32>
  %a0 = pf.linear %x0, %q0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r0 = pf.add %a0, %x0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %g0 = pf.param_ref @"bert.encoder.layer.0.attention.output.LayerNorm.weight" : tensor<16xf32>
  %b0 = pf.param_ref @"bert.encoder.layer.0.attention.output.LayerNorm.bias" : tensor<16xf32>
  %h0 = pf.layer_norm %r0, %g0, %b0 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %i0 = pf.param_ref @"bert.encoder.layer.0.intermediate.dense.weight" : tensor<64x16xf32>
  %f0 = pf.linear %h0, %i0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %o0 = pf.param_ref @"bert.encoder.layer.0.output.dense.weight" : tensor<16x64xf32>
  %d0 = pf.linear %f0, %o0 {transpose_weight} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %s0 = pf.add %d0, %h0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %G0 = pf.param_ref @"bert.encoder.layer.0.output.LayerNorm.weight" : tensor<16xf32>
  %B0 = pf.param_ref @"bert.encoder.layer.0.output.LayerNorm.bias" : tensor<16xf32>
  %y0 = pf.layer_norm %s0, %G0, %B0 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %q1 = pf.param_ref @"bert.encoder.layer.1.attention.self.query.weight" : tensor<16x16xf32>
  %a1 = pf.linear %y0, %q1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r1 = pf.add %a1, %y0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %g1 = pf.param_ref @"bert.encoder.layer.1.attention.output.LayerNorm.weight" : tensor<16xf32>
  %b1 = pf.param_ref @"bert.encoder.layer.1.attention.output.LayerNorm.bias" : tensor<16xf32>
  %h1 = pf.layer_norm %r1, %g1, %b1 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %i1 = pf.param_ref @"bert.encoder.layer.1.intermediate.dense.weight" : tensor<64x16xf32>
  %f1 = pf.linear %h1, %i1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %o1 = pf.param_ref @"bert.encoder.layer.1.output.dense.weight" : tensor<16x64xf32>
  %d1 = pf.linear %f1, %o1 {transpose_weight} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %s1 = pf.add %d1, %h1 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %G1 = pf.param_ref @"bert.encoder.layer.1.output.LayerNorm.weight" : tensor<16xf32>
  %B1 = pf.param_ref @"bert.encoder.layer.1.output.LayerNorm.bias" : tensor<16xf32>
  %y1 = pf.layer_norm %s1, %G1, %B1 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %tw = pf.param_ref @"cls.predictions.transform.dense.weight" : tensor<16x16xf32>
  %t = pf.linear %y1, %tw {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %tg = pf.param_ref @"cls.predictions.transform.LayerNorm.weight" : tensor<16xf32>
  %tb = pf.param_ref @"cls.predictions.transform.LayerNorm.bias" : tensor<16xf32>
  %tn = pf.layer_norm %t, %tg, %tb {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"cls.predictions.bias" : tensor<1000xf32>
  %logits = pf.linear %tn, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<1000x16xf32>, tensor<1000xf32>) -> tensor<4x8x1000xf32>
  return %logits : tensor<4x8x1000xf32>
}

// grain=block (the pass's default): whole blocks, the embeddings in block 0
// and the head in block 1, so the head's stage does most of the work.
// BLOCK-LABEL: func.func @stage0_forward(
// BLOCK-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64}
// BLOCK: pf.gather
// BLOCK-LABEL: func.func @stage1_forward(
// BLOCK-SAME: attributes {pf.blocks = array<i64: 1>, pf.stage = 1 : i64}
// BLOCK: pf.softmax_cross_entropy

// grain=ends: the embeddings and the head are units of their own, costed on
// their own; the cut falls between the last block and the head, whose stage
// holds no encoder block.
// ENDS-LABEL: func.func @stage0_forward(
// ENDS-SAME: attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64, pf.units = ["embeddings", "block0", "block1"]}
// ENDS-LABEL: func.func @stage1_forward(
// ENDS-SAME: attributes {pf.stage = 1 : i64, pf.units = ["head"]}
// ENDS-NOT: func.func
// ENDS: pf.param_ref @cls.predictions.transform.dense.weight
// ENDS: pf.softmax_cross_entropy

// grain=half, D = 2: the head's transform stays with the blocks, the decoder
// and its loss make the last stage.
// HALF2-LABEL: func.func @stage0_forward(
// HALF2-SAME: pf.units = ["embeddings", "block0.attn", "block0.ffn", "block1.attn", "block1.ffn", "head.transform"]
// HALF2-LABEL: func.func @stage1_forward(%arg0: tensor<4x8xi64> {pf.name = "labels"}, %arg1: tensor<4x8x16xf32> {pf.name = "act/37"})
// HALF2-SAME: attributes {pf.stage = 1 : i64, pf.units = ["head.decoder"]}
// HALF2-NOT: pf.layer_norm
// HALF2: pf.linear %arg1
// HALF2: pf.softmax_cross_entropy
// HALF2-LABEL: func.func @stage1_backward(
// HALF2-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/44"}, tensor<1000xf32> {pf.name = "grad/cls.predictions.bias"}, tensor<1000x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})

// grain=half, D = 7: every unit on a stage of its own. Block 0 is cut after
// its first LayerNorm: stage 1 (attention half) sends that LayerNorm's output,
// which stage 2 (FFN half) reads twice (FFN1 and the residual); the sum of the
// two parts of its gradient runs on stage 2, which sends it back.
// HALF7-LABEL: func.func @stage0_forward(
// HALF7-SAME: attributes {pf.stage = 0 : i64, pf.units = ["embeddings"]}
// HALF7-LABEL: func.func @stage1_forward(%arg0: tensor<4x8x16xf32> {pf.name = "act/4"})
// HALF7-SAME: -> (tensor<4x8x16xf32> {pf.name = "act/10"},
// HALF7-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 1 : i64, pf.units = ["block0.attn"]}
// HALF7-NOT: func.func
// HALF7: pf.param_ref @bert.encoder.layer.0.attention.self.query.weight
// HALF7-NOT: func.func
// HALF7: %[[LN:.*]] = pf.layer_norm
// HALF7-NEXT: return %[[LN]],
// HALF7-LABEL: func.func @stage1_backward(
// HALF7-SAME: {pf.name = "grad_act/93"}) -> (tensor<4x8x16xf32> {pf.name = "grad_act/101"}, tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.attention.self.query.weight"}, tensor<16xf32> {pf.name = "grad/bert.encoder.layer.0.attention.output.LayerNorm.weight"}, tensor<16xf32> {pf.name = "grad/bert.encoder.layer.0.attention.output.LayerNorm.bias"})
// HALF7: pf.layer_norm_grad
// HALF7-LABEL: func.func @stage2_forward(%arg0: tensor<4x8x16xf32> {pf.name = "act/10"})
// HALF7-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 2 : i64, pf.units = ["block0.ffn"]}
// HALF7: pf.linear %arg0
// HALF7: pf.add %{{.*}}, %arg0
// HALF7-LABEL: func.func @stage2_backward(
// HALF7-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/93"}, tensor<64x16xf32> {pf.name = "grad/bert.encoder.layer.0.intermediate.dense.weight"}, tensor<16x64xf32> {pf.name = "grad/bert.encoder.layer.0.output.dense.weight"}, tensor<16xf32> {pf.name = "grad/bert.encoder.layer.0.output.LayerNorm.weight"}, tensor<16xf32> {pf.name = "grad/bert.encoder.layer.0.output.LayerNorm.bias"})
// HALF7: %[[GI:.*]], %{{.*}}, %{{.*}} = pf.layer_norm_grad
// HALF7: pf.gemm
// HALF7: %[[DX:.*]] = pf.linear
// HALF7: %[[SUM:.*]] = pf.add %[[GI]], %[[DX]]
// HALF7-NEXT: return %[[SUM]],
// HALF7-LABEL: func.func @stage3_forward(
// HALF7-SAME: pf.units = ["block1.attn"]
// HALF7-LABEL: func.func @stage4_forward(
// HALF7-SAME: pf.units = ["block1.ffn"]
// HALF7-LABEL: func.func @stage5_forward(
// HALF7-SAME: attributes {pf.stage = 5 : i64, pf.units = ["head.transform"]}
// HALF7-LABEL: func.func @stage6_forward(
// HALF7-SAME: attributes {pf.stage = 6 : i64, pf.units = ["head.decoder"]}

// The halves of a backward (zero-bubble schedules) carry the units too, and
// the attributes verify.
// HALF7-SPLIT: func.func @stage2_backward_input(
// HALF7-SPLIT-SAME: pf.units = ["block0.ffn"]
// HALF7-SPLIT: func.func @stage2_backward_weight(
// HALF7-SPLIT-SAME: pf.units = ["block0.ffn"]
// HALF7-SPLIT: func.func @stage6_backward_weight(
// HALF7-SPLIT-SAME: attributes {pf.stage = 6 : i64, pf.units = ["head.decoder"]}

// TOO-MANY: error: pf-split-stages: cannot cut 7 units of grain=half into 8 stages (more stages than units)
// TOO-MANY-ENDS: error: pf-split-stages: cannot cut 4 units of grain=ends into 5 stages (more stages than units)

// The pipelined training step (what `mpirun pf-train --pipeline` builds) cuts
// at grain=half by default: rank 1 runs the decoder and the loss, receives
// the head transform's output and sends back its gradient; the tied word
// embedding's pieces meet on rank 1. The programs verify.
// TRAINING: func.func @stage1_forward(%arg0: tensor<4x8xi64> {pf.name = "labels"}, %arg1: tensor<4x8x16xf32> {pf.name = "act/37"})
// TRAINING-SAME: pf.units = ["head.decoder"]
// TRAINING: func.func @stage1_backward(
// TRAINING-SAME: -> (tensor<4x8x16xf32> {pf.name = "grad_act/44"},
// TRAINING: pf.rank_program @rank0
// TRAINING: %[[F0:[0-9]+]]:{{[0-9]+}} = pf.run_stage forward @stage0_forward() microbatch(0)
// TRAINING-NEXT: pf.send_act %[[F0]]#0 microbatch(0) to(1)
// TRAINING: %[[GA44:[0-9]+]] = pf.recv_act microbatch(0) from(1)
// TRAINING-NEXT: pf.run_stage backward @stage0_backward(%[[F0]]#1, {{.*}}, %[[GA44]]) microbatch(0)
// TRAINING: pf.rank_program @rank1
// TRAINING: %[[A37:[0-9]+]] = pf.recv_act microbatch(0) from(0)
// TRAINING-NEXT: pf.run_stage forward @stage1_forward(%[[A37]]) microbatch(0)
// TRAINING: %[[B1:[0-9]+]]:3 = pf.run_stage backward @stage1_backward({{.*}}) microbatch(0)
// TRAINING: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B1]]#2 : tensor<1000x16xf32>) microbatch(0) root(1) ranks([0, 1])

// A measured profile of the two blocks (3 and 30 ms; the embeddings counted
// in block 0, the head in block 1): each block's time is divided among its
// units by their analytic shares, so stage 0 (the embeddings and block 0's
// halves) holds block 0's 3 ms exactly.
// PROFILE: pf-split-stages costs (skewed 2 blocks (per unit, divided by the analytic a100 model), ms per micro-batch, forward + backward): embeddings {{[0-9.]+}} -> 0, block0.attn {{[0-9.]+}} -> 0, block0.ffn {{[0-9.]+}} -> 0, block1.attn {{[0-9.]+}} -> 1, block1.ffn {{[0-9.]+}} -> 1, head.transform {{[0-9.]+}} -> 1, head.decoder {{[0-9.]+}} -> 2; stages 3 2.753 27.25 (max/mean 2.477)
