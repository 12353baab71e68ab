// pf-infer-shapes{require-static} fails, naming the op, when a dynamic function
// argument leaves a result dynamic; a fully static program passes.
// RUN: not pf-opt %s --split-input-file --pf-infer-shapes="require-static" -o /dev/null 2>&1 | FileCheck %s
// RUN: pf-opt %s --split-input-file --pf-infer-shapes | FileCheck %s --check-prefix=LOOSE

// Only the dynamic program fails, at its pf.linear:
// CHECK: infer-shapes-require-static.mlir:[[@LINE+16]]:8: error: result type 'tensor<?x8xf32>' is not static after shape inference
// CHECK-NEXT: %y = pf.linear %x, %w : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<*xf32>
// CHECK-NOT: error:
// LOOSE-LABEL: func.func @static_program
// LOOSE-SAME: -> tensor<4x8xf32>
// LOOSE-LABEL: func.func @dynamic_batch
// LOOSE-SAME: -> tensor<?x8xf32>
// LOOSE: pf.linear {{.*}} -> tensor<?x8xf32>
func.func @static_program(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<*xf32> {
  %y = pf.linear %x, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

func.func @dynamic_batch(%x: tensor<?x16xf32>, %w: tensor<16x8xf32>) -> tensor<*xf32> {
  %y = pf.linear %x, %w : (tensor<?x16xf32>, tensor<16x8xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}
