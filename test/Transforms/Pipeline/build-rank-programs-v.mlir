// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=4 split-backward=true" --pf-build-rank-programs="schedule=zb-v microbatches=4" | grep -E "rank_program|pf\.(run_stage|send_act|recv_act|all_reduce|broadcast|reduce_microbatch|step_result)" | FileCheck %s --check-prefix=ZBV --implicit-check-not=all_reduce --implicit-check-not=pf.broadcast --implicit-check-not=reduce_microbatch
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=4 split-backward=true" --pf-build-rank-programs="schedule=zb-v microbatches=4" | FileCheck %s --check-prefix=TIED
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=4 split-backward=true" --pf-build-rank-programs="schedule=zb-v microbatches=1" | FileCheck %s --check-prefix=TIED-N1
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=4 split-backward=true" --pf-build-rank-programs="schedule=dualpipev microbatches=4" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|run_stage (forward|backward)" | FileCheck %s --check-prefix=DUALPIPEV
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=dualpipe microbatches=4" | FileCheck %s --check-prefix=DUALPIPE
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=zb-v micro-batches=2" | FileCheck %s --check-prefix=TRAINING
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" --pf-build-rank-programs="schedule=zb-v microbatches=4" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=4" --pf-build-rank-programs="schedule=dualpipev microbatches=4" 2>&1 | FileCheck %s --check-prefix=FUSED
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=dualpipe microbatches=2" 2>&1 | FileCheck %s --check-prefix=DUALPIPE-N

// The schedules with two stages per rank in a V (zb-v, dualpipev: stage s < D
// on rank s, stage s >= D on rank 2D-1-s) and DualPipe (two pipes as
// Chimera's), over the backward halves of pf-split-stages{split-backward}.
// A toy encoder of four blocks (the tied embedding read by stage 0's gather
// and stage 3's decoder), D = 2.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.3.dense.weight" : tensor<16x16xf32>
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
  %w3 = pf.param_ref @"bert.encoder.layer.3.dense.weight" : tensor<16x16xf32>
  %x4 = pf.linear %x3, %w3 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r = pf.add %x4, %x1 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"cls.predictions.bias" : tensor<100xf32>
  %logits = pf.linear %r, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<100x16xf32>, tensor<100xf32>) -> tensor<4x8x100xf32>
  return %logits : tensor<4x8x100xf32>
}

