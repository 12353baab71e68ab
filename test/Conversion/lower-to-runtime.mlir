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
// CHECK-SAME: pf.arena_bytes = 64 : i64
// CHECK-SAME: pf.buffers = [{bytes = 24 : i64, index = 0 : i64, kind = "input"}, {bytes = 48 : i64, kind = "param", name = "w"}, {bytes = 32 : i64, kind = "arena", offset = 0 : i64}, {bytes = 32 : i64, index = 0 : i64, kind = "output"}, {bytes = 8 : i64, kind = "constant", value = dense<8> : tensor<1xi64>}]
// CHECK-SAME: pf.inputs = [{name = "x", tensor = 0 : i64}]
// CHECK-SAME: pf.outputs = [{name = "y", tensor = 5 : i64}]
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
// CHECK-SAME: pf.arena_bytes = 128 : i64
// CHECK-SAME: {bytes = 64 : i64, kind = "arena", offset = 0 : i64}, {bytes = 64 : i64, kind = "arena", offset = 64 : i64}, {bytes = 64 : i64, kind = "arena", offset = 0 : i64}
// CHECK-SAME: pf.peak_live_bytes = 128 : i64
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
