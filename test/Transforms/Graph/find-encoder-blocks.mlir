// RUN: pf-opt %s -split-input-file --pf-find-encoder-blocks -verify-diagnostics | FileCheck %s

// Two post-LN blocks (attention, then feed-forward, each closed by the
// LayerNorm of a residual add) and a head transform (GELU + LayerNorm, no
// attention before it). Names say nothing.
// CHECK: pf.param @"onnx::W_1" : {{.*}} {pf.encoder_block = 0 : i64}
// CHECK: pf.param @"onnx::W_2" : {{.*}} {pf.encoder_block = 0 : i64}
// CHECK: pf.param @"onnx::S_1" : {{.*}} {pf.encoder_block = 0 : i64}
// CHECK: pf.param @"onnx::W_3" : {{.*}} {pf.encoder_block = 1 : i64}
// CHECK: pf.param @"onnx::W_4" : {{.*}} {pf.encoder_block = 1 : i64}
// The head and the LayerNorm before the first block are in no block.
// CHECK: pf.param @"onnx::W_5" : tensor<4x4xf32>{{$}}
// CHECK: pf.param @"onnx::S_0" : tensor<4xf32>{{$}}
// A parameter read in both blocks is left unmarked.
// CHECK: pf.param @"onnx::S_shared" : tensor<4xf32>{{$}}
pf.param @"onnx::W_1" : tensor<4x4xf32>
pf.param @"onnx::W_2" : tensor<4x4xf32>
pf.param @"onnx::S_1" : tensor<4xf32>
pf.param @"onnx::W_3" : tensor<4x4xf32>
pf.param @"onnx::W_4" : tensor<4x4xf32>
pf.param @"onnx::W_5" : tensor<4x4xf32>
pf.param @"onnx::S_0" : tensor<4xf32>
pf.param @"onnx::S_shared" : tensor<4xf32>
// expected-remark @below {{pf-find-encoder-blocks: no parameter name gives an encoder block; found 2 from the graph's structure}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s0 = pf.param_ref @"onnx::S_0" : tensor<4xf32>
  %ss = pf.param_ref @"onnx::S_shared" : tensor<4xf32>
  %h0 = pf.layer_norm %x, %s0, %s0 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // block 0: attention
  %w1 = pf.param_ref @"onnx::W_1" : tensor<4x4xf32>
  %a1 = pf.linear %h0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p1 = pf.softmax %a1 {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r1 = pf.add %p1, %h0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s1 = pf.param_ref @"onnx::S_1" : tensor<4xf32>
  %h1 = pf.layer_norm %r1, %s1, %ss {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // block 0: feed-forward
  %w2 = pf.param_ref @"onnx::W_2" : tensor<4x4xf32>
  %f1 = pf.linear %h1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g1 = pf.gelu %f1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r2 = pf.add %g1, %h1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = pf.layer_norm %r2, %s1, %s1 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // block 1: attention
  %w3 = pf.param_ref @"onnx::W_3" : tensor<4x4xf32>
  %a3 = pf.linear %h2, %w3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p3 = pf.softmax %a3 {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r3 = pf.add %p3, %h2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h3 = pf.layer_norm %r3, %ss, %ss {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // block 1: feed-forward
  %w4 = pf.param_ref @"onnx::W_4" : tensor<4x4xf32>
  %f4 = pf.linear %h3, %w4 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g4 = pf.gelu %f4 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r4 = pf.add %g4, %h3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h4 = pf.layer_norm %r4, %s0, %s0 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // head transform: GELU and LayerNorm, no residual, no attention
  %w5 = pf.param_ref @"onnx::W_5" : tensor<4x4xf32>
  %t5 = pf.linear %h4, %w5 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g5 = pf.gelu %t5 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h5 = pf.layer_norm %g5, %s0, %s0 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %h5 : tensor<2x4xf32>
}

// -----

// Names that give blocks: nothing changes, no remark.
// CHECK: pf.param @encoder.layer.0.w : tensor<4x4xf32>{{$}}
pf.param @encoder.layer.0.w : tensor<4x4xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = pf.param_ref @encoder.layer.0.w : tensor<4x4xf32>
  %y = pf.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Names give the blocks (`blocks.N.`, a plain PyTorch module tree), but the
// linears have no bias: their folded weights keep the exporter's names, which
// pf-name-weights cannot replace. The structure's blocks are the named ones
// (each structural block reads the LayerNorms of one named block), so each
// such weight gets its block; a named parameter and one outside the blocks
// (the head's) stay as they are.
// CHECK-LABEL: pf.param @"onnx::MatMul_1" : {{.*}} {pf.encoder_block = 0 : i64}
// CHECK: pf.param @"onnx::MatMul_2" : {{.*}} {pf.encoder_block = 0 : i64}
// CHECK: pf.param @"onnx::MatMul_3" : {{.*}} {pf.encoder_block = 1 : i64}
// CHECK: pf.param @"onnx::MatMul_4" : {{.*}} {pf.encoder_block = 1 : i64}
// CHECK: pf.param @"onnx::MatMul_5" : tensor<4x4xf32>{{$}}
// CHECK: pf.param @blocks.0.norm1.weight : tensor<4xf32>{{$}}
pf.param @"onnx::MatMul_1" : tensor<4x4xf32>
pf.param @"onnx::MatMul_2" : tensor<4x4xf32>
pf.param @"onnx::MatMul_3" : tensor<4x4xf32>
pf.param @"onnx::MatMul_4" : tensor<4x4xf32>
pf.param @"onnx::MatMul_5" : tensor<4x4xf32>
pf.param @blocks.0.norm1.weight : tensor<4xf32>
pf.param @blocks.0.norm2.weight : tensor<4xf32>
pf.param @blocks.1.norm1.weight : tensor<4xf32>
pf.param @blocks.1.norm2.weight : tensor<4xf32>
pf.param @norm.weight : tensor<4xf32>
// expected-remark @below {{pf-find-encoder-blocks: 4 exporter-named parameter(s) read inside the named encoder blocks placed in their block from the graph's structure}}
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = pf.param_ref @norm.weight : tensor<4xf32>
  %h0 = pf.layer_norm %x, %s, %s {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w1 = pf.param_ref @"onnx::MatMul_1" : tensor<4x4xf32>
  %a1 = pf.linear %h0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p1 = pf.softmax %a1 {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r1 = pf.add %p1, %h0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s01 = pf.param_ref @blocks.0.norm1.weight : tensor<4xf32>
  %h1 = pf.layer_norm %r1, %s01, %s {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"onnx::MatMul_2" : tensor<4x4xf32>
  %f1 = pf.linear %h1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g1 = pf.gelu %f1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r2 = pf.add %g1, %h1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s02 = pf.param_ref @blocks.0.norm2.weight : tensor<4xf32>
  %h2 = pf.layer_norm %r2, %s02, %s02 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w3 = pf.param_ref @"onnx::MatMul_3" : tensor<4x4xf32>
  %a3 = pf.linear %h2, %w3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p3 = pf.softmax %a3 {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r3 = pf.add %p3, %h2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s11 = pf.param_ref @blocks.1.norm1.weight : tensor<4xf32>
  %h3 = pf.layer_norm %r3, %s11, %s11 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w4 = pf.param_ref @"onnx::MatMul_4" : tensor<4x4xf32>
  %f4 = pf.linear %h3, %w4 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g4 = pf.gelu %f4 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r4 = pf.add %g4, %h3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s12 = pf.param_ref @blocks.1.norm2.weight : tensor<4xf32>
  %h4 = pf.layer_norm %r4, %s12, %s12 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w5 = pf.param_ref @"onnx::MatMul_5" : tensor<4x4xf32>
  %t5 = pf.linear %h4, %w5 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %t5 : tensor<2x4xf32>
}

// -----

// The structure's blocks are not the named ones (the one structural block
// reads the LayerNorms of blocks 0 and 1): nothing changes, no remark.
// CHECK-LABEL: pf.param @"onnx::MatMul_1" : tensor<4x4xf32>{{$}}
// CHECK: pf.param @"onnx::MatMul_2" : tensor<4x4xf32>{{$}}
pf.param @"onnx::MatMul_1" : tensor<4x4xf32>
pf.param @"onnx::MatMul_2" : tensor<4x4xf32>
pf.param @blocks.0.norm.weight : tensor<4xf32>
pf.param @blocks.1.norm.weight : tensor<4xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w1 = pf.param_ref @"onnx::MatMul_1" : tensor<4x4xf32>
  %a1 = pf.linear %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p1 = pf.softmax %a1 {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r1 = pf.add %p1, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s0 = pf.param_ref @blocks.0.norm.weight : tensor<4xf32>
  %h1 = pf.layer_norm %r1, %s0, %s0 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %w2 = pf.param_ref @"onnx::MatMul_2" : tensor<4x4xf32>
  %f1 = pf.linear %h1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g1 = pf.gelu %f1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %r2 = pf.add %g1, %h1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s1 = pf.param_ref @blocks.1.norm.weight : tensor<4xf32>
  %h2 = pf.layer_norm %r2, %s1, %s1 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %h2 : tensor<2x4xf32>
}
