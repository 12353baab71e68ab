// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=2 --pf-build-rank-programs="schedule=1f1b microbatches=2" | FileCheck %s
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=2 --pf-build-rank-programs="schedule=1f1b microbatches=4" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D2-1F1B-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=2 --pf-build-rank-programs="schedule=gpipe microbatches=4" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D2-GPIPE-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=1f1b microbatches=4" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-1F1B-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=gpipe microbatches=2" | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-GPIPE-N2
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=D3-COMM
// The written programs pass the checks again after a round trip.
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=1f1b microbatches=4" | pf-opt --pf-verify-rank-programs | grep -E "rank_program|run_stage (forward|backward)|all_reduce|pf.broadcast" | FileCheck %s --check-prefix=D3-1F1B-N4
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=1f1b microbatches=4" | grep -E "rank_program|run_stage (forward|backward|accumulate)|reduce_microbatch" | FileCheck %s --check-prefix=D3-REDUCE
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=3 --pf-build-rank-programs="schedule=1f1b microbatches=4" | FileCheck %s --check-prefix=D3-MIDDLE
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-build-gradients=tag-origin=true --pf-split-stages=stages=2 --pf-build-rank-programs="schedule=1f1b microbatches=2 gradient-results=false" | FileCheck %s --check-prefix=NO-GRADIENTS

// The toy encoder of split-stages.mlir: embeddings, three blocks of one linear
// each, a residual from block 0 to block 2 and the tied decoder.

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

// The count-weighted sum of a stage's own gradients over the micro-batches
// (on the last stage the tied embedding's in its own functions, after
// pf.reduce_microbatch summed the micro-batch's pieces across ranks), called
// after each backward in micro-batch order: one function per position with
// the ops its branch of pf-split-microbatches' selects takes. N = 2: the
// first (the term) and the last (the mean); the middle one (the running
// sum) in the D3-MIDDLE run.
// CHECK-LABEL: func.func @stage0_accumulate_first(
// CHECK-SAME: %[[G0:arg0]]: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, %arg1: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}, %[[C0:arg2]]: tensor<i64> {pf.name = "loss_count"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.0.dense.weight"}, tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.1.dense.weight"})
// CHECK: %[[CF0:.*]] = pf.cast %[[C0]]
// CHECK: %[[TERM0:.*]] = pf.mul %[[G0]], %[[CF0]]
// CHECK-NOT: pf.where
// CHECK: return %[[TERM0]], %{{.*}} :
// CHECK-LABEL: func.func @stage0_accumulate_last(
// CHECK-SAME: %[[G:arg0]]: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, %[[S:arg1]]: tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.0.dense.weight"}, %arg2: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}, %arg3: tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.1.dense.weight"}, %[[C:arg4]]: tensor<i64> {pf.name = "loss_count"}, %[[T:arg5]]: tensor<i64> {pf.name = "loss_total"})
// CHECK-SAME: -> (tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.0.dense.weight"}, tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.1.dense.weight"})
// The running sum continues in one pass: (sum + piece·c) / total, the bits
// of pf.mul, pf.add and pf.div (a middle call divides by nothing).
// CHECK-NOT: pf.mul
// CHECK: %[[MEAN:.*]] = pf.weighted_add %[[S]], %[[G]], %[[C]], %[[T]] : tensor<16x16xf32>
// CHECK: return %[[MEAN]], %{{.*}} :
// The last stage weights the loss with its gradients (one rank runs all of
// its micro-batches): the same term, running sum and mean.
// CHECK-LABEL: func.func @stage1_accumulate_first(
// CHECK-SAME: {pf.name = "grad/bert.encoder.layer.2.dense.weight"}
// CHECK-SAME: {pf.name = "grad/cls.predictions.bias"}, %[[L0:arg2]]: tensor<f32> {pf.name = "loss"}, %{{.*}}: tensor<i64> {pf.name = "loss_count"})
// CHECK-SAME: tensor<f32> {pf.name = "loss_sum"})
// CHECK: %[[LTERM0:.*]] = pf.mul %[[L0]], %{{.*}}
// CHECK: return %{{.*}}, %{{.*}}, %[[LTERM0]] :
// CHECK-LABEL: func.func @stage1_accumulate_last(
// CHECK-SAME: %[[L:arg4]]: tensor<f32> {pf.name = "loss"}, %[[LS:arg5]]: tensor<f32> {pf.name = "loss_sum"}, %[[LC:arg6]]: tensor<i64> {pf.name = "loss_count"}, %[[LT:arg7]]: tensor<i64> {pf.name = "loss_total"})
// CHECK-SAME: tensor<f32> {pf.name = "loss_sum"})
// CHECK: %[[LMEAN:.*]] = pf.weighted_add %[[LS]], %[[L]], %[[LC]], %[[LT]] : tensor<f32>
// CHECK: return %{{.*}}, %{{.*}}, %[[LMEAN]] :
// CHECK-LABEL: func.func @stage1_accumulate_reduced_first(
// CHECK-SAME: {pf.name = "grad/bert.embeddings.word_embeddings.weight"}, %{{.*}}: tensor<i64> {pf.name = "loss_count"}
// CHECK-LABEL: func.func @stage1_accumulate_reduced_last(
// CHECK-SAME: {pf.name = "grad/bert.embeddings.word_embeddings.weight"}, %{{.*}}: tensor<100x16xf32> {pf.name = "grad_sum/bert.embeddings.word_embeddings.weight"}, %{{.*}}: tensor<i64> {pf.name = "loss_count"}, %{{.*}}: tensor<i64> {pf.name = "loss_total"}

