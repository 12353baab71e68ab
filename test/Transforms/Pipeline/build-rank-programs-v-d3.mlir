// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=6 split-backward=true" --pf-build-rank-programs="schedule=zb-v microbatches=3" | grep -E "rank_program|pf\.(run_stage|send_act|recv_act|all_reduce|broadcast|reduce_microbatch|step_result)" | FileCheck %s --check-prefix=ZBV --implicit-check-not=all_reduce --implicit-check-not=pf.broadcast --implicit-check-not=reduce_microbatch
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=6 split-backward=true" --pf-build-rank-programs="schedule=dualpipev microbatches=6" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|pf\.(send_act|recv_act)" | FileCheck %s --check-prefix=DUALPIPEV

// The V schedules on three ranks (build-rank-programs-v.mlir has D = 2):
// six stages of one linear each, stage s < 3 on rank s, stage s >= 3 on rank
// 5-s. Rank 2 holds the V's turn (stages 2 and 3) and exchanges values with
// rank 1 only; rank 1 sends stage 1's act/* down to rank 2 and stage 4's up
// to rank 0; the tied embedding's pieces (stages 0 and 5) meet on rank 0.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.3.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.4.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.5.dense.weight" : tensor<16x16xf32>
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
  %w4 = pf.param_ref @"bert.encoder.layer.4.dense.weight" : tensor<16x16xf32>
  %x5 = pf.linear %x4, %w4 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %w5 = pf.param_ref @"bert.encoder.layer.5.dense.weight" : tensor<16x16xf32>
  %x6 = pf.linear %x5, %w5 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"cls.predictions.bias" : tensor<100xf32>
  %logits = pf.linear %x6, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<100x16xf32>, tensor<100xf32>) -> tensor<4x8x100xf32>
  return %logits : tensor<4x8x100xf32>
}

