// pf.broadcast: Chimera's replicas split a stage's preconditioning; the
// layer's owner (root) preconditions its clipped gradient and hands the
// result (its operand) to the other replica, which does not compute it;
// every member returns the root's value. Every member runs a matching
// broadcast, after the root's call and before kfac_kl_clip, which takes the
// broadcast results as the updates.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: the replicas sum their micro-batches' pieces, clip the sums, rank 0
// preconditions layer 0 and rank 1 layer 1, and both KL-clip the broadcast
// updates with their clipped gradients and update. Both gradients are summed
// over ranks [0, 1], so the lowest member (rank 0) counts their terms of the
// norm and of the KL sum (counted) and rank 1 counts none.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2x2xf32> {pf.name = "grad/w0"}, tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_1(tensor<2x2xf32> {pf.name = "grad/w1"}) -> (tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_update(tensor<2x2xf32> {pf.name = "grad/w0"}, tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g:2 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %s0 = pf.all_reduce "grad/w0"(%g#0 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %s1 = pf.all_reduce "grad/w1"(%g#1 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %c:2 = pf.clip_gradients(%s0, %s1 : tensor<2x2xf32>, tensor<2x2xf32>) names(["grad/w0", "grad/w1"]) counted([true, true]) max_norm(1.0) order(["grad/w0", "grad/w1"]) -> tensor<2x2xf32>, tensor<2x2xf32>
  %p0 = pf.run_stage precondition @stage0_kfac_precondition_0(%c#0) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %u0 = pf.broadcast "grad/w0"(%p0 : tensor<2x2xf32>) root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %u1 = pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %k:2 = pf.kfac_kl_clip updates(%u0, %u1 : tensor<2x2xf32>, tensor<2x2xf32>) gradients(%c#0, %c#1 : tensor<2x2xf32>, tensor<2x2xf32>) names(["grad/w0", "grad/w1"]) counted([true, true]) kappa(1.0e-03) order(["grad/w0", "grad/w1"]) -> tensor<2x2xf32>, tensor<2x2xf32>
  pf.run_stage update @stage0_update(%k#0, %k#1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g:2 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %s0 = pf.all_reduce "grad/w0"(%g#0 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %s1 = pf.all_reduce "grad/w1"(%g#1 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %c:2 = pf.clip_gradients(%s0, %s1 : tensor<2x2xf32>, tensor<2x2xf32>) names(["grad/w0", "grad/w1"]) counted([false, false]) max_norm(1.0) order(["grad/w0", "grad/w1"]) -> tensor<2x2xf32>, tensor<2x2xf32>
  %p1 = pf.run_stage precondition @stage0_kfac_precondition_1(%c#1) layer(1) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %u0 = pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %u1 = pf.broadcast "grad/w1"(%p1 : tensor<2x2xf32>) root(1) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %k:2 = pf.kfac_kl_clip updates(%u0, %u1 : tensor<2x2xf32>, tensor<2x2xf32>) gradients(%c#0, %c#1 : tensor<2x2xf32>, tensor<2x2xf32>) names(["grad/w0", "grad/w1"]) counted([false, false]) kappa(1.0e-03) order(["grad/w0", "grad/w1"]) -> tensor<2x2xf32>, tensor<2x2xf32>
  pf.run_stage update @stage0_update(%k#0, %k#1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
}

// -----

pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op root 2 is not one of ranks array<i64: 0, 1>}}
  %g = pf.broadcast "grad/w" root(2) ranks([0, 1]) : tensor<4xf32> -> tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op ranks array<i64: 1, 2> do not include its own rank 0}}
  %g = pf.broadcast "grad/w" root(1) ranks([1, 2]) : tensor<4xf32> -> tensor<4xf32>
}

// -----

// The other member's broadcast names another root (and hands over the sum,
// which no step-end call of its computed).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p = pf.run_stage precondition @stage0_kfac_precondition_0(%s) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-error@+1 {{rank 0, op 4: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> : 'tensor<2x2xf32>' has no counterpart of the same root, ranks and type on rank 1}}
  %u = pf.broadcast "grad/w0"(%p : tensor<2x2xf32>) root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  // expected-error@+2 {{rank 1, op 3: broadcast of 'grad/w0' from rank 1 over ranks array<i64: 0, 1> : 'tensor<2x2xf32>' has no counterpart of the same root, ranks and type on rank 0}}
  // expected-error@+1 {{rank 1, op 3: broadcast of 'grad/w0' from rank 1 over ranks array<i64: 0, 1>: no step-end call on the root computes it before the broadcast}}
  %u = pf.broadcast "grad/w0"(%s : tensor<2x2xf32>) root(1) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}

// -----

// The receiver computes the value as well.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p = pf.run_stage precondition @stage0_kfac_precondition_0(%s) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %u = pf.broadcast "grad/w0"(%p : tensor<2x2xf32>) root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p = pf.run_stage precondition @stage0_kfac_precondition_0(%s) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-error@+1 {{rank 1, op 4: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1>: this rank computes it too (op 3), but takes the root's}}
  %u = pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}

// -----

// A broadcast after the KL-clip, which needs every preconditioned gradient.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p = pf.run_stage precondition @stage0_kfac_precondition_0(%s) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %k = pf.kfac_kl_clip updates(%p : tensor<2x2xf32>) gradients(%s : tensor<2x2xf32>) names(["grad/w0"]) counted([true]) kappa(1.0e-03) order(["grad/w0"]) -> tensor<2x2xf32>
  // expected-error@+1 {{rank 0, op 5: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> comes after kfac_kl_clip (op 4), which needs every preconditioned gradient}}
  %u = pf.broadcast "grad/w0"(%p : tensor<2x2xf32>) root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2x2xf32>
  %s = pf.all_reduce "grad/w0"(%g : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(1.0e-03) order(["grad/w0"])
  // expected-error@+1 {{rank 1, op 4: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> comes after kfac_kl_clip (op 3), which needs every preconditioned gradient}}
  %u = pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}

// -----

// Members that reach their broadcasts in different orders deadlock.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2x2xf32> {pf.name = "grad/w0"}, tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_1(tensor<2x2xf32> {pf.name = "grad/w1"}) -> (tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g:2 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %s0 = pf.all_reduce "grad/w0"(%g#0 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %s1 = pf.all_reduce "grad/w1"(%g#1 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p0 = pf.run_stage precondition @stage0_kfac_precondition_0(%s0) layer(0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-error@+1 {{rank 0, op 5: deadlock: no rank can progress}}
  %u0 = pf.broadcast "grad/w0"(%p0 : tensor<2x2xf32>) root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %u1 = pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g:2 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %s0 = pf.all_reduce "grad/w0"(%g#0 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %s1 = pf.all_reduce "grad/w1"(%g#1 : tensor<2x2xf32>) ranks([0, 1]) order(library) : tensor<2x2xf32> -> tensor<2x2xf32>
  %p1 = pf.run_stage precondition @stage0_kfac_precondition_1(%s1) layer(1) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-note@+1 {{rank 1 is blocked here (op 5)}}
  %u1 = pf.broadcast "grad/w1"(%p1 : tensor<2x2xf32>) root(1) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
  %u0 = pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32> -> tensor<2x2xf32>
}
