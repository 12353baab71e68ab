// pf.broadcast: Chimera's replicas split a stage's preconditioning; the
// layer's owner (root) preconditions it and hands the result to the other
// replica, which does not compute it. Every member runs a matching broadcast,
// after the root's call and before kfac_kl_clip.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: rank 0 preconditions layer 0, rank 1 layer 1.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_1(tensor<2x2xf32> {pf.name = "grad/w1"}) -> (tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
  pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32>
  pf.kfac_kl_clip kappa(1.0e-03) order(["grad/w0", "grad/w1"])
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_1() layer(1) : () -> ()
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
  pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32>
  pf.kfac_kl_clip kappa(1.0e-03) order(["grad/w0", "grad/w1"])
}

// -----

pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op root 2 is not one of ranks array<i64: 0, 1>}}
  pf.broadcast "grad/w" root(2) ranks([0, 1]) : tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op ranks array<i64: 1, 2> do not include its own rank 0}}
  pf.broadcast "grad/w" root(1) ranks([1, 2]) : tensor<4xf32>
}

// -----

// The other member's broadcast names another root.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  // expected-error@+1 {{rank 0, op 3: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> : 'tensor<2x2xf32>' has no counterpart of the same root, ranks and type on rank 1}}
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+2 {{rank 1, op 2: broadcast of 'grad/w0' from rank 1 over ranks array<i64: 0, 1> : 'tensor<2x2xf32>' has no counterpart of the same root, ranks and type on rank 0}}
  // expected-error@+1 {{rank 1, op 2: broadcast of 'grad/w0' from rank 1 over ranks array<i64: 0, 1>: no step-end call on the root computes it before the broadcast}}
  pf.broadcast "grad/w0" root(1) ranks([0, 1]) : tensor<2x2xf32>
}

// -----

// The receiver computes the value as well.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  // expected-error@+1 {{rank 1, op 3: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1>: this rank computes it too (op 2), but takes the root's}}
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}

// -----

// A broadcast after the KL-clip, which needs every preconditioned gradient.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  pf.kfac_kl_clip kappa(1.0e-03) order(["grad/w0"])
  // expected-error@+1 {{rank 0, op 4: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> comes after kfac_kl_clip (op 3), which needs every preconditioned gradient}}
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.kfac_kl_clip kappa(1.0e-03) order(["grad/w0"])
  // expected-error@+1 {{rank 1, op 3: broadcast of 'grad/w0' from rank 0 over ranks array<i64: 0, 1> comes after kfac_kl_clip (op 2), which needs every preconditioned gradient}}
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}

// -----

// Members that reach their broadcasts in different orders deadlock.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_0(tensor<2x2xf32> {pf.name = "grad/w0"}) -> (tensor<2x2xf32> {pf.name = "grad/w0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_kfac_precondition_1(tensor<2x2xf32> {pf.name = "grad/w1"}) -> (tensor<2x2xf32> {pf.name = "grad/w1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_0() layer(0) : () -> ()
  // expected-error@+1 {{rank 0, op 3: deadlock: no rank can progress}}
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
  pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage precondition @stage0_kfac_precondition_1() layer(1) : () -> ()
  // expected-note@+1 {{rank 1 is blocked here (op 3)}}
  pf.broadcast "grad/w1" root(1) ranks([0, 1]) : tensor<2x2xf32>
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<2x2xf32>
}
