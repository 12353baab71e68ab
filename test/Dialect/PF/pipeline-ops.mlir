// Round trip of the pipeline structure ops.
// RUN: pf-opt %s | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | pf-opt | FileCheck %s
// RUN: pf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @two_stages
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[R:.*]]:2 = pf.pipeline stages(2) microbatches(4) (%[[X]] : tensor<8x4xf32>) attributes {schedule = "gpipe"} {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x4xf32>):
// CHECK-NEXT: %[[M:.*]] = pf.microbatch %[[A]] {count = 4 : i64, index = 1 : i64} : (tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[S0:.*]] = pf.stage 0 (%[[M]] : tensor<2x4xf32>) {
// CHECK-NEXT: ^bb0(%[[B:.*]]: tensor<2x4xf32>):
// CHECK-NEXT: %[[G:.*]] = pf.gelu %[[B]] : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: pf.send %[[G]] to 1 tag 7 : tensor<2x4xf32>
// CHECK-NEXT: pf.yield %[[G]] : tensor<2x4xf32>
// CHECK-NEXT: } -> tensor<2x4xf32>
// CHECK-NEXT: %[[S1:.*]] = pf.stage 1 {
// CHECK-NEXT: %[[V:.*]] = pf.recv from 0 tag 7 : tensor<2x4xf32>
// CHECK-NEXT: pf.yield %[[V]] : tensor<2x4xf32>
// CHECK-NEXT: } -> tensor<2x4xf32>
// CHECK-NEXT: pf.yield %[[S0]], %[[S1]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT: } -> tensor<2x4xf32>, tensor<2x4xf32>{{$}}
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
// GENERIC-LABEL: sym_name = "two_stages"
// GENERIC: "pf.pipeline"(%{{.*}}) <{num_microbatches = 4 : i64, num_stages = 2 : i64, schedule = "gpipe"}> ({
// GENERIC: "pf.microbatch"(%{{.*}}) <{count = 4 : i64, dim = 0 : i64, index = 1 : i64}>
// GENERIC: "pf.stage"(%{{.*}}) <{index = 0 : i64}> ({
// GENERIC: "pf.send"(%{{.*}}) <{tag = 7 : i64, to = 1 : i64}> : (tensor<2x4xf32>) -> ()
// GENERIC: "pf.yield"(%{{.*}}) : (tensor<2x4xf32>) -> ()
// GENERIC: "pf.recv"() <{from = 0 : i64, tag = 7 : i64}> : () -> tensor<2x4xf32>
func.func @two_stages(%x: tensor<8x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %r:2 = pf.pipeline stages(2) microbatches(4) (%x : tensor<8x4xf32>) attributes {schedule = "gpipe"} {
  ^bb0(%a: tensor<8x4xf32>):
    %m = pf.microbatch %a {index = 1, count = 4} : (tensor<8x4xf32>) -> tensor<2x4xf32>
    %s0 = pf.stage 0 (%m : tensor<2x4xf32>) {
    ^bb0(%b: tensor<2x4xf32>):
      %g = pf.gelu %b : (tensor<2x4xf32>) -> tensor<2x4xf32>
      pf.send %g to 1 tag 7 : tensor<2x4xf32>
      pf.yield %g : tensor<2x4xf32>
    } -> tensor<2x4xf32>
    %s1 = pf.stage 1 {
      %v = pf.recv from 0 tag 7 : tensor<2x4xf32>
      pf.yield %v : tensor<2x4xf32>
    } -> tensor<2x4xf32>
    pf.yield %s0, %s1 : tensor<2x4xf32>, tensor<2x4xf32>
  } -> tensor<2x4xf32>, tensor<2x4xf32>
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// The default schedule (1f1b) is not printed; empty stage bodies get the
// implicit pf.yield.
// CHECK-LABEL: func.func @defaults
// CHECK-NEXT: pf.pipeline stages(3) microbatches(1) {
// CHECK-NEXT: pf.stage 0 {
// CHECK-NEXT: }
// CHECK-NEXT: pf.stage 2 {
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return
// GENERIC-LABEL: sym_name = "defaults"
// GENERIC: "pf.pipeline"() <{num_microbatches = 1 : i64, num_stages = 3 : i64, schedule = "1f1b"}>
// GENERIC: "pf.yield"() : () -> ()
func.func @defaults() {
  pf.pipeline stages(3) microbatches(1) {
    pf.stage 0 {
    }
    pf.stage 2 {
      pf.yield
    }
  }
  return
}

// Micro-batches split any dimension; a dynamic one stays dynamic.
// CHECK-LABEL: func.func @microbatch
// CHECK-NEXT: pf.microbatch %{{.*}} {count = 2 : i64, dim = 1 : i64, index = 0 : i64} : (tensor<3x8xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: pf.microbatch %{{.*}} {count = 4 : i64, index = 3 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: pf.microbatch %{{.*}} {count = 1 : i64, index = 0 : i64} : (tensor<8xi64>) -> tensor<8xi64>
func.func @microbatch(%x: tensor<3x8xf32>, %d: tensor<?x8xf32>, %i: tensor<8xi64>) {
  %0 = pf.microbatch %x {index = 0, count = 2, dim = 1} : (tensor<3x8xf32>) -> tensor<3x4xf32>
  %1 = pf.microbatch %d {index = 3, count = 4} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %2 = pf.microbatch %i {index = 0, count = 1} : (tensor<8xi64>) -> tensor<8xi64>
  return
}

// Outside a stage, send/recv only need a valid peer.
// CHECK-LABEL: func.func @send_recv_outside_stage
// CHECK-NEXT: pf.send %{{.*}} to 3 tag 0 : tensor<4xf32>
// CHECK-NEXT: pf.recv from 0 tag 1 : tensor<4xf32>
func.func @send_recv_outside_stage(%x: tensor<4xf32>) -> tensor<4xf32> {
  pf.send %x to 3 tag 0 : tensor<4xf32>
  %r = pf.recv from 0 tag 1 : tensor<4xf32>
  return %r : tensor<4xf32>
}

// A scheduled pipeline: one pf.program of pf.task ops per device.
// CHECK-LABEL: func.func @scheduled
// CHECK-NEXT: pf.pipeline stages(2) microbatches(2) {
// CHECK-NEXT: pf.program device(1) {
// CHECK-NEXT: pf.task "forward" {{{.*}}microbatch = 1 : i64{{.*}}}
// CHECK-NEXT: pf.task "inversion_a" {{{.*}}layer = 3 : i64, outside_bubble{{.*}}}
// CHECK-NEXT: }
// GENERIC-LABEL: sym_name = "scheduled"
// GENERIC: "pf.program"() <{device = 1 : i64}> ({
// GENERIC: "pf.task"() <{{{.*}}kind = "forward"{{.*}}}> : () -> ()
func.func @scheduled() {
  pf.pipeline stages(2) microbatches(2) {
    pf.program device(1) {
      pf.task "forward" {step = 0, stage = 1, microbatch = 1, start = 0.0, end = 1.5}
      pf.task "inversion_a" {step = 0, stage = 1, layer = 3, start = 1.5, end = 2.0, outside_bubble}
    }
  }
  return
}
