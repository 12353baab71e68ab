// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=zb-h1 microbatches=2" | FileCheck %s
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=zb-h1 microbatches=4" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D2-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" --pf-build-rank-programs="schedule=zb-h1 microbatches=2" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-N2
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" --pf-build-rank-programs="schedule=zb-h1 microbatches=4" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" --pf-build-rank-programs="schedule=zb-h1 microbatches=4" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=gpipe microbatches=2" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=GPIPE
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=3 split-backward=true" --pf-build-rank-programs="schedule=1f1b microbatches=2" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=1F1B
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 split-backward=true" --pf-build-rank-programs="schedule=zb-h2 microbatches=4" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|run_stage (forward|backward)" | FileCheck %s --check-prefix=ZBH2

// schedule=zb-h1 over the backward halves of pf-split-stages{split-backward}:
// 1F1B's order with each backward split into backward_input (B) and
// backward_weight (W); rank d defers its W passes by d micro-batches
// (pf::sched::buildPipeline), so the input gradients reach the earlier stages
// sooner. Only B sends (the grad_act/*); W sends nothing. The toy encoder of
// split-stages.mlir.

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

// D = 2, N = 2 in full. Rank 1 (the last stage, d = 1) runs B0 and sends
// its gradients at once, and defers W0 until after B1; rank 0 (d = 0) runs each
// W right after its B. The tied embedding's piece of micro-batch m goes from
// rank 0 after its W(m) to rank 1, which takes it only after its own W(m)
// (each member's reduce takes its W's piece; rank 1's returns the sum, which
// its accumulate_reduced calls add up).
// Stage 0's B half has nothing to compute (no stage before it): its W half
// reads the forward's saved values and the received gradients; rank 1's
// deferred W(0) reads what its B(0) kept for it (wsaved/*), after B(1).
// Each accumulate call continues the previous one's running sums; the last
// ones' results are the step's gradients, which each rank hands the host
// (rank 1 the loss first): the tied embedding's as the value the broadcast
// returns (rank 1, the root, broadcasts its last reduced running sum) only
// on rank 0, the lowest member of the sum, which counts it; then the rank's
// own, sorted by name.
// CHECK-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
// CHECK-NEXT: %[[F0_0:[0-9]+]]:4 = pf.run_stage forward @stage0_forward() microbatch(0)
// CHECK-NEXT: pf.send_act %[[F0_0]]#0 microbatch(0) to(1) tag(0) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[F0_0]]#1 microbatch(0) to(1) tag(2) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[F0_1:[0-9]+]]:4 = pf.run_stage forward @stage0_forward() microbatch(1)
// CHECK-NEXT: pf.send_act %[[F0_1]]#0 microbatch(1) to(1) tag(1) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[F0_1]]#1 microbatch(1) to(1) tag(3) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA15_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(4) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA22_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(6) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// CHECK-NEXT: %[[BW0_0:[0-9]+]]:3 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_0]]#2, %[[F0_0]]#3, %[[GA15_0]], %[[GA22_0]]) microbatch(0)
// CHECK-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[BW0_0]]#2 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32>
// CHECK-NEXT: %[[GA15_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(5) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA22_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(7) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[ACC0_0:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_first(%[[BW0_0]]#0, %[[BW0_0]]#1) microbatch(0)
// CHECK-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// CHECK-NEXT: %[[BW0_1:[0-9]+]]:3 = pf.run_stage backward_weight @stage0_backward_weight(%[[F0_1]]#2, %[[F0_1]]#3, %[[GA15_1]], %[[GA22_1]]) microbatch(1)
// CHECK-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[BW0_1]]#2 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32>
// CHECK-NEXT: %[[ACC0_1:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_last(%[[BW0_1]]#0, %[[ACC0_0]]#0, %[[BW0_1]]#1, %[[ACC0_0]]#1) microbatch(1)
// CHECK-NEXT: %[[BC0:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>{{$}}
// CHECK-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[BC0]] : tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[ACC0_1]]#0 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[ACC0_1]]#1 : tensor<16x16xf32>
// CHECK-NEXT: }
// CHECK-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
// CHECK-NEXT: %[[A3_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[A5_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(2) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[F1_0:[0-9]+]]:4 = pf.run_stage forward @stage1_forward(%[[A3_0]], %[[A5_0]]) microbatch(0)
// CHECK-NEXT: %[[A3_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[A5_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(3) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[BI1_0:[0-9]+]]:4 = pf.run_stage backward_input @stage1_backward_input(%[[F1_0]]#2) microbatch(0)
// CHECK-NEXT: pf.send_act %[[BI1_0]]#0 microbatch(0) to(0) tag(4) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[BI1_0]]#1 microbatch(0) to(0) tag(6) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[F1_1:[0-9]+]]:4 = pf.run_stage forward @stage1_forward(%[[A3_1]], %[[A5_1]]) microbatch(1)
// CHECK-NEXT: %[[BI1_1:[0-9]+]]:4 = pf.run_stage backward_input @stage1_backward_input(%[[F1_1]]#2) microbatch(1)
// CHECK-NEXT: pf.send_act %[[BI1_1]]#0 microbatch(1) to(0) tag(5) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[BI1_1]]#1 microbatch(1) to(0) tag(7) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[BW1_0:[0-9]+]]:3 = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_0]]#0, %[[F1_0]]#1, %[[BI1_0]]#2, %[[BI1_0]]#3) microbatch(0)
// CHECK-NEXT: %[[ACC1_0:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_first(%[[BW1_0]]#0, %[[BW1_0]]#1, %[[F1_0]]#3) microbatch(0)
// CHECK-NEXT: %[[EMB0:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[BW1_0]]#2 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[RED0:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_first(%[[EMB0]]) microbatch(0)
// CHECK-NEXT: %[[BW1_1:[0-9]+]]:3 = pf.run_stage backward_weight @stage1_backward_weight(%[[F1_1]]#0, %[[F1_1]]#1, %[[BI1_1]]#2, %[[BI1_1]]#3) microbatch(1)
// CHECK-NEXT: %[[ACC1_1:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_last(%[[BW1_1]]#0, %[[ACC1_0]]#0, %[[BW1_1]]#1, %[[ACC1_0]]#1, %[[F1_1]]#3, %[[ACC1_0]]#2) microbatch(1)
// CHECK-NEXT: %[[EMB1:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[BW1_1]]#2 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[RED1:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_last(%[[EMB1]], %[[RED0]]) microbatch(1)
// CHECK-NEXT: pf.step_result "loss" %[[ACC1_1]]#2 : tensor<f32>
// CHECK-NEXT: %{{[0-9]+}} = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%[[RED1]] : tensor<100x16xf32>) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[ACC1_1]]#0 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/cls.predictions.bias" %[[ACC1_1]]#1 : tensor<100xf32>
// CHECK-NEXT: }