// zb-v, D = 2, N = 4: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
// The V's turn (stage 1 -> stage 2 on rank 1, forward act/* and backward
// grad_act/*) is on one rank: no send or recv between them, the next call
// reads the values the previous one made (stage 2's forward reads stage 1's
// results, stage 1's backward halves stage 2's; a weight half reads its
// forward's saved value and the gradient its input half used). act/3
// (relayed to the residual) crosses both ways with its own tags (chunk 0
// down, chunk 1 back up). The tied embedding's two pieces are both on rank
// 0: summed there by @stage3_accumulate_tied* once both stages returned the
// micro-batch's (after stage 0's weight half), no all_reduce, broadcast or
// reduce_microbatch. Each accumulate call takes the micro-batch's gradient
// pieces and continues the running sums of the previous one; after the last
// ones each rank hands its step gradients (their results; the tied one the
// tied sum) to the host, rank 0 the loss first.
// ZBV-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 3]) microbatches(4) {
// ZBV-NEXT: %[[F0_0:[0-9]+]]:2 = pf.run_stage forward @stage0_forward() microbatch(0)
// ZBV-NEXT: pf.send_act %[[F0_0]]#0 microbatch(0) to(1) tag(0)
// ZBV-NEXT: %[[F0_1:[0-9]+]]:2 = pf.run_stage forward @stage0_forward() microbatch(1)
// ZBV-NEXT: pf.send_act %[[F0_1]]#0 microbatch(1) to(1) tag(1)
// ZBV-NEXT: %[[A3_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(28)
// ZBV-NEXT: %[[A7_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(36)
// ZBV-NEXT: %[[F0_2:[0-9]+]]:2 = pf.run_stage forward @stage0_forward() microbatch(2)
// ZBV-NEXT: pf.send_act %[[F0_2]]#0 microbatch(2) to(1) tag(2)
// ZBV-NEXT: %[[F3_0:[0-9]+]]:4 = pf.run_stage forward @stage3_forward(%[[A3_0]], %[[A7_0]]) microbatch(0)
// ZBV-NEXT: %[[A3_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(29)
// ZBV-NEXT: %[[A7_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(37)
// ZBV-NEXT: %[[BI3_0:[0-9]+]]:4 = pf.run_stage backward_input @stage3_backward_input(%[[F3_0]]#2) microbatch(0)
// ZBV-NEXT: pf.send_act %[[BI3_0]]#0 microbatch(0) to(1) tag(40)
// ZBV-NEXT: pf.send_act %[[BI3_0]]#1 microbatch(0) to(1) tag(44)
// ZBV-NEXT: %[[BW3_0:[0-9]+]]:3 = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_0]]#0, %[[F3_0]]#1, %[[BI3_0]]#2, %[[BI3_0]]#3) microbatch(0)
// ZBV-NEXT: %[[ACC3_0:[0-9]+]]:3 = pf.run_stage accumulate @stage3_accumulate_first(%[[BW3_0]]#0, %[[BW3_0]]#1, %[[F3_0]]#3) microbatch(0)
// ZBV-NEXT: %[[F3_1:[0-9]+]]:4 = pf.run_stage forward @stage3_forward(%[[A3_1]], %[[A7_1]]) microbatch(1)
// ZBV-NEXT: %[[BI3_1:[0-9]+]]:4 = pf.run_stage backward_input @stage3_backward_input(%[[F3_1]]#2) microbatch(1)
// ZBV-NEXT: pf.send_act %[[BI3_1]]#0 microbatch(1) to(1) tag(41)
// ZBV-NEXT: pf.send_act %[[BI3_1]]#1 microbatch(1) to(1) tag(45)
// ZBV-NEXT: %[[GA42_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(24)
// ZBV-NEXT: %[[BW3_1:[0-9]+]]:3 = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_1]]#0, %[[F3_1]]#1, %[[BI3_1]]#2, %[[BI3_1]]#3) microbatch(1)
// ZBV-NEXT: %[[ACC3_1:[0-9]+]]:3 = pf.run_stage accumulate @stage3_accumulate(%[[BW3_1]]#0, %[[ACC3_0]]#0, %[[BW3_1]]#1, %[[ACC3_0]]#1, %[[F3_1]]#3, %[[ACC3_0]]#2) microbatch(1)
// ZBV-NEXT: %[[F0_3:[0-9]+]]:2 = pf.run_stage forward @stage0_forward() microbatch(3)
// ZBV-NEXT: pf.send_act %[[F0_3]]#0 microbatch(3) to(1) tag(3)
// ZBV-NEXT: %[[A3_2:[0-9]+]] = pf.recv_act microbatch(2) from(1) tag(30)
// ZBV-NEXT: %[[A7_2:[0-9]+]] = pf.recv_act microbatch(2) from(1) tag(38)
// ZBV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// ZBV-NEXT: %[[BW0_0:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_0]]#1, %[[GA42_0]]) microbatch(0)
// ZBV-NEXT: %[[ACC0_0:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate_first(%[[BW0_0]]#0) microbatch(0)
// ZBV-NEXT: %[[TIED_0:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied_first(%[[BW3_0]]#2, %[[BW0_0]]#1) microbatch(0)
// ZBV-NEXT: %[[F3_2:[0-9]+]]:4 = pf.run_stage forward @stage3_forward(%[[A3_2]], %[[A7_2]]) microbatch(2)
// ZBV-NEXT: %[[BI3_2:[0-9]+]]:4 = pf.run_stage backward_input @stage3_backward_input(%[[F3_2]]#2) microbatch(2)
// ZBV-NEXT: pf.send_act %[[BI3_2]]#0 microbatch(2) to(1) tag(42)
// ZBV-NEXT: pf.send_act %[[BI3_2]]#1 microbatch(2) to(1) tag(46)
// ZBV-NEXT: %[[GA42_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(25)
// ZBV-NEXT: %[[BW3_2:[0-9]+]]:3 = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_2]]#0, %[[F3_2]]#1, %[[BI3_2]]#2, %[[BI3_2]]#3) microbatch(2)
// ZBV-NEXT: %[[ACC3_2:[0-9]+]]:3 = pf.run_stage accumulate @stage3_accumulate(%[[BW3_2]]#0, %[[ACC3_1]]#0, %[[BW3_2]]#1, %[[ACC3_1]]#1, %[[F3_2]]#3, %[[ACC3_1]]#2) microbatch(2)
// ZBV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// ZBV-NEXT: %[[A3_3:[0-9]+]] = pf.recv_act microbatch(3) from(1) tag(31)
// ZBV-NEXT: %[[A7_3:[0-9]+]] = pf.recv_act microbatch(3) from(1) tag(39)
// ZBV-NEXT: %[[BW0_1:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_1]]#1, %[[GA42_1]]) microbatch(1)
// ZBV-NEXT: %[[ACC0_1:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate(%[[BW0_1]]#0, %[[ACC0_0]]) microbatch(1)
// ZBV-NEXT: %[[TIED_1:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied(%[[BW3_1]]#2, %[[BW0_1]]#1, %[[TIED_0]]) microbatch(1)
// ZBV-NEXT: %[[F3_3:[0-9]+]]:4 = pf.run_stage forward @stage3_forward(%[[A3_3]], %[[A7_3]]) microbatch(3)
// ZBV-NEXT: %[[BI3_3:[0-9]+]]:4 = pf.run_stage backward_input @stage3_backward_input(%[[F3_3]]#2) microbatch(3)
// ZBV-NEXT: pf.send_act %[[BI3_3]]#0 microbatch(3) to(1) tag(43)
// ZBV-NEXT: pf.send_act %[[BI3_3]]#1 microbatch(3) to(1) tag(47)
// ZBV-NEXT: %[[GA42_2:[0-9]+]] = pf.recv_act microbatch(2) from(1) tag(26)
// ZBV-NEXT: %[[BW3_3:[0-9]+]]:3 = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_3]]#0, %[[F3_3]]#1, %[[BI3_3]]#2, %[[BI3_3]]#3) microbatch(3)
// ZBV-NEXT: %[[ACC3_3:[0-9]+]]:3 = pf.run_stage accumulate @stage3_accumulate_last(%[[BW3_3]]#0, %[[ACC3_2]]#0, %[[BW3_3]]#1, %[[ACC3_2]]#1, %[[F3_3]]#3, %[[ACC3_2]]#2) microbatch(3)
// ZBV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(2)
// ZBV-NEXT: %[[GA42_3:[0-9]+]] = pf.recv_act microbatch(3) from(1) tag(27)
// ZBV-NEXT: %[[BW0_2:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_2]]#1, %[[GA42_2]]) microbatch(2)
// ZBV-NEXT: %[[ACC0_2:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate(%[[BW0_2]]#0, %[[ACC0_1]]) microbatch(2)
// ZBV-NEXT: %[[TIED_2:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied(%[[BW3_2]]#2, %[[BW0_2]]#1, %[[TIED_1]]) microbatch(2)
// ZBV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(3)
// ZBV-NEXT: %[[BW0_3:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_3]]#1, %[[GA42_3]]) microbatch(3)
// ZBV-NEXT: %[[ACC0_3:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate_last(%[[BW0_3]]#0, %[[ACC0_2]]) microbatch(3)
// ZBV-NEXT: %[[TIED_3:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied_last(%[[BW3_3]]#2, %[[BW0_3]]#1, %[[TIED_2]]) microbatch(3)
// ZBV-NEXT: pf.step_result "loss" %[[ACC3_3]]#2
// ZBV-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[TIED_3]]
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[ACC0_3]]
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.3.dense.weight" %[[ACC3_3]]#0
// ZBV-NEXT: pf.step_result "grad/cls.predictions.bias" %[[ACC3_3]]#1
// ZBV-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([1, 2]) microbatches(4) {
// ZBV-NEXT: %[[A3_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(0)
// ZBV-NEXT: %[[F1_0:[0-9]+]]:3 = pf.run_stage forward @stage1_forward(%[[A3_0]]) microbatch(0)
// ZBV-NEXT: %[[A3_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(1)
// ZBV-NEXT: %[[F2_0:[0-9]+]]:3 = pf.run_stage forward @stage2_forward(%[[F1_0]]#0, %[[F1_0]]#1) microbatch(0)
// ZBV-NEXT: pf.send_act %[[F2_0]]#0 microbatch(0) to(0) tag(28)
// ZBV-NEXT: pf.send_act %[[F2_0]]#1 microbatch(0) to(0) tag(36)
// ZBV-NEXT: %[[A3_2:[0-9]+]] = pf.recv_act microbatch(2) from(0) tag(2)
// ZBV-NEXT: %[[F1_1:[0-9]+]]:3 = pf.run_stage forward @stage1_forward(%[[A3_1]]) microbatch(1)
// ZBV-NEXT: %[[F2_1:[0-9]+]]:3 = pf.run_stage forward @stage2_forward(%[[F1_1]]#0, %[[F1_1]]#1) microbatch(1)
// ZBV-NEXT: pf.send_act %[[F2_1]]#0 microbatch(1) to(0) tag(29)
// ZBV-NEXT: pf.send_act %[[F2_1]]#1 microbatch(1) to(0) tag(37)
// ZBV-NEXT: %[[GA17_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(40)
// ZBV-NEXT: %[[GA24_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(44)
// ZBV-NEXT: %[[BI2_0:[0-9]+]]:2 = pf.run_stage backward_input @stage2_backward_input(%[[GA17_0]], %[[GA24_0]]) microbatch(0)
// ZBV-NEXT: %[[BW2_0:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_0]]#2, %[[GA24_0]]) microbatch(0)
// ZBV-NEXT: %[[ACC2_0:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_first(%[[BW2_0]]) microbatch(0)
// ZBV-NEXT: %[[F1_2:[0-9]+]]:3 = pf.run_stage forward @stage1_forward(%[[A3_2]]) microbatch(2)
// ZBV-NEXT: %[[GA17_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(41)
// ZBV-NEXT: %[[GA24_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(45)
// ZBV-NEXT: %[[BI1_0:[0-9]+]] = pf.run_stage backward_input @stage1_backward_input(%[[BI2_0]]#0, %[[BI2_0]]#1) microbatch(0)
// ZBV-NEXT: pf.send_act %[[BI1_0]] microbatch(0) to(0) tag(24)
// ZBV-NEXT: %[[BW1_0:[0-9]+]] = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_0]]#2, %[[BI2_0]]#1) microbatch(0)
// ZBV-NEXT: %[[A3_3:[0-9]+]] = pf.recv_act microbatch(3) from(0) tag(3)
// ZBV-NEXT: %[[ACC1_0:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_first(%[[BW1_0]]) microbatch(0)
// ZBV-NEXT: %[[F2_2:[0-9]+]]:3 = pf.run_stage forward @stage2_forward(%[[F1_2]]#0, %[[F1_2]]#1) microbatch(2)
// ZBV-NEXT: pf.send_act %[[F2_2]]#0 microbatch(2) to(0) tag(30)
// ZBV-NEXT: pf.send_act %[[F2_2]]#1 microbatch(2) to(0) tag(38)
// ZBV-NEXT: %[[BI2_1:[0-9]+]]:2 = pf.run_stage backward_input @stage2_backward_input(%[[GA17_1]], %[[GA24_1]]) microbatch(1)
// ZBV-NEXT: %[[BW2_1:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_1]]#2, %[[GA24_1]]) microbatch(1)
// ZBV-NEXT: %[[ACC2_1:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate(%[[BW2_1]], %[[ACC2_0]]) microbatch(1)
// ZBV-NEXT: %[[F1_3:[0-9]+]]:3 = pf.run_stage forward @stage1_forward(%[[A3_3]]) microbatch(3)
// ZBV-NEXT: %[[GA17_2:[0-9]+]] = pf.recv_act microbatch(2) from(0) tag(42)
// ZBV-NEXT: %[[GA24_2:[0-9]+]] = pf.recv_act microbatch(2) from(0) tag(46)
// ZBV-NEXT: %[[BI1_1:[0-9]+]] = pf.run_stage backward_input @stage1_backward_input(%[[BI2_1]]#0, %[[BI2_1]]#1) microbatch(1)
// ZBV-NEXT: pf.send_act %[[BI1_1]] microbatch(1) to(0) tag(25)
// ZBV-NEXT: %[[BW1_1:[0-9]+]] = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_1]]#2, %[[BI2_1]]#1) microbatch(1)
// ZBV-NEXT: %[[ACC1_1:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate(%[[BW1_1]], %[[ACC1_0]]) microbatch(1)
// ZBV-NEXT: %[[F2_3:[0-9]+]]:3 = pf.run_stage forward @stage2_forward(%[[F1_3]]#0, %[[F1_3]]#1) microbatch(3)
// ZBV-NEXT: pf.send_act %[[F2_3]]#0 microbatch(3) to(0) tag(31)
// ZBV-NEXT: pf.send_act %[[F2_3]]#1 microbatch(3) to(0) tag(39)
// ZBV-NEXT: %[[BI2_2:[0-9]+]]:2 = pf.run_stage backward_input @stage2_backward_input(%[[GA17_2]], %[[GA24_2]]) microbatch(2)
// ZBV-NEXT: %[[BW2_2:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_2]]#2, %[[GA24_2]]) microbatch(2)
// ZBV-NEXT: %[[GA17_3:[0-9]+]] = pf.recv_act microbatch(3) from(0) tag(43)
// ZBV-NEXT: %[[GA24_3:[0-9]+]] = pf.recv_act microbatch(3) from(0) tag(47)
// ZBV-NEXT: %[[ACC2_2:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate(%[[BW2_2]], %[[ACC2_1]]) microbatch(2)
// ZBV-NEXT: %[[BI1_2:[0-9]+]] = pf.run_stage backward_input @stage1_backward_input(%[[BI2_2]]#0, %[[BI2_2]]#1) microbatch(2)
// ZBV-NEXT: pf.send_act %[[BI1_2]] microbatch(2) to(0) tag(26)
// ZBV-NEXT: %[[BI2_3:[0-9]+]]:2 = pf.run_stage backward_input @stage2_backward_input(%[[GA17_3]], %[[GA24_3]]) microbatch(3)
// ZBV-NEXT: %[[BI1_3:[0-9]+]] = pf.run_stage backward_input @stage1_backward_input(%[[BI2_3]]#0, %[[BI2_3]]#1) microbatch(3)
// ZBV-NEXT: pf.send_act %[[BI1_3]] microbatch(3) to(0) tag(27)
// ZBV-NEXT: %[[BW1_2:[0-9]+]] = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_2]]#2, %[[BI2_2]]#1) microbatch(2)
// ZBV-NEXT: %[[ACC1_2:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate(%[[BW1_2]], %[[ACC1_1]]) microbatch(2)
// ZBV-NEXT: %[[BW2_3:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_3]]#2, %[[GA24_3]]) microbatch(3)
// ZBV-NEXT: %[[ACC2_3:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_last(%[[BW2_3]], %[[ACC2_2]]) microbatch(3)
// ZBV-NEXT: %[[BW1_3:[0-9]+]] = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_3]]#2, %[[BI2_3]]#1) microbatch(3)
// ZBV-NEXT: %[[ACC1_3:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_last(%[[BW1_3]], %[[ACC1_2]]) microbatch(3)
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[ACC1_3]]
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[ACC2_3]]

