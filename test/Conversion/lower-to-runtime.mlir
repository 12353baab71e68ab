// RUN: pf-opt %s --split-input-file --pf-lower-to-runtime --verify-diagnostics | FileCheck %s

// A linear layer, a view and a softmax: one call each, views are free, and the
// plan records where every tensor lives.
pf.param @w : tensor<4x3xf32>
func.func @main(%x: tensor<2x3xf32> {pf.name = "x"}) -> (tensor<8xf32> {pf.name = "y"}) {
  %w = pf.param_ref @w : tensor<4x3xf32>
  %h = pf.linear %x, %w {transpose_weight} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %s = pf.softmax %h : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %c = pf.constant dense<[8]> : tensor<1xi64>
  %r = pf.reshape %s, %c : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// CHECK-LABEL: func.func @pf_main(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i64
// CHECK-SAME: pf.runtime_plan = #pf.runtime_plan<arena_bytes = 64
// CHECK-SAME: buffers = [#pf.buffer<kind = input, bytes = 24, index = 0>, #pf.buffer<kind = param, bytes = 48, name = "w">, #pf.buffer<kind = arena, bytes = 32, offset = 0>, #pf.buffer<kind = output, bytes = 32, index = 0>, #pf.buffer<kind = constant, bytes = 8, value = dense<8> : tensor<1xi64>>]
// CHECK-SAME: inputs = [#pf.io<name = "x", tensor = 0>]
// CHECK-SAME: outputs = [#pf.io<name = "y", tensor = 5>]
// CHECK: call @pfrt_linear(%arg0, {{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: cf.cond_br
// CHECK: call @pfrt_softmax(%arg0, {{.*}}) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-NOT: call @pfrt_reshape
// CHECK: return %{{.*}} : i64
// CHECK: func.func private @pfrt_linear(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32

// -----

// Two intermediates that are never alive together share arena memory.
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = pf.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = pf.exp %a : (tensor<16xf32>) -> tensor<16xf32>
  %c = pf.exp %b : (tensor<16xf32>) -> tensor<16xf32>
  %d = pf.exp %c : (tensor<16xf32>) -> tensor<16xf32>
  return %d : tensor<16xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK-SAME: arena_bytes = 128
// CHECK-SAME: #pf.buffer<kind = arena, bytes = 64, offset = 0>, #pf.buffer<kind = arena, bytes = 64, offset = 64>, #pf.buffer<kind = arena, bytes = 64, offset = 0>
// CHECK-SAME: peak_live_bytes = 128
// CHECK-COUNT-4: call @pfrt_exp

// -----

// A returned input is copied into the output buffer.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// CHECK-LABEL: func.func @pf_main
// CHECK: call @pfrt_copy

// -----

func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @-1 {{the runtime lowering needs static shapes, got 'tensor<?x4xf32>'}}
  return %x : tensor<?x4xf32>
}

// -----

func.func @main(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'pf.kfac.factor_a' is not supported by the runtime lowering yet}}
  %a = pf.kfac.factor_a %x : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

// A function without kernels (stage 0's backward_input of
// pf-split-stages{split-backward}): no status checks and no failure block,
// which would have no predecessors and not survive the conversion to LLVM.
func.func @main() {
  return
}

// CHECK-LABEL: func.func @pf_main(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i64
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: return %[[ZERO]] : i64
// CHECK-NEXT: }
