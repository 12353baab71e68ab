// Errors of pf-partition, each verified at the op it names. Cases that need
// their own pass options are split-file sections with their own RUN.
// RUN: rm -rf %t && split-file %s %t
// RUN: pf-opt %t/errors.mlir -split-input-file --pf-partition -verify-diagnostics
// RUN: pf-opt %t/twice.mlir --pf-partition=stages=1 --pf-partition=stages=1 -verify-diagnostics
// RUN: pf-opt %t/too-many.mlir --pf-partition="stages=4" -verify-diagnostics
// RUN: pf-opt %t/zero-stages.mlir --pf-partition="stages=0" -verify-diagnostics
// RUN: pf-opt %t/microbatches.mlir --pf-partition="stages=2 microbatches=0" -verify-diagnostics
// RUN: pf-opt %t/device.mlir --pf-partition="stages=2 device=tpu" -verify-diagnostics
// RUN: pf-opt %t/profile.mlir --pf-partition="stages=2 cost=profile profile=%t/missing.json" -verify-diagnostics
// RUN: pf-opt %t/profile-layers.mlir --pf-partition="stages=2 cost=profile profile=%S/Inputs/uniform-3-layers.json" -verify-diagnostics
// RUN: pf-opt %t/memory-cap.mlir --pf-partition="stages=2 memory-cap-mb=0.00001" -verify-diagnostics
// RUN: pf-opt %t/no-profile.mlir --pf-partition="stages=2 cost=profile" -verify-diagnostics
// RUN: pf-opt %t/profile-analytic.mlir --pf-partition="stages=2 profile=%t/missing.json" -verify-diagnostics

//--- errors.mlir
// expected-error @+1 {{pf-partition: the module has no function with a body}}
module {
  func.func private @declared(tensor<2x4xf32>) -> tensor<2x4xf32>
}

// -----

// Blocks are found by parameter names; this function has none.
pf.param @w : tensor<4x4xf32>
// expected-error @+1 {{no encoder blocks found: pipeline partitioning needs parameter names such as 'encoder.layer.N.' or blocks found from the graph's structure}}
func.func @no_blocks(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = pf.param_ref @w : tensor<4x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

//--- twice.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: the function is already partitioned}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y0 : tensor<2x4xf32>
}

//--- too-many.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: cannot cut 3 encoder blocks into 4 stages (more stages than layers)}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- zero-stages.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: cannot cut 3 encoder blocks into 0 stages}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- microbatches.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: microbatches must be >= 1, got 0}}
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

//--- no-profile.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: cost=profile needs profile=PATH}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- profile-analytic.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{missing.json' is only read with cost=profile}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}

//--- profile-layers.mlir
// A profile of 3 layers for a model of 2 blocks.
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
// expected-error @+1 {{has 3 layers but the model has 2 encoder blocks}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y1 : tensor<2x4xf32>
}

//--- memory-cap.mlir
pf.param @"encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"encoder.layer.1.w" : tensor<4x4xf32>
pf.param @"encoder.layer.2.w" : tensor<4x4xf32>
// expected-error @+1 {{pf-partition: no partition of 3 layers into 2 stages keeps every stage within the memory cap of 1e-05}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"encoder.layer.0.w" : tensor<4x4xf32>
  %y0 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"encoder.layer.1.w" : tensor<4x4xf32>
  %y1 = pf.linear %y0, %w1 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"encoder.layer.2.w" : tensor<4x4xf32>
  %y2 = pf.linear %y1, %w2 {transpose_weight} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}
