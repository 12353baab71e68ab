// RUN: pf-opt %s -split-input-file --pf-add-masked-lm-loss | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-add-masked-lm-loss="output=hidden ignore-index=0 keep-outputs=true" | FileCheck %s --check-prefix=KEEP

// The result named "logits" [batch, seq, vocab] becomes the masked-LM loss:
// a labels argument [batch, seq] of i64 is appended, the loss (mean over the
// tokens whose label is not ignore-index, -100 by default, which the printer
// elides) is the only result.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x5xf32> {pf.name = "x"}, %[[L:.*]]: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"})
// CHECK: %[[Y:.*]] = pf.exp %[[X]]
// CHECK: %[[LOSS:.*]], %{{.*}}, %{{.*}} = pf.softmax_cross_entropy %[[Y]], %[[L]] : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3x5xf32>, tensor<i64>)
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// Another output, another ignored label, and the outputs kept after the loss
// under their names.
// KEEP-LABEL: func.func @main(
// KEEP-SAME: %[[X:.*]]: tensor<2x3x5xf32> {pf.name = "x"}, %[[L:.*]]: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}, tensor<2x3x5xf32> {pf.name = "logits"}, tensor<2x3x5xf32> {pf.name = "hidden"})
// KEEP: %[[Y:.*]] = pf.exp %[[X]]
// KEEP: %[[LOSS:.*]], %{{.*}}, %{{.*}} = pf.softmax_cross_entropy %[[X]], %[[L]] {ignore_index = 0 : i64}
// KEEP-NEXT: return %[[LOSS]], %[[Y]], %[[X]] : tensor<f32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>
func.func @main(%x: tensor<2x3x5xf32> {pf.name = "x"}) -> (tensor<2x3x5xf32> {pf.name = "logits"}, tensor<2x3x5xf32> {pf.name = "hidden"}) {
  %y = pf.exp %x : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %y, %x : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// 2-D logits [tokens, vocab] get 1-D labels; an unnamed output is kept as
// output<i>.
// CHECK-LABEL: func.func @tokens(
// CHECK-SAME: %[[H:.*]]: tensor<6x7xf32>, %[[L:.*]]: tensor<6xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"})
// CHECK: pf.softmax_cross_entropy %[[H]], %[[L]] : (tensor<6x7xf32>, tensor<6xi64>)
// KEEP-LABEL: func.func @tokens(
// KEEP-SAME: -> (tensor<f32> {pf.name = "loss"}, tensor<6x7xf32> {pf.name = "logits"}, tensor<6x7xf32> {pf.name = "hidden"}, tensor<6x7xf32> {pf.name = "output2"})
// KEEP: %[[N:.*]] = pf.neg %arg0
// KEEP: pf.softmax_cross_entropy %[[N]], %arg1 {ignore_index = 0 : i64} : (tensor<6x7xf32>, tensor<6xi64>)
func.func @tokens(%h: tensor<6x7xf32>) -> (tensor<6x7xf32> {pf.name = "logits"}, tensor<6x7xf32> {pf.name = "hidden"}, tensor<6x7xf32>) {
  %n = pf.neg %h : (tensor<6x7xf32>) -> tensor<6x7xf32>
  return %h, %n, %h : tensor<6x7xf32>, tensor<6x7xf32>, tensor<6x7xf32>
}
