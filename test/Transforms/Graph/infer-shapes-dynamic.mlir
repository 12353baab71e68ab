// RUN: pf-opt %s --pf-infer-shapes | FileCheck %s

// Without require-static, dynamic dimensions are fine: the pass refines what
// it can (rank, the static dims) and succeeds.
// CHECK-LABEL: func.func @dynamic_input(
// CHECK-SAME: %[[X:.*]]: tensor<?x4xf32>) -> tensor<4x?xf32>
// CHECK: %[[E:.*]] = pf.exp %[[X]] : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[T:.*]] = pf.transpose %[[E]] : (tensor<?x4xf32>) -> tensor<4x?xf32>
// CHECK: return %[[T]] : tensor<4x?xf32>
func.func @dynamic_input(%x: tensor<?x4xf32>) -> tensor<*xf32> {
  %e = pf.exp %x : (tensor<?x4xf32>) -> tensor<*xf32>
  %t = pf.transpose %e : (tensor<*xf32>) -> tensor<*xf32>
  return %t : tensor<*xf32>
}

// A Reshape to a shape that is not constant keeps dynamic dims; the Shape of
// a dynamic tensor does not fold.
// CHECK-LABEL: func.func @shape_from_input(
// CHECK: pf.reshape %arg0, %arg1 : (tensor<8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
// CHECK: pf.shape %arg2 : (tensor<?x4xf32>) -> tensor<2xi64>
func.func @shape_from_input(%x: tensor<8xf32>, %s: tensor<2xi64>, %d: tensor<?x4xf32>) -> (tensor<*xf32>, tensor<*xi64>) {
  %r = pf.reshape %x, %s : (tensor<8xf32>, tensor<2xi64>) -> tensor<*xf32>
  %sh = pf.shape %d : (tensor<?x4xf32>) -> tensor<*xi64>
  return %r, %sh : tensor<*xf32>, tensor<*xi64>
}