// D = 2, 1F1B, N = 2, in full. Stage 0 sends act/3 and act/5 (tags: index of
// the name * N + micro-batch), stage 1 returns grad_act/15 and grad_act/22.
// Each recv comes before the call that reads it and each send right after the
// call that computes it; each backward reads its micro-batch's saved values
// (its forward's results #2 and #3) and received gradients, and returns its
// gradients' pieces as values, which the accumulate calls take (with the
// previous call's running sums) in micro-batch order. The tied embedding's
// gradient: rank 0 hands each micro-batch's piece to rank 1 right after its
// backward; rank 1 takes it before its first pass that starts after that
// backward ends in the timed run (here after its last pass: rank 0's
// backwards end later), sums it into a value and accumulates that, and
// broadcasts the step's gradient back as a value. Each rank hands its step
// gradients (the last running sums, the broadcast's result) to the host's step
// end by pf.step_result; a gradient summed over ranks only from the one rank
// that counts it, the lowest member of its sum (rank 0 for the embedding).
// CHECK-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
// CHECK-NEXT: %[[F0_0:[0-9]+]]:4 = pf.run_stage forward @stage0_forward() microbatch(0)
// CHECK-NEXT: pf.send_act %[[F0_0]]#0 microbatch(0) to(1) tag(0) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[F0_0]]#1 microbatch(0) to(1) tag(2) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[F0_1:[0-9]+]]:4 = pf.run_stage forward @stage0_forward() microbatch(1)
// CHECK-NEXT: pf.send_act %[[F0_1]]#0 microbatch(1) to(1) tag(1) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[F0_1]]#1 microbatch(1) to(1) tag(3) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA15_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(4) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA22_0:[0-9]+]] = pf.recv_act microbatch(0) from(1) tag(6) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[B0_0:[0-9]+]]:3 = pf.run_stage backward @stage0_backward(%[[F0_0]]#2, %[[F0_0]]#3, %[[GA15_0]], %[[GA22_0]]) microbatch(0)
// CHECK-SAME: -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100x16xf32>)
// CHECK-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B0_0]]#2 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// CHECK-NEXT: %[[GA15_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(5) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[GA22_1:[0-9]+]] = pf.recv_act microbatch(1) from(1) tag(7) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[S0_0:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_first(%[[B0_0]]#0, %[[B0_0]]#1) microbatch(0)
// CHECK-NEXT: %[[B0_1:[0-9]+]]:3 = pf.run_stage backward @stage0_backward(%[[F0_1]]#2, %[[F0_1]]#3, %[[GA15_1]], %[[GA22_1]]) microbatch(1)
// CHECK-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B0_1]]#2 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// CHECK-NEXT: %[[S0_1:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_last(%[[B0_1]]#0, %[[S0_0]]#0, %[[B0_1]]#1, %[[S0_0]]#1) microbatch(1)
// The non-root member receives the root's sum as a value; it is the sum's
// lowest member, so it reports it, with its own gradients (sorted by name).
// CHECK-NEXT: %[[BC0:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>{{$}}
// CHECK-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[BC0]] : tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[S0_1]]#0 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[S0_1]]#1 : tensor<16x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
// CHECK-NEXT: %[[A3_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[A5_0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(2) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[F1_0:[0-9]+]]:4 = pf.run_stage forward @stage1_forward(%[[A3_0]], %[[A5_0]]) microbatch(0)
// CHECK-NEXT: %[[A3_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[A5_1:[0-9]+]] = pf.recv_act microbatch(1) from(0) tag(3) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[B1_0:[0-9]+]]:5 = pf.run_stage backward @stage1_backward(%[[F1_0]]#0, %[[F1_0]]#1, %[[F1_0]]#2) microbatch(0)
// CHECK-NEXT: pf.send_act %[[B1_0]]#0 microbatch(0) to(0) tag(4) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[B1_0]]#1 microbatch(0) to(0) tag(6) : tensor<4x8x16xf32>
// The loss is a value of the program too: each forward returns its
// micro-batch's (#3), the accumulate calls weight it with the gradients, the
// last one's sum is the step's loss, which pf.step_result hands to the host.
// CHECK-NEXT: %[[LS0:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_first(%[[B1_0]]#2, %[[B1_0]]#3, %[[F1_0]]#3) microbatch(0) in_place([0, 1, 2]) : (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>)
// CHECK-NEXT: %[[F1_1:[0-9]+]]:4 = pf.run_stage forward @stage1_forward(%[[A3_1]], %[[A5_1]]) microbatch(1)
// CHECK-NEXT: %[[B1_1:[0-9]+]]:5 = pf.run_stage backward @stage1_backward(%[[F1_1]]#0, %[[F1_1]]#1, %[[F1_1]]#2) microbatch(1)
// CHECK-NEXT: pf.send_act %[[B1_1]]#0 microbatch(1) to(0) tag(5) : tensor<4x8x16xf32>
// CHECK-NEXT: pf.send_act %[[B1_1]]#1 microbatch(1) to(0) tag(7) : tensor<4x8x16xf32>
// CHECK-NEXT: %[[LS1:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_last(%[[B1_1]]#2, %[[LS0]]#0, %[[B1_1]]#3, %[[LS0]]#1, %[[F1_1]]#3, %[[LS0]]#2) microbatch(1)
// The root's reduce returns the micro-batch's sum of both pieces, which the
// reduced accumulate calls weight.
// CHECK-NEXT: %[[R0:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B1_0]]#4 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[RS0:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_first(%[[R0]]) microbatch(0)
// CHECK-NEXT: %[[R1:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B1_1]]#4 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[RS1:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_last(%[[R1]], %[[RS0]]) microbatch(1)
// CHECK-NEXT: pf.step_result "loss" %[[LS1]]#2 : tensor<f32>
// The root broadcasts the step's sum (the last reduced running sum); rank 0,
// the lowest member, reports it, so the root reports only its own gradients.
// CHECK-NEXT: %{{[0-9]+}} = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%[[RS1]] : tensor<100x16xf32>) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[LS1]]#0 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/cls.predictions.bias" %[[LS1]]#1 : tensor<100xf32>
// CHECK-NEXT: }

