// RUN: pf-opt %s -split-input-file --pf-build-rank-programs="schedule=1f1b microbatches=2" -verify-diagnostics
// RUN: not pf-opt %s -split-input-file --pf-build-rank-programs="schedule=zb-h1" 2>&1 | FileCheck %s --check-prefix=ZB
// RUN: not pf-opt %s -split-input-file --pf-build-rank-programs="schedule=zb-h1" 2>&1 | FileCheck %s --check-prefix=ZB-WEIGHT
// RUN: not pf-opt %s -split-input-file --pf-build-rank-programs="schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not pf-opt %s -split-input-file --pf-build-rank-programs="microbatches=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not pf-opt %s --pf-build-rank-programs="schedule=2f2b" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// zb-h1 needs the backward halves of pf-split-stages{split-backward=true}.
// ZB: error: pf-build-rank-programs: schedule 'zb-h1' needs @stage0_backward_input and @stage0_backward_weight (run pf-split-stages with split-backward=true)
// ZB-WEIGHT: error: pf-build-rank-programs: schedule 'zb-h1' needs @stage1_backward_input and @stage1_backward_weight (run pf-split-stages with split-backward=true)
// INTERLEAVED: error: pf-build-rank-programs: interleaved needs chunks >= 2 and at least 2 ranks of `chunks` stages each
// ZERO: error: pf-build-rank-programs: microbatches must be >= 1, got 0
// UNKNOWN: for the --schedule option: schedule must be gpipe, 1f1b, interleaved, chimera, zb-h1, zb-h2, zb-v, dualpipe or dualpipev, got '2f2b'

// expected-error@+1 {{pf-build-rank-programs: no stage functions (@stage0_forward, ...); run pf-split-stages first}}
module {
  func.func @main() {
    return
  }
}

// -----

// expected-error@+1 {{pf-build-rank-programs: @stage0_forward has no @stage0_backward (nor @stage0_backward_input and @stage0_backward_weight)}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
}

// -----

// Half of a split backward is not a backward.
// expected-error@+1 {{pf-build-rank-programs: @stage1_forward has no @stage1_backward (nor @stage1_backward_input and @stage1_backward_weight)}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_input() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_weight() attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward_input() attributes {pf.stage = 1 : i64}
}

// -----

// expected-error@+1 {{pf-build-rank-programs: @stage0_backward_weight does not carry pf.stage = 0}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_input() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_weight() attributes {pf.stage = 1 : i64}
}

// -----

// A gradient sent to stage 0 that neither half of its backward takes.
// expected-error@+1 {{pf-build-rank-programs: @stage1_backward_input returns 'grad_act/7', which the backward of stage 0 does not take}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_input() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward_weight(tensor<4xf32> {pf.name = "grad_act/8"}) attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward_input() -> (tensor<4xf32> {pf.name = "grad_act/7"}) attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward_weight() attributes {pf.stage = 1 : i64}
}

// -----

// expected-error@+1 {{pf-build-rank-programs: @stage1_backward does not carry pf.stage = 1}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward() attributes {pf.stage = 0 : i64}
}

// -----

// expected-error@+1 {{pf-build-rank-programs: @stage0_forward returns 'act/1', which @stage1_forward does not take}}
module {
  func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/2"}) attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
}

// -----

// expected-error@+1 {{pf-build-rank-programs: the module already has pf.rank_program ops}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
  pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
    pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
    pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  }
}

// -----

// The partial gradients of one parameter must agree in type across stages.
// expected-error@+1 {{pf-build-rank-programs: 'grad/emb' has type 'tensor<4xf32>' on stage 0 but 'tensor<8xf32>' on stage 1}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward() -> (tensor<8xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
}

// -----

// A call reads a stage value that no earlier call or recv on its rank makes
// (here a saved/* the forward does not return): the programs' values are SSA
// values, so the pass cannot write the call.
// expected-error@+1 {{pf-build-rank-programs: a call or send needs 'saved/9' of micro-batch 0, which no earlier call or recv on its rank makes}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
  func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
  func.func private @stage1_backward(tensor<4xf32> {pf.name = "saved/9"}) attributes {pf.stage = 1 : i64}
}
