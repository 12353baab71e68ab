// RUN: pf-opt %s -split-input-file --pf-retie-weights -verify-diagnostics | FileCheck %s

// A generated-name parameter holding the transpose of another is read as a
// transpose of it and removed; the source records the initializer's name.
// CHECK: pf.param @emb : tensor<3x2xf32> = {{.*}} {pf.onnx_transposed_copies = ["onnx::MatMul_9"]}
// CHECK-NOT: pf.param @"onnx::MatMul_9"
// A zero matrix is no evidence of a tie.
// CHECK: pf.param @"onnx::MatMul_4" : tensor<2x3xf32> = dense<0.000000e+00>
// A module-path name is not an exporter's copy, even when it is equal.
// CHECK: pf.param @decoder.weight : tensor<2x3xf32>
pf.param @emb : tensor<3x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
pf.param @zeros : tensor<3x2xf32> = dense<0.0> : tensor<3x2xf32>
// expected-remark @below {{pf-retie-weights: 'onnx::MatMul_9' equals the transpose of 'emb'}}
pf.param @"onnx::MatMul_9" : tensor<2x3xf32> = dense<[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]> : tensor<2x3xf32>
pf.param @"onnx::MatMul_4" : tensor<2x3xf32> = dense<0.0> : tensor<2x3xf32>
pf.param @decoder.weight : tensor<2x3xf32> = dense<[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]> : tensor<2x3xf32>

// CHECK-LABEL: func.func @main(
// CHECK: %[[E:.*]] = pf.param_ref @emb : tensor<3x2xf32>
// CHECK-NEXT: %[[T:.*]] = pf.transpose %[[E]] {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[M:.*]] = pf.matmul %arg0, %[[T]]
func.func @main(%x: tensor<4x2xf32>) -> (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %w = pf.param_ref @"onnx::MatMul_9" : tensor<2x3xf32>
  %m = pf.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %z = pf.param_ref @"onnx::MatMul_4" : tensor<2x3xf32>
  %d = pf.param_ref @decoder.weight : tensor<2x3xf32>
  return %m, %z, %d : tensor<4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Two generated names that are each other's transpose: one stays.
// CHECK: pf.param @"onnx::MatMul_1" : tensor<2x3xf32> = {{.*}} {pf.onnx_transposed_copies = ["onnx::MatMul_2"]}
// CHECK-NOT: pf.param @"onnx::MatMul_2"
pf.param @"onnx::MatMul_1" : tensor<2x3xf32> = dense<[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]> : tensor<2x3xf32>
// expected-remark @below {{'onnx::MatMul_2' equals the transpose of 'onnx::MatMul_1'}}
pf.param @"onnx::MatMul_2" : tensor<3x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
// Without data nothing is compared.
// CHECK: pf.param @"onnx::MatMul_3" : tensor<2x3xf32>{{$}}
pf.param @"onnx::MatMul_3" : tensor<2x3xf32>
func.func @main() -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>) {
  %a = pf.param_ref @"onnx::MatMul_1" : tensor<2x3xf32>
  %b = pf.param_ref @"onnx::MatMul_2" : tensor<3x2xf32>
  %c = pf.param_ref @"onnx::MatMul_3" : tensor<2x3xf32>
  return %a, %b, %c : tensor<2x3xf32>, tensor<3x2xf32>, tensor<2x3xf32>
}