// D = 2, N = 4.
// D2-N4-LABEL: pf.rank_program @rank0 rank(0)
// D2-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// D2-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// D2-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// D2-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// D2-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// D2-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// D2-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(3)
// D2-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(3)
// D2-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(3)
// D2-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1])
// D2-N4-LABEL: pf.rank_program @rank1 rank(1)
// D2-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// D2-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// D2-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// D2-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// D2-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// D2-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// D2-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(3)
// D2-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(3)
// D2-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(2)
// D2-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(3)
// D2-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(1) ranks([0, 1])
// D2-N4-NOT: pf.run_stage

// D = 3, N = 2: rank 2 defers W by two micro-batches, i.e. to the end.
// D3-N2-LABEL: pf.rank_program @rank0 rank(0)
// D3-N2-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// D3-N2-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(2) ranks([0, 2])
// D3-N2-LABEL: pf.rank_program @rank1 rank(1)
// D3-N2-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// D3-N2-LABEL: pf.rank_program @rank2 rank(2)
// D3-N2-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(0)
// D3-N2-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(1)
// D3-N2-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(2) ranks([0, 2])
// D3-N2-NOT: pf.run_stage

// D = 3, N = 4 (also after a round trip through pf-verify-rank-programs).
// D3-N4-LABEL: pf.rank_program @rank0 rank(0)
// D3-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// D3-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// D3-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage0_forward() microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(2) ranks([0, 2])
// D3-N4-LABEL: pf.rank_program @rank1 rank(1)
// D3-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(3)
// D3-N4-LABEL: pf.rank_program @rank2 rank(2)
// D3-N4-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(0)
// D3-N4-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(1)
// D3-N4-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(2)
// D3-N4-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(3)
// D3-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(2) ranks([0, 2])
// D3-N4-NOT: pf.run_stage