// 1F1B, D = 2, N = 4: one warm-up forward on stage 0, then alternating.
// D2-1F1B-N4: pf.rank_program @rank0
// D2-1F1B-N4-NEXT: forward @stage0_forward() microbatch(0)
// D2-1F1B-N4-NEXT: forward @stage0_forward() microbatch(1)
// D2-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(0)
// D2-1F1B-N4-NEXT: forward @stage0_forward() microbatch(2)
// D2-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(1)
// D2-1F1B-N4-NEXT: forward @stage0_forward() microbatch(3)
// D2-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(2)
// D2-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(3)
// D2-1F1B-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1])
// D2-1F1B-N4-NEXT: pf.rank_program @rank1
// D2-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(0)
// D2-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(0)
// D2-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(1)
// D2-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(1)
// D2-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(2)
// D2-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(2)
// D2-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(3)
// D2-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(3)
// D2-1F1B-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(1) ranks([0, 1])

// GPipe, D = 2, N = 4: all forwards, then all backwards, on both ranks.
// D2-GPIPE-N4: pf.rank_program @rank0
// D2-GPIPE-N4-NEXT: forward @stage0_forward() microbatch(0)
// D2-GPIPE-N4-NEXT: forward @stage0_forward() microbatch(1)
// D2-GPIPE-N4-NEXT: forward @stage0_forward() microbatch(2)
// D2-GPIPE-N4-NEXT: forward @stage0_forward() microbatch(3)
// D2-GPIPE-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(0)
// D2-GPIPE-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(1)
// D2-GPIPE-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(2)
// D2-GPIPE-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(3)
// D2-GPIPE-N4-NEXT: pf.broadcast
// D2-GPIPE-N4-NEXT: pf.rank_program @rank1
// D2-GPIPE-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(0)
// D2-GPIPE-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(1)
// D2-GPIPE-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(2)
// D2-GPIPE-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(3)
// D2-GPIPE-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(0)
// D2-GPIPE-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(1)
// D2-GPIPE-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(2)
// D2-GPIPE-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(3)
// D2-GPIPE-N4-NEXT: pf.broadcast

