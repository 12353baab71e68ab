// K-FAC at the end of a training step in the per-rank programs: each rank's
// precondition call after the clipping, pf.kfac_kl_clip (a collective of
// every rank) after it and before the update.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// A valid K-FAC step end; rank 1 has no K-FAC layers (no precondition call)
// but takes part in the KL-clip.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
func.func private @stage1_update() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a", "grad/b"])
  pf.run_stage precondition @stage0_precondition() : () -> ()
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/a"])
  pf.run_stage update @stage0_update() : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a", "grad/b"])
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/a"])
  pf.run_stage update @stage1_update() : () -> ()
}

// -----

// Preconditioning before the clipping, and the ranks disagree on κ.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 2: precondition @stage0_precondition runs before clip_gradients: K-FAC preconditions the clipped gradients}}
  pf.run_stage precondition @stage0_precondition() : () -> ()
  // expected-error@+1 {{rank 0, op 3: clip_gradients comes after the K-FAC step work (op 2), which needs the step's final gradients}}
  pf.clip_gradients max_norm(1.0) order(["grad/a"])
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/a"])
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.clip_gradients max_norm(1.0) order(["grad/a"])
  // expected-error@+1 {{rank 1, op 3: kfac_kl_clip differs from rank 0's (kappa and order must be the same on every rank)}}
  pf.kfac_kl_clip kappa(2.0e-3) order(["grad/a"])
}

// -----

// A precondition call after the KL-clip, and one rank without the KL-clip.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/a"])
  // expected-error@+1 {{rank 0, op 3: precondition @stage0_precondition comes after kfac_kl_clip (op 2), which needs every preconditioned gradient}}
  pf.run_stage precondition @stage0_precondition() : () -> ()
}
// expected-error@+1 {{rank 1 has no kfac_kl_clip but rank 0 has one: every rank must take part}}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A backward after the K-FAC step work.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_precondition() : () -> ()
  // expected-error@+1 {{rank 0, op 4: backward @stage0_backward comes after the K-FAC step work (op 3), which needs the step's final gradients}}
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
}

// -----

pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.kfac_kl_clip' op kappa must be positive and finite, got 0}}
  pf.kfac_kl_clip kappa(0.0) order(["grad/a"])
}