// The first stage's piece is renamed grad_part/*: a rank keeps one grad/<p>
// per micro-batch. The last stage's accumulation adds it to its own piece,
// then weights the sum as for any gradient (b + a, commutative: the
// single-process a + b bit for bit).
// TIED: func.func @stage0_backward_weight({{.*}}) -> ({{.*}}tensor<100x16xf32> {pf.name = "grad_part/bert.embeddings.word_embeddings.weight"})
// TIED: func.func @stage3_backward_weight({{.*}}tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"})
// TIED-NOT: grad_part
// TIED: func.func @stage3_accumulate_tied_first(%arg0: tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"}, %arg1: tensor<100x16xf32> {pf.name = "grad_part/bert.embeddings.word_embeddings.weight"}, %arg2: tensor<i64> {pf.name = "loss_count"}) -> (tensor<100x16xf32> {pf.name = "grad_sum/bert.embeddings.word_embeddings.weight"})
// TIED-NEXT: %[[SUM:.*]] = pf.add %arg0, %arg1
// TIED-NEXT: %[[COUNT:.*]] = pf.cast %arg2
// TIED-NEXT: %[[TERM:.*]] = pf.mul %[[SUM]], %[[COUNT]]
// TIED-NEXT: return %[[TERM]]
// TIED: func.func @stage3_accumulate_tied(%arg0: {{.*}}"grad/bert.embeddings.word_embeddings.weight"}, %arg1: {{.*}}"grad_part/bert.embeddings.word_embeddings.weight"}, %arg2: {{.*}}"grad_sum/bert.embeddings.word_embeddings.weight"}, %arg3: {{.*}}"loss_count"})
// TIED: func.func @stage3_accumulate_tied_last(

