// The pipelined training step (--pf-pipelined-training, what every rank of
// `mpirun pf-train --pipeline` builds): the stage functions, one update
// function per stage (pf-add-optimizer on a split module; the tied word
// embedding is updated on both of its stages with one shared state), and the
// rank programs ending in the clipping over all ranks and the update.
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block" | FileCheck %s
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=zb-h1 micro-batches=2 grain=block clip-norm=0 optimizer=sgd" | FileCheck %s --check-prefix=ZB
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block" | FileCheck %s --check-prefix=CHIMERA
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block deterministic=true" | FileCheck %s --check-prefix=CHIMERA-EXACT
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block deterministic=true tied-per-microbatch=false" | FileCheck %s --check-prefix=TIED-AT-END
// RUN: not pf-opt %s --pf-pipelined-training="stages=3 schedule=chimera micro-batches=2 grain=block" 2>&1 | FileCheck %s --check-prefix=CHIMERA-ODD
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true" | FileCheck %s --check-prefix=KFAC
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block kfac=true" | FileCheck %s --check-prefix=CHIMERA-KFAC
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block kfac=true kfac-work=bubbles" | FileCheck %s --check-prefix=CHIMERA-BUBBLES
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=chimera micro-batches=2 grain=block kfac=true kfac-work=bubbles split-precondition=false" | FileCheck %s --check-prefix=CHIMERA-BOTH --implicit-check-not=pf.broadcast
// RUN: pf-opt %s --pf-pipelined-training="stages=2 schedule=1f1b micro-batches=2 grain=block kfac=true kfac-work=bubbles" | FileCheck %s --check-prefix=BUBBLES
// RUN: not pf-opt %s --pf-add-masked-lm-loss --pf-insert-kfac --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 microbatches=2" --pf-build-rank-programs="microbatches=4" 2>&1 | FileCheck %s --check-prefix=KFAC-N
// RUN: pf-opt %s --pf-add-masked-lm-loss --pf-insert-kfac --pf-build-gradients=tag-origin=true --pf-split-stages="stages=2 microbatches=2" --pf-kfac-precondition="refresh-input=true damping-input=true" | FileCheck %s --check-prefix=REFRESH-INPUT

// The step's gradient order, for the single-process norm.
// CHECK: module attributes {pf.step_gradients = ["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]}
// One AdamW state per parameter, the tied one's shared by both stages.
// CHECK-COUNT-1: pf.param @bert.embeddings.word_embeddings.weight.exp_avg :
// CHECK-LABEL: func.func @stage0_update(
// CHECK-SAME: {pf.name = "grad/bert.encoder.layer.0.dense.weight"}
// CHECK-SAME: {pf.name = "grad/bert.embeddings.word_embeddings.weight"}
// CHECK-SAME: {pf.name = "lr"}
// CHECK-SAME: {pf.name = "step"}
// CHECK-SAME: attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64}
// CHECK: pf.adamw_update @bert.encoder.layer.0.dense.weight
// CHECK: pf.adamw_update @bert.embeddings.word_embeddings.weight(@bert.embeddings.word_embeddings.weight.exp_avg, @bert.embeddings.word_embeddings.weight.exp_avg_sq)
// CHECK-LABEL: func.func @stage1_update(
// CHECK: pf.adamw_update @cls.predictions.bias{{.*}}weight_decay = 0.0
// CHECK: pf.adamw_update @bert.embeddings.word_embeddings.weight(@bert.embeddings.word_embeddings.weight.exp_avg, @bert.embeddings.word_embeddings.weight.exp_avg_sq)
// The tied gradient's sum comes back from its root (rank 1) as a value.
// Each rank clips its step gradients (that value and its own running sums)
// by the norm over all ranks, hands the clipped ones to the host and updates
// with them (its update function's grad/* arguments, in argument order).
// The tied sum is counted (its square in the norm) and reported by rank 0,
// its lowest member, only; each rank counts the gradients only it holds.
// CHECK-LABEL: pf.rank_program @rank0
// CHECK: %[[SUM0:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_last(
// CHECK-NEXT: %[[EMB0:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[CLIP0:[0-9]+]]:3 = pf.clip_gradients(%[[EMB0]], %[[SUM0]]#0, %[[SUM0]]#1 : tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight"]) counted([true, true, true]) max_norm(1.000000e+00) order(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) -> tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[CLIP0]]#0 : tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[CLIP0]]#1 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[CLIP0]]#2 : tensor<16x16xf32>
// CHECK-NEXT: pf.run_stage update @stage0_update(%[[CLIP0]]#1, %[[CLIP0]]#2, %[[CLIP0]]#0) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100x16xf32>) -> ()
// CHECK-NEXT: }
// CHECK-LABEL: pf.rank_program @rank1
// CHECK: %[[SUM1:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_last(
// CHECK: %[[TIED:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_reduced_last(
// CHECK-NEXT: pf.step_result "loss" %[[SUM1]]#2 : tensor<f32>
// CHECK-NEXT: %[[EMB1:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%[[TIED]] : tensor<100x16xf32>) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[CLIP1:[0-9]+]]:3 = pf.clip_gradients(%[[EMB1]], %[[SUM1]]#0, %[[SUM1]]#1 : tensor<100x16xf32>, tensor<16x16xf32>, tensor<100xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) counted([false, true, true]) max_norm(1.000000e+00) order(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) -> tensor<100x16xf32>, tensor<16x16xf32>, tensor<100xf32>
// CHECK-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[CLIP1]]#1 : tensor<16x16xf32>
// CHECK-NEXT: pf.step_result "grad/cls.predictions.bias" %[[CLIP1]]#2 : tensor<100xf32>
// CHECK-NEXT: pf.run_stage update @stage1_update(%[[CLIP1]]#1, %[[CLIP1]]#2, %[[CLIP1]]#0) : (tensor<16x16xf32>, tensor<100xf32>, tensor<100x16xf32>) -> ()
// CHECK-NEXT: }

