// K-FAC inverses in the bubbles: the warm-up program inverts each layer at
// its end and promotes; the window programs (window_step k of window_steps
// K) place each inverse once per window; a step that gathers curvature
// (warm-up, window step 0) inverts a layer only after its stage's passes.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: one rank, one layer, K = 2; the window places the inverse in step 1,
// inside the passes (where the rank waits).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
  pf.run_stage precondition @stage0_precondition() : () -> ()
  pf.run_stage update @stage0_update() : () -> ()
}
pf.rank_program @rank0_window0 rank(0) ranks(1) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 2 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_precondition() : () -> ()
  pf.run_stage update @stage0_update() : () -> ()
}
pf.rank_program @rank0_window1 rank(0) ranks(1) stages([0]) microbatches(2) attributes {window_step = 1 : i64, window_steps = 2 : i64} {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_precondition() : () -> ()
  pf.run_stage update @stage0_update() : () -> ()
}

// -----

// A warm-up step that inverts before its last backward (which still updates
// the factors), promotes too early and inverts a layer twice.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 3: kfac_inverse @stage0_kfac_inverse_0 runs before op 5 (backward @stage0_backward), which still updates the factors of stage 0}}
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  // expected-error@+1 {{rank 0, op 4: kfac_promote_inverses comes before the kfac_inverse of op 6}}
  pf.kfac_promote_inverses
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 0, op 6: kfac_inverse @stage0_kfac_inverse_0 inverts layer 0 a second time in the step}}
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage precondition @stage0_precondition() : () -> ()
}

// -----

// Inverting without promoting, and promoting after the precondition call.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
func.func private @stage1_kfac_inverse_1() attributes {pf.stage = 1 : i64}
func.func private @stage1_precondition() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 2: the step inverts factors but never runs kfac_promote_inverses}}
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage precondition @stage0_precondition() : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage1_kfac_inverse_1() layer(1) : () -> ()
  pf.run_stage precondition @stage1_precondition() : () -> ()
  // expected-error@+1 {{rank 1, op 4: kfac_promote_inverses comes after the precondition call (op 3)}}
  pf.kfac_promote_inverses
}

// -----

// Window programs: a promotion in window step 1, and window step 0 inverting
// before the passes that gather its curvature.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(1) stages([0]) microbatches(1) attributes {window_step = 0 : i64, window_steps = 2 : i64} {
  pf.kfac_promote_inverses
  // expected-error@+1 {{rank 0, op 1: kfac_inverse @stage0_kfac_inverse_0 runs before op 3 (backward @stage0_backward), which still updates the factors of stage 0}}
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank0_window1 rank(0) ranks(1) stages([0]) microbatches(1) attributes {window_step = 1 : i64, window_steps = 2 : i64} {
  // expected-error@+1 {{rank 0, op 0: kfac_promote_inverses in window step 1: only a warm-up step and window step 0 promote}}
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}

// -----

// A layer inverted in two window steps.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(1) stages([0]) microbatches(1) attributes {window_step = 0 : i64, window_steps = 2 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
}
// expected-error@+1 {{layer 0 is inverted twice in a window (rank 0 in window step 0, rank 0 in window step 1)}}
pf.rank_program @rank0_window1 rank(0) ranks(1) stages([0]) microbatches(1) attributes {window_step = 1 : i64, window_steps = 2 : i64} {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}

// -----

// A layer the window never inverts.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_inverse_0() attributes {pf.stage = 0 : i64}
// expected-error@+1 {{rank 0: the window programs never invert layer 0; every layer must be inverted once per window}}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(1) stages([0]) microbatches(1) attributes {window_step = 0 : i64, window_steps = 1 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
