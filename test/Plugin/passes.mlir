// pf passes in the stock mlir-opt, loaded with --load-pass-plugin, give what
// pf-opt gives: the graph passes one by one (one with an option) on the
// graph of Transforms/Graph/graph-opt.mlir, and pf-lower-to-runtime. The
// graph passes lean on MLIR's canonicalizer and CSE (in libMLIR.so) seeing
// the plugin's ops' traits, so a TypeID the two libraries disagree on shows
// as a different output.
// RUN: %mlir-opt-pf %S/../Transforms/Graph/graph-opt.mlir --pass-pipeline='builtin.module(pf-untie-initializers,pf-infer-shapes{require-static=true},canonicalize,pf-fuse-layer-norm,pf-fuse-gelu{tolerance=1e-9},pf-fuse-linear,canonicalize,cse,pf-dce)' > %t.plugin.mlir
// RUN: pf-opt %S/../Transforms/Graph/graph-opt.mlir --pass-pipeline='builtin.module(pf-untie-initializers,pf-infer-shapes{require-static=true},canonicalize,pf-fuse-layer-norm,pf-fuse-gelu{tolerance=1e-9},pf-fuse-linear,canonicalize,cse,pf-dce)' > %t.pf-opt.mlir
// RUN: diff %t.plugin.mlir %t.pf-opt.mlir
// RUN: FileCheck %s < %t.plugin.mlir
// The lowering to the runtime ABI.
// RUN: %mlir-opt-pf %S/../Conversion/lower-training.mlir --pass-pipeline='builtin.module(pf-lower-to-runtime)' > %t.lower.plugin.mlir
// RUN: pf-opt %S/../Conversion/lower-training.mlir --pass-pipeline='builtin.module(pf-lower-to-runtime)' > %t.lower.pf-opt.mlir
// RUN: diff %t.lower.plugin.mlir %t.lower.pf-opt.mlir
// RUN: FileCheck %s --check-prefix=LOWER < %t.lower.plugin.mlir

// The canonicalizer (libMLIR.so) hoists the constants, as it does only for
// ops with the ConstantLike trait; the linears fuse; the strict tolerance
// keeps the erf GELU (pf-graph-opt's default one fuses it); the Reshape to
// Shape(x) folds away; the LayerNorm fuses.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: -> tensor<2x4x8xf32>
// CHECK-NEXT: pf.constant dense<5.000000e-01>
// CHECK-NEXT: pf.constant dense<1.000000e+00>
// CHECK-NEXT: pf.constant dense<1.41421354>
// CHECK: pf.linear {{.*}} {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NOT: pf.gelu
// CHECK: pf.erf
// CHECK: pf.linear
// CHECK-NOT: pf.reshape
// CHECK: pf.layer_norm
// CHECK-NEXT: return

// LOWER: func.func @pf_main(%arg0: !llvm.ptr, %arg1: !llvm.ptr) -> i64 attributes {{{.*}}pf.runtime_plan = #pf.runtime_plan<
// LOWER: call @pfrt_softmax_cross_entropy(
// LOWER: call @pfrt_adamw_step(
// LOWER: func.func private @pfrt_softmax_cross_entropy(
