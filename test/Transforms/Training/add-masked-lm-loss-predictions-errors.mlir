// RUN: pf-opt %s -split-input-file --pf-add-masked-lm-loss=predictions=1 -verify-diagnostics

// predictions=P needs the logits of the decoder's pf.linear.
// expected-error @+1 {{pf-add-masked-lm-loss: predictions=1 needs logits [batch, sequence, vocabulary] made by a pf.linear (the decoder) of a [batch, sequence, hidden] input}}
func.func @no_decoder(%x: tensor<2x3x5xf32>) -> (tensor<2x3x5xf32> {pf.name = "logits"}) {
  %y = pf.exp %x : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// 2-D logits [tokens, vocabulary]: no sequence to gather from.
pf.param @w : tensor<5x4xf32>
// expected-error @+1 {{pf-add-masked-lm-loss: predictions=1 needs logits [batch, sequence, vocabulary] made by a pf.linear (the decoder) of a [batch, sequence, hidden] input}}
func.func @tokens(%x: tensor<6x4xf32>) -> (tensor<6x5xf32> {pf.name = "logits"}) {
  %w = pf.param_ref @w : tensor<5x4xf32>
  %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}
