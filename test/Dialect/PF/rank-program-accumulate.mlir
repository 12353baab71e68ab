// A rank's accumulate calls (the count-weighted sum of gradients over the
// micro-batches) run once per micro-batch whose pieces the rank returns, in
// micro-batch order, each after the call returning its pieces.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: backward, then its accumulate, in micro-batch order.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_last() microbatch(1) : () -> ()
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
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 3: the accumulation of grad_sum/w adds 1 micro-batches but not micro-batch(es) [0], whose pieces this rank returns}}
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 5: accumulate @stage0_accumulate_last of micro-batch 0 out of order: micro-batch 1 was accumulated before it (the sum runs in micro-batch order)}}
  pf.run_stage accumulate @stage0_accumulate_last() microbatch(0) : () -> ()
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 2: accumulate @stage0_accumulate_first of micro-batch 0 takes 'grad/w', which no call of that micro-batch returned on this rank before it}}
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_last() microbatch(1) : () -> ()
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 4: the accumulation of grad_sum/w adds 1 micro-batches but not micro-batch(es) [1], whose pieces this rank returns}}
  pf.run_stage accumulate @stage0_accumulate_first() microbatch(0) : () -> ()
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

// -----

// Replicas (Chimera): each member accumulates the pieces it returns, its own
// micro-batches, and pf.all_reduce order(library) adds the partial sums.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_replica0_single(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_replica0_single() microbatch(0) : () -> ()
  pf.all_reduce "grad/w" ranks([0, 1]) order(library) : tensor<2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage accumulate @stage0_accumulate_replica0_single() microbatch(1) : () -> ()
  pf.all_reduce "grad/w" ranks([0, 1]) order(library) : tensor<2xf32>
}