// zb-h1 takes the updates' gradients from the weight halves; no clipping:
// the update takes the running sums and the tied gradient's broadcast.
// ZB: func.func @stage0_backward_weight(
// ZB: func.func @stage0_update(
// ZB: pf.sgd_update @bert.encoder.layer.0.dense.weight
// ZB-NOT: pf.clip_gradients
// ZB: %[[ZSUM:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_last(
// ZB-NEXT: %[[ZEMB:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1)
// ZB-NOT: pf.clip_gradients
// ZB: pf.run_stage update @stage0_update(%[[ZSUM]]#0, %[[ZSUM]]#1, %[[ZEMB]]) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100x16xf32>) -> ()

// With K-FAC: κ and the single-process order of the KL-clip's sum; each
// factor update is one of 2 per-call updates (micro-batch and loss count are
// graph inputs), placed with its layer (block 2's A on stage 1, though its
// input comes from stage 0); each layer has its own precondition function
// (its inverses' refresh, then B⁻¹∇W·A⁻¹), which the rank holding its stage
// calls on the clipped gradient after the clipping; the KL-clip runs on every
// rank before the update, on the preconditioned gradients and the clipped
// ones they came from, and the update takes its results. Each rank counts
// the KL terms of its own layers; the tied gradient is counted and reported
// by rank 0 only.
// KFAC: module attributes {pf.kfac_kl_clip = 1.000000e-03 : f64, pf.kfac_kl_order = ["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight"]
// KFAC-N: pf-build-rank-programs: the K-FAC update of 'bert.encoder.layer.0.dense.weight.kfac.A' expects 2 micro-batch calls per step but the programs have 4 (run pf-split-stages with microbatches=4)
// KFAC-LABEL: func.func @stage0_forward(
// KFAC-SAME: {pf.name = "step"}, %[[M:[a-z0-9]+]]: tensor<i64> {pf.name = "microbatch"})
// KFAC: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %{{.*}} step %{{.*}} microbatch(%[[M]] : tensor<i64>) {decay = 5.000000e-01 : f64, updates = 2 : i64}
// KFAC-LABEL: func.func @stage0_backward(
// KFAC-SAME: %[[C:[a-z0-9]+]]: tensor<i64> {pf.name = "loss_count"}
// KFAC: pf.kfac.update_factor @bert.encoder.layer.1.dense.weight.kfac.B from %{{.*}} step %{{.*}} count %[[C]] microbatch
// KFAC-LABEL: func.func @stage0_kfac_precondition_0(%{{.*}}: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, %{{.*}}: tensor<i64> {pf.name = "step"}) -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<i32> {pf.name = "kfac/issues"}) attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64}
// KFAC-NEXT: pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A,
// KFAC: %weight_update = pf.kfac.precondition %[[GW:arg0]],
// Grafted to the layer gradient's norm inside the stage function (AdamW).
// KFAC-NEXT: %[[G:.*]] = pf.kfac.graft updates(%weight_update : tensor<16x16xf32>) gradients(%[[GW]] : tensor<16x16xf32>) -> tensor<16x16xf32>
// KFAC-NEXT: return %[[G]], %0 : tensor<16x16xf32>, tensor<i32>
// KFAC-LABEL: func.func @stage0_kfac_precondition_1(%{{.*}}: tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}, %{{.*}}: tensor<i64> {pf.name = "step"})
// KFAC-NEXT: pf.kfac.refresh_inverses(@bert.encoder.layer.1.dense.weight.kfac.A,
// KFAC-LABEL: func.func @stage1_forward(
// KFAC: pf.kfac.update_factor @bert.encoder.layer.2.dense.weight.kfac.A from
// KFAC-LABEL: func.func @stage1_kfac_precondition_2(
// KFAC-LABEL: pf.rank_program @rank0
// KFAC: %[[KCLIP0:[0-9]+]]:3 = pf.clip_gradients({{.*}}) counted([true, true, true]) max_norm
// KFAC-NEXT: %[[P0:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[KCLIP0]]#1) layer(0) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// KFAC-NEXT: %[[P1:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[KCLIP0]]#2) layer(1) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// KFAC-NEXT: %[[U01:[0-9]+]]:2 = pf.kfac_kl_clip updates(%[[P0]], %[[P1]] : tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[KCLIP0]]#1, %[[KCLIP0]]#2 : tensor<16x16xf32>, tensor<16x16xf32>) names(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight"]) counted([true, true]) kappa(1.000000e-03) order(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight"]) -> tensor<16x16xf32>, tensor<16x16xf32>
// KFAC-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[KCLIP0]]#0 : tensor<100x16xf32>
// KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[U01]]#0 : tensor<16x16xf32>
// KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[U01]]#1 : tensor<16x16xf32>
// KFAC-NEXT: pf.run_stage update @stage0_update(%[[U01]]#0, %[[U01]]#1, %[[KCLIP0]]#0) :
// KFAC-LABEL: pf.rank_program @rank1
// KFAC: %[[KCLIP1:[0-9]+]]:3 = pf.clip_gradients({{.*}}) counted([false, true, true]) max_norm
// KFAC-NEXT: %[[P2:[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2(%[[KCLIP1]]#1) layer(2) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// KFAC-NEXT: %[[U2:[0-9]+]] = pf.kfac_kl_clip updates(%[[P2]] : tensor<16x16xf32>) gradients(%[[KCLIP1]]#1 : tensor<16x16xf32>) names(["grad/bert.encoder.layer.2.dense.weight"]) counted([true]) kappa(1.000000e-03) order(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight"]) -> tensor<16x16xf32>
// KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[U2]] : tensor<16x16xf32>
// KFAC-NEXT: pf.step_result "grad/cls.predictions.bias" %[[KCLIP1]]#2 : tensor<100xf32>
// KFAC-NEXT: pf.run_stage update @stage1_update(%[[U2]], %[[KCLIP1]]#2, %[[KCLIP1]]#0) :

