// A rank's accumulate calls (the count-weighted sum of gradients over the
// micro-batches) run once per micro-batch whose pieces the rank returns, in
// micro-batch order, each taking its pieces (grad/*, grad_part/*: results of
// the calls of its micro-batch that return them) and, after the first, the
// previous call's running sums (grad_sum/*) as operands.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: backward, then its accumulate, in micro-batch order; the last
// call's running sum is the rank's step gradient.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %s0 = pf.run_stage accumulate @stage0_accumulate_first(%g0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  %s1 = pf.run_stage accumulate @stage0_accumulate_last(%g1, %s0) microbatch(1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  pf.step_result "grad/w" %s1 : tensor<2xf32>
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
// The out-of-order call does not count: micro-batch 0 is never summed.
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 0, op 3: the accumulation of grad_sum/w adds 1 micro-batches but not micro-batch(es) [0], whose pieces this rank returns}}
  %s1 = pf.run_stage accumulate @stage0_accumulate_first(%g1) microbatch(1) : (tensor<2xf32>) -> tensor<2xf32>
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 0, op 5: accumulate @stage0_accumulate_last of micro-batch 0 out of order: micro-batch 1 was accumulated before it (the sum runs in micro-batch order)}}
  %s0 = pf.run_stage accumulate @stage0_accumulate_last(%g0, %s1) microbatch(0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
}

// -----

// An accumulate call before the backward of its micro-batch: its piece is
// not out yet (SSA dominance), and the value it takes in its place (the
// micro-batch's saved activation, of the same type) is not the gradient its
// argument names.
func.func private @stage0_forward() -> (tensor<2xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<2xf32> {pf.name = "saved/0"}) -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  %a0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<2xf32>
  %a1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<2xf32>
  // expected-error@+1 {{'pf.run_stage' op input #0 is 'saved/0' but @stage0_accumulate_first takes 'grad/w' there}}
  %s0 = pf.run_stage accumulate @stage0_accumulate_first(%a0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  %g0 = pf.run_stage backward @stage0_backward(%a0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  %g1 = pf.run_stage backward @stage0_backward(%a1) microbatch(1) : (tensor<2xf32>) -> tensor<2xf32>
  %s1 = pf.run_stage accumulate @stage0_accumulate_last(%g1, %s0) microbatch(1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 0, op 4: the accumulation of grad_sum/w adds 1 micro-batches but not micro-batch(es) [1], whose pieces this rank returns}}
  %s0 = pf.run_stage accumulate @stage0_accumulate_first(%g0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

// After micro-batch 0 a call continues the running sum: the first
// micro-batch's function (the term alone) cannot sum micro-batch 1.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  %s0 = pf.run_stage accumulate @stage0_accumulate_first(%g0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  // expected-error@+1 {{rank 0, op 5: accumulate @stage0_accumulate_first of micro-batch 1 does not take the running sum 'grad_sum/w' it continues}}
  %s1 = pf.run_stage accumulate @stage0_accumulate_first(%g1) microbatch(1) : (tensor<2xf32>) -> tensor<2xf32>
}

// -----

// The V's first and last stage on one rank both return the tied embedding's
// gradient: the first as grad_part/*, which the last stage's accumulation adds
// once both pieces of the micro-batch are out. Here it runs before stage 0's
// backward and takes the stage-1 piece in place of the grad_part/*.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad_part/e"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/e"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_tied(tensor<2xf32> {pf.name = "grad/e"}, tensor<2xf32> {pf.name = "grad_part/e"}) -> (tensor<2xf32> {pf.name = "grad_sum/e"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0, 1]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %e = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{'pf.run_stage' op input #1 is 'grad/e' but @stage1_accumulate_tied takes 'grad_part/e' there}}
  %s = pf.run_stage accumulate @stage1_accumulate_tied(%e, %e) microbatch(0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %part = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
}

// -----

// Two stages of one rank returning the same grad/* of a micro-batch: the
// rank would hold two pieces under one name.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/e"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/e"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0, 1]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %e1 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 0, op 3: backward @stage0_backward returns 'grad/e' of micro-batch 0 a second time on this rank}}
  %e0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
}

// -----

// Replicas (Chimera): each member accumulates the pieces it returns, its own
// micro-batches, pf.all_reduce order(library) adds the partial sums, and
// the lowest member (rank 0) reports the sum: over all ranks a gradient
// leaves at most once.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_replica0_single(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %s = pf.run_stage accumulate @stage0_accumulate_replica0_single(%g) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  %e = pf.all_reduce "grad/w"(%s : tensor<2xf32>) ranks([0, 1]) order(library) : tensor<2xf32> -> tensor<2xf32>
  pf.step_result "grad/w" %e : tensor<2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  %s = pf.run_stage accumulate @stage0_accumulate_replica0_single(%g) microbatch(1) : (tensor<2xf32>) -> tensor<2xf32>
  %e = pf.all_reduce "grad/w"(%s : tensor<2xf32>) ranks([0, 1]) order(library) : tensor<2xf32> -> tensor<2xf32>
}
