// Round trip of named parameters and their uses.
// RUN: pf-opt %s | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Shapes-only parameter (imported with --no-weights), one with inline dense
// data, one with a resource blob, and one whose ONNX name needs quoting.
// CHECK: pf.param @bert.embeddings.word_embeddings.weight : tensor<30522x128xf32>{{$}}
// CHECK-NEXT: pf.param @bias : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>{{$}}
// CHECK-NEXT: pf.param @blob : tensor<2xf32> = dense_resource<param_blob> : tensor<2xf32>{{$}}
// CHECK-NEXT: pf.param @"onnx::MatMul_123" : tensor<2x2xf32> {pf.kfac_weight = "bias"}{{$}}
// GENERIC: "pf.param"() <{sym_name = "bert.embeddings.word_embeddings.weight", type = tensor<30522x128xf32>}> : () -> ()
// GENERIC: "pf.param"() <{sym_name = "bias", type = tensor<2xf32>, value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}> : () -> ()
// GENERIC: "pf.param"() <{sym_name = "onnx::MatMul_123", type = tensor<2x2xf32>}> {pf.kfac_weight = "bias"} : () -> ()
pf.param @"bert.embeddings.word_embeddings.weight" : tensor<30522x128xf32>
pf.param @bias : tensor<2xf32> = dense<[1.0, 2.0]> : tensor<2xf32>
pf.param @blob : tensor<2xf32> = dense_resource<param_blob> : tensor<2xf32>
pf.param @"onnx::MatMul_123" : tensor<2x2xf32> {pf.kfac_weight = "bias"}

// CHECK-LABEL: func.func @refs
// CHECK-NEXT: %[[E:.*]] = pf.param_ref @bert.embeddings.word_embeddings.weight : tensor<30522x128xf32>
// CHECK-NEXT: %[[B:.*]] = pf.param_ref @bias : tensor<2xf32>
// CHECK-NEXT: %[[M:.*]] = pf.param_ref @"onnx::MatMul_123" : tensor<2x2xf32>
// CHECK-NEXT: %[[B2:.*]] = pf.param_ref @blob : tensor<2xf32>
// CHECK-NEXT: return %[[E]], %[[B]], %[[M]], %[[B2]]
// GENERIC: "pf.param_ref"() <{name = @bias}> : () -> tensor<2xf32>
func.func @refs() -> (tensor<30522x128xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2xf32>) {
  %e = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<30522x128xf32>
  %b = pf.param_ref @bias : tensor<2xf32>
  %m = pf.param_ref @"onnx::MatMul_123" : tensor<2x2xf32>
  %b2 = pf.param_ref @blob : tensor<2xf32>
  return %e, %b, %m, %b2 : tensor<30522x128xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      param_blob: "0x040000000000803F00000040"
    }
  }
#-}