// K-FAC for the bubbles: pending inverses, one inverse function per layer,
// factor updates gated by the host (kfac_curvature), preconditioning only in
// the per-layer precondition functions (no refresh there), and the warm-up program's step end: the
// inverses, the promotion, then the preconditioning.
// BUBBLES-DAG: pf.param @bert.encoder.layer.0.dense.weight.kfac.A_inv_next : tensor<16x16xf32> = {{.*}}pf.kfac_pending
// BUBBLES-DAG: pf.param @bert.encoder.layer.2.dense.weight.kfac.B_inv_next : tensor<16x16xf32> = {{.*}}pf.kfac_pending
// The factor updates are their own functions (pf-outline-kfac-factors): the
// forward returns nothing new for layer 0's A (its input is the saved/1 the
// backward reads), the backward returns layer 0's output gradient.
// BUBBLES-LABEL: func.func @stage0_forward(
// BUBBLES-NOT: pf.kfac.update_factor
// BUBBLES: return
// BUBBLES: func.func @stage0_kfac_factor_a_0(%arg0: tensor<4x8x16xf32> {pf.name = "saved/1"}, %arg1: tensor<i64> {pf.name = "step"}, %arg2: tensor<i64> {pf.name = "microbatch"}, %arg3: tensor<i64> {pf.name = "kfac_curvature"}) attributes {pf.kfac_after = "stage0_forward", pf.stage = 0 : i64}
// BUBBLES-NEXT: pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %arg0 step %arg1 microbatch(%arg2 : tensor<i64>) due(%arg3 : tensor<i64>)
// BUBBLES-LABEL: func.func @stage0_backward(
// BUBBLES-SAME: {pf.name = "kfac_in/bert.encoder.layer.0.dense.weight.kfac.B"}
// BUBBLES-NOT: pf.kfac.update_factor
// BUBBLES: return
// BUBBLES: func.func @stage0_kfac_factor_b_0(%arg0: tensor<4x8x16xf32> {pf.name = "kfac_in/bert.encoder.layer.0.dense.weight.kfac.B"}, %arg1: tensor<i64> {pf.name = "step"}, %arg2: tensor<i64> {pf.name = "loss_count"}
// BUBBLES-SAME: pf.kfac_after = "stage0_backward"
// BUBBLES-DAG: func.func @stage0_kfac_inverse_0(%arg0: tensor<i64> {pf.name = "step"}) -> (tensor<i32> {pf.name = "kfac/issues"}) attributes {pf.stage = 0 : i64}
// BUBBLES-DAG: pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A, @bert.encoder.layer.0.dense.weight.kfac.B) into (@bert.encoder.layer.0.dense.weight.kfac.A_inv_next, @bert.encoder.layer.0.dense.weight.kfac.B_inv_next)
// BUBBLES-LABEL: func.func @stage0_kfac_precondition_0(
// BUBBLES-SAME: -> (tensor<16x16xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"})
// BUBBLES-NOT: refresh_inverses
// BUBBLES: pf.kfac.precondition
// BUBBLES-NEXT: pf.kfac.graft
// BUBBLES-NEXT: return
// BUBBLES-LABEL: func.func @stage1_kfac_inverse_2(
// The factor calls read the pass's stage values: layer 0's A the forward's
// saved/1 (#2, which the backward reads too), layer 1's A its saved/5 (#3),
// layer 0's B the kfac_in/* the backward returns (#3, after its gradients).
// BUBBLES-LABEL: pf.rank_program @rank0
// BUBBLES: %[[F0:[0-9]+]]:4 = pf.run_stage forward @stage0_forward() microbatch(0)
// BUBBLES: pf.send_act %[[F0]]#0
// BUBBLES: pf.run_stage kfac_factor_a @stage0_kfac_factor_a_0(%[[F0]]#2) microbatch(0) layer(0)
// BUBBLES-NEXT: pf.run_stage kfac_factor_a @stage0_kfac_factor_a_1(%[[F0]]#3) microbatch(0) layer(1)
// BUBBLES-NEXT: pf.run_stage forward @stage0_forward() microbatch(1)
// BUBBLES: pf.run_stage backward @stage0_backward(%[[F0]]#2, %[[F0]]#3, {{.*}}) microbatch(0)
// BUBBLES: %[[B1:[0-9]+]]:4 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(1)
// BUBBLES-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[B1]]#2 : tensor<100x16xf32>) microbatch(1) root(1)
// BUBBLES-NEXT: pf.run_stage kfac_factor_b @stage0_kfac_factor_b_0(%[[B1]]#3) microbatch(1) layer(0)
// BUBBLES: %[[BCLIP:[0-9]+]]:3 = pf.clip_gradients(
// BUBBLES-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0)
// BUBBLES-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_1() layer(1)
// BUBBLES-NEXT: pf.kfac_promote_inverses
// BUBBLES-NEXT: %[[BP0:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[BCLIP]]#1) layer(0)
// BUBBLES-NEXT: %[[BP1:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[BCLIP]]#2) layer(1)
// BUBBLES-NEXT: pf.kfac_kl_clip updates(%[[BP0]], %[[BP1]] : tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[BCLIP]]#1, %[[BCLIP]]#2 : tensor<16x16xf32>, tensor<16x16xf32>)
// BUBBLES-LABEL: pf.rank_program @rank1
// BUBBLES: pf.run_stage kfac_inverse @stage1_kfac_inverse_2() layer(2)
// BUBBLES-NEXT: pf.kfac_promote_inverses

