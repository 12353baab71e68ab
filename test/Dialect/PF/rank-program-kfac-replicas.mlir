// K-FAC in the bubbles with replicated stages (Chimera): both replicas sum
// their factors and invert every layer in the warm-up step; in a window one
// replica inverts each layer and, in the last window step, every replica
// all-reduces that layer's pending inverses (the inverting one hands them
// over). A kfac_inverse reads its factors after their all_reduce and writes
// its inverses before theirs.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: stage 0 on ranks 0 and 1, K = 2; rank 1 inverts layer 0 in window
// step 1 and hands the inverses to rank 0.
pf.param @"w.kfac.A" : tensor<2x2xf32>
pf.param @"w.kfac.B" : tensor<2x2xf32>
pf.param @"w.kfac.A_inv_next" : tensor<2x2xf32>
pf.param @"w.kfac.B_inv_next" : tensor<2x2xf32>
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func @stage0_kfac_inverse_0(%step: tensor<i64>) -> tensor<i32> attributes {pf.stage = 0 : i64} {
  %0 = pf.kfac.refresh_inverses(@"w.kfac.A", @"w.kfac.B") into (@"w.kfac.A_inv_next", @"w.kfac.B_inv_next") step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 2 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1_window0 rank(1) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 2 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank0_window1 rank(0) ranks(2) stages([0]) microbatches(2) attributes {window_step = 1 : i64, window_steps = 2 : i64} {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.all_reduce "w.kfac.A_inv_next" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B_inv_next" ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1_window1 rank(1) ranks(2) stages([0]) microbatches(2) attributes {window_step = 1 : i64, window_steps = 2 : i64} {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.all_reduce "w.kfac.A_inv_next" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B_inv_next" ranks([0, 1]) : tensor<2x2xf32>
}

// -----

// The warm-up step inverts before the factors are summed.
pf.param @"w.kfac.A" : tensor<2x2xf32>
pf.param @"w.kfac.B" : tensor<2x2xf32>
pf.param @"w.kfac.A_inv_next" : tensor<2x2xf32>
pf.param @"w.kfac.B_inv_next" : tensor<2x2xf32>
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func @stage0_kfac_inverse_0(%step: tensor<i64>) -> tensor<i32> attributes {pf.stage = 0 : i64} {
  %0 = pf.kfac.refresh_inverses(@"w.kfac.A", @"w.kfac.B") into (@"w.kfac.A_inv_next", @"w.kfac.B_inv_next") step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  // expected-error@+1 {{rank 0, op 3: kfac_inverse @stage0_kfac_inverse_0 inverts 'w.kfac.B' before its all_reduce (op 4)}}
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
  pf.kfac_promote_inverses
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.all_reduce "w.kfac.A" ranks([0, 1]) : tensor<2x2xf32>
  pf.all_reduce "w.kfac.B" ranks([0, 1]) : tensor<2x2xf32>
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}

// -----

// Both replicas invert the layer in the window.
pf.param @"w.kfac.A" : tensor<2x2xf32>
pf.param @"w.kfac.B" : tensor<2x2xf32>
pf.param @"w.kfac.A_inv_next" : tensor<2x2xf32>
pf.param @"w.kfac.B_inv_next" : tensor<2x2xf32>
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func @stage0_kfac_inverse_0(%step: tensor<i64>) -> tensor<i32> attributes {pf.stage = 0 : i64} {
  %0 = pf.kfac.refresh_inverses(@"w.kfac.A", @"w.kfac.B") into (@"w.kfac.A_inv_next", @"w.kfac.B_inv_next") step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 1 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
}
// expected-error@+1 {{layer 0 is inverted twice in a window (rank 0 in window step 0, rank 1 in window step 0)}}
pf.rank_program @rank1_window0 rank(1) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 1 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
}

// -----

// The replica that does not invert the layer never receives its inverses.
pf.param @"w.kfac.A" : tensor<2x2xf32>
pf.param @"w.kfac.B" : tensor<2x2xf32>
pf.param @"w.kfac.A_inv_next" : tensor<2x2xf32>
pf.param @"w.kfac.B_inv_next" : tensor<2x2xf32>
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func @stage0_kfac_inverse_0(%step: tensor<i64>) -> tensor<i32> attributes {pf.stage = 0 : i64} {
  %0 = pf.kfac.refresh_inverses(@"w.kfac.A", @"w.kfac.B") into (@"w.kfac.A_inv_next", @"w.kfac.B_inv_next") step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}
// expected-error@+1 {{rank 0: layer 0 is inverted on ranks [0, 1] in the warm-up step, so window step 0 must all-reduce 'w.kfac.A_inv_next' over them}}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
  pf.kfac_promote_inverses
}
pf.rank_program @rank0_window0 rank(0) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 1 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage kfac_inverse @stage0_kfac_inverse_0() layer(0) : () -> ()
}
pf.rank_program @rank1_window0 rank(1) ranks(2) stages([0]) microbatches(2) attributes {window_step = 0 : i64, window_steps = 1 : i64} {
  pf.kfac_promote_inverses
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
}
