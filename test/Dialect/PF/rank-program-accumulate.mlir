// A stage's accumulate calls (the count-weighted sum of its gradients over
// the micro-batches) run on one rank, once per micro-batch in micro-batch
// order, each after that micro-batch's backward.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: backward, then its accumulate, in micro-batch order.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate() microbatch(1) : () -> ()
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate() attributes {pf.stage = 0 : i64}
// The out-of-order call does not count: micro-batch 1 is never summed.
// expected-error@+1 {{rank 0: stage 0 accumulates 1 of 2 micro-batches}}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 3: accumulate @stage0_accumulate of micro-batch 1 out of order: micro-batch 0 comes first (the sum runs in micro-batch order)}}
  pf.run_stage accumulate @stage0_accumulate() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate() microbatch(0) : () -> ()
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 2: accumulate @stage0_accumulate of micro-batch 0 comes before that micro-batch's backward on this rank}}
  pf.run_stage accumulate @stage0_accumulate() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage accumulate @stage0_accumulate() microbatch(1) : () -> ()
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate() attributes {pf.stage = 0 : i64}
// expected-error@+1 {{rank 0: stage 0 accumulates 1 of 2 micro-batches}}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage accumulate @stage0_accumulate() microbatch(0) : () -> ()
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
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 5: accumulate @stage0_accumulate_first of micro-batch 1 does not take the running sum 'grad_sum/w' it continues}}
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(1) : () -> ()
}

// -----

// The V's first and last stage on one rank both return the tied embedding's
// gradient: the first as grad_part/*, which the last stage's accumulation adds
// once both pieces of the micro-batch are out.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad_part/e"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/e"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_tied(tensor<2xf32> {pf.name = "grad/e"}, tensor<2xf32> {pf.name = "grad_part/e"}) -> (tensor<2xf32> {pf.name = "grad_sum/e"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0, 1]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 3: accumulate @stage1_accumulate_tied of micro-batch 0 takes 'grad_part/e', which no call of that micro-batch returned on this rank before it}}
  pf.run_stage accumulate @stage1_accumulate_tied() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
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
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 3: backward @stage0_backward returns 'grad/e' of micro-batch 0 a second time on this rank}}
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
