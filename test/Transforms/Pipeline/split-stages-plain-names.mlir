// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 grain=block" | FileCheck %s --check-prefix=BLOCK
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 grain=ends" | FileCheck %s --check-prefix=ENDS
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=7 grain=half" | FileCheck %s --check-prefix=HALF7
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block" | pf-opt --pf-verify-rank-programs | FileCheck %s --check-prefix=TRAINING

// split-stages-units.mlir's model as a BERT written in plain PyTorch
// exports it (issue 39): module names that say nothing of embeddings or heads
// (`tok.weight`, `norm.*`, `dense.weight`, `head_norm.*`, `decoder.bias`),
// only the blocks named (`blocks.N.`), and a folded constant the exporter
// named (`onnx::Add_7`: the position embedding's rows, added in the
// embeddings). Where a parameter without a block sits comes from its first
// reader: before the blocks (the embeddings) or after them (the head). Taken
// for the head by its name, `tok.weight` used to pull the embeddings and
// both blocks to the last stage, leaving stage 0 without a parameter
// (pf-add-optimizer: "no result named grad/<parameter>").

pf.param @"tok.weight" : tensor<1000x16xf32>
pf.param @"onnx::Add_7" : tensor<1x8x16xf32>
pf.param @"norm.weight" : tensor<16xf32>
pf.param @"norm.bias" : tensor<16xf32>
pf.param @"blocks.0.attn.query.weight" : tensor<16x16xf32>
pf.param @"blocks.0.norm1.weight" : tensor<16xf32>
pf.param @"blocks.0.norm1.bias" : tensor<16xf32>
pf.param @"blocks.0.ff1.weight" : tensor<64x16xf32>
pf.param @"blocks.0.ff2.weight" : tensor<16x64xf32>
pf.param @"blocks.0.norm2.weight" : tensor<16xf32>
pf.param @"blocks.0.norm2.bias" : tensor<16xf32>
pf.param @"blocks.1.attn.query.weight" : tensor<16x16xf32>
pf.param @"blocks.1.norm1.weight" : tensor<16xf32>
pf.param @"blocks.1.norm1.bias" : tensor<16xf32>
pf.param @"blocks.1.ff1.weight" : tensor<64x16xf32>
pf.param @"blocks.1.ff2.weight" : tensor<16x64xf32>
pf.param @"blocks.1.norm2.weight" : tensor<16xf32>
pf.param @"blocks.1.norm2.bias" : tensor<16xf32>
pf.param @"dense.weight" : tensor<16x16xf32>
pf.param @"head_norm.weight" : tensor<16xf32>
pf.param @"head_norm.bias" : tensor<16xf32>
pf.param @"decoder.bias" : tensor<1000xf32>

