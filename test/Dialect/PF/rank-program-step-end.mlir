// The end of a training step in the per-rank programs: pf.clip_gradients (a
// collective of every rank, after the backwards and all-reduces) and the
// per-step update calls.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// A valid step end on both ranks.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
func.func private @stage1_update() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a", "grad/b"])
  pf.run_stage update @stage0_update() : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a", "grad/b"])
  pf.run_stage update @stage1_update() : () -> ()
}

// -----

// The ranks disagree on the clipping.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a", "grad/b"])
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 1, op 2: clip_gradients differs from rank 0's (max_norm and order must be the same on every rank)}}
  pf.clip_gradients max_norm(2.0) order(["grad/a", "grad/b"])
}

// -----

// One rank does not take part.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a"])
}
// expected-error@+1 {{rank 1 has no clip_gradients but rank 0 has one: every rank must take part}}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A backward after the clipping, and an update before it.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
func.func private @stage1_update() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a"])
  // expected-error@+1 {{rank 0, op 2: backward @stage0_backward comes after clip_gradients (op 1), which needs the step's final gradients}}
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 1, op 2: the update runs before clip_gradients (op 3)}}
  pf.run_stage update @stage1_update() : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a"])
}

// -----

// Per-micro-batch work after the update.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage update @stage0_update() : () -> ()
  // expected-error@+1 {{rank 0, op 2: backward @stage0_backward comes after the update (op 1): the update ends the step}}
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}
