// RUN: pf-opt %s -split-input-file --pf-add-masked-lm-loss -verify-diagnostics

// expected-error @+1 {{pf-add-masked-lm-loss: no function with a body}}
module {
  func.func private @declared(tensor<2x5xf32>) -> tensor<2x5xf32>
}

// -----

// expected-error @+1 {{pf-add-masked-lm-loss: the function has no result named 'logits'}}
func.func @unnamed(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  return %x : tensor<2x5xf32>
}

// -----

// expected-error @+1 {{pf-add-masked-lm-loss: logits must be a static float tensor [..., vocabulary], got 'tensor<2x5xi64>'}}
func.func @integer(%x: tensor<2x5xi64>) -> (tensor<2x5xi64> {pf.name = "logits"}) {
  return %x : tensor<2x5xi64>
}

// -----

// expected-error @+1 {{pf-add-masked-lm-loss: logits must be a static float tensor [..., vocabulary], got 'tensor<?x5xf32>'}}
func.func @dynamic(%x: tensor<?x5xf32>) -> (tensor<?x5xf32> {pf.name = "logits"}) {
  return %x : tensor<?x5xf32>
}

// -----

// A vector has no vocabulary dimension.
// expected-error @+1 {{pf-add-masked-lm-loss: logits must be a static float tensor [..., vocabulary], got 'tensor<5xf32>'}}
func.func @vector(%x: tensor<5xf32>) -> (tensor<5xf32> {pf.name = "logits"}) {
  return %x : tensor<5xf32>
}
