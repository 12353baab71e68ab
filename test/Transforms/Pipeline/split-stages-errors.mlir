// RUN: pf-opt %s -split-input-file -verify-diagnostics --pf-split-stages=stages=2
// RUN: not pf-opt %s -split-input-file --pf-split-stages=stages=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not pf-opt %s -split-input-file --pf-split-stages=stages=3 2>&1 | FileCheck %s --check-prefix=TOO-MANY

// The tags are those of pf-build-gradients{tag-origin=true}, written by hand.
// ZERO: cannot cut 2 encoder blocks into 0 stages
// TOO-MANY: cannot cut 2 encoder blocks into 3 stages (more stages than blocks)

pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
// expected-error @below {{pf-split-stages: the function has no tagged gradient ops: build the step with pf-build-gradients{tag-origin=true}}}
func.func @untagged(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

pf.param @w : tensor<4x4xf32>
// expected-error @below {{no encoder blocks found}}
func.func @no_blocks(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = pf.param_ref @w : tensor<4x4xf32>
  %y = pf.linear %x, %w {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = pf.linear %y, %w {pf.grad_of = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
func.func @unknown_origin(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.w" : tensor<4x4xf32>
  %z = pf.linear %y, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @below {{pf-split-stages: cannot place this op: its 'pf.grad_of' = 7 names no forward op}}
  %g = pf.linear %z, %w1 {pf.grad_of = 7 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
func.func @sum_of_constants(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.w" : tensor<4x4xf32>
  %z = pf.linear %y, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = pf.linear %z, %w0 {pf.grad_of = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %c = pf.constant dense<1.0> : tensor<2x4xf32>
  // expected-error @below {{pf-split-stages: cannot place this sum of gradients: no operand comes from a stage}}
  %s = pf.add %c, %c {pf.grad_sum} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %g, %s : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// A gradient op of block 1's linear reads a gradient made on stage 0, whose
// backward runs after stage 1's.
pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
func.func @against_the_pipeline(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.w" : tensor<4x4xf32>
  %z = pf.linear %y, %w1 {pf.grad_id = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g0 = pf.linear %y, %w0 {pf.grad_of = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @below {{pf-split-stages: cannot place this op on the backward of stage 1: it reads a value of the backward of stage 0, which runs after it}}
  %g1 = pf.linear %g0, %w1 {pf.grad_of = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %g1 : tensor<2x4xf32>
}

// -----

// A gradient op of block 0's linear reads a forward value of stage 1.
pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
func.func @reads_a_later_forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.w" : tensor<4x4xf32>
  %z = pf.linear %y, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @below {{pf-split-stages: cannot place this op on the backward of stage 0: it reads a value of the forward of stage 1, which runs after it}}
  %g0 = pf.linear %z, %w0 {pf.grad_of = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %g0 : tensor<2x4xf32>
}

// -----

pf.param @"bert.encoder.layer.0.w" : tensor<4x4xf32>
pf.param @"bert.encoder.layer.1.w" : tensor<4x4xf32>
// expected-error @below {{pf-split-stages: a result is a function argument; no stage computes it}}
func.func @returns_argument(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %w0 = pf.param_ref @"bert.encoder.layer.0.w" : tensor<4x4xf32>
  %y = pf.linear %x, %w0 {pf.grad_id = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.w" : tensor<4x4xf32>
  %z = pf.linear %y, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = pf.linear %z, %w0 {pf.grad_of = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %g, %x : tensor<2x4xf32>, tensor<2x4xf32>
}