// One micro-batch: nothing weighted, the two pieces only added.
// TIED-N1: func.func @stage3_accumulate_tied(%arg0: tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"}, %arg1: tensor<100x16xf32> {pf.name = "grad_part/bert.embeddings.word_embeddings.weight"}) -> (tensor<100x16xf32> {pf.name = "grad_sum/bert.embeddings.word_embeddings.weight"})
// TIED-N1-NEXT: %[[SUM:.*]] = pf.add %arg0, %arg1
// TIED-N1-NEXT: return %[[SUM]]
// The step's tied gradient is that sum; the others are the pieces
// themselves.
// TIED-N1: pf.rank_program @rank0
// TIED-N1: %[[F3:[0-9]+]]:4 = pf.run_stage forward @stage3_forward(
// TIED-N1: %[[BW3:[0-9]+]]:3 = pf.run_stage backward_weight @stage3_backward_weight(
// TIED-N1: %[[BW0:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// TIED-N1-NEXT: %[[TSUM:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied(%[[BW3]]#2, %[[BW0]]#1) microbatch(0)
// TIED-N1-NEXT: pf.step_result "loss" %[[F3]]#3 : tensor<f32>
// TIED-N1-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[TSUM]] : tensor<100x16xf32>
// TIED-N1-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[BW0]]#0 : tensor<16x16xf32>
// TIED-N1-NEXT: pf.step_result "grad/bert.encoder.layer.3.dense.weight" %[[BW3]]#0 : tensor<16x16xf32>
// TIED-N1-NEXT: pf.step_result "grad/cls.predictions.bias" %[[BW3]]#1 : tensor<100xf32>
// TIED-N1-NOT: all_reduce

