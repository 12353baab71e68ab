// Round trip of the K-FAC ops.
// RUN: pf-opt %s | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Factors are square over the last dimension (plus the bias column for A);
// all leading dimensions are tokens.
// CHECK-LABEL: func.func @factors
// CHECK-SAME: (%[[X:.*]]: tensor<8x128x64xf32>, %[[G:.*]]: tensor<1024x32xf32>, %[[D:.*]]: tensor<?x?xf32>, %[[U:.*]]: tensor<*xf32>)
// CHECK-NEXT: %[[A:.*]] = pf.kfac.factor_a %[[X]] : (tensor<8x128x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[AB:.*]] = pf.kfac.factor_a %[[X]] {bias_column} : (tensor<8x128x64xf32>) -> tensor<65x65xf32>
// CHECK-NEXT: %[[B:.*]] = pf.kfac.factor_b %[[G]] : (tensor<1024x32xf32>) -> tensor<32x32xf32>
// CHECK-NEXT: pf.kfac.factor_b %[[G]] {scale = 1.024000e+03 : f64} : (tensor<1024x32xf32>) -> tensor<32x32xf32>
// CHECK-NEXT: pf.kfac.factor_a %[[D]] : (tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-NEXT: pf.kfac.factor_b %[[U]] : (tensor<*xf32>) -> tensor<?x?xf32>
// CHECK-NEXT: %[[PI:.*]] = pf.kfac.pi %[[AB]], %[[B]] : (tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<f32>
// CHECK-NEXT: pf.kfac.inverse %[[AB]], %[[PI]] {side = "A"} : (tensor<65x65xf32>, tensor<f32>) -> tensor<65x65xf32>
// CHECK-NEXT: pf.kfac.inverse %[[B]], %[[PI]] {damping = 3.000000e-02 : f64, side = "B"} : (tensor<32x32xf32>, tensor<f32>) -> tensor<32x32xf32>
// GENERIC-LABEL: sym_name = "factors"
// GENERIC: "pf.kfac.factor_a"(%{{.*}}) : (tensor<8x128x64xf32>) -> tensor<64x64xf32>
// GENERIC: "pf.kfac.factor_a"(%{{.*}}) <{bias_column}> : (tensor<8x128x64xf32>) -> tensor<65x65xf32>
// GENERIC: "pf.kfac.factor_b"(%{{.*}}) <{scale = 1.000000e+00 : f64}> : (tensor<1024x32xf32>) -> tensor<32x32xf32>
// GENERIC: "pf.kfac.pi"(%{{.*}}, %{{.*}}) : (tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<f32>
// GENERIC: "pf.kfac.inverse"(%{{.*}}, %{{.*}}) <{damping = 1.000000e-03 : f64, side = "A"}>
func.func @factors(%x: tensor<8x128x64xf32>, %g: tensor<1024x32xf32>, %d: tensor<?x?xf32>,
                   %u: tensor<*xf32>) {
  %a = pf.kfac.factor_a %x : (tensor<8x128x64xf32>) -> tensor<64x64xf32>
  %ab = pf.kfac.factor_a %x {bias_column} : (tensor<8x128x64xf32>) -> tensor<65x65xf32>
  %b = pf.kfac.factor_b %g : (tensor<1024x32xf32>) -> tensor<32x32xf32>
  %bs = pf.kfac.factor_b %g {scale = 1024.0} : (tensor<1024x32xf32>) -> tensor<32x32xf32>
  %ad = pf.kfac.factor_a %d : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %bu = pf.kfac.factor_b %u : (tensor<*xf32>) -> tensor<?x?xf32>
  %pi = pf.kfac.pi %ab, %b : (tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<f32>
  %ai = pf.kfac.inverse %ab, %pi {side = "A"} : (tensor<65x65xf32>, tensor<f32>) -> tensor<65x65xf32>
  %bi = pf.kfac.inverse %b, %pi {side = "B", damping = 0.03} : (tensor<32x32xf32>, tensor<f32>) -> tensor<32x32xf32>
  return
}

// ∇W is [out, in]; an (in+1)x(in+1) A inverse preconditions the bias jointly
// and then the bias gradient is required and gets its own result.
// CHECK-LABEL: func.func @precondition
// CHECK-NEXT: %{{.*}} = pf.kfac.precondition %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<32x32xf32>) -> tensor<32x64xf32>
// CHECK-NEXT: %weight_update{{.*}}, %bias_update{{.*}} = pf.kfac.precondition %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>, tensor<32xf32>) -> (tensor<32x64xf32>, tensor<32xf32>)
// CHECK-NEXT: %{{.*}} = pf.kfac.precondition %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?xf32>, tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<?x?xf32>
// GENERIC-LABEL: sym_name = "precondition"
// GENERIC: "pf.kfac.precondition"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>, tensor<32xf32>) -> (tensor<32x64xf32>, tensor<32xf32>)
func.func @precondition(%gw: tensor<32x64xf32>, %ai: tensor<64x64xf32>, %aib: tensor<65x65xf32>,
                        %bi: tensor<32x32xf32>, %gb: tensor<32xf32>, %gd: tensor<?x?xf32>) {
  %0 = pf.kfac.precondition %gw, %ai, %bi
      : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<32x32xf32>) -> tensor<32x64xf32>
  %1:2 = pf.kfac.precondition %gw, %aib, %bi, %gb
      : (tensor<32x64xf32>, tensor<65x65xf32>, tensor<32x32xf32>, tensor<32xf32>) -> (tensor<32x64xf32>, tensor<32xf32>)
  %2 = pf.kfac.precondition %gd, %aib, %bi
      : (tensor<?x?xf32>, tensor<65x65xf32>, tensor<32x32xf32>) -> tensor<?x?xf32>
  return
}