// 1F1B, D = 3, N = 4: D-1-s warm-up forwards on stage s. The tied embedding
// lives on stages 0 and 2: the middle rank has no broadcast.
// D3-1F1B-N4: pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(4)
// D3-1F1B-N4-NEXT: forward @stage0_forward() microbatch(0)
// D3-1F1B-N4-NEXT: forward @stage0_forward() microbatch(1)
// D3-1F1B-N4-NEXT: forward @stage0_forward() microbatch(2)
// D3-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(0)
// D3-1F1B-N4-NEXT: forward @stage0_forward() microbatch(3)
// D3-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(1)
// D3-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(2)
// D3-1F1B-N4-NEXT: backward @stage0_backward({{.*}}) microbatch(3)
// D3-1F1B-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(2) ranks([0, 2])
// D3-1F1B-N4-NEXT: pf.rank_program @rank1 rank(1) ranks(3) stages([1]) microbatches(4)
// D3-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(0)
// D3-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(1)
// D3-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(0)
// D3-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(2)
// D3-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(1)
// D3-1F1B-N4-NEXT: forward @stage1_forward({{.*}}) microbatch(3)
// D3-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(2)
// D3-1F1B-N4-NEXT: backward @stage1_backward({{.*}}) microbatch(3)
// D3-1F1B-N4-NEXT: pf.rank_program @rank2 rank(2) ranks(3) stages([2]) microbatches(4)
// D3-1F1B-N4-NEXT: forward @stage2_forward({{.*}}) microbatch(0)
// D3-1F1B-N4-NEXT: backward @stage2_backward({{.*}}) microbatch(0)
// D3-1F1B-N4-NEXT: forward @stage2_forward({{.*}}) microbatch(1)
// D3-1F1B-N4-NEXT: backward @stage2_backward({{.*}}) microbatch(1)
// D3-1F1B-N4-NEXT: forward @stage2_forward({{.*}}) microbatch(2)
// D3-1F1B-N4-NEXT: backward @stage2_backward({{.*}}) microbatch(2)
// D3-1F1B-N4-NEXT: forward @stage2_forward({{.*}}) microbatch(3)
// D3-1F1B-N4-NEXT: backward @stage2_backward({{.*}}) microbatch(3)
// D3-1F1B-N4-NEXT: pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%{{[0-9]+}} : tensor<100x16xf32>) root(2) ranks([0, 2])

