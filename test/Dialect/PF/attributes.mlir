// Every discardable pf attribute, where it belongs and with a valid value,
// verifies and round-trips (attributes-invalid.mlir has the errors).
// RUN: pf-opt %s | pf-opt | FileCheck %s

// CHECK: module attributes {pf.onnx_opset = 14 : i64, pf.onnx_producer = "pytorch", pf.source = "bert.onnx"}
module attributes {pf.source = "bert.onnx", pf.onnx_opset = 14 : i64, pf.onnx_producer = "pytorch"} {
  // CHECK: pf.param @w.kfac.A : tensor<2x2xf32> {pf.kfac_bias = "b", pf.kfac_weight = "w"}
  pf.param @w.kfac.A : tensor<2x2xf32> {pf.kfac_weight = "w", pf.kfac_bias = "b"}

  // CHECK-LABEL: func.func @main
  // CHECK-SAME: (%{{.*}}: tensor<4x2xf32> {pf.name = "x"}) -> (tensor<4x2xf32> {pf.name = "y"})
  // CHECK-SAME: attributes {pf.microbatches = 2 : i64}
  func.func @main(%x: tensor<4x2xf32> {pf.name = "x"}) -> (tensor<4x2xf32> {pf.name = "y"})
      attributes {pf.microbatches = 2 : i64} {
    // CHECK: pf.pipeline stages(1) microbatches(2)
    // CHECK-SAME: attributes {pf.kfac_policy = "pipefisher", pf.refresh_steps = 3 : i64, pf.step_time_ms = 1.250000e+01 : f64, pf.utilization = 7.500000e-01 : f64}
    %r = pf.pipeline stages(1) microbatches(2) (%x : tensor<4x2xf32>) attributes {
        pf.kfac_policy = "pipefisher", pf.refresh_steps = 3 : i64,
        pf.step_time_ms = 12.5 : f64, pf.utilization = 0.75 : f64} {
    ^bb0(%a: tensor<4x2xf32>):
      // CHECK: pf.stage 0
      // CHECK-SAME: pf.devices = array<i64: 0, 1>
      %s = pf.stage 0 (%a : tensor<4x2xf32>) attributes {pf.devices = array<i64: 0, 1>} {
      ^bb0(%b: tensor<4x2xf32>):
        // CHECK: pf.gelu %{{.*}} {pf.block = 0 : i64, pf.name = "h"}
        %g = pf.gelu %b {pf.block = 0 : i64, pf.name = "h"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
        pf.yield %g : tensor<4x2xf32>
      } -> tensor<4x2xf32>
      pf.yield %s : tensor<4x2xf32>
    } -> tensor<4x2xf32>
    return %r : tensor<4x2xf32>
  }

  // The runtime lowering's plan, on the entry function.
  // CHECK-LABEL: func.func @plan
  // CHECK-SAME: pf.runtime_plan = #pf.runtime_plan<arena_bytes = 64
  func.func @plan() attributes {pf.runtime_plan = #pf.runtime_plan<arena_bytes = 64, buffers = [], inputs = [], op_names = ["x"], outputs = [], peak_live_bytes = 32, tensors = []>} {
    return
  }

  // Stage functions of pf-split-stages and pf-build-gradients' origin tags.
  // CHECK-LABEL: func.func @stage0_forward
  // CHECK-SAME: attributes {pf.blocks = array<i64: 0, 1>, pf.stage = 0 : i64}
  // CHECK: pf.exp %{{.*}} {pf.grad_id = 3 : i64}
  // CHECK: pf.neg %{{.*}} {pf.grad_of = 3 : i64, pf.grad_sum}
  func.func @stage0_forward(%x: tensor<2xf32>) -> tensor<2xf32>
      attributes {pf.stage = 0 : i64, pf.blocks = array<i64: 0, 1>} {
    %e = pf.exp %x {pf.grad_id = 3 : i64} : (tensor<2xf32>) -> tensor<2xf32>
    %n = pf.neg %e {pf.grad_of = 3 : i64, pf.grad_sum} : (tensor<2xf32>) -> tensor<2xf32>
    return %n : tensor<2xf32>
  }

  // A stage function of pf-split-stages{grain=half}: its units, no encoder
  // block (the head's decoder alone).
  // CHECK-LABEL: func.func @stage1_forward
  // CHECK-SAME: attributes {pf.stage = 1 : i64, pf.units = ["head.decoder"]}
  func.func @stage1_forward(%x: tensor<2xf32>) -> tensor<2xf32>
      attributes {pf.stage = 1 : i64, pf.units = ["head.decoder"]} {
    return %x : tensor<2xf32>
  }
}
