// Errors of pf-schedule, each verified at the op it names. Cases that need
// their own pass options are split-file sections with their own RUN
// (pf-partition makes the pf.pipeline at the function's location).
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-schedule -verify-diagnostics
// RUN: pf-opt %t/twice.mlir --pf-partition=stages=1 --pf-schedule --pf-schedule -verify-diagnostics
// RUN: pf-opt %t/chimera-odd.mlir --pf-partition="stages=3" --pf-schedule="schedule=chimera" -verify-diagnostics
// RUN: pf-opt %t/refresh-steps.mlir --pf-partition="stages=2" --pf-schedule="refresh-steps=-1" -verify-diagnostics
// RUN: pf-opt %t/interleaved.mlir --pf-partition="stages=3" --pf-schedule="schedule=interleaved chunks=2" -verify-diagnostics
// RUN: pf-opt %t/device.mlir --pf-partition="stages=2" --pf-schedule="device=tpu" -verify-diagnostics
// RUN: pf-opt %t/profile.mlir --pf-partition="stages=2" --pf-schedule="cost=profile profile=%t/missing.json" -verify-diagnostics
// RUN: pf-opt %t/report.mlir --pf-partition="stages=2" --pf-schedule="report=%t/no-such-dir/r.json" -verify-diagnostics
// RUN: pf-opt %t/block-range.mlir -split-input-file --pf-schedule -verify-diagnostics
// Bad values of the enumerated options (schedule, policy, kfac, cost) are
// rejected when the options are parsed, before any op: test/option-errors.test.

//--- errors.mlir
// A hand-written pipeline whose ops do not say which encoder block they
// belong to (pf-partition records it as pf.block).
pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 0>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      // expected-error @+1 {{pf-schedule: op in a stage has no 'pf.block' attribute (made by pf-partition)}}
      %y = pf.linear %arg2, %w {transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// The stages say which encoder blocks they hold (pf-partition records it).
pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    // expected-error @+1 {{pf-schedule: stage has no 'blocks' attribute (made by pf-partition)}}
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      %y = pf.linear %arg2, %w {pf.block = 0 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{pf-schedule: stage 0 holds no encoder block}}
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      %y = pf.linear %arg2, %w {pf.block = 0 : i64, transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// expected-error @+1 {{pf-schedule: no pf.pipeline found; run pf-partition first}}
module {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

//--- twice.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-schedule: the pipeline is already scheduled}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y0 : tensor<2x4xf32>
}

//--- chimera-odd.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-schedule: chimera needs an even number of stages (got 3)}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- refresh-steps.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-schedule: refresh-steps must be >= 0}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- interleaved.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-schedule: interleaved needs the 3 stages to be a multiple of chunks=2}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- device.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{unknown device 'tpu'}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- profile.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{missing.json: cannot open the profile}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- report.mlir
// An output file that cannot be written.
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{cannot open for writing: No such file or directory}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- block-range.mlir
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
