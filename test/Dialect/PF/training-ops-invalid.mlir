// RUN: pf-opt %s -split-input-file -verify-diagnostics

func.func @labels(%logits: tensor<2x5x10xf32>, %labels: tensor<2x4xi64>) {
  // expected-error @+2 {{labels of shape 'tensor<2x4xi64>' do not match logits 'tensor<2x5x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss, %d, %count = pf.softmax_cross_entropy %logits, %labels : (tensor<2x5x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x5x10xf32>, tensor<i64>)
  return
}

// -----

func.func @gather_grad(%ids: tensor<2x5xi64>, %g: tensor<2x4x3xf32>) {
  // expected-error @+1 {{grad_output shape 'tensor<2x4x3xf32>' does not match the gather of 'tensor<10x3xf32>' by 'tensor<2x5xi64>'}}
  %d = pf.gather_grad %ids, %g : (tensor<2x5xi64>, tensor<2x4x3xf32>) -> tensor<10x3xf32>
  return
}

// -----

pf.param @w : tensor<4x3xf32>
func.func @missing_state(%g: tensor<4x3xf32>, %lr: tensor<f64>, %s: tensor<i64>) {
  // expected-error @+1 {{exp_avg 'nope' does not name a pf.param}}
  pf.adamw_update @w(@nope, @w) grad %g lr %lr step %s : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  return
}

// -----

pf.param @w : tensor<4x3xf32>
pf.param @m : tensor<3x4xf32>
func.func @wrong_state_type(%g: tensor<4x3xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{momentum_buffer 'm' has type 'tensor<3x4xf32>' but the gradient is 'tensor<4x3xf32>'}}
  pf.sgd_update @w momentum_buffer @m grad %g lr %lr : tensor<4x3xf32>, tensor<f64>
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<2x5x3xf32>, %scale: tensor<5xf32>, %dy: tensor<2x5x3xf32>) {
  // expected-error @+1 {{scale of shape 'tensor<5xf32>' does not match the normalized dimensions of 'tensor<2x5x3xf32>'}}
  %dx, %ds, %db = pf.layer_norm_grad %x, %scale, %dy {axis = 2 : i64, epsilon = 1.0e-5 : f32} : tensor<2x5x3xf32>, tensor<5xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<2x5x3xf32>, %scale: tensor<3xf32>, %dy: tensor<2x5x3xf32>) {
  // expected-error @+1 {{axis 3 is outside [0, 3)}}
  %dx, %ds, %db = pf.layer_norm_grad %x, %scale, %dy {axis = 3 : i64, epsilon = 1.0e-5 : f32} : tensor<2x5x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @gelu_grad_approximate(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "sigmoid"}}
  %d = pf.gelu_grad %x, %x {approximate = "sigmoid"} : tensor<4xf32>
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<2x4xf32>) {
  // expected-error @+1 {{axis -1 is outside [0, 2)}}
  %d = pf.softmax_grad %y, %y {axis = -1 : i64} : tensor<2x4xf32>
  return
}
