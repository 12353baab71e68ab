// RUN: not pf-opt %s --split-input-file --pf-outline-kfac-factors 2>&1 | FileCheck %s

// Without pf-kfac-precondition{bubbles}'s inverse functions the layers have
// no numbers.
pf.param @w.kfac.A : tensor<4x4xf32>
func.func @stage0_forward(%x: tensor<2x4xf32> {pf.name = "input"}, %step: tensor<i64> {pf.name = "step"}) attributes {pf.stage = 0 : i64} {
  pf.kfac.update_factor @w.kfac.A from %x step %step : tensor<2x4xf32>, tensor<i64>
  return
}
// CHECK: error: pf-outline-kfac-factors: the module has no stage<s>_kfac_inverse_<l> functions

// -----

// A factor that no inverse function refreshes.
pf.param @w.kfac.A : tensor<4x4xf32>
pf.param @w.kfac.B : tensor<4x4xf32>
pf.param @w.kfac.A_inv_next : tensor<4x4xf32>
pf.param @w.kfac.B_inv_next : tensor<4x4xf32>
pf.param @v.kfac.A : tensor<4x4xf32>
func.func @stage0_kfac_inverse_0(%step: tensor<i64> {pf.name = "step"}) -> (tensor<i32> {pf.name = "kfac/issues"}) attributes {pf.stage = 0 : i64} {
  %0 = pf.kfac.refresh_inverses(@w.kfac.A, @w.kfac.B) into (@w.kfac.A_inv_next, @w.kfac.B_inv_next) step %step : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}
func.func @stage0_forward(%x: tensor<2x4xf32> {pf.name = "input"}, %step: tensor<i64> {pf.name = "step"}) attributes {pf.stage = 0 : i64} {
  pf.kfac.update_factor @v.kfac.A from %x step %step : tensor<2x4xf32>, tensor<i64>
  return
}
// CHECK: error: 'pf.kfac.update_factor' op pf-outline-kfac-factors: no inverse function refreshes 'v.kfac.A'
