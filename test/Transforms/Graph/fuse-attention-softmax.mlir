// RUN: pf-opt %s -split-input-file --pf-fuse-attention-softmax | FileCheck %s

// BERT's attention: scores / sqrt(64) + the [B, 1, 1, S] mask, softmax over
// the keys: one op with scale 1/8.
// CHECK-LABEL: func.func @bert(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x16x16xf32>, %[[M:[^:]*]]: tensor<2x1x1x16xf32>)
// CHECK-NEXT: %[[P:.*]] = pf.scaled_masked_softmax %[[X]], %[[M]] {scale = 1.250000e-01 : f64} : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NEXT: return %[[P]]
func.func @bert(%x: tensor<2x4x16x16xf32>, %mask: tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32> {
  %c = pf.constant dense<8.0> : tensor<f32>
  %d = pf.div %x, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %a = pf.add %d, %mask : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
  %p = pf.softmax %a {axis = -1 : i64} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return %p : tensor<2x4x16x16xf32>
}

// -----

// A product with the constant first and the mask first in the add; the
// softmax's axis given as the last index.
// CHECK-LABEL: func.func @mul_mask_first(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf64>, %[[M:[^:]*]]: tensor<8xf64>)
// CHECK-NEXT: %[[P:.*]] = pf.scaled_masked_softmax %[[X]], %[[M]] {scale = 2.500000e-01 : f64} : (tensor<4x8xf64>, tensor<8xf64>) -> tensor<4x8xf64>
// CHECK-NEXT: return %[[P]]
func.func @mul_mask_first(%x: tensor<4x8xf64>, %mask: tensor<8xf64>) -> tensor<4x8xf64> {
  %c = pf.constant dense<0.25> : tensor<1xf64>
  %s = pf.mul %c, %x : (tensor<1xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %a = pf.add %mask, %s : (tensor<8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %p = pf.softmax %a {axis = 1 : i64} : (tensor<4x8xf64>) -> tensor<4x8xf64>
  return %p : tensor<4x8xf64>
}

// -----

// Either part alone fuses: a mask without scaling (scale 1, elided), a
// scaling without mask.
// CHECK-LABEL: func.func @parts(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[M:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[P:.*]] = pf.scaled_masked_softmax %[[X]], %[[M]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[Q:.*]] = pf.scaled_masked_softmax %[[X]] {scale = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[P]], %[[Q]]
func.func @parts(%x: tensor<4x8xf32>, %mask: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = pf.add %x, %mask : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = pf.softmax %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = pf.constant dense<2.0> : tensor<f32>
  %d = pf.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %q = pf.softmax %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %p, %q : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Left alone: a softmax over another axis; scaled scores that are also
// returned (the mask still folds, the division stays); a divisor that is not
// a constant.
// CHECK-LABEL: func.func @unfused(
// CHECK: pf.softmax %{{.*}} {axis = 0 : i64}
// CHECK: %[[D:.*]] = pf.div %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<f32>)
// CHECK: pf.scaled_masked_softmax %[[D]], %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[E:.*]] = pf.div %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: pf.softmax %[[E]] :
func.func @unfused(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %mask: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = pf.constant dense<8.0> : tensor<f32>
  %s0 = pf.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p0 = pf.softmax %s0 {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = pf.div %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %a = pf.add %d, %mask : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %p1 = pf.softmax %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = pf.div %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p2 = pf.softmax %e : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %p0, %p1, %p2, %d : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
