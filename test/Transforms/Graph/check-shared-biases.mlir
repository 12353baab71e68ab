// RUN: pf-opt %s --pf-check-shared-biases -verify-diagnostics -o /dev/null

// What torch's dynamo exporter (optimize=True) writes for an untrained
// model: the all-zero biases of different layers stored once.
pf.param @layer0.weight : tensor<8x16xf32>
pf.param @layer1.weight : tensor<8x16xf32>
pf.param @merged.bias : tensor<16xf32>
// A layer applied twice (ALBERT's sharing): weight and bias together.
pf.param @shared.weight : tensor<8x16xf32>
pf.param @shared.bias : tensor<16xf32>

func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %w0 = pf.param_ref @layer0.weight : tensor<8x16xf32>
  // expected-warning @+1 {{pf-check-shared-biases: 'merged.bias' is the bias of 2 linear layers with different weights ('layer0.weight', 'layer1.weight'), so they train it as one parameter}}
  %b = pf.param_ref @merged.bias : tensor<16xf32>
  %y0 = pf.linear %x, %w0, %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w1 = pf.param_ref @layer1.weight : tensor<8x16xf32>
  %y1 = pf.linear %x, %w1, %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %ws = pf.param_ref @shared.weight : tensor<8x16xf32>
  %bs = pf.param_ref @shared.bias : tensor<16xf32>
  %y2 = pf.linear %x, %ws, %bs : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y3 = pf.linear %x, %ws, %bs : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y0, %y1, %y2, %y3 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