// Rank 0: stage 0's weight half reads its forward's saved/1 (#1) and the
// grad_act/51 rank 1 sends back; stage 5's forward the act/11 from rank 1.
// The tied accumulation adds stage 5's piece (#2) and stage 0's (#1) and
// continues its running sum; its last result is the step's tied gradient.
// ZBV-LABEL: pf.rank_program @rank0 rank(0) ranks(3) stages([0, 5]) microbatches(3) {
// ZBV-NEXT: %[[F0:[0-9]+]]:2 = pf.run_stage forward @stage0_forward() microbatch(0)
// ZBV: %[[A11:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(30)
// ZBV-NEXT: pf.run_stage forward @stage5_forward(%[[A11]]) microbatch(0)
// ZBV: %[[BW5_0:[0-9]+]]:3 = pf.run_stage backward_weight @stage5_backward_weight({{.*}}) microbatch(0)
// ZBV: %[[BW5_1:[0-9]+]]:3 = pf.run_stage backward_weight @stage5_backward_weight({{.*}}) microbatch(1)
// ZBV: %[[GA51_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(27)
// ZBV: %[[BW5_2:[0-9]+]]:3 = pf.run_stage backward_weight @stage5_backward_weight({{.*}}) microbatch(2)
// ZBV: %[[BW0_0:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0]]#1, %[[GA51_0]]) microbatch(0)
// ZBV-NEXT: %[[GA51_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(28)
// ZBV-NEXT: %[[ACC0_0:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate_first(%[[BW0_0]]#0) microbatch(0)
// ZBV-NEXT: %[[TIED0:[0-9]+]] = pf.run_stage accumulate @stage5_accumulate_tied_first(%[[BW5_0]]#2, %[[BW0_0]]#1) microbatch(0)
// ZBV: %[[BW0_1:[0-9]+]]:2 = pf.run_stage backward_weight @stage0_backward_weight(%{{[0-9]+}}#1, %[[GA51_1]]) microbatch(1)
// ZBV: %[[TIED1:[0-9]+]] = pf.run_stage accumulate @stage5_accumulate_tied(%[[BW5_1]]#2, %[[BW0_1]]#1, %[[TIED0]]) microbatch(1)
// ZBV: %[[TIED2:[0-9]+]] = pf.run_stage accumulate @stage5_accumulate_tied_last(%[[BW5_2]]#2, %{{[0-9]+}}#1, %[[TIED1]]) microbatch(2)
// ZBV-NEXT: pf.step_result "loss"
// ZBV-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[TIED2]]
// ZBV-LABEL: pf.rank_program @rank1 rank(1) ranks(3) stages([1, 4]) microbatches(3) {
// ZBV-NEXT: %[[A3:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(3)
// ZBV-NEXT: %[[F1:[0-9]+]]:2 = pf.run_stage forward @stage1_forward(%[[A3]]) microbatch(0)
// ZBV-NEXT: pf.send_act %[[F1]]#0 microbatch(0) to(2)
// ZBV: %[[A9:[0-9]+]] = pf.recv_act microbatch(0) from(2) tag(42)
// ZBV: %[[F4:[0-9]+]]:2 = pf.run_stage forward @stage4_forward(%[[A9]]) microbatch(0)
// ZBV-NEXT: pf.send_act %[[F4]]#0 microbatch(0) to(0)
// ZBV-NOT: accumulate_tied
// ZBV-LABEL: pf.rank_program @rank2 rank(2) ranks(3) stages([2, 3]) microbatches(3) {
// ZBV-NEXT: %[[A5_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(6)
// ZBV-NEXT: %[[F2_0:[0-9]+]]:2 = pf.run_stage forward @stage2_forward(%[[A5_0]]) microbatch(0)
// ZBV-NEXT: %[[A5_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(7)
// ZBV-NEXT: %[[F3_0:[0-9]+]]:2 = pf.run_stage forward @stage3_forward(%[[F2_0]]#0) microbatch(0)
// ZBV-NEXT: pf.send_act %[[F3_0]]#0 microbatch(0) to(1) tag(42)
// ZBV-NEXT: %[[A5_2:[0-9]+]] = pf.recv_act microbatch(2) from(1) tag(8)
// ZBV-NEXT: %[[F2_1:[0-9]+]]:2 = pf.run_stage forward @stage2_forward(%[[A5_1]]) microbatch(1)
// ZBV-NEXT: %[[F3_1:[0-9]+]]:2 = pf.run_stage forward @stage3_forward(%[[F2_1]]#0) microbatch(1)
// ZBV-NEXT: pf.send_act %[[F3_1]]#0 microbatch(1) to(1) tag(43)
// ZBV-NEXT: %[[F2_2:[0-9]+]]:2 = pf.run_stage forward @stage2_forward(%[[A5_2]]) microbatch(2)
// ZBV-NEXT: %[[GA33_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(48)
// ZBV-NEXT: %[[F3_2:[0-9]+]]:2 = pf.run_stage forward @stage3_forward(%[[F2_2]]#0) microbatch(2)
// ZBV-NEXT: pf.send_act %[[F3_2]]#0 microbatch(2) to(1) tag(44)
// ZBV-NEXT: %[[BI3_0:[0-9]+]] = pf.run_stage backward_input @stage3_backward_input(%[[GA33_0]]) microbatch(0)
// ZBV-NEXT: %[[BW3_0:[0-9]+]] = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_0]]#1, %[[GA33_0]]) microbatch(0)
// ZBV-NEXT: %[[GA33_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(49)
// ZBV-NEXT: %[[ACC3_0:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_first(%[[BW3_0]]) microbatch(0)
// ZBV-NEXT: %[[BI2_0:[0-9]+]] = pf.run_stage backward_input @stage2_backward_input(%[[BI3_0]]) microbatch(0)
// ZBV-NEXT: pf.send_act %[[BI2_0]] microbatch(0) to(1) tag(24)
// ZBV-NEXT: %[[BW2_0:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_0]]#1, %[[BI3_0]]) microbatch(0)
// ZBV-NEXT: %[[ACC2_0:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_first(%[[BW2_0]]) microbatch(0)
// ZBV-NEXT: %[[BI3_1:[0-9]+]] = pf.run_stage backward_input @stage3_backward_input(%[[GA33_1]]) microbatch(1)
// ZBV-NEXT: %[[BW3_1:[0-9]+]] = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_1]]#1, %[[GA33_1]]) microbatch(1)
// ZBV-NEXT: %[[GA33_2:[0-9]+]] = pf.recv_act microbatch(2) from(1) tag(50)
// ZBV-NEXT: %[[ACC3_1:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate(%[[BW3_1]], %[[ACC3_0]]) microbatch(1)
// ZBV-NEXT: %[[BI2_1:[0-9]+]] = pf.run_stage backward_input @stage2_backward_input(%[[BI3_1]]) microbatch(1)
// ZBV-NEXT: pf.send_act %[[BI2_1]] microbatch(1) to(1) tag(25)
// ZBV-NEXT: %[[BW2_1:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_1]]#1, %[[BI3_1]]) microbatch(1)
// ZBV-NEXT: %[[ACC2_1:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate(%[[BW2_1]], %[[ACC2_0]]) microbatch(1)
// ZBV-NEXT: %[[BI3_2:[0-9]+]] = pf.run_stage backward_input @stage3_backward_input(%[[GA33_2]]) microbatch(2)
// ZBV-NEXT: %[[BW3_2:[0-9]+]] = pf.run_stage backward_weight @stage3_backward_weight(%[[F3_2]]#1, %[[GA33_2]]) microbatch(2)
// ZBV-NEXT: %[[ACC3_2:[0-9]+]] = pf.run_stage accumulate @stage3_accumulate_last(%[[BW3_2]], %[[ACC3_1]]) microbatch(2)
// ZBV-NEXT: %[[BI2_2:[0-9]+]] = pf.run_stage backward_input @stage2_backward_input(%[[BI3_2]]) microbatch(2)
// ZBV-NEXT: pf.send_act %[[BI2_2]] microbatch(2) to(1) tag(26)
// ZBV-NEXT: %[[BW2_2:[0-9]+]] = pf.run_stage backward_weight @stage2_backward_weight(%[[F2_2]]#1, %[[BI3_2]]) microbatch(2)
// ZBV-NEXT: %[[ACC2_2:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_last(%[[BW2_2]], %[[ACC2_1]]) microbatch(2)
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[ACC2_2]]
// ZBV-NEXT: pf.step_result "grad/bert.encoder.layer.3.dense.weight" %[[ACC3_2]]

// dualpipev, N = 6: the same placement; every transfer is between
// neighbouring ranks and none from a rank to itself.
// DUALPIPEV-LABEL: pf.rank_program @rank0
// DUALPIPEV-NOT: {{(to|from)\(0\)|(to|from)\(2\)}}
// DUALPIPEV-LABEL: pf.rank_program @rank1
// DUALPIPEV-NOT: {{(to|from)\(1\)}}
// DUALPIPEV-LABEL: pf.rank_program @rank2
// DUALPIPEV-NOT: {{(to|from)\((0|2)\)}}
