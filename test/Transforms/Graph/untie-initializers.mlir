// RUN: pf-opt %s -split-input-file --pf-untie-initializers | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-untie-initializers | FileCheck %s --check-prefix=GONE

// The identities of parameters that carry pf.name are gone.
// GONE-NOT: pf.identity {{.*}}pf.name = "{{(a.copy|taken|s.copy)}}"

// CHECK: pf.param @a : tensor<2x2xf32> = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// The copies follow their source in graph order, with the same value.
// CHECK-NEXT: pf.param @a.copy : tensor<2x2xf32> = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// A copy whose name is taken gets a unique one.
// CHECK-NEXT: pf.param @[[TAKEN:taken_[0-9]+]] : tensor<2x2xf32> = dense<{{\[\[}}1.000000e+00
// Shapes-only parameters are copied without value.
// CHECK: pf.param @s : tensor<3xf32>{{$}}
// CHECK-NEXT: pf.param @s.copy : tensor<3xf32>{{$}}
// CHECK: pf.param @taken : tensor<2x2xf32> = dense<0.000000e+00>
pf.param @a : tensor<2x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
pf.param @s : tensor<3xf32>
pf.param @taken : tensor<2x2xf32> = dense<0.0> : tensor<2x2xf32>

// CHECK-LABEL: func.func @main(
// CHECK-DAG: %[[A:.*]] = pf.param_ref @a : tensor<2x2xf32>
// CHECK-DAG: %[[ACOPY:.*]] = pf.param_ref @a.copy : tensor<2x2xf32>
// CHECK-DAG: %[[TAKENREF:.*]] = pf.param_ref @[[TAKEN]] : tensor<2x2xf32>
// CHECK-DAG: %[[SCOPY:.*]] = pf.param_ref @s.copy : tensor<3xf32>
// An identity without pf.name, or of a non-parameter, is left alone.
// CHECK-DAG: %[[KEEP1:.*]] = pf.identity %[[A]] : (tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-DAG: %[[KEEP2:.*]] = pf.identity %arg0 {pf.name = "x.copy"}
// CHECK: return %[[A]], %[[ACOPY]], %[[TAKENREF]], %[[SCOPY]], %[[KEEP1]], %[[KEEP2]]
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %a = pf.param_ref @a : tensor<2x2xf32>
  %a2 = pf.identity %a {pf.name = "a.copy"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %a3 = pf.identity %a {pf.name = "taken"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %s = pf.param_ref @s : tensor<3xf32>
  %s2 = pf.identity %s {pf.name = "s.copy"} : (tensor<3xf32>) -> tensor<3xf32>
  %k1 = pf.identity %a : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %k2 = pf.identity %x {pf.name = "x.copy"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %a, %a2, %a3, %s2, %k1, %k2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Two copies of one source follow it in the order the graph makes them,
// before the next parameter.
// CHECK: pf.param @b : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: pf.param @b.first : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: pf.param @b.second : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: pf.param @c : tensor<2xf32> = dense<3.000000e+00> : tensor<2xf32>
// The source's read stays (pf-dce removes it).
// CHECK-LABEL: func.func @two_copies(
// CHECK-NEXT: pf.param_ref @b :
// CHECK-NEXT: %[[B1:.*]] = pf.param_ref @b.first
// CHECK-NEXT: %[[B2:.*]] = pf.param_ref @b.second
// CHECK-NEXT: %[[C:.*]] = pf.param_ref @c
// CHECK-NEXT: return %[[B1]], %[[B2]], %[[C]]
pf.param @b : tensor<2xf32> = dense<[1.0, 2.0]> : tensor<2xf32>
pf.param @c : tensor<2xf32> = dense<3.0> : tensor<2xf32>
func.func @two_copies() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %b = pf.param_ref @b : tensor<2xf32>
  %b1 = pf.identity %b {pf.name = "b.first"} : (tensor<2xf32>) -> tensor<2xf32>
  %b2 = pf.identity %b {pf.name = "b.second"} : (tensor<2xf32>) -> tensor<2xf32>
  %c = pf.param_ref @c : tensor<2xf32>
  return %b1, %b2, %c : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
