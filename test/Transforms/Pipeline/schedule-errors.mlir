// RUN: not pf-opt %s --pf-schedule 2>&1 | FileCheck %s

// A hand-written pipeline whose ops do not say which encoder block they
// belong to (pf-partition records it as pf.block).
pf.param @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = pf.pipeline stages(1) microbatches(2) (%arg0 : tensor<4x16xf32>) {
  ^bb0(%arg1: tensor<4x16xf32>):
    %1 = pf.stage 0 (%arg1 : tensor<4x16xf32>) attributes {blocks = array<i64: 0>} {
    ^bb0(%arg2: tensor<4x16xf32>):
      %w = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
      // CHECK: schedule-errors.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: pf-schedule: op in a stage has no 'pf.block' attribute (made by pf-partition)
      %y = pf.linear %arg2, %w {transpose_weight} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
      pf.yield %y : tensor<4x16xf32>
    } -> tensor<4x16xf32>
    pf.yield %1 : tensor<4x16xf32>
  } -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
