// RUN: pf-opt %s -split-input-file --pf-name-weights | FileCheck %s

// A generated weight name takes its layer's name from the bias; the ONNX
// name stays in pf.onnx_name, and every read follows.
// CHECK: pf.param @enc.layer.0.q.weight : tensor<8x16xf32> {pf.onnx_name = "onnx::MatMul_1"}
// A weight whose layers disagree keeps its name.
// CHECK: pf.param @"onnx::MatMul_2" : tensor<8x16xf32>{{$}}
// A name that is taken is not reused.
// CHECK: pf.param @"onnx::MatMul_3" : tensor<8x16xf32>{{$}}
// A module-path name is kept.
// CHECK: pf.param @mine : tensor<8x16xf32>{{$}}
pf.param @"onnx::MatMul_1" : tensor<8x16xf32>
pf.param @"onnx::MatMul_2" : tensor<8x16xf32>
pf.param @"onnx::MatMul_3" : tensor<8x16xf32>
pf.param @mine : tensor<8x16xf32>
pf.param @enc.layer.0.q.bias : tensor<16xf32>
pf.param @enc.layer.0.k.bias : tensor<16xf32>
pf.param @enc.layer.0.v.bias : tensor<16xf32>
pf.param @enc.layer.0.v.weight : tensor<8x16xf32>
pf.param @head.bias : tensor<16xf32>

// CHECK-LABEL: func.func @main(
// CHECK: pf.param_ref @enc.layer.0.q.weight
// CHECK: pf.param_ref @"onnx::MatMul_2"
// CHECK: pf.param_ref @"onnx::MatMul_3"
// CHECK: pf.param_ref @mine
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %w1 = pf.param_ref @"onnx::MatMul_1" : tensor<8x16xf32>
  %b1 = pf.param_ref @enc.layer.0.q.bias : tensor<16xf32>
  %y1 = pf.linear %x, %w1, %b1 : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w2 = pf.param_ref @"onnx::MatMul_2" : tensor<8x16xf32>
  %b2 = pf.param_ref @enc.layer.0.k.bias : tensor<16xf32>
  %y2 = pf.linear %x, %w2, %b2 : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %b2b = pf.param_ref @head.bias : tensor<16xf32>
  %y2b = pf.linear %x, %w2, %b2b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w3 = pf.param_ref @"onnx::MatMul_3" : tensor<8x16xf32>
  %b3 = pf.param_ref @enc.layer.0.v.bias : tensor<16xf32>
  %y3 = pf.linear %x, %w3, %b3 : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w4 = pf.param_ref @mine : tensor<8x16xf32>
  %y4 = pf.linear %x, %w4, %b3 : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y1, %y2, %y2b, %y3, %y4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