// dualpipev, D = 2, N = 4: the same placement; its whole backwards (the
// layout's fullBackward) run as the two halves back to back.
// DUALPIPEV-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 3]) microbatches(4) {
// DUALPIPEV-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage0_forward() microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage forward @stage3_forward({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage3_backward_input({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage3_backward_weight({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage3_forward({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage0_forward() microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage3_backward_input({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage3_backward_weight({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage3_forward({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage3_backward_input({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage3_backward_weight({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage forward @stage3_forward({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage3_backward_input({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage3_backward_weight({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(3)
// DUALPIPEV-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([1, 2]) microbatches(4) {
// DUALPIPEV-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// DUALPIPEV-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(2)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(3)
// DUALPIPEV-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(3)

// dualpipe, D = 2, N = 4: two pipes as Chimera's (micro-batches 0, 1 down:
// stage s on rank s; 2, 3 up: on rank 1-s), so every rank holds both stages
// and every gradient is all-reduced over the two replicas at the step end.
// Only rank 0, the lowest member of each sum, reports the sums (and the
// loss); rank 1 reports nothing.
// DUALPIPE-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 1]) microbatches(4) {
// DUALPIPE-NEXT: %[[F0:[0-9]+]]:5 = pf.run_stage forward @stage0_forward() microbatch(0)
// DUALPIPE-NEXT: pf.send_act %[[F0]]#0 microbatch(0) to(1)
// DUALPIPE-NEXT: pf.send_act %[[F0]]#1 microbatch(0) to(1)
// DUALPIPE-NEXT: %[[A3:[0-9]+]] = pf.recv_act microbatch(2) from(1)
// DUALPIPE-NEXT: %[[A7:[0-9]+]] = pf.recv_act microbatch(2) from(1)
// DUALPIPE-NEXT: pf.run_stage forward @stage1_forward(%[[A3]], %[[A7]]) microbatch(2)
// DUALPIPE: %[[EMBSUM:[0-9]+]] = pf.all_reduce "grad/bert.embeddings.word_embeddings.weight"({{%[0-9]+}} : tensor<{{.*}}>) ranks([0, 1])
// DUALPIPE: %[[BIASSUM:[0-9]+]] = pf.all_reduce "grad/cls.predictions.bias"({{%[0-9]+(#[0-9]+)?}} : tensor<{{.*}}>) ranks([0, 1])
// DUALPIPE: pf.step_result "loss"
// DUALPIPE-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[EMBSUM]] :
// DUALPIPE: pf.step_result "grad/cls.predictions.bias" %[[BIASSUM]] :
// DUALPIPE-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([0, 1]) microbatches(4) {
// DUALPIPE-NEXT: %[[A3:[0-9]+]] = pf.recv_act microbatch(0) from(0)
// DUALPIPE-NEXT: %[[A7:[0-9]+]] = pf.recv_act microbatch(0) from(0)
// DUALPIPE-NEXT: pf.run_stage forward @stage0_forward() microbatch(2)
// DUALPIPE: pf.run_stage forward @stage1_forward(%[[A3]], %[[A7]]) microbatch(0)
// DUALPIPE: pf.all_reduce "grad/cls.predictions.bias"({{%[0-9]+(#[0-9]+)?}} : tensor<{{.*}}>) ranks([0, 1])
// DUALPIPE-NOT: pf.step_result