// gpipe and 1f1b over split functions call the halves back to back where
// the fused backward would run.
// GPIPE-LABEL: pf.rank_program @rank0 rank(0)
// GPIPE-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// GPIPE-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// GPIPE-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// GPIPE-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// GPIPE-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// GPIPE-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// GPIPE-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1])
// GPIPE-LABEL: pf.rank_program @rank1 rank(1)
// GPIPE-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// GPIPE-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// GPIPE-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// GPIPE-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// GPIPE-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// GPIPE-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// GPIPE-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(1) ranks([0, 1])
// GPIPE-NOT: pf.run_stage

// 1F1B-LABEL: pf.rank_program @rank0 rank(0)
// 1F1B-NEXT: pf.run_stage forward @stage0_forward() microbatch(0)
// 1F1B-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_input @stage0_backward_input() microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_weight @stage0_backward_weight({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(2) ranks([0, 2])
// 1F1B-LABEL: pf.rank_program @rank1 rank(1)
// 1F1B-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_input @stage1_backward_input({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// 1F1B-LABEL: pf.rank_program @rank2 rank(2)
// 1F1B-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(0)
// 1F1B-NEXT: pf.run_stage forward @stage2_forward({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_input @stage2_backward_input({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.run_stage backward_weight @stage2_backward_weight({{.*}}) microbatch(1)
// 1F1B-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(2) ranks([0, 2])
// 1F1B-NOT: pf.run_stage

// ZB-H2, D = 2, N = 4 (its order for uniform passes): rank 0 runs
// 2(D-1)+1 = 3 warm-up forwards, then each input half before the next
// forward; rank 1 runs every input half before any weight half, which fill
// its tail.
// ZBH2-LABEL: pf.rank_program @rank0
// ZBH2-NEXT: forward @stage0_forward() microbatch(0)
// ZBH2-NEXT: forward @stage0_forward() microbatch(1)
// ZBH2-NEXT: forward @stage0_forward() microbatch(2)
// ZBH2-NEXT: backward_input @stage0_backward_input() microbatch(0)
// ZBH2-NEXT: forward @stage0_forward() microbatch(3)
// ZBH2-NEXT: backward_input @stage0_backward_input() microbatch(1)
// ZBH2-NEXT: backward_weight @stage0_backward_weight({{.*}}) microbatch(0)
// ZBH2-LABEL: pf.rank_program @rank1
// ZBH2-NEXT: forward @stage1_forward({{.*}}) microbatch(0)
// ZBH2-NEXT: backward_input @stage1_backward_input({{.*}}) microbatch(0)
// ZBH2-NEXT: forward @stage1_forward({{.*}}) microbatch(1)
// ZBH2-NEXT: backward_input @stage1_backward_input({{.*}}) microbatch(1)
// ZBH2-NEXT: forward @stage1_forward({{.*}}) microbatch(2)
// ZBH2-NEXT: backward_input @stage1_backward_input({{.*}}) microbatch(2)
// ZBH2-NEXT: forward @stage1_forward({{.*}}) microbatch(3)
// ZBH2-NEXT: backward_input @stage1_backward_input({{.*}}) microbatch(3)
// ZBH2-NEXT: backward_weight @stage1_backward_weight({{.*}}) microbatch(0)
// ZBH2-NEXT: backward_weight @stage1_backward_weight({{.*}}) microbatch(1)
// ZBH2-NEXT: backward_weight @stage1_backward_weight({{.*}}) microbatch(2)
// ZBH2-NEXT: backward_weight @stage1_backward_weight({{.*}}) microbatch(3)
