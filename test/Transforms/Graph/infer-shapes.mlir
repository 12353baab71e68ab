// RUN: pf-opt %s -split-input-file --pf-infer-shapes | FileCheck %s --check-prefixes=CHECK,DYNAMIC
// RUN: pf-opt %s -split-input-file --pf-infer-shapes="require-static=true" -verify-diagnostics | FileCheck %s

// Static cases (CHECK) give the same IR with and without require-static;
// dynamic ones (DYNAMIC) succeed without it and are errors with it (the
// expected-error lines apply to the second RUN only). More require-static
// errors: infer-shapes-errors.mlir.

// Result types written less refined (unranked, dynamic dims) are refined
// from the operands, in program order, and the signature follows.
// CHECK-LABEL: func.func @refine(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>, %[[W:.*]]: tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[M:.*]] = pf.matmul %[[X]], %[[W]] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[E:.*]] = pf.exp %[[M]] : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[T:.*]] = pf.transpose %[[E]] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK: %[[S:.*]] = pf.softmax %[[T]] : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK: %[[R:.*]] = pf.transpose %[[S]] : (tensor<4x2xf32>) -> tensor<2x4xf32>
// CHECK: return %[[R]] : tensor<2x4xf32>
func.func @refine(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<*xf32> {
  %m = pf.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<*xf32>
  %e = pf.exp %m : (tensor<*xf32>) -> tensor<?x?xf32>
  %t = pf.transpose %e : (tensor<?x?xf32>) -> tensor<?x2xf32>
  %s = pf.softmax %t : (tensor<?x2xf32>) -> tensor<*xf32>
  %r = pf.transpose %s : (tensor<*xf32>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// The exporter's Shape -> Gather -> Unsqueeze -> Concat chain folds to a
// constant once the input shape is known, and the Reshape gets a static type.
// CHECK-LABEL: func.func @fold_shape_chain(
// CHECK-SAME: %[[X:.*]]: tensor<2x5x8xf32>) -> tensor<2x5x2x4xf32>
// CHECK-NOT: pf.shape
// CHECK-NOT: pf.gather
// CHECK-NOT: pf.unsqueeze
// CHECK-NOT: pf.concat
// CHECK: %[[C:.*]] = pf.constant dense<[2, 5, 2, 4]> : tensor<4xi64>
// CHECK: %[[R:.*]] = pf.reshape %[[X]], %[[C]] : (tensor<2x5x8xf32>, tensor<4xi64>) -> tensor<2x5x2x4xf32>
// CHECK: return %[[R]] : tensor<2x5x2x4xf32>
func.func @fold_shape_chain(%x: tensor<2x5x8xf32>) -> tensor<?x?x?x?xf32> {
  %s = pf.shape %x : (tensor<2x5x8xf32>) -> tensor<3xi64>
  %i0 = pf.constant dense<0> : tensor<i64>
  %b = pf.gather %s, %i0 : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %bu = pf.unsqueeze %b {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %s1 = pf.shape %x : (tensor<2x5x8xf32>) -> tensor<3xi64>
  %i1 = pf.constant dense<1> : tensor<i64>
  %q = pf.gather %s1, %i1 : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %qu = pf.unsqueeze %q {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %h = pf.constant dense<2> : tensor<1xi64>
  %d = pf.constant dense<4> : tensor<1xi64>
  %shape = pf.concat %bu, %qu, %h, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r = pf.reshape %x, %shape : (tensor<2x5x8xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  return %r : tensor<?x?x?x?xf32>
}

// -----

// Refinement and folding feed each other: the Reshape only becomes static
// after the chain folds, and the Expand after it only then.
// CHECK-LABEL: func.func @iterate(
// CHECK-SAME: -> tensor<3x2x4xf32>
// CHECK: pf.expand %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<3x2x4xf32>
func.func @iterate(%x: tensor<8xf32>) -> tensor<*xf32> {
  %two = pf.constant dense<[2, 4]> : tensor<2xi64>
  %r = pf.reshape %x, %two : (tensor<8xf32>, tensor<2xi64>) -> tensor<*xf32>
  %s = pf.shape %r : (tensor<*xf32>) -> tensor<*xi64>
  %three = pf.constant dense<3> : tensor<1xi64>
  %shape = pf.concat %three, %s {axis = 0 : i64} : (tensor<1xi64>, tensor<*xi64>) -> tensor<*xi64>
  %e = pf.expand %r, %shape : (tensor<*xf32>, tensor<*xi64>) -> tensor<*xf32>
  return %e : tensor<*xf32>
}

// -----

// Without require-static, dynamic dimensions are fine: the pass refines what
// it can (rank, the static dims) and succeeds.
// DYNAMIC-LABEL: func.func @dynamic_input(
// DYNAMIC-SAME: %[[X:.*]]: tensor<?x4xf32>) -> tensor<4x?xf32>
// DYNAMIC: %[[E:.*]] = pf.exp %[[X]] : (tensor<?x4xf32>) -> tensor<?x4xf32>
// DYNAMIC: %[[T:.*]] = pf.transpose %[[E]] : (tensor<?x4xf32>) -> tensor<4x?xf32>
// DYNAMIC: return %[[T]] : tensor<4x?xf32>
func.func @dynamic_input(%x: tensor<?x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{result type 'tensor<?x4xf32>' is not static after shape inference}}
  %e = pf.exp %x : (tensor<?x4xf32>) -> tensor<*xf32>
  // expected-error @+1 {{result type 'tensor<4x?xf32>' is not static after shape inference}}
  %t = pf.transpose %e : (tensor<*xf32>) -> tensor<*xf32>
  return %t : tensor<*xf32>
}

// -----

// A Reshape to a shape that is not constant keeps dynamic dims; the Shape of
// a dynamic tensor does not fold.
// DYNAMIC-LABEL: func.func @shape_from_input(
// DYNAMIC: pf.reshape %arg0, %arg1 : (tensor<8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
// DYNAMIC: pf.shape %arg2 : (tensor<?x4xf32>) -> tensor<2xi64>
func.func @shape_from_input(%x: tensor<8xf32>, %s: tensor<2xi64>, %d: tensor<?x4xf32>) -> (tensor<*xf32>, tensor<*xi64>) {
  // expected-error @+1 {{result type 'tensor<?x?xf32>' is not static after shape inference}}
  %r = pf.reshape %x, %s : (tensor<8xf32>, tensor<2xi64>) -> tensor<*xf32>
  %sh = pf.shape %d : (tensor<?x4xf32>) -> tensor<*xi64>
  return %r, %sh : tensor<*xf32>, tensor<*xi64>
}