// The whole step: rank 0's two stages share the tied embedding, updated once
// by the merged @rank0_update, which takes the clipped tied sum and bias
// gradient (its grad/* arguments, in argument order). Each rank clips its
// step gradients (their running sums) and hands the clipped ones to the
// host and its updates. No gradient is summed over ranks (the tied one is
// rank 0's alone), so each rank counts all of its own (counted all true).
// TRAINING: func.func @rank0_update(%arg0: tensor<100x16xf32> {pf.name = "grad/bert.embeddings.word_embeddings.weight"}, %arg1: tensor<f64> {pf.name = "lr"}, %arg2: tensor<i64> {pf.name = "step"}, %arg3: tensor<100xf32> {pf.name = "grad/cls.predictions.bias"})
// TRAINING: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 3]) microbatches(2) {
// TRAINING: %[[LAST3:[0-9]+]]:2 = pf.run_stage accumulate @stage3_accumulate_last({{.*}}) microbatch(1)
// TRAINING: %[[TSUM:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_tied_last({{.*}}) microbatch(1)
// TRAINING-NEXT: pf.step_result "loss" %[[LAST3]]#1 : tensor<f32>
// TRAINING-NEXT: %[[CLIP0:[0-9]+]]:2 = pf.clip_gradients(%[[TSUM]], %[[LAST3]]#0 : tensor<100x16xf32>, tensor<100xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/cls.predictions.bias"]) counted([true, true]) max_norm(1.000000e+00) order(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/bert.encoder.layer.3.dense.weight", "grad/cls.predictions.bias"]) -> tensor<100x16xf32>, tensor<100xf32>
// TRAINING-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[CLIP0]]#0 : tensor<100x16xf32>
// TRAINING-NEXT: pf.step_result "grad/cls.predictions.bias" %[[CLIP0]]#1 : tensor<100xf32>
// TRAINING-NEXT: pf.run_stage update @rank0_update(%[[CLIP0]]#0, %[[CLIP0]]#1) : (tensor<100x16xf32>, tensor<100xf32>) -> ()
// TRAINING-NEXT: }
// TRAINING: pf.rank_program @rank1 rank(1) ranks(2) stages([1, 2]) microbatches(2) {
// TRAINING: %[[SUM2:[0-9]+]]:2 = pf.run_stage accumulate @stage2_accumulate_last(
// TRAINING: %[[SUM1:[0-9]+]]:2 = pf.run_stage accumulate @stage1_accumulate_last(
// TRAINING-NEXT: %[[CLIP1:[0-9]+]]:4 = pf.clip_gradients(%[[SUM1]]#0, %[[SUM1]]#1, %[[SUM2]]#0, %[[SUM2]]#1 : {{.*}}) names(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/bert.encoder.layer.3.dense.weight"]) counted([true, true, true, true]) max_norm(1.000000e+00) order(["grad/bert.embeddings.word_embeddings.weight", {{.*}}])
// TRAINING-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[CLIP1]]#0
// TRAINING-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[CLIP1]]#1
// TRAINING-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[CLIP1]]#2
// TRAINING-NEXT: pf.step_result "grad/bert.encoder.layer.3.dense.weight" %[[CLIP1]]#3
// TRAINING-NEXT: pf.run_stage update @stage1_update(%[[CLIP1]]#0, %[[CLIP1]]#1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
// TRAINING-NEXT: pf.run_stage update @stage2_update(%[[CLIP1]]#2, %[[CLIP1]]#3) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()

// ODD: error: pf-build-rank-programs: zb-v needs two stages on each of at least 2 ranks: the module has 3 stages (run pf-split-stages with stages = 2 × ranks)
// FUSED: error: pf-build-rank-programs: schedule 'dualpipev' needs @stage0_backward_input and @stage0_backward_weight (run pf-split-stages with split-backward=true)
// DUALPIPE-N: error: pf-build-rank-programs: dualpipe needs at least 2 x 2 = 4 micro-batches (got 2)
