// The end of a training step in the per-rank programs: pf.clip_gradients (a
// collective of every rank, after the backwards and all-reduces) takes the
// rank's gradients of the step and returns them clipped, and the per-step
// update calls take the clipped gradients.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// A valid step end on both ranks.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_update(tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_update(tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %c = pf.clip_gradients(%a : tensor<4xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4xf32>
  pf.step_result "grad/a" %c : tensor<4xf32>
  pf.run_stage update @stage0_update(%c) : (tensor<4xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %b = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<2xf32>
  %c = pf.clip_gradients(%b : tensor<2xf32>) names(["grad/b"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>
  pf.step_result "grad/b" %c : tensor<2xf32>
  pf.run_stage update @stage1_update(%c) : (tensor<2xf32>) -> ()
}

// -----

// The ranks disagree on the clipping.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %c = pf.clip_gradients(%a : tensor<4xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %b = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 1, op 2: clip_gradients differs from rank 0's (max_norm and order must be the same on every rank)}}
  %c = pf.clip_gradients(%b : tensor<2xf32>) names(["grad/b"]) counted([true]) max_norm(2.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>
}

// -----

// One rank does not take part.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %c = pf.clip_gradients(%a : tensor<4xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a"]) -> tensor<4xf32>
}
// expected-error@+1 {{rank 1 has no clip_gradients but rank 0 has one: every rank must take part}}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A backward after the clipping (rank 0 clips before it has its gradient),
// and an update before it.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_update(tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.clip_gradients() names([]) counted([]) max_norm(1.0) order(["grad/a", "grad/b"])
  // expected-error@+1 {{rank 0, op 2: backward @stage0_backward comes after clip_gradients (op 1), which needs the step's final gradients}}
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %b = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{rank 1, op 2: the update runs before clip_gradients (op 3)}}
  pf.run_stage update @stage1_update(%b) : (tensor<2xf32>) -> ()
  %c = pf.clip_gradients(%b : tensor<2xf32>) names(["grad/b"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>
}

// -----

// Per-micro-batch work after the update (which took micro-batch 0's piece
// only).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_update(tensor<4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage update @stage0_update(%a0) : (tensor<4xf32>) -> ()
  // expected-error@+1 {{rank 0, op 4: backward @stage0_backward comes after the update (op 3): the update ends the step}}
  %a1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(1) : () -> ()
}

// -----

// A gradient summed over ranks is counted in the norm by exactly one member
// (counted: the lowest); here neither replica counts it.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 3: pf.clip_gradients takes 'grad/w' on ranks [0, 1] but none counts it (exactly one rank counts each gradient)}}
  %c = pf.clip_gradients(%s : tensor<4xf32>) names(["grad/w"]) counted([false]) max_norm(1.0) order(["grad/w"]) -> tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  %c = pf.clip_gradients(%s : tensor<4xf32>) names(["grad/w"]) counted([false]) max_norm(1.0) order(["grad/w"]) -> tensor<4xf32>
}

// -----

// Both replicas count the summed gradient: the norm would hold its square
// twice.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  %c = pf.clip_gradients(%s : tensor<4xf32>) names(["grad/w"]) counted([true]) max_norm(1.0) order(["grad/w"]) -> tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  // expected-error@+1 {{rank 1, op 3: pf.clip_gradients takes 'grad/w' on ranks [0, 1] but more than one counts it (exactly one rank counts each gradient)}}
  %c = pf.clip_gradients(%s : tensor<4xf32>) names(["grad/w"]) counted([true]) max_norm(1.0) order(["grad/w"]) -> tensor<4xf32>
}
