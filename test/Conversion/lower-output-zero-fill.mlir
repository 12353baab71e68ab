// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime | FileCheck %s

// Which outputs the host zeroes before a run (#pf.io's zero_fill): not those a
// kernel free of side effects writes unconditionally (y, the logits of a
// forward pass, also through a view), nor output copies (x returned as it
// is).
func.func @main(%x: tensor<2x3xf32> {pf.name = "x"}) -> (tensor<2x3xf32> {pf.name = "y"}, tensor<6xf32> {pf.name = "flat"}, tensor<2x3xf32> {pf.name = "same"}) {
  %y = pf.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = pf.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = pf.constant dense<[6]> : tensor<1xi64>
  %r = pf.reshape %t, %c : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<6xf32>
  return %y, %r, %x : tensor<2x3xf32>, tensor<6xf32>, tensor<2x3xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: outputs = [#pf.io<name = "y", tensor = {{[0-9]+}}>, #pf.io<name = "flat", tensor = {{[0-9]+}}>, #pf.io<name = "same", tensor = {{[0-9]+}}>]

// -----

// The outcome of a K-FAC refresh comes from an op that writes parameters in
// place and runs under a condition: the host keeps zeroing it.
pf.param @A : tensor<4x4xf32>
pf.param @B : tensor<2x2xf32>
pf.param @A_inv : tensor<4x4xf32>
pf.param @B_inv : tensor<2x2xf32>
func.func @main(%step: tensor<i64> {pf.name = "step"}, %x: tensor<2xf32> {pf.name = "x"}) -> (tensor<i32> {pf.name = "outcome"}, tensor<2xf32> {pf.name = "y"}) {
  %o = pf.kfac.refresh_inverses(@A, @B) into (@A_inv, @B_inv) step %step {every = 4 : i64} : tensor<i64> -> tensor<i32>
  %y = pf.exp %x : (tensor<2xf32>) -> tensor<2xf32>
  return %o, %y : tensor<i32>, tensor<2xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: outputs = [#pf.io<name = "outcome", tensor = {{[0-9]+}}, zero_fill = true>, #pf.io<name = "y", tensor = {{[0-9]+}}>]
