// K-FAC at the end of a training step in the per-rank programs: each rank's
// precondition call takes its clipped gradient and returns the update;
// pf.kfac_kl_clip (a collective of every rank) takes the updates with their
// clipped gradients, after the precondition calls and before the update,
// which takes the KL-clipped updates.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// A valid K-FAC step end; rank 1 has no K-FAC layers (no precondition call)
// but takes part in the KL-clip (with no updates) and updates with its
// clipped gradient. Each gradient is held by one rank, which counts it
// (counted).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<4x4xf32> {pf.name = "grad/a"}) -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_update(tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_update(tensor<4xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x4xf32>
  %c = pf.clip_gradients(%a : tensor<4x4xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4x4xf32>
  %p = pf.run_stage precondition @stage0_precondition(%c) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %u = pf.kfac_kl_clip updates(%p : tensor<4x4xf32>) gradients(%c : tensor<4x4xf32>) names(["grad/a"]) counted([true]) kappa(1.0e-3) order(["grad/a"]) -> tensor<4x4xf32>
  pf.run_stage update @stage0_update(%u) : (tensor<4x4xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %b = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4xf32>
  %c = pf.clip_gradients(%b : tensor<4xf32>) names(["grad/b"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4xf32>
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(1.0e-3) order(["grad/a"])
  pf.run_stage update @stage1_update(%c) : (tensor<4xf32>) -> ()
}

// -----

// Preconditioning before the clipping, and the ranks disagree on κ.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<4x4xf32> {pf.name = "grad/a"}) -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4xf32> {pf.name = "grad/b"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x4xf32>
  // expected-error@+1 {{rank 0, op 2: precondition @stage0_precondition runs before clip_gradients: K-FAC preconditions the clipped gradients}}
  %p = pf.run_stage precondition @stage0_precondition(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-error@+1 {{rank 0, op 3: clip_gradients comes after the K-FAC step work (op 2), which needs the step's final gradients}}
  %c = pf.clip_gradients(%a : tensor<4x4xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4x4xf32>
  %u = pf.kfac_kl_clip updates(%p : tensor<4x4xf32>) gradients(%c : tensor<4x4xf32>) names(["grad/a"]) counted([true]) kappa(1.0e-3) order(["grad/a"]) -> tensor<4x4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %b = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4xf32>
  %c = pf.clip_gradients(%b : tensor<4xf32>) names(["grad/b"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<4xf32>
  // expected-error@+1 {{rank 1, op 3: kfac_kl_clip differs from rank 0's (kappa and order must be the same on every rank)}}
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(2.0e-3) order(["grad/a"])
}

// -----

// A precondition call after the KL-clip, and one rank without the KL-clip.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<4x4xf32> {pf.name = "grad/a"}) -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x4xf32>
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(1.0e-3) order(["grad/a"])
  // expected-error@+1 {{rank 0, op 3: precondition @stage0_precondition comes after kfac_kl_clip (op 2), which needs every preconditioned gradient}}
  %p = pf.run_stage precondition @stage0_precondition(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
}
// expected-error@+1 {{rank 1 has no kfac_kl_clip but rank 0 has one: every rank must take part}}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A backward after the K-FAC step work (which took micro-batch 0's piece
// only).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<4x4xf32> {pf.name = "grad/a"}) -> (tensor<4x4xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %a0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x4xf32>
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %p = pf.run_stage precondition @stage0_precondition(%a0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-error@+1 {{rank 0, op 4: backward @stage0_backward comes after the K-FAC step work (op 3), which needs the step's final gradients}}
  %a1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4x4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.kfac_kl_clip' op kappa must be positive and finite, got 0}}
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(0.0) order(["grad/a"])
}

// -----

// The KL-clip counts each ⟨update, gradient⟩ once too: of a layer both
// replicas hold, the lowest counts it (as in the clipping); here both do.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<4x4xf32> {pf.name = "grad/w"}) -> (tensor<4x4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4x4xf32>) ranks([0, 1]) order(library) : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = pf.clip_gradients(%s : tensor<4x4xf32>) names(["grad/w"]) counted([true]) max_norm(1.0) order(["grad/w"]) -> tensor<4x4xf32>
  %p = pf.run_stage precondition @stage0_precondition(%c) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %u = pf.kfac_kl_clip updates(%p : tensor<4x4xf32>) gradients(%c : tensor<4x4xf32>) names(["grad/w"]) counted([true]) kappa(1.0e-3) order(["grad/w"]) -> tensor<4x4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4x4xf32>
  %s = pf.all_reduce "grad/w"(%g : tensor<4x4xf32>) ranks([0, 1]) order(library) : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = pf.clip_gradients(%s : tensor<4x4xf32>) names(["grad/w"]) counted([false]) max_norm(1.0) order(["grad/w"]) -> tensor<4x4xf32>
  %p = pf.run_stage precondition @stage0_precondition(%c) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-error@+1 {{rank 1, op 5: pf.kfac_kl_clip takes 'grad/w' on ranks [0, 1] but more than one counts it (exactly one rank counts each gradient)}}
  %u = pf.kfac_kl_clip updates(%p : tensor<4x4xf32>) gradients(%c : tensor<4x4xf32>) names(["grad/w"]) counted([true]) kappa(1.0e-3) order(["grad/w"]) -> tensor<4x4xf32>
}