// GPipe, D = 3, N = 2.
// D3-GPIPE-N2: pf.rank_program @rank0
// D3-GPIPE-N2-NEXT: forward @stage0_forward() microbatch(0)
// D3-GPIPE-N2-NEXT: forward @stage0_forward() microbatch(1)
// D3-GPIPE-N2-NEXT: backward @stage0_backward({{.*}}) microbatch(0)
// D3-GPIPE-N2-NEXT: backward @stage0_backward({{.*}}) microbatch(1)
// D3-GPIPE-N2-NEXT: pf.broadcast
// D3-GPIPE-N2-NEXT: pf.rank_program @rank1
// D3-GPIPE-N2-NEXT: forward @stage1_forward({{.*}}) microbatch(0)
// D3-GPIPE-N2-NEXT: forward @stage1_forward({{.*}}) microbatch(1)
// D3-GPIPE-N2-NEXT: backward @stage1_backward({{.*}}) microbatch(0)
// D3-GPIPE-N2-NEXT: backward @stage1_backward({{.*}}) microbatch(1)
// D3-GPIPE-N2-NEXT: pf.rank_program @rank2
// D3-GPIPE-N2-NEXT: forward @stage2_forward({{.*}}) microbatch(0)
// D3-GPIPE-N2-NEXT: forward @stage2_forward({{.*}}) microbatch(1)
// D3-GPIPE-N2-NEXT: backward @stage2_backward({{.*}}) microbatch(0)
// D3-GPIPE-N2-NEXT: backward @stage2_backward({{.*}}) microbatch(1)
// D3-GPIPE-N2-NEXT: pf.broadcast

// D = 3: the middle rank relays act/3 (the residual) from rank 0 to rank 2,
// with the same tag on each hop (the peers differ): its forward takes the
// received act/3 and returns it anew (result #0), and that is what it sends.
// It sends the summed gradient grad_act/34 (its backward's first stage value;
// the second is its weight's gradient) back to rank 0.
// D3-COMM-LABEL: pf.rank_program @rank1
// D3-COMM-NEXT: %[[A3:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(0)
// D3-COMM-NEXT: %[[F1:[0-9]+]]:3 = pf.run_stage forward @stage1_forward(%[[A3]]) microbatch(0)
// D3-COMM-NEXT: pf.send_act %[[F1]]#0 microbatch(0) to(2) tag(0)
// D3-COMM-NEXT: pf.send_act %[[F1]]#1 microbatch(0) to(2) tag(2)
// D3-COMM: %[[GA15:[0-9]+]] = pf.recv_act microbatch(0) from(2) tag(4)
// D3-COMM-NEXT: %[[GA22:[0-9]+]] = pf.recv_act microbatch(0) from(2) tag(6)
// D3-COMM-NEXT: %[[B1:[0-9]+]]:2 = pf.run_stage backward @stage1_backward(%[[F1]]#2, %[[GA15]], %[[GA22]]) microbatch(0)
// D3-COMM-NEXT: pf.send_act %[[B1]]#0 microbatch(0) to(0) tag(8)