func.func @main(%ids: tensor<4x8xi64> {pf.name = "input_ids"}) -> (tensor<4x8x1000xf32> {pf.name = "logits"}) {
  %emb = pf.param_ref @"tok.weight" : tensor<1000x16xf32>
  %x1 = pf.gather %emb, %ids : (tensor<1000x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
  %pos = pf.param_ref @"onnx::Add_7" : tensor<1x8x16xf32>
  %x = pf.add %x1, %pos : (tensor<4x8x16xf32>, tensor<1x8x16xf32>) -> tensor<4x8x16xf32>
  %eg = pf.param_ref @"norm.weight" : tensor<16xf32>
  %eb = pf.param_ref @"norm.bias" : tensor<16xf32>
  %x0 = pf.layer_norm %x, %eg, %eb {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %q0 = pf.param_ref @"blocks.0.attn.query.weight" : tensor<16x16xf32>
  %a0 = pf.linear %x0, %q0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r0 = pf.add %a0, %x0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %g0 = pf.param_ref @"blocks.0.norm1.weight" : tensor<16xf32>
  %b0 = pf.param_ref @"blocks.0.norm1.bias" : tensor<16xf32>
  %h0 = pf.layer_norm %r0, %g0, %b0 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %i0 = pf.param_ref @"blocks.0.ff1.weight" : tensor<64x16xf32>
  %f0 = pf.linear %h0, %i0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %o0 = pf.param_ref @"blocks.0.ff2.weight" : tensor<16x64xf32>
  %d0 = pf.linear %f0, %o0 {transpose_weight} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %s0 = pf.add %d0, %h0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %G0 = pf.param_ref @"blocks.0.norm2.weight" : tensor<16xf32>
  %B0 = pf.param_ref @"blocks.0.norm2.bias" : tensor<16xf32>
  %y0 = pf.layer_norm %s0, %G0, %B0 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %q1 = pf.param_ref @"blocks.1.attn.query.weight" : tensor<16x16xf32>
  %a1 = pf.linear %y0, %q1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r1 = pf.add %a1, %y0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %g1 = pf.param_ref @"blocks.1.norm1.weight" : tensor<16xf32>
  %b1 = pf.param_ref @"blocks.1.norm1.bias" : tensor<16xf32>
  %h1 = pf.layer_norm %r1, %g1, %b1 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %i1 = pf.param_ref @"blocks.1.ff1.weight" : tensor<64x16xf32>
  %f1 = pf.linear %h1, %i1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %o1 = pf.param_ref @"blocks.1.ff2.weight" : tensor<16x64xf32>
  %d1 = pf.linear %f1, %o1 {transpose_weight} : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %s1 = pf.add %d1, %h1 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %G1 = pf.param_ref @"blocks.1.norm2.weight" : tensor<16xf32>
  %B1 = pf.param_ref @"blocks.1.norm2.bias" : tensor<16xf32>
  %y1 = pf.layer_norm %s1, %G1, %B1 {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>

  %tw = pf.param_ref @"dense.weight" : tensor<16x16xf32>
  %t = pf.linear %y1, %tw {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %tg = pf.param_ref @"head_norm.weight" : tensor<16xf32>
  %tb = pf.param_ref @"head_norm.bias" : tensor<16xf32>
  %tn = pf.layer_norm %t, %tg, %tb {axis = 2 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"decoder.bias" : tensor<1000xf32>
  %logits = pf.linear %tn, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<1000x16xf32>, tensor<1000xf32>) -> tensor<4x8x1000xf32>
  return %logits : tensor<4x8x1000xf32>
}


// grain=block: the embeddings in block 0, the head in block 1, as with
// Hugging Face names.
// BLOCK-LABEL: func.func @stage0_forward(%arg0: tensor<4x8xi64> {pf.name = "input_ids"})
// BLOCK-SAME: attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64}
// BLOCK: pf.gather
// BLOCK-LABEL: func.func @stage0_backward(
// BLOCK-SAME: {pf.name = "grad/onnx::Add_7"}, tensor<16xf32> {pf.name = "grad/norm.weight"}, tensor<16xf32> {pf.name = "grad/norm.bias"}, tensor<16x16xf32> {pf.name = "grad/blocks.0.attn.query.weight"}
// BLOCK-SAME: tensor<1000x16xf32> {pf.name = "grad/tok.weight"}) attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64}
// BLOCK-LABEL: func.func @stage1_forward(%arg0: tensor<4x8xi64> {pf.name = "labels"},
// BLOCK-SAME: attributes {pf.blocks = array<i64: 1>, pf.stage = 1 : i64}
// BLOCK-NOT: pf.gather
// BLOCK: pf.softmax_cross_entropy
// BLOCK-LABEL: func.func @stage1_backward(
// BLOCK-SAME: {pf.name = "grad/blocks.1.attn.query.weight"}
// BLOCK-SAME: {pf.name = "grad/dense.weight"}, tensor<16xf32> {pf.name = "grad/head_norm.weight"}, tensor<16xf32> {pf.name = "grad/head_norm.bias"}, tensor<1000xf32> {pf.name = "grad/decoder.bias"}, tensor<1000x16xf32> {pf.name = "grad/tok.weight"}) attributes {pf.blocks = array<i64: 1>, pf.stage = 1 : i64}

// grain=ends: four units, as with Hugging Face names (it found one).
// ENDS-LABEL: func.func @stage0_forward(
// ENDS-SAME: attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64, pf.units = ["embeddings", "block0", "block1"]}
// ENDS-LABEL: func.func @stage1_forward(
// ENDS-SAME: attributes {pf.stage = 1 : i64, pf.units = ["head"]}
// ENDS: pf.param_ref @dense.weight

// grain=half, D = 7: every unit on a stage of its own, the embeddings first.
// HALF7-LABEL: func.func @stage0_forward(
// HALF7-SAME: attributes {pf.stage = 0 : i64, pf.units = ["embeddings"]}
// HALF7-LABEL: func.func @stage0_backward(
// HALF7-SAME: -> (tensor<1x8x16xf32> {pf.name = "grad/onnx::Add_7"}, tensor<16xf32> {pf.name = "grad/norm.weight"}, tensor<16xf32> {pf.name = "grad/norm.bias"}, tensor<1000x16xf32> {pf.name = "grad/tok.weight"}) attributes {pf.stage = 0 : i64, pf.units = ["embeddings"]}
// HALF7-LABEL: func.func @stage1_forward(
// HALF7-SAME: pf.units = ["block0.attn"]
// HALF7-LABEL: func.func @stage2_forward(
// HALF7-SAME: pf.units = ["block0.ffn"]
// HALF7-LABEL: func.func @stage3_forward(
// HALF7-SAME: pf.units = ["block1.attn"]
// HALF7-LABEL: func.func @stage4_forward(
// HALF7-SAME: pf.units = ["block1.ffn"]
// HALF7-LABEL: func.func @stage5_forward(
// HALF7-SAME: attributes {pf.stage = 5 : i64, pf.units = ["head.transform"]}
// HALF7-LABEL: func.func @stage5_backward(
// HALF7-SAME: {pf.name = "grad/dense.weight"}, tensor<16xf32> {pf.name = "grad/head_norm.weight"}, tensor<16xf32> {pf.name = "grad/head_norm.bias"})
// HALF7-LABEL: func.func @stage6_forward(
// HALF7-SAME: attributes {pf.stage = 6 : i64, pf.units = ["head.decoder"]}

// The pipelined training step: each stage updates its parameters, the tied
// table on both; the programs verify.
// TRAINING-LABEL: func.func @stage0_update(%arg0: tensor<1x8x16xf32> {pf.name = "grad/onnx::Add_7"}
// TRAINING: pf.adamw_update @"onnx::Add_7"
// TRAINING: pf.adamw_update @tok.weight
// TRAINING-LABEL: func.func @stage1_update(
// TRAINING: pf.adamw_update @blocks.1.attn.query.weight
// TRAINING: pf.adamw_update @decoder.bias
// TRAINING: pf.adamw_update @tok.weight
// TRAINING: pf.rank_program @rank0
// TRAINING: pf.run_stage update @stage0_update
// TRAINING: pf.rank_program @rank1
// TRAINING: pf.run_stage update @stage1_update
