// The pf dialect's verifier of discardable pf.* attributes: an unknown name,
// a value of the wrong type or range, or an attribute on an op that may not
// carry it is an error naming the attribute.
// RUN: pf-opt %s -split-input-file -verify-diagnostics

func.func @unknown_op_attr(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op has unknown pf attribute 'pf.blok'}}
  %0 = pf.gelu %x {pf.blok = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @empty_name(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.identity' op attribute 'pf.name' must be a non-empty string, got ""}}
  %0 = pf.identity %x {pf.name = ""} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @name_not_string(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.identity' op attribute 'pf.name' must be a non-empty string, got 3 : i64}}
  %0 = pf.identity %x {pf.name = 3} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @negative_block(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op attribute 'pf.block' must be a non-negative i64, got -1 : i64}}
  %0 = pf.gelu %x {pf.block = -1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @block_i32(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op attribute 'pf.block' must be a non-negative i64, got 1 : i32}}
  %0 = pf.gelu %x {pf.block = 1 : i32} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @block_string(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op attribute 'pf.block' must be a non-negative i64, got "0"}}
  %0 = pf.gelu %x {pf.block = "0"} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @devices_off_stage(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op may not carry 'pf.devices': it belongs on a pf.stage}}
  %0 = pf.gelu %x {pf.devices = array<i64: 0>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op attribute 'pf.devices' must be a non-empty array<i64> of distinct non-negative devices, got array<i64: 0, -1>}}
  pf.stage 0 attributes {pf.devices = array<i64: 0, -1>} {
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op attribute 'pf.devices' must be a non-empty array<i64> of distinct non-negative devices, got array<i64: 1, 1>}}
  pf.stage 0 attributes {pf.devices = array<i64: 1, 1>} {
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op attribute 'pf.devices' must be a non-empty array<i64> of distinct non-negative devices, got array<i64>}}
  pf.stage 0 attributes {pf.devices = array<i64>} {
  }
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op attribute 'pf.devices' must be a non-empty array<i64> of distinct non-negative devices, got [0, 1]}}
  pf.stage 0 attributes {pf.devices = [0, 1]} {
  }
}

// -----

// expected-error @+1 {{'pf.param' op attribute 'pf.kfac_weight' must be a non-empty string (a parameter's name), got @w}}
pf.param @w.kfac.A : tensor<2x2xf32> {pf.kfac_weight = @w}

// -----

// expected-error @+1 {{'pf.param' op attribute 'pf.kfac_bias' must be a non-empty string (a parameter's name), got ""}}
pf.param @w.kfac.A : tensor<2x2xf32> {pf.kfac_weight = "w", pf.kfac_bias = ""}

// -----

func.func @kfac_marker_off_param(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op may not carry 'pf.kfac_weight': it belongs on a pf.param}}
  %0 = pf.gelu %x {pf.kfac_weight = "w"} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'pf.onnx_opset' must be a positive i64, got 0 : i64}}
module attributes {pf.onnx_opset = 0 : i64} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'pf.source' must be a non-empty string, got ""}}
module attributes {pf.source = ""} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'pf.onnx_producer' must be a non-empty string, got 1 : i64}}
module attributes {pf.onnx_producer = 1} {
}

// -----

// expected-error @+1 {{'func.func' op may not carry 'pf.onnx_opset': it belongs on a module}}
func.func @opset_on_function() attributes {pf.onnx_opset = 14 : i64} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op has unknown pf attribute 'pf.opset'}}
module attributes {pf.opset = 14 : i64} {
}

// -----

// expected-error @+1 {{'func.func' op attribute 'pf.microbatches' must be a positive i64, got 0 : i64}}
func.func @zero_microbatches() attributes {pf.microbatches = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op may not carry 'pf.microbatches': it belongs on a function}}
module attributes {pf.microbatches = 2 : i64} {
}

// -----

// expected-error @+1 {{'pf.pipeline' op attribute 'pf.refresh_steps' must be a non-negative i64, got -1 : i64}}
pf.pipeline stages(1) microbatches(1) attributes {pf.refresh_steps = -1 : i64} {
}

// -----

// expected-error @+1 {{'pf.pipeline' op attribute 'pf.step_time_ms' must be a non-negative f64, got 3 : i64}}
pf.pipeline stages(1) microbatches(1) attributes {pf.step_time_ms = 3 : i64} {
}

// -----

// expected-error @+1 {{'pf.pipeline' op attribute 'pf.utilization' must be a non-negative f64, got -5.000000e-01 : f64}}
pf.pipeline stages(1) microbatches(1) attributes {pf.utilization = -0.5 : f64} {
}

// -----

// expected-error @+1 {{'pf.pipeline' op attribute 'pf.kfac_policy' must be a non-empty string, got ""}}
pf.pipeline stages(1) microbatches(1) attributes {pf.kfac_policy = ""} {
}

// -----

pf.pipeline stages(1) microbatches(1) {
  // expected-error @+1 {{'pf.stage' op may not carry 'pf.kfac_policy': it belongs on a pf.pipeline}}
  pf.stage 0 attributes {pf.kfac_policy = "pf"} {
  }
}

// -----

// expected-error @+1 {{'func.func' op attribute 'pf.runtime_plan' must be a #pf.runtime_plan, got []}}
func.func @plan_untyped() attributes {pf.runtime_plan = []} {
  return
}

// -----

// The plan's old dictionary attributes are gone: unknown names.
// expected-error @+1 {{'func.func' op has unknown pf attribute 'pf.buffers'}}
func.func @plan_buffers() attributes {pf.buffers = []} {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 1 attribute 'pf.name' must be a non-empty string, got ""}}
func.func @empty_argument_name(%x: tensor<2xf32> {pf.name = "x"}, %y: tensor<2xf32> {pf.name = ""}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 has unknown pf attribute 'pf.block' (only 'pf.name' names an argument or result)}}
func.func @block_on_argument(%x: tensor<2xf32> {pf.block = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op result 0 attribute 'pf.name' must be a non-empty string, got 7 : i64}}
func.func @result_name_not_string(%x: tensor<2xf32>) -> (tensor<2xf32> {pf.name = 7}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op result 0 has unknown pf attribute 'pf.names' (only 'pf.name' names an argument or result)}}
func.func @unknown_result_attr(%x: tensor<2xf32>) -> (tensor<2xf32> {pf.names = "y"}) {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'pf.stage' must be a non-negative i64, got -1 : i64}}
func.func @negative_stage() attributes {pf.stage = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op attribute 'pf.blocks' must be a non-empty array<i64> of non-negative blocks, got array<i64>}}
func.func @no_blocks() attributes {pf.blocks = array<i64>} {
  return
}

// -----

func.func @stage_on_op(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.exp' op may not carry 'pf.stage': it belongs on a function}}
  %e = pf.exp %x {pf.stage = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}

// -----

func.func @grad_sum_not_unit(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.exp' op attribute 'pf.grad_sum' must be a unit attribute, got 1 : i64}}
  %e = pf.exp %x {pf.grad_sum = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %e : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'pf.units' must be a non-empty array of non-empty strings, got []}}
func.func @no_units() attributes {pf.stage = 0 : i64, pf.units = []} {
  return
}

// -----

func.func @units_off_function(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'pf.gelu' op may not carry 'pf.units': it belongs on a function}}
  %0 = pf.gelu %x {pf.units = ["block0.attn"]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
