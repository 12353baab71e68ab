// RUN: pf-opt %s --pf-infer-shapes="require-static=true" --split-input-file --verify-diagnostics

// With require-static, a type left dynamic is an error on the op (without it,
// see the DYNAMIC cases of infer-shapes.mlir).
func.func @dynamic_input(%x: tensor<?x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{result type 'tensor<?x4xf32>' is not static after shape inference; fix the dynamic input dimensions (e.g. pf-translate --shape NAME=DxD)}}
  %e = pf.exp %x : (tensor<?x4xf32>) -> tensor<*xf32>
  return %e : tensor<*xf32>
}

// -----

// A Reshape whose shape is not constant cannot become static.
func.func @shape_from_input(%x: tensor<8xf32>, %s: tensor<2xi64>) -> tensor<*xf32> {
  %y = pf.neg %x : (tensor<8xf32>) -> tensor<8xf32>
  // expected-error @+1 {{result type 'tensor<?x?xf32>' is not static after shape inference}}
  %r = pf.reshape %x, %s : (tensor<8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// A mismatch that shows only once an operand is refined is an error, too.
func.func @late_mismatch(%x: tensor<2x3xf32>, %w: tensor<4x5xf32>) -> tensor<*xf32> {
  %e = pf.exp %x : (tensor<2x3xf32>) -> tensor<2x?xf32>
  // expected-error @+1 {{matmul contraction dimensions differ: 3 vs 4}}
  %m = pf.matmul %e, %w : (tensor<2x?xf32>, tensor<4x5xf32>) -> tensor<*xf32>
  return %m : tensor<*xf32>
}
