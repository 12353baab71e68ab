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
  // CHECK-SAME: pf.arena_bytes = 64 : i64
  func.func @plan() attributes {pf.buffers = [], pf.tensors = [], pf.inputs = [],
                                pf.outputs = [], pf.op_names = ["x"],
                                pf.arena_bytes = 64 : i64, pf.peak_live_bytes = 32 : i64} {
    return
  }
}
