// pf-kfac-window-programs: the window programs of K-FAC in the bubbles, the
// factor and inverse calls at the places a placement table gives. K-FAC work
// placed after a rank's last pass goes into its tail bubble: before the
// first collective after that pass that waits for another rank (the tied
// gradient's all-reduce or broadcast; on its root, the first
// reduce_microbatch), an inverse after the sums of the factors it reads
// (Chimera).
//
// 1F1B, N = 2: rank 1's passes are F0 B0 F1 B1; rank 0's F0 F1 B0 B1.
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=2 placement=0,0,1,1,0,1,0,4,1,2,0,4,1,2,-2,4" | FileCheck %s
// Chimera, N = 2 (both replicas on both ranks): the inverse of layer 2 on
// rank 0 after every pass, layers 0 and 1 on rank 1.
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=1 placement=0,2,0,99,1,0,0,99,1,1,0,99" | FileCheck %s --check-prefix=CHIMERA
// RUN: not pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=2 placement=0,0,1" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=2 placement=0,0,1,-3" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=2 placement=0,0,1,1,0,1,0,4" 2>&1 | FileCheck %s --check-prefix=UNPLACED
// RUN: not pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" --pf-kfac-window-programs="steps=2 placement=0,0,2,1,0,1,0,4,1,2,0,4" 2>&1 | FileCheck %s --check-prefix=STEP

// Rank 0: layer 1 inverted in window step 0 after its 4 passes (and its
// last accumulate call), before the tied gradient's broadcast (its
// reduce_microbatch does not wait), whose result the step end clips with the
// rank's own step gradients, counting all three (rank 0 is the tied sum's
// lowest member); the clipped gradients of its K-FAC layers are
// preconditioned and KL-clipped, and the final values go to the host (the
// tied one from rank 0 only) and the update. Layer 0 is inverted in window step 1 before its second pass (F1).
// CHECK-LABEL: pf.rank_program @rank0_window0
// CHECK: [[B0_1:%[0-9]+]]:4 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(1) :
// CHECK-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"([[B0_1]]#2 : tensor<100x16xf32>) microbatch(1) root(1)
// CHECK: pf.run_stage kfac_factor_b @stage0_kfac_factor_b_1({{.*}}) microbatch(1) layer(1) :
// CHECK-NEXT: [[SUM0:%[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_last([[B0_1]]#0, {{%[0-9]+}}#0, [[B0_1]]#1, {{%[0-9]+}}#1) microbatch(1) in_place([1, 3]) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
// CHECK-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_1() layer(1) : () -> ()
// CHECK-NEXT: [[EMB:%[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: [[CLIP0:%[0-9]+]]:3 = pf.clip_gradients([[EMB]], [[SUM0]]#0, [[SUM0]]#1 : tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight"]) counted([true, true, true]) max_norm(1.000000e+00) order({{.*}}) -> tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: [[PRE0:%[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0([[CLIP0]]#1) layer(0) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: [[PRE1:%[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1([[CLIP0]]#2) layer(1) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: [[KL0:%[0-9]+]]:2 = pf.kfac_kl_clip updates([[PRE0]], [[PRE1]] : tensor<16x16xf32>, tensor<16x16xf32>) gradients([[CLIP0]]#1, [[CLIP0]]#2 : tensor<16x16xf32>, tensor<16x16xf32>) names(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight"]) counted([true, true]) kappa(1.000000e-03) order({{.*}}) -> tensor<16x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" [[CLIP0]]#0 : tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" [[KL0]]#0 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" [[KL0]]#1 : tensor<16x16xf32>
// CHECK-NEXT: pf.run_stage update @stage0_update([[KL0]]#0, [[KL0]]#1, [[CLIP0]]#0) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100x16xf32>) -> ()
// CHECK-LABEL: pf.rank_program @rank0_window1
// CHECK-NEXT: pf.run_stage forward @stage0_forward() microbatch(0) :
// CHECK: pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
// CHECK-NEXT: pf.run_stage forward @stage0_forward() microbatch(1) :

