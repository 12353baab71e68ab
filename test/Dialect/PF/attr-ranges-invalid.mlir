// Integer attributes with a range are constrained attribute types
// (PF_NonNegativeI64Attr, PF_PositiveI64Attr): the generated verifier rejects
// a value outside the range, naming the attribute.
// RUN: pf-opt %s -split-input-file -verify-diagnostics

func.func @microbatch_count(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'pf.microbatch' op attribute 'count' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = pf.microbatch %x {index = 0, count = 0} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @microbatch_index(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'pf.microbatch' op attribute 'index' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = pf.microbatch %x {index = -1, count = 2} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @microbatch_dim(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'pf.microbatch' op attribute 'dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = pf.microbatch %x {index = 0, count = 2, dim = -1} : (tensor<8x4xf32>) -> tensor<8x2xf32>
  return
}

// -----

pf.pipeline stages(2) microbatches(1) {
  pf.stage 0 {
    %x = pf.constant dense<1.0> : tensor<2xf32>
    // expected-error @+1 {{'pf.send' op attribute 'tag' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    pf.send %x to 1 tag -1 : tensor<2xf32>
  }
}

// -----

pf.pipeline stages(2) microbatches(1) {
  pf.stage 1 {
    // expected-error @+1 {{'pf.recv' op attribute 'tag' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    %v = pf.recv from 0 tag -4 : tensor<2xf32>
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  pf.program device(0) {
    // expected-error @+1 {{'pf.task' op attribute 'step' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    pf.task "forward" {step = -1, stage = 0, start = 0.0, end = 1.0}
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  pf.program device(0) {
    // expected-error @+1 {{'pf.task' op attribute 'stage' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    pf.task "forward" {step = 0, stage = -2, start = 0.0, end = 1.0}
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  pf.program device(0) {
    // expected-error @+1 {{'pf.task' op attribute 'microbatch' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    pf.task "forward" {step = 0, stage = 0, microbatch = -1, start = 0.0, end = 1.0}
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  pf.program device(0) {
    // expected-error @+1 {{'pf.task' op attribute 'layer' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
    pf.task "inversion_a" {step = 0, stage = 0, layer = -3, start = 0.0, end = 1.0}
  }
}

// -----

pf.param @w.kfac.A : tensor<3x3xf32>
func.func @update_every(%x: tensor<6x3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{'pf.kfac.update_factor' op attribute 'every' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  pf.kfac.update_factor @w.kfac.A from %x step %s {every = 0 : i64} : tensor<6x3xf32>, tensor<i64>
  return
}

// -----

pf.param @w.kfac.B : tensor<3x3xf32>
func.func @capture_every(%x: tensor<6x3xf32>, %s: tensor<i64>) -> tensor<6x3xf32> {
  // expected-error @+1 {{'pf.kfac.capture_output' op attribute 'every' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = pf.kfac.capture_output %x into @w.kfac.B step %s {every = -2 : i64} : tensor<6x3xf32>, tensor<i64>
  return %y : tensor<6x3xf32>
}

// -----

pf.param @a : tensor<4x4xf32>
pf.param @b : tensor<5x5xf32>
func.func @refresh_retries(%s: tensor<i64>) {
  // expected-error @+1 {{'pf.kfac.refresh_inverses' op attribute 'retries' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %o = pf.kfac.refresh_inverses(@a, @b) into (@a, @b) step %s {retries = -1 : i64} : tensor<i64> -> tensor<i32>
  return
}

// -----

pf.param @a : tensor<4x4xf32>
pf.param @b : tensor<5x5xf32>
func.func @refresh_warmup(%s: tensor<i64>) {
  // expected-error @+1 {{'pf.kfac.refresh_inverses' op attribute 'warmup' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %o = pf.kfac.refresh_inverses(@a, @b) into (@a, @b) step %s {warmup = -5 : i64} : tensor<i64> -> tensor<i32>
  return
}