// Chimera: both ranks hold both stages (down pipe: stage s on rank s, up: on
// rank 1 - s), every gradient is summed between the replicas, and each rank
// applies one merged update (the tied embedding once, not once per stage).
// CHIMERA-LABEL: func.func @rank0_update(
// CHIMERA-COUNT-1: pf.adamw_update @bert.embeddings.word_embeddings.weight(
// CHIMERA: return
// CHIMERA-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 1]) microbatches(2)
// CHIMERA-DAG: pf.run_stage forward @stage0_forward() microbatch(0)
// CHIMERA-DAG: %[[F1:[0-9]+]]:4 = pf.run_stage forward @stage1_forward({{.*}}) microbatch(1)
// The replicas' gradients: by default each replica weights the pieces it
// returns by accumulate calls as they come out (micro-batch 1's stage 1 and
// micro-batch 0's stage 0 here; the tied embedding from both stages, its
// first and last piece), and the library's all-reduce adds the partial sums;
// deterministic=true: every micro-batch's pieces in micro-batch order (the
// default order, not printed), combined at the step end.
// The replicas weight the losses of their own micro-batches with the last
// stage's gradients and the library adds the two partial sums; rank 0, the
// lower, reports the step's loss. The library adds each replica's partial
// sums of the gradients as values (pf.all_reduce of the operand, in name
// order); after the loss, the sums are clipped, and the clipped gradients go
// to the host (pf.step_result, sorted by name) and to the merged update.
// Rank 0, the lowest member of every sum, counts all of them in the norm and
// reports them; rank 1 counts and reports none.
// CHIMERA: %[[B1:[0-9]+]]:5 = pf.run_stage backward @stage1_backward({{.*}}) microbatch(1)
// CHIMERA: %[[PARTIAL:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_replica{{[0-9]+}}_single(%[[B1]]#2, %[[B1]]#3, %[[F1]]#3) microbatch(1) in_place([0, 1, 2]) : (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>)
// CHIMERA: %[[B0:[0-9]+]]:3 = pf.run_stage backward @stage0_backward(
// CHIMERA-DAG: %[[R0:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_replica{{[0-9]+}}_single(%[[B0]]#0, %[[B0]]#1) microbatch(0)
// CHIMERA-DAG: %[[TIED0:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate_replica{{[0-9]+}}_first(%[[B0]]#2) microbatch(0)
// CHIMERA: %[[TIED1:[0-9]+]] = pf.run_stage accumulate @stage0_accumulate_replica{{[0-9]+}}_last(%[[B1]]#4, %[[TIED0]]) microbatch(1)
// CHIMERA-NEXT: %[[ETIED:[0-9]+]] = pf.all_reduce "grad/bert.embeddings.word_embeddings.weight"(%[[TIED1]] : tensor<100x16xf32>) ranks([0, 1]) order(library) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHIMERA-NEXT: %[[E0:[0-9]+]] = pf.all_reduce "grad/bert.encoder.layer.0.dense.weight"(%[[R0]]#0 : tensor<16x16xf32>) ranks([0, 1]) order(library) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-NEXT: %[[E1:[0-9]+]] = pf.all_reduce "grad/bert.encoder.layer.1.dense.weight"(%[[R0]]#1 : tensor<16x16xf32>) ranks([0, 1]) order(library) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-NEXT: %[[E2:[0-9]+]] = pf.all_reduce "grad/bert.encoder.layer.2.dense.weight"(%[[PARTIAL]]#0 : tensor<16x16xf32>) ranks([0, 1]) order(library) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-NEXT: %[[EB:[0-9]+]] = pf.all_reduce "grad/cls.predictions.bias"(%[[PARTIAL]]#1 : tensor<100xf32>) ranks([0, 1]) order(library) : tensor<100xf32> -> tensor<100xf32>
// CHIMERA-NEXT: %[[LOSS:[0-9]+]] = pf.all_reduce "loss_sum"(%[[PARTIAL]]#2 : tensor<f32>) ranks([0, 1]) order(library) : tensor<f32> -> tensor<f32>
// CHIMERA-NEXT: pf.step_result "loss" %[[LOSS]] : tensor<f32>
// CHIMERA-NEXT: %[[CC:[0-9]+]]:5 = pf.clip_gradients(%[[ETIED]], %[[E0]], %[[E1]], %[[E2]], %[[EB]] : tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<100xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) counted([true, true, true, true, true]) max_norm(1.000000e+00) order(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) -> tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<100xf32>
// CHIMERA-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[CC]]#0 : tensor<100x16xf32>
// CHIMERA-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[CC]]#1 : tensor<16x16xf32>
// CHIMERA-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[CC]]#2 : tensor<16x16xf32>
// CHIMERA-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[CC]]#3 : tensor<16x16xf32>
// CHIMERA-NEXT: pf.step_result "grad/cls.predictions.bias" %[[CC]]#4 : tensor<100xf32>
// CHIMERA-NEXT: pf.run_stage update @rank0_update(%[[CC]]#1, %[[CC]]#2, %[[CC]]#0, %[[CC]]#3, %[[CC]]#4) : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<100x16xf32>, tensor<16x16xf32>, tensor<100xf32>) -> ()
// CHIMERA-EXACT-LABEL: pf.rank_program @rank0
// The bitwise mode: the gradients and the loss are summed as one process
// sums them by the higher member of each pair, rank 1, from the program's
// own ops: rank 0 sends the pieces rank 1 does not have (the replicas'
// micro-batch 0 of stage 0, micro-batch 1 of stage 1 and its loss; tags
// above the activations') and the rows of its tied embedding's pieces
// (pf.reduce_microbatch), and takes each gradient's sum by pf.broadcast.
// Rank 0, the lowest member of every sum, counts them all in the clipping
// and reports them; rank 1 reports the loss.
// CHIMERA-EXACT-NOT: accumulate
// CHIMERA-EXACT: %[[XB1:[0-9]+]]:5 = pf.run_stage backward @stage1_backward({{.*}}) microbatch(1)
// CHIMERA-EXACT-NOT: accumulate
// CHIMERA-EXACT: %[[XB0:[0-9]+]]:3 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(0)
// CHIMERA-EXACT-NOT: accumulate
// CHIMERA-EXACT-NOT: pf.step_result "loss"
// CHIMERA-EXACT: pf.send_act %[[XB0]]#0 microbatch(0) to(1) tag(16) : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: pf.send_act %[[XB0]]#1 microbatch(0) to(1) tag(18) : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: %[[X0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight" root(1) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: %[[X1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight" root(1)
// CHIMERA-EXACT-NEXT: pf.send_act %[[XB1]]#2 microbatch(1) to(1) tag(21) : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: pf.send_act %[[XB1]]#3 microbatch(1) to(1) tag(23) : tensor<100xf32>
// CHIMERA-EXACT-NEXT: pf.send_act %{{[0-9]+}}#3 microbatch(1) to(1) tag(25) : tensor<f32>
// CHIMERA-EXACT-NEXT: %[[X2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight" root(1)
// CHIMERA-EXACT-NEXT: %[[XBIAS:[0-9]+]] = pf.broadcast "grad/cls.predictions.bias" root(1)
// CHIMERA-EXACT-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[XB0]]#2 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// CHIMERA-EXACT-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[XB1]]#4 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// CHIMERA-EXACT-NEXT: %[[XE:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1)
// CHIMERA-EXACT-NEXT: %[[XC:[0-9]+]]:5 = pf.clip_gradients(%[[XE]], %[[X0]], %[[X1]], %[[X2]], %[[XBIAS]] : tensor<100x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<100xf32>) names(["grad/bert.embeddings.word_embeddings.weight", "grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight", "grad/cls.predictions.bias"]) counted([true, true, true, true, true]) max_norm(1.000000e+00)
// CHIMERA-EXACT-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[XC]]#0 : tensor<100x16xf32>
// CHIMERA-EXACT-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[XC]]#1 : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[XC]]#2 : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[XC]]#3 : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: pf.step_result "grad/cls.predictions.bias" %[[XC]]#4 : tensor<100xf32>
// CHIMERA-EXACT-NEXT: pf.run_stage update @rank0_update(%[[XC]]#1, %[[XC]]#2, %[[XC]]#0, %[[XC]]#3, %[[XC]]#4) :
// The owner weights every micro-batch's sum in micro-batch order (the
// accumulate functions of one process's sum: term, then running sum and
// mean), its own piece, the received one, or its piece plus the other's
// rows; then broadcasts. The loss's chain runs with the last stage's
// replicas (the same holders) and leaves as the step's. It counts and
// reports none of the gradients.
// CHIMERA-EXACT-LABEL: pf.rank_program @rank1
// CHIMERA-EXACT: %[[YB0:[0-9]+]]:3 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(1)
// CHIMERA-EXACT-NEXT: %[[R0:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(16) : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: %[[R1:[0-9]+]] = pf.recv_act microbatch(0) from(0) tag(18) : tensor<16x16xf32>
// CHIMERA-EXACT-NEXT: %[[S0:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_exact0_first(%[[R0]], %[[R1]]) microbatch(0) in_place([0, 1])
// CHIMERA-EXACT-NEXT: %[[S1:[0-9]+]]:2 = pf.run_stage accumulate @stage0_accumulate_exact0_last(%[[YB0]]#0, %[[S0]]#0, %[[YB0]]#1, %[[S0]]#1) microbatch(1) in_place([1, 3])
// CHIMERA-EXACT-NEXT: %[[Y0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight"(%[[S1]]#0 : tensor<16x16xf32>) root(1) ranks([0, 1])
// CHIMERA-EXACT-NEXT: %[[Y1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight"(%[[S1]]#1 : tensor<16x16xf32>) root(1) ranks([0, 1])
// CHIMERA-EXACT-NEXT: pf.run_stage accumulate @stage1_accumulate_exact1_first({{.*}}) microbatch(0) in_place([0, 1, 2]) : (tensor<16x16xf32>, tensor<100xf32>, tensor<f32>)
// CHIMERA-EXACT-NEXT: pf.recv_act microbatch(1) from(0) tag(21)
// CHIMERA-EXACT-NEXT: pf.recv_act microbatch(1) from(0) tag(23)
// CHIMERA-EXACT-NEXT: pf.recv_act microbatch(1) from(0) tag(25) : tensor<f32>
// CHIMERA-EXACT-NEXT: %[[L:[0-9]+]]:3 = pf.run_stage accumulate @stage1_accumulate_exact1_last
// CHIMERA-EXACT-NEXT: %[[Y2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight"
// CHIMERA-EXACT-NEXT: %[[YBIAS:[0-9]+]] = pf.broadcast "grad/cls.predictions.bias"
// CHIMERA-EXACT-NEXT: pf.step_result "loss" %[[L]]#2 : tensor<f32>
// CHIMERA-EXACT-NEXT: %[[T0:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"({{.*}}) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHIMERA-EXACT-NEXT: %[[TS:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_exact2_first(%[[T0]]) microbatch(0)
// CHIMERA-EXACT-NEXT: %[[T1:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"({{.*}}) microbatch(1) root(1)
// CHIMERA-EXACT-NEXT: %[[TE:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_exact2_last(%[[T1]], %[[TS]]) microbatch(1)
// CHIMERA-EXACT-NEXT: %[[YE:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%[[TE]] : tensor<100x16xf32>) root(1)
// CHIMERA-EXACT-NEXT: %[[YC:[0-9]+]]:5 = pf.clip_gradients(%[[YE]], %[[Y0]], %[[Y1]], %[[Y2]], %[[YBIAS]] : {{.*}}) counted([false, false, false, false, false]) max_norm
// CHIMERA-EXACT-NOT: "loss_sum"
// CHIMERA-EXACT-NOT: pf.step_result
// CHIMERA-EXACT: pf.run_stage update @rank1_update(%[[YC]]#1, %[[YC]]#2, %[[YC]]#0, %[[YC]]#3, %[[YC]]#4) :
// CHIMERA-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([0, 1])
// CHIMERA-DAG: pf.run_stage forward @stage1_forward({{.*}}) microbatch(0)
// CHIMERA-DAG: pf.run_stage forward @stage0_forward() microbatch(1)
// CHIMERA: pf.all_reduce "loss_sum"
// CHIMERA-NOT: pf.step_result
// CHIMERA: %[[CC1:[0-9]+]]:5 = pf.clip_gradients({{.*}}) names({{.*}}) counted([false, false, false, false, false]) max_norm
// CHIMERA-NOT: pf.step_result
// CHIMERA: pf.run_stage update @rank1_update(%[[CC1]]#1, %[[CC1]]#2, %[[CC1]]#0, %[[CC1]]#3, %[[CC1]]#4) :
// Chimera with K-FAC: both replicas' copies of each factor are summed after
// the passes (with the gradients, before the clipping), then the replicas
// split the preconditioning layer by layer.
// CHIMERA-KFAC-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 1])
// CHIMERA-KFAC: pf.run_stage backward
// CHIMERA-KFAC: pf.all_reduce "bert.encoder.layer.0.dense.weight.kfac.A" ranks([0, 1]) : tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: pf.all_reduce "bert.encoder.layer.0.dense.weight.kfac.B" ranks([0, 1]) : tensor<16x16xf32>
// CHIMERA-KFAC: pf.all_reduce "bert.encoder.layer.2.dense.weight.kfac.B" ranks([0, 1])
// CHIMERA-KFAC: %[[KC0:[0-9]+]]:5 = pf.clip_gradients({{.*}}) counted([true, true, true, true, true]) max_norm
// Each layer's preconditioning (with its inverse refresh) on one replica,
// of its clipped gradient; the owner broadcasts the result and the other
// replica receives it. Each KL-clip takes the three updates (computed or
// received) with the replica's own clipped gradients, and the update takes
// the KL-clipped ones. Rank 0 counts every layer's term (rank 1's split
// layer too: both replicas hold it) and reports the gradients; rank 1
// counts and reports none.
// CHIMERA-KFAC-NEXT: %[[KP0:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[KC0]]#1) layer(0) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KP2:[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2(%[[KC0]]#3) layer(2) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KB0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight"(%[[KP0]] : tensor<16x16xf32>) root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KB1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight" root(1) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KB2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight"(%[[KP2]] : tensor<16x16xf32>) root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KU:[0-9]+]]:3 = pf.kfac_kl_clip updates(%[[KB0]], %[[KB1]], %[[KB2]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[KC0]]#1, %[[KC0]]#2, %[[KC0]]#3 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) names(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight"]) counted([true, true, true]) kappa(1.000000e-03) order(["grad/bert.encoder.layer.0.dense.weight", "grad/bert.encoder.layer.1.dense.weight", "grad/bert.encoder.layer.2.dense.weight"]) -> tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: pf.step_result "grad/bert.embeddings.word_embeddings.weight" %[[KC0]]#0 : tensor<100x16xf32>
// CHIMERA-KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.0.dense.weight" %[[KU]]#0 : tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.1.dense.weight" %[[KU]]#1 : tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: pf.step_result "grad/bert.encoder.layer.2.dense.weight" %[[KU]]#2 : tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: pf.step_result "grad/cls.predictions.bias" %[[KC0]]#4 : tensor<100xf32>
// CHIMERA-KFAC-NEXT: pf.run_stage update @rank0_update(%[[KU]]#0, %[[KU]]#1, %[[KC0]]#0, %[[KU]]#2, %[[KC0]]#4) :
// CHIMERA-KFAC-LABEL: pf.rank_program @rank1 rank(1)
// CHIMERA-KFAC: pf.all_reduce "bert.encoder.layer.0.dense.weight.kfac.A" ranks([0, 1])
// CHIMERA-KFAC: %[[KC1:[0-9]+]]:5 = pf.clip_gradients({{.*}}) counted([false, false, false, false, false]) max_norm
// CHIMERA-KFAC-NEXT: %[[KP1:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[KC1]]#2) layer(1) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KR0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight" root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KR1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight"(%[[KP1]] : tensor<16x16xf32>) root(1) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KR2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight" root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-KFAC-NEXT: %[[KV:[0-9]+]]:3 = pf.kfac_kl_clip updates(%[[KR0]], %[[KR1]], %[[KR2]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[KC1]]#1, %[[KC1]]#2, %[[KC1]]#3 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) names({{.*}}) counted([false, false, false]) kappa
// CHIMERA-KFAC-NOT: pf.step_result
// CHIMERA-KFAC: pf.run_stage update @rank1_update(%[[KV]]#0, %[[KV]]#1, %[[KC1]]#0, %[[KV]]#2, %[[KC1]]#4) :
// Chimera with K-FAC in the bubbles: each replica's factor calls (outlined,
// after their passes) update its copy; the warm-up program sums the copies
// before both replicas invert (the window programs, added by pf-train after
// the warm-up, give each layer to one replica).
// CHIMERA-BUBBLES-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0, 1])
// CHIMERA-BUBBLES: pf.run_stage kfac_factor_a @stage0_kfac_factor_a_0({{.*}}) microbatch(0) layer(0)
// CHIMERA-BUBBLES: pf.run_stage kfac_factor_b @stage0_kfac_factor_b_0({{.*}}) microbatch(0) layer(0)
// CHIMERA-BUBBLES: pf.all_reduce "bert.encoder.layer.0.dense.weight.kfac.A" ranks([0, 1]) : tensor<16x16xf32>
// CHIMERA-BUBBLES: %[[CB0:[0-9]+]]:5 = pf.clip_gradients(
// CHIMERA-BUBBLES-NEXT: pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0)
// CHIMERA-BUBBLES: pf.kfac_promote_inverses
// The replicas split the preconditioning (it writes no state here): each
// layer on the member with less work so far, its result broadcast.
// CHIMERA-BUBBLES-NEXT: %[[CBP0:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[CB0]]#1) layer(0)
// CHIMERA-BUBBLES-NEXT: %[[CBP2:[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2(%[[CB0]]#3) layer(2)
// CHIMERA-BUBBLES-NEXT: %[[CBB0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight"(%[[CBP0]] : tensor<16x16xf32>) root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: %[[CBB1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight" root(1) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: %[[CBB2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight"(%[[CBP2]] : tensor<16x16xf32>) root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: pf.kfac_kl_clip updates(%[[CBB0]], %[[CBB1]], %[[CBB2]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[CB0]]#1, %[[CB0]]#2, %[[CB0]]#3 :
// CHIMERA-BUBBLES-LABEL: pf.rank_program @rank1 rank(1)
// CHIMERA-BUBBLES: pf.run_stage kfac_factor_a @stage0_kfac_factor_a_0({{.*}}) microbatch(1) layer(0)
// CHIMERA-BUBBLES: pf.all_reduce "bert.encoder.layer.0.dense.weight.kfac.A" ranks([0, 1])
// CHIMERA-BUBBLES: %[[CB1:[0-9]+]]:5 = pf.clip_gradients(
// CHIMERA-BUBBLES: pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0)
// CHIMERA-BUBBLES: pf.kfac_promote_inverses
// CHIMERA-BUBBLES-NEXT: %[[CBP1:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[CB1]]#2) layer(1)
// CHIMERA-BUBBLES-NEXT: %[[CBR0:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.0.dense.weight" root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: %[[CBR1:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.1.dense.weight"(%[[CBP1]] : tensor<16x16xf32>) root(1) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: %[[CBR2:[0-9]+]] = pf.broadcast "grad/bert.encoder.layer.2.dense.weight" root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
// CHIMERA-BUBBLES-NEXT: pf.kfac_kl_clip updates(%[[CBR0]], %[[CBR1]], %[[CBR2]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[CB1]]#1, %[[CB1]]#2, %[[CB1]]#3 :
// split-precondition=false: both replicas precondition every layer.
// CHIMERA-BOTH-LABEL: pf.rank_program @rank0 rank(0)
// CHIMERA-BOTH: %[[BC0:[0-9]+]]:5 = pf.clip_gradients(
// CHIMERA-BOTH: pf.kfac_promote_inverses
// CHIMERA-BOTH-NEXT: %[[BP00:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[BC0]]#1) layer(0)
// CHIMERA-BOTH-NEXT: %[[BP01:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[BC0]]#2) layer(1)
// CHIMERA-BOTH-NEXT: %[[BP02:[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2(%[[BC0]]#3) layer(2)
// CHIMERA-BOTH-NEXT: pf.kfac_kl_clip updates(%[[BP00]], %[[BP01]], %[[BP02]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[BC0]]#1, %[[BC0]]#2, %[[BC0]]#3 :
// CHIMERA-BOTH-LABEL: pf.rank_program @rank1 rank(1)
// CHIMERA-BOTH: %[[BC1:[0-9]+]]:5 = pf.clip_gradients(
// CHIMERA-BOTH: pf.kfac_promote_inverses
// CHIMERA-BOTH-NEXT: %[[BP10:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_0(%[[BC1]]#1) layer(0)
// CHIMERA-BOTH-NEXT: %[[BP11:[0-9]+]] = pf.run_stage precondition @stage0_kfac_precondition_1(%[[BC1]]#2) layer(1)
// CHIMERA-BOTH-NEXT: %[[BP12:[0-9]+]] = pf.run_stage precondition @stage1_kfac_precondition_2(%[[BC1]]#3) layer(2)
// CHIMERA-BOTH-NEXT: pf.kfac_kl_clip updates(%[[BP10]], %[[BP11]], %[[BP12]] : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) gradients(%[[BC1]]#1, %[[BC1]]#2, %[[BC1]]#3 :
// CHIMERA-ODD: error: pf-build-rank-programs: chimera needs an even number of stages (got 3)

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

