// RUN: pf-opt %s --pf-verify-rank-programs | FileCheck %s
// RUN: pf-opt %s | pf-opt --pf-verify-rank-programs | FileCheck %s

// A hand-written two-rank 1F1B step with one micro-batch in flight: the
// per-rank program round-trips and passes the checks across ranks. The task
// kind is an enum attribute printed as a keyword, as is the all_reduce's
// order (elided when it is the default, microbatch). The stage values
// (act/*, saved/*, grad_act/*, the loss and the gradients grad/*) are SSA
// values of the program: a call's operands are its function's stage-value
// arguments and its results the stage-value results, in order; graph inputs
// (input_ids) are not. The gradients leave as the step's (pf.step_result
// without a micro-batch): rank 0 sums its own grad/w0 by accumulate calls
// (the running sum grad_sum/w0); the tied grad/emb, which both ranks return,
// goes per micro-batch to rank 1 (pf.reduce_microbatch: the root's result is
// the micro-batch's sum; a real program weights those by accumulate calls,
// left out here) and comes back by pf.broadcast, the step's sum on both
// ranks; only the lowest member (rank 0) reports it, since over all ranks
// each gradient leaves at most once. (The loss is left out here: a real
// program weights it by accumulate calls and reports the step's.)

func.func private @stage0_forward(tensor<4x8xi64> {pf.name = "input_ids"})
    -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}, tensor<4x16xf32> {pf.name = "grad_act/7"})
    -> (tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4x16xf32> {pf.name = "act/1"})
    -> (tensor<4x16xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"})
    attributes {pf.stage = 1 : i64}
func.func private @stage1_backward(tensor<4x16xf32> {pf.name = "saved/1"})
    -> (tensor<4x16xf32> {pf.name = "grad_act/7"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 1 : i64}
func.func private @stage0_accumulate_first(tensor<16x16xf32> {pf.name = "grad/w0"})
    -> (tensor<16x16xf32> {pf.name = "grad_sum/w0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<16x16xf32> {pf.name = "grad_sum/w0"})
    -> (tensor<16x16xf32> {pf.name = "grad_sum/w0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}

// CHECK-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
// CHECK-NEXT: %[[F0:.*]]:2 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NEXT: pf.send_act %[[F0]]#0 microbatch(0) to(1) tag(0) : tensor<4x16xf32>
// CHECK-NEXT: %[[F1:.*]]:2 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK-NEXT: %[[G0:.*]] = pf.recv_act microbatch(0) from(1) tag(2) : tensor<4x16xf32>
// CHECK-NEXT: pf.send_act %[[F1]]#0 microbatch(1) to(1) tag(1) : tensor<4x16xf32>
// CHECK-NEXT: %[[W0:.*]]:2 = pf.run_stage backward @stage0_backward(%[[F0]]#1, %[[G0]]) microbatch(0) : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<100x16xf32>)
// CHECK-NEXT: %[[S0:.*]] = pf.run_stage accumulate @stage0_accumulate_first(%[[W0]]#0) microbatch(0) : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: %[[G1:.*]] = pf.recv_act microbatch(1) from(1) tag(3) : tensor<4x16xf32>
// CHECK-NEXT: %[[W1:.*]]:2 = pf.run_stage backward @stage0_backward(%[[F1]]#1, %[[G1]]) microbatch(1) : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<100x16xf32>)
// CHECK-NEXT: %[[S1:.*]] = pf.run_stage accumulate @stage0_accumulate_last(%[[W1]]#0, %[[S0]]) microbatch(1) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: pf.reduce_microbatch "grad/emb"(%[[W0]]#1 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32>
// CHECK-NEXT: pf.reduce_microbatch "grad/emb"(%[[W1]]#1 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32>
// CHECK-NEXT: %[[E:.*]] = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/emb" %[[E]] : tensor<100x16xf32>
// CHECK-NEXT: pf.step_result "grad/w0" %[[S1]] : tensor<16x16xf32>
// CHECK-NEXT: pf.run_stage update @stage0_update() : () -> ()
// CHECK-NEXT: }
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0, %saved0 = pf.run_stage forward @stage0_forward() microbatch(0)
      : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  pf.send_act %act0 microbatch(0) to(1) tag(0) : tensor<4x16xf32>
  %act1, %saved1 = pf.run_stage forward @stage0_forward() microbatch(1)
      : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  // Receive before sending: rank 1 sends this gradient before it receives
  // micro-batch 1 (a send waits for its recv).
  %grad0 = pf.recv_act microbatch(0) from(1) tag(2) : tensor<4x16xf32>
  pf.send_act %act1 microbatch(1) to(1) tag(1) : tensor<4x16xf32>
  %w0, %emb0 = pf.run_stage backward @stage0_backward(%saved0, %grad0) microbatch(0)
      : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<100x16xf32>)
  %sum0 = pf.run_stage accumulate @stage0_accumulate_first(%w0) microbatch(0)
      : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %grad1 = pf.recv_act microbatch(1) from(1) tag(3) : tensor<4x16xf32>
  %w1, %emb1 = pf.run_stage backward @stage0_backward(%saved1, %grad1) microbatch(1)
      : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<100x16xf32>)
  // The running sum of the previous call continues (a value of micro-batch 0).
  %sum1 = pf.run_stage accumulate @stage0_accumulate_last(%w1, %sum0) microbatch(1)
      : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  pf.reduce_microbatch "grad/emb"(%emb0 : tensor<100x16xf32>) microbatch(0) root(1)
      ranks([0, 1]) : tensor<100x16xf32>
  pf.reduce_microbatch "grad/emb"(%emb1 : tensor<100x16xf32>) microbatch(1) root(1)
      ranks([0, 1]) : tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
  pf.step_result "grad/w0" %sum1 : tensor<16x16xf32>
  pf.run_stage update @stage0_update() : () -> ()
}

// CHECK-LABEL: pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
// CHECK-NEXT: %[[A0:.*]] = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x16xf32>
// CHECK-NEXT: %[[S0:.*]]:2 = pf.run_stage forward @stage1_forward(%[[A0]]) microbatch(0) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<f32>)
// CHECK-NEXT: %[[B0:.*]]:2 = pf.run_stage backward @stage1_backward(%[[S0]]#0) microbatch(0) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<100x16xf32>)
// CHECK-NEXT: pf.send_act %[[B0]]#0 microbatch(0) to(0) tag(2) : tensor<4x16xf32>
// CHECK-NEXT: %[[A1:.*]] = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4x16xf32>
// CHECK-NEXT: %[[S1:.*]]:2 = pf.run_stage forward @stage1_forward(%[[A1]]) microbatch(1) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<f32>)
// CHECK-NEXT: %[[B1:.*]]:2 = pf.run_stage backward @stage1_backward(%[[S1]]#0) microbatch(1) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<100x16xf32>)
// CHECK-NEXT: pf.send_act %[[B1]]#0 microbatch(1) to(0) tag(3) : tensor<4x16xf32>
// CHECK-NEXT: %[[R0:.*]] = pf.reduce_microbatch "grad/emb"(%[[B0]]#1 : tensor<100x16xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %[[R1:.*]] = pf.reduce_microbatch "grad/emb"(%[[B1]]#1 : tensor<100x16xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: %{{.*}} = pf.broadcast "grad/emb"(%[[R1]] : tensor<100x16xf32>) root(1) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
// CHECK-NEXT: }
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  %act0 = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x16xf32>
  %saved0, %loss0 = pf.run_stage forward @stage1_forward(%act0) microbatch(0)
      : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<f32>)
  %grad0, %emb0 = pf.run_stage backward @stage1_backward(%saved0) microbatch(0)
      : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<100x16xf32>)
  pf.send_act %grad0 microbatch(0) to(0) tag(2) : tensor<4x16xf32>
  %act1 = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4x16xf32>
  %saved1, %loss1 = pf.run_stage forward @stage1_forward(%act1) microbatch(1)
      : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<f32>)
  %grad1, %emb1 = pf.run_stage backward @stage1_backward(%saved1) microbatch(1)
      : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<100x16xf32>)
  pf.send_act %grad1 microbatch(1) to(0) tag(3) : tensor<4x16xf32>
  %sum0 = pf.reduce_microbatch "grad/emb"(%emb0 : tensor<100x16xf32>) microbatch(0) root(1)
      ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
  %sum1 = pf.reduce_microbatch "grad/emb"(%emb1 : tensor<100x16xf32>) microbatch(1) root(1)
      ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb"(%sum1 : tensor<100x16xf32>) root(1) ranks([0, 1])
      : tensor<100x16xf32> -> tensor<100x16xf32>
}
