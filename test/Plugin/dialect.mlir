// The stock mlir-opt with the pf dialect plugin parses and prints pf IR:
// custom form -> custom form, and generic form -> custom form, every op
// verified on the way (parameters at module level need the module's
// SymbolTable trait, which libMLIR.so and the plugin must agree on), and the
// result is what pf-opt prints.
// RUN: %mlir-opt --load-dialect-plugin=%pf_plugin %s | %mlir-opt --load-dialect-plugin=%pf_plugin | FileCheck %s
// RUN: %mlir-opt --load-dialect-plugin=%pf_plugin %s --mlir-print-op-generic | %mlir-opt --load-dialect-plugin=%pf_plugin | FileCheck %s
// RUN: %mlir-opt --load-dialect-plugin=%pf_plugin %s > %t.plugin.mlir
// RUN: pf-opt %s > %t.pf-opt.mlir
// RUN: diff %t.plugin.mlir %t.pf-opt.mlir
// Without the plugin the stock tool knows no pf dialect.
// RUN: not %mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NO-PLUGIN

// NO-PLUGIN: error: Dialect `pf' not found for custom op 'pf.param'

// CHECK: pf.param @w : tensor<3x2xf32> = dense_resource<w_blob> : tensor<3x2xf32>{{$}}
// CHECK-NEXT: pf.param @"onnx::bias" : tensor<3xf32>{{$}}
pf.param @w : tensor<3x2xf32> = dense_resource<w_blob> : tensor<3x2xf32>
pf.param @"onnx::bias" : tensor<3xf32>

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<4x2xf32> {pf.name = "x"}
// CHECK-NEXT: %[[W:.*]] = pf.param_ref @w : tensor<3x2xf32>
// CHECK-NEXT: %[[B:.*]] = pf.param_ref @"onnx::bias" : tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = pf.linear %[[X]], %[[W]], %[[B]] {transpose_weight} : (tensor<4x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[G:.*]] = pf.gelu %[[Y]] : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[C:.*]] = pf.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = pf.mul %[[G]], %[[C]] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[M]]
func.func @main(%x: tensor<4x2xf32> {pf.name = "x"}) -> (tensor<4x3xf32> {pf.name = "y"}) {
  %w = pf.param_ref @w : tensor<3x2xf32>
  %b = pf.param_ref @"onnx::bias" : tensor<3xf32>
  %y = pf.linear %x, %w, %b {transpose_weight} : (tensor<4x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %g = pf.gelu %y : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %c = pf.constant dense<2.0> : tensor<f32>
  %m = pf.mul %g, %c : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %m : tensor<4x3xf32>
}

// CHECK: dialect_resources
// CHECK: w_blob: "0x04000000
{-#
  dialect_resources: {
    builtin: {
      w_blob: "0x040000000000803F0000004000004040000080400000A0400000C040"
    }
  }
#-}