// 1F1B, D = 3, N = 4, the tied embedding (stages 0 and 2): rank 0 hands each
// micro-batch's piece over right after its backward. Rank 2 takes micro-batch
// m before its first pass starting after rank 0's backward of m ends in the
// timed run (forward 1, backward 2): micro-batch 0 (rank 0's backward ends at
// 9) before its backward of micro-batch 2 (starts at 9), so it holds at most
// three pieces, and accumulates each sum right after its reduce (its own
// gradients right after its backward).
// D3-REDUCE-LABEL: pf.rank_program @rank0
// D3-REDUCE: %[[B0:[0-9]+]]:2 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(0)
// D3-REDUCE-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B0]]#1 : tensor<100x16xf32>) microbatch(0) root(2) ranks([0, 2]) : tensor<100x16xf32>{{$}}
// D3-REDUCE-NEXT: accumulate @stage0_accumulate_first(%[[B0]]#0) microbatch(0)
// D3-REDUCE-LABEL: pf.rank_program @rank1
// D3-REDUCE-NOT: reduce_microbatch
// D3-REDUCE-LABEL: pf.rank_program @rank2
// D3-REDUCE-NEXT: forward @stage2_forward({{.*}}) microbatch(0)
// D3-REDUCE-NEXT: %[[B2_0:[0-9]+]]:5 = pf.run_stage backward @stage2_backward({{.*}}) microbatch(0)
// D3-REDUCE-NEXT: accumulate @stage2_accumulate_first({{.*}}) microbatch(0)
// D3-REDUCE-NEXT: forward @stage2_forward({{.*}}) microbatch(1)
// D3-REDUCE-NEXT: %[[B2_1:[0-9]+]]:5 = pf.run_stage backward @stage2_backward({{.*}}) microbatch(1)
// D3-REDUCE-NEXT: accumulate @stage2_accumulate({{.*}}) microbatch(1)
// D3-REDUCE-NEXT: forward @stage2_forward({{.*}}) microbatch(2)
// D3-REDUCE-NEXT: %[[R0:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B2_0]]#4 : tensor<100x16xf32>) microbatch(0) root(2) ranks([0, 2])
// D3-REDUCE-NEXT: %[[RS0:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_reduced_first(%[[R0]]) microbatch(0)
// D3-REDUCE-NEXT: %[[B2_2:[0-9]+]]:5 = pf.run_stage backward @stage2_backward({{.*}}) microbatch(2)
// D3-REDUCE-NEXT: accumulate @stage2_accumulate({{.*}}) microbatch(2)
// D3-REDUCE-NEXT: forward @stage2_forward({{.*}}) microbatch(3)
// D3-REDUCE-NEXT: %[[R1:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B2_1]]#4 : tensor<100x16xf32>) microbatch(1) root(2) ranks([0, 2])
// D3-REDUCE-NEXT: %[[RS1:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_reduced(%[[R1]], %[[RS0]]) microbatch(1)
// D3-REDUCE-NEXT: %[[B2_3:[0-9]+]]:5 = pf.run_stage backward @stage2_backward({{.*}}) microbatch(3)
// D3-REDUCE-NEXT: accumulate @stage2_accumulate_last({{.*}}) microbatch(3)
// D3-REDUCE-NEXT: %[[R2:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B2_2]]#4 : tensor<100x16xf32>) microbatch(2) root(2) ranks([0, 2])
// D3-REDUCE-NEXT: %[[RS2:[0-9]+]] = pf.run_stage accumulate @stage2_accumulate_reduced(%[[R2]], %[[RS1]]) microbatch(2)
// D3-REDUCE-NEXT: %[[R3:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B2_3]]#4 : tensor<100x16xf32>) microbatch(3) root(2) ranks([0, 2])
// D3-REDUCE-NEXT: accumulate @stage2_accumulate_reduced_last(%[[R3]], %[[RS2]]) microbatch(3)

// N = 4: the middle micro-batches' function adds the term to the running sum
// (no select, no divide).
// D3-MIDDLE-LABEL: func.func @stage0_accumulate(
// D3-MIDDLE-SAME: %[[G:arg0]]: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, %[[S:arg1]]: tensor<16x16xf32> {pf.name = "grad_sum/bert.encoder.layer.0.dense.weight"}
// D3-MIDDLE-SAME: %[[C:arg2]]: tensor<i64> {pf.name = "loss_count"})
// D3-MIDDLE-NEXT: %[[ADDED:.*]] = pf.weighted_add %[[S]], %[[G]], %[[C]] : tensor<16x16xf32>
// D3-MIDDLE-NEXT: return %[[ADDED]] :

// gradient-results=false (pf-train): only the loss leaves the programs; the
// gradients end in the program (here, without an optimizer, at their sums).
// NO-GRADIENTS-LABEL: pf.rank_program @rank0
// NO-GRADIENTS-NOT: pf.step_result
// NO-GRADIENTS: pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1)
// NO-GRADIENTS-NOT: pf.step_result
// NO-GRADIENTS-LABEL: pf.rank_program @rank1
// NO-GRADIENTS-NOT: pf.step_result "grad/
// NO-GRADIENTS: pf.step_result "loss"
// NO-GRADIENTS-NOT: pf.step_result "grad/