// Window step 0 of rank 1: factor B of micro-batch 0 moved from after B0 to
// the tail (micro-batch 1's follows it), still reading B0's activation
// gradient, then the inverse of layer 2, all before the tied gradient's
// first reduce_microbatch (which waits for rank 0's backward). Its step end
// clips the broadcast tied sum without counting it (rank 0 does) and does
// not report it.
// CHECK-LABEL: pf.rank_program @rank1_window0
// CHECK-NEXT: pf.kfac_promote_inverses
// CHECK: [[B0:%[0-9]+]]:5 = pf.run_stage backward @stage1_backward({{.*}}) microbatch(0) :
// CHECK-NOT: kfac_factor_b
// CHECK: [[ACC0:%[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_first([[B0]]#2, [[B0]]#3, {{%[0-9]+}}#3) microbatch(0) in_place([0, 1, 2]) :
// CHECK-NOT: kfac_factor_b
// CHECK: [[B1:%[0-9]+]]:5 = pf.run_stage backward @stage1_backward({{.*}}) microbatch(1) :
// CHECK-NEXT: pf.send_act [[B1]]#0 microbatch(1)
// CHECK-NEXT: pf.send_act [[B1]]#1 microbatch(1)
// CHECK-NEXT: [[SUM:%[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_last([[B1]]#2, [[ACC0]]#0, [[B1]]#3, [[ACC0]]#1, {{%[0-9]+}}#3, [[ACC0]]#2) microbatch(1) in_place([1, 3, 5]) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100xf32>, tensor<100xf32>, tensor<f32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>)
// CHECK-NEXT: pf.run_stage kfac_factor_b @stage1_kfac_factor_b_2([[B0]]#0) microbatch(0) layer(2) : (tensor<4x8x16xf32>) -> ()
// CHECK-NEXT: pf.run_stage kfac_factor_b @stage1_kfac_factor_b_2([[B1]]#0) microbatch(1) layer(2) : (tensor<4x8x16xf32>) -> ()
// CHECK-NEXT: pf.run_stage kfac_inverse @stage1_kfac_inverse_2() layer(2) : () -> ()
// CHECK-NEXT: [[EMB0:%[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"([[B0]]#4 : tensor<100x16xf32>) microbatch(0) root(1)
// CHECK-NEXT: [[RED0:%[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_first([[EMB0]]) microbatch(0) in_place([0]) : (tensor<100x16xf32>) -> tensor<100x16xf32>
// CHECK-NEXT: [[EMB1:%[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"([[B1]]#4 : tensor<100x16xf32>) microbatch(1) root(1)
// CHECK-NEXT: [[RED1:%[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_last([[EMB1]], [[RED0]]) microbatch(1) in_place([1]) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "loss" [[SUM]]#2 : tensor<f32>
// CHECK-NEXT: [[STEP_EMB:%[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"([[RED1]] : tensor<100x16xf32>) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: [[CLIP1:%[0-9]+]]:3 = pf.clip_gradients([[STEP_EMB]], [[SUM]]#0, [[SUM]]#1 : tensor<100x16xf32>, tensor<16x16xf32>, tensor<100xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) counted([false, true, true]) max_norm(1.000000e+00) order({{.*}}) -> tensor<100x16xf32>, tensor<16x16xf32>, tensor<100xf32>
// CHECK-NEXT: [[PRE2:%[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2([[CLIP1]]#1) layer(2) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: [[KL2:%[0-9]+]] = pf.kfac_kl_clip updates([[PRE2]] : tensor<16x16xf32>) gradients([[CLIP1]]#1 : tensor<16x16xf32>) names(["grad/bert.encoder.layer.2.dense.weight"]) counted([true]) kappa(1.000000e-03) order({{.*}}) -> tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" [[KL2]] : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/cls.predictions.bias" [[CLIP1]]#2 : tensor<100xf32>
// CHECK-NEXT: pf.run_stage update @stage1_update([[KL2]], [[CLIP1]]#2, [[CLIP1]]#0) : (tensor<16x16xf32>, tensor<100xf32>, tensor<100x16xf32>) -> ()
// Window step 1 of rank 1: no factor calls, no inverse.
// CHECK-LABEL: pf.rank_program @rank1_window1
// CHECK-NOT: kfac_factor
// CHECK-NOT: kfac_inverse
// CHECK: pf.run_stage update @stage1_update({{.*}}) : (tensor<16x16xf32>, tensor<100xf32>, tensor<100x16xf32>) -> ()
// Chimera: the sums of the replicas' factors come first after the last
// pass; the inverse goes after them and before the gradients' all-reduces.
// Every gradient is summed over both replicas: rank 0, the lowest member,
// counts all of them (clipping and KL-clip, rank 1's split layer too) and
// reports them; rank 1 counts and reports none.
// CHIMERA-LABEL: pf.rank_program @rank0_window0
// CHIMERA: pf.all_reduce "bert.encoder.layer.2.dense.weight.kfac.B"
// CHIMERA-NEXT: pf.run_stage kfac_inverse @stage1_kfac_inverse_2() layer(2) : () -> ()
// CHIMERA-NEXT: pf.all_reduce "grad/bert.embeddings.word_embeddings.weight"(
// CHIMERA: pf.clip_gradients({{.*}}) names({{.*}}) counted([true, true, true, true, true]) max_norm
// CHIMERA: pf.kfac_kl_clip updates({{.*}}) names({{.*}}) counted([true, true, true]) kappa
// CHIMERA-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight"
// CHIMERA: pf.step_result "grad/cls.predictions.bias"
// CHIMERA-NEXT: pf.run_stage update @rank0_update(
// CHIMERA-LABEL: pf.rank_program @rank1_window0
// CHIMERA: pf.all_reduce "bert.encoder.layer.2.dense.weight.kfac.B"
// CHIMERA-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
// CHIMERA-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_1() layer(1) : () -> ()
// CHIMERA-NEXT: pf.all_reduce "grad/bert.embeddings.word_embeddings.weight"(
// CHIMERA-NOT: pf.step_result
// CHIMERA: pf.clip_gradients({{.*}}) names({{.*}}) counted([false, false, false, false, false]) max_norm
// CHIMERA-NOT: pf.step_result
// CHIMERA: pf.kfac_kl_clip updates({{.*}}) names({{.*}}) counted([false, false, false]) kappa
// CHIMERA-NEXT: pf.run_stage update @rank1_update(

// SIZE: error: pf-kfac-window-programs: the placement has 3 numbers, not 4 per row
// NEGATIVE: error: pf-kfac-window-programs: placement row 0: passes before it -3 is negative
// UNPLACED: error: K-FAC window: the inverse of layer 2 is placed on 0 of the ranks that invert it in the warm-up step, not on one
// STEP: error: K-FAC window: layer 0 of rank 0 placed in window step 2, not in [0, 2)

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
