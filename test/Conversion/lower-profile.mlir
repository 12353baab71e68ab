// RUN: pf-opt %s --pf-lower-to-runtime=profile=true | FileCheck %s

// With profile=true every kernel call is bracketed by the host's hooks, with
// its op index (-1 for the output copies); the status check follows.
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = pf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %0 : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK: %[[OP0:.*]] = arith.constant 0 : i64
// CHECK: call @pf_profile_begin(%[[OP0]]) : (i64) -> ()
// CHECK: %[[S:.*]] = call @pfrt_exp(
// CHECK: %[[OP0B:.*]] = arith.constant 0 : i64
// CHECK: call @pf_profile_end(%[[OP0B]]) : (i64) -> ()
// CHECK: arith.extui %[[S]]
// CHECK: cf.cond_br
// CHECK: %[[COPY:.*]] = arith.constant -1 : i64
// CHECK: call @pf_profile_begin(%[[COPY]])
// CHECK: call @pfrt_copy(
// CHECK: call @pf_profile_end(
// CHECK-DAG: func.func private @pf_profile_begin(i64)
// CHECK-DAG: func.func private @pf_profile_end(i64)
