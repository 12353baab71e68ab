// RUN: pf-opt %s --pf-schedule -split-input-file -verify-diagnostics

// pf-schedule sizes its cost model by the encoder blocks the stages hold
// (their `blocks`, from pf-partition): a pf.block outside its stage's blocks,
// or a stage listing a block beyond them, is an error, not an allocation of
// that many blocks.

pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 0>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      // expected-error @+1 {{pf-schedule: 'pf.linear' has pf.block 1000000000000, but its stage 0 holds encoder blocks [0] of 1}}
      %y = pf.linear %arg2, %w {pf.block = 1000000000000 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// A block of another stage.
pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
pf.param @bert.encoder.layer.1.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(2) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 0>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      // expected-error @+1 {{pf-schedule: 'pf.linear' has pf.block 1, but its stage 0 holds encoder blocks [0] of 2}}
      %y = pf.linear %arg2, %w {pf.block = 1 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.send %y to 1 tag 0 : tensor<4x16xf32>
      pf.yield
    }
    %1 = pf.stage 1 attributes {blocks = array<i64: 1>} {
      %x = pf.recv from 0 tag 0 : tensor<4x16xf32>
      %w = pf.param_ref @bert.encoder.layer.1.dense.weight : tensor<16x16xf32>
      %y = pf.linear %x, %w {pf.block = 1 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    // expected-error @+1 {{pf-schedule: stage 0 lists encoder block 1000000000000, but the stages hold 1 blocks}}
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 1000000000000>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      %y = pf.linear %arg2, %w {pf.block = 1000000000000 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(2) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 0>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      %y = pf.linear %arg2, %w {pf.block = 0 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    // expected-error @+1 {{pf-schedule: encoder block 0 is listed by more than one stage}}
    pf.stage 1 attributes {blocks = array<i64: 0>} {
    }
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
