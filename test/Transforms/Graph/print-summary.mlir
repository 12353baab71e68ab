// RUN: pf-opt %s -split-input-file --pf-print-summary -o /dev/null | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-print-summary="json=true" -o /dev/null | FileCheck %s --check-prefix=JSON
// The pass prints and leaves the module alone.
// RUN: pf-opt %s -split-input-file --pf-print-summary | FileCheck %s --check-prefix=IR

// CHECK-LABEL: pf module summary
// CHECK-NEXT: entry @main
// CHECK-NEXT: input  input: tensor<2x8xf32>
// CHECK-NEXT: output logits: tensor<2x4xf32>
// CHECK-NEXT: parameters: 8 (352 elements, 0.0 MB, some weights missing)
// 2·32·8 + 8·32 + 8·32 + 2·16·16 + 8·16 + 2·8·8 + 2·8·4 = 1856 FLOP.
// CHECK-NEXT: forward: 0.00 GFLOP
// CHECK-NEXT: ops:
// CHECK-NEXT: pf.gelu 1
// CHECK-NEXT: pf.layer_norm 2
// CHECK-NEXT: pf.linear 4
// CHECK-NEXT: pf.param_ref 8
// CHECK-NEXT: encoder blocks: 2
// CHECK-NEXT: block   0: 1 pf.linear, 1 pf.layer_norm, 1 pf.gelu
// CHECK-NEXT: block   1: 1 pf.linear, 1 pf.layer_norm, 0 pf.gelu
// CHECK-NEXT: pf.linear outside encoder blocks: 2
// CHECK-NOT: module

// JSON: {
// JSON-NEXT: "blocks": [
// JSON-NEXT: {
// JSON-NEXT: "block": 0,
// JSON-NEXT: "gelu": 1,
// JSON-NEXT: "layer_norm": 1,
// JSON-NEXT: "linear": 1
// JSON-NEXT: },
// JSON-NEXT: {
// JSON-NEXT: "block": 1,
// JSON-NEXT: "gelu": 0,
// JSON-NEXT: "layer_norm": 1,
// JSON-NEXT: "linear": 1
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "entry": "main",
// JSON-NEXT: "forward_flops": 1856,
// JSON-NEXT: "inputs": [
// JSON-NEXT: {
// JSON-NEXT: "name": "input",
// JSON-NEXT: "type": "tensor<2x8xf32>"
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "linear_outside_blocks": 2,
// JSON-NEXT: "ops": {
// JSON-NEXT: "pf.gelu": 1,
// JSON-NEXT: "pf.layer_norm": 2,
// JSON-NEXT: "pf.linear": 4,
// JSON-NEXT: "pf.param_ref": 8
// JSON-NEXT: },
// JSON-NEXT: "outputs": [
// JSON-NEXT: {
// JSON-NEXT: "name": "logits",
// JSON-NEXT: "type": "tensor<2x4xf32>"
// JSON-NEXT: }
// JSON-NEXT: ],
// JSON-NEXT: "parameter_bytes": 1408,
// JSON-NEXT: "parameter_elements": 352,
// JSON-NEXT: "parameters": 8,
// JSON-NEXT: "parameters_with_data": 5
// JSON-NEXT: }

// IR-LABEL: pf module summary
// IR: module {
// IR: pf.param @encoder.layer.0.fc.weight : tensor<8x16xf32> = dense<1.000000e+00>
// IR: pf.linear
// IR: pf.gelu

// Two encoder blocks (found by parameter names) and a head outside them.
// Block 0 has a linear named by its weight, a GELU fed by it, a LayerNorm;
// block 1 a linear whose weight lost its name (onnx::MatMul_1), found by its
// bias, and a LayerNorm. "head.branch.1." is no block ("h.1." must start a
// name component).
pf.param @"encoder.layer.0.fc.weight" : tensor<8x16xf32> = dense<1.0> : tensor<8x16xf32>
pf.param @"encoder.layer.0.fc.bias" : tensor<16xf32> = dense<0.0> : tensor<16xf32>
pf.param @"encoder.layer.0.ln.weight" : tensor<16xf32> = dense<1.0> : tensor<16xf32>
pf.param @"onnx::MatMul_1" : tensor<16x8xf32> = dense<1.0> : tensor<16x8xf32>
pf.param @"encoder.layer.1.fc.bias" : tensor<8xf32> = dense<0.0> : tensor<8xf32>
pf.param @"encoder.layer.1.ln.weight" : tensor<8xf32>
pf.param @"head.weight" : tensor<8x4xf32>
pf.param @"head.branch.1.weight" : tensor<4x4xf32>

func.func @main(%x: tensor<2x8xf32> {pf.name = "input"}) -> (tensor<2x4xf32> {pf.name = "logits"}) {
  %w0 = pf.param_ref @"encoder.layer.0.fc.weight" : tensor<8x16xf32>
  %b0 = pf.param_ref @"encoder.layer.0.fc.bias" : tensor<16xf32>
  %h0 = pf.linear %x, %w0, %b0 : (tensor<2x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %g0 = pf.gelu %h0 : (tensor<2x16xf32>) -> tensor<2x16xf32>
  %s0 = pf.param_ref @"encoder.layer.0.ln.weight" : tensor<16xf32>
  %n0 = pf.layer_norm %g0, %s0 : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %w1 = pf.param_ref @"onnx::MatMul_1" : tensor<16x8xf32>
  %b1 = pf.param_ref @"encoder.layer.1.fc.bias" : tensor<8xf32>
  %h1 = pf.linear %n0, %w1, %b1 : (tensor<2x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s1 = pf.param_ref @"encoder.layer.1.ln.weight" : tensor<8xf32>
  %n1 = pf.layer_norm %h1, %s1 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %wh = pf.param_ref @"head.weight" : tensor<8x4xf32>
  %h = pf.linear %n1, %wh : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %wb = pf.param_ref @"head.branch.1.weight" : tensor<4x4xf32>
  %y = pf.linear %h, %wb : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Shapes only, no encoder block: 2·1000·500·1000 FLOP = 1 GFLOP; 500000
// elements of 4 bytes = 2.0 MB.
// CHECK-LABEL: pf module summary
// CHECK-NEXT: entry @head_only
// CHECK-NEXT: input  arg0: tensor<1000x1000xf32>
// CHECK-NEXT: output result0: tensor<1000x500xf32>
// CHECK-NEXT: parameters: 1 (500000 elements, 2.0 MB, shapes only)
// CHECK-NEXT: forward: 1.00 GFLOP
// CHECK-NEXT: ops:
// CHECK-NEXT: pf.linear 1
// CHECK-NEXT: pf.param_ref 1
// CHECK-NEXT: encoder blocks: 0
// CHECK-NEXT: pf.linear outside encoder blocks: 1
// JSON-LABEL: "entry": "head_only",
// JSON: "forward_flops": 1000000000,
// JSON: "linear_outside_blocks": 1,
// JSON: "parameter_bytes": 2000000,
// JSON-NEXT: "parameter_elements": 500000,
// JSON-NEXT: "parameters": 1,
// JSON-NEXT: "parameters_with_data": 0
// IR-LABEL: pf module summary
// IR: func.func @head_only
pf.param @"cls.weight" : tensor<1000x500xf32>
func.func @head_only(%x: tensor<1000x1000xf32>) -> tensor<1000x500xf32> {
  %w = pf.param_ref @"cls.weight" : tensor<1000x500xf32>
  %y = pf.linear %x, %w : (tensor<1000x1000xf32>, tensor<1000x500xf32>) -> tensor<1000x500xf32>
  return %y : tensor<1000x500xf32>
}