// An interval schedule on ranks (pf-train --kfac-interval-schedule with
// --pipeline): every layer's precondition function takes the host's due flag
// after its damping, and its refresh reads it.
// REFRESH-INPUT-LABEL: func.func @stage0_kfac_precondition_0(
// REFRESH-INPUT-SAME: {pf.name = "step"}, %[[DAMPING:.*]]: tensor<f64> {pf.name = "kfac_damping"}, %[[DUE:.*]]: tensor<i64> {pf.name = "kfac_refresh_due"})
// REFRESH-INPUT: pf.kfac.refresh_inverses({{.*}} due(%[[DUE]] : tensor<i64>) damping(%[[DAMPING]] : tensor<f64>)
// REFRESH-INPUT-LABEL: func.func @stage1_kfac_precondition_2(
// REFRESH-INPUT-SAME: {pf.name = "kfac_refresh_due"})

// The tied embedding kept to the step's end in the bitwise mode
// (tied-per-microbatch=false): after the passes, rank 0 sends the rows of
// each micro-batch's piece to rank 1, which adds them to its own piece and
// weights the sums in micro-batch order (the exact sum's accumulate calls),
// then broadcasts the step's gradient before the clipping.
// TIED-AT-END-LABEL: pf.rank_program @rank0
// TIED-AT-END: %[[P0:[0-9]+]]:3 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(0)
// TIED-AT-END-NOT: pf.reduce_microbatch
// TIED-AT-END: %[[P1:[0-9]+]]:3 = pf.run_stage backward @stage0_backward({{.*}}) microbatch(1)
// TIED-AT-END: pf.run_stage accumulate @stage0_accumulate_last
// TIED-AT-END-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[P0]]#2 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// TIED-AT-END-NEXT: pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"(%[[P1]]#2 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32>{{$}}
// TIED-AT-END-NEXT: %[[E:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight" root(1) ranks([0, 1])
// TIED-AT-END-NEXT: pf.clip_gradients(%[[E]],
// TIED-AT-END-LABEL: pf.rank_program @rank1
// TIED-AT-END: pf.run_stage accumulate @stage1_accumulate_last
// TIED-AT-END-NEXT: pf.step_result "loss"
// TIED-AT-END-NEXT: %[[R0:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"({{.*}}) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// TIED-AT-END-NEXT: %[[S0:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_exact0_first(%[[R0]]) microbatch(0) in_place([0])
// TIED-AT-END-NEXT: %[[R1:[0-9]+]] = pf.reduce_microbatch "grad/bert.embeddings.word_embeddings.weight"({{.*}}) microbatch(1) root(1)
// TIED-AT-END-NEXT: %[[S1:[0-9]+]] = pf.run_stage accumulate @stage1_accumulate_exact0_last(%[[R1]], %[[S0]]) microbatch(1) in_place([1])
// TIED-AT-END-NEXT: %[[E1:[0-9]+]] = pf.broadcast "grad/bert.embeddings.word_embeddings.weight"(%[[S1]] : tensor<100x16xf32>) root(1)
// TIED-AT-END-NEXT: pf.clip_gradients(%[[E1]],