// The eigenbasis: eigenvectors and eigenvalues of both factors, the damping
// (a value: a constant or the host's per-step input) on the product; a bias
// column preconditions the bias jointly, as above.
// CHECK-LABEL: func.func @precondition_eigen
// CHECK-NEXT: %{{.*}} = pf.kfac.precondition_eigen %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>) -> tensor<32x64xf32>
// CHECK-NEXT: %weight_update{{.*}}, %bias_update{{.*}} = pf.kfac.precondition_eigen {{.*}} {weight_in_out} : (tensor<64x32xf32>, tensor<65x65xf32>, tensor<65xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>)
// GENERIC-LABEL: sym_name = "precondition_eigen"
// GENERIC: "pf.kfac.precondition_eigen"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<32x64xf32>
func.func @precondition_eigen(%gw: tensor<32x64xf32>, %qa: tensor<64x64xf32>, %la: tensor<64xf32>,
                              %gt: tensor<64x32xf32>, %qab: tensor<65x65xf32>, %lab: tensor<65xf32>,
                              %qb: tensor<32x32xf32>, %lb: tensor<32xf32>, %gb: tensor<32xf32>,
                              %d: tensor<f64>) {
  %0 = pf.kfac.precondition_eigen %gw, %qa, %la, %qb, %lb, %d
      : (tensor<32x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>) -> tensor<32x64xf32>
  %1:2 = pf.kfac.precondition_eigen %gt, %qab, %lab, %qb, %lb, %d, %gb {weight_in_out}
      : (tensor<64x32xf32>, tensor<65x65xf32>, tensor<65xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<f64>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>)
  return
}

// With the host's per-step damping (a damping schedule).
// CHECK-LABEL: func.func @refresh_eigen
// CHECK-NEXT: pf.kfac.refresh_inverses(@w.kfac.A, @w.kfac.B) into (@w.kfac.A_vectors, @w.kfac.B_vectors) values (@w.kfac.A_values, @w.kfac.B_values) step %{{.*}} : tensor<i64> -> tensor<i32>
// CHECK-NEXT: pf.kfac.refresh_inverses(@w.kfac.A, @w.kfac.B) into (@w.kfac.A_vectors, @w.kfac.B_vectors) step %{{.*}} damping(%{{.*}} : tensor<f64>) : tensor<i64> -> tensor<i32>
// GENERIC-LABEL: sym_name = "refresh_eigen"
// GENERIC: a_values = @w.kfac.A_values
pf.param @w.kfac.A : tensor<4x4xf32>
pf.param @w.kfac.B : tensor<3x3xf32>
pf.param @w.kfac.A_vectors : tensor<4x4xf32>
pf.param @w.kfac.B_vectors : tensor<3x3xf32>
pf.param @w.kfac.A_values : tensor<4xf32>
pf.param @w.kfac.B_values : tensor<3xf32>
func.func @refresh_eigen(%step: tensor<i64>, %damping: tensor<f64>) -> tensor<i32> {
  %0 = pf.kfac.refresh_inverses(@w.kfac.A, @w.kfac.B) into (@w.kfac.A_vectors, @w.kfac.B_vectors) values (@w.kfac.A_values, @w.kfac.B_values) step %step : tensor<i64> -> tensor<i32>
  %1 = pf.kfac.refresh_inverses(@w.kfac.A, @w.kfac.B) into (@w.kfac.A_vectors, @w.kfac.B_vectors) step %step damping(%damping : tensor<f64>) : tensor<i64> -> tensor<i32>
  return %0 : tensor<i32>
}

// Grafting: one layer's weight and bias updates with their gradients.
// CHECK-LABEL: func.func @graft
// CHECK-NEXT: %[[G:.*]]:2 = pf.kfac.graft updates(%{{.*}}, %{{.*}} : tensor<5x4xf32>, tensor<5xf32>) gradients(%{{.*}}, %{{.*}} : tensor<5x4xf32>, tensor<5xf32>) -> tensor<5x4xf32>, tensor<5xf32>
// GENERIC-LABEL: sym_name = "graft"
// GENERIC: "pf.kfac.graft"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 2, 2>}>
func.func @graft(%u: tensor<5x4xf32>, %v: tensor<5xf32>, %gw: tensor<5x4xf32>, %gb: tensor<5xf32>)
    -> (tensor<5x4xf32>, tensor<5xf32>) {
  %g:2 = pf.kfac.graft updates(%u, %v : tensor<5x4xf32>, tensor<5xf32>) gradients(%gw, %gb : tensor<5x4xf32>, tensor<5xf32>) -> tensor<5x4xf32>, tensor<5xf32>
  return %g#0, %g#1 : tensor<5x4xf32>, tensor<5xf32>
}
