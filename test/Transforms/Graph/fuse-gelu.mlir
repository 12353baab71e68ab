// RUN: pf-opt %s -split-input-file --pf-fuse-gelu | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-fuse-gelu="tolerance=1e-9" | FileCheck %s --check-prefix=STRICT

// BERT's exact GELU: x * (erf(x / sqrt(2)) + 1) * 0.5.
// CHECK-LABEL: func.func @erf_div(
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[G:.*]] = pf.gelu %[[X]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
// 1.4142135 (as f32) is within the default tolerance of sqrt(2), not within 1e-9.
// STRICT-LABEL: func.func @erf_div(
// STRICT-NOT: pf.gelu
// STRICT: pf.erf
func.func @erf_div(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
  %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// erf(x * (1/sqrt(2))), 1 + erf, and the factors in another order and
// association: 0.5 * ((1 + erf) * x).
// CHECK-LABEL: func.func @erf_mul_other_order(
// CHECK-NEXT: %[[G:.*]] = pf.gelu %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_mul_other_order(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %inv = pf.constant dense<0.707106769> : tensor<f32>
  %q = pf.mul %inv, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %one, %e : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = pf.mul %a, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %half, %m : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// (x * 0.5) * (1 + erf(...)): the half is taken first.
// CHECK-LABEL: func.func @erf_half_first(
// CHECK-NEXT: %[[G:.*]] = pf.gelu %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_half_first(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = pf.constant dense<1.41421354> : tensor<f32>
  %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// HF gelu_new: 0.5x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as Pow.
// CHECK-LABEL: func.func @tanh_pow(
// CHECK-NEXT: %[[G:.*]] = pf.gelu %arg0 {approximate = "tanh"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_pow(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %three = pf.constant dense<3.0> : tensor<f32>
  %p = pf.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %k = pf.constant dense<0.044715> : tensor<f32>
  %c = pf.mul %p, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s = pf.add %x, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = pf.constant dense<0.797884583> : tensor<f32>
  %t = pf.mul %s, %r : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %th = pf.tanh %t : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %th, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// The tanh form with x^3 written x * x * x and the sum as (cubic + x).
// CHECK-LABEL: func.func @tanh_product(
// CHECK-NEXT: %[[G:.*]] = pf.gelu %arg0 {approximate = "tanh"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_product(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %xx = pf.mul %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %xxx = pf.mul %xx, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = pf.constant dense<0.044715> : tensor<f32>
  %c = pf.mul %k, %xxx : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = pf.add %c, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = pf.constant dense<0.797884583> : tensor<f32>
  %t = pf.mul %r, %s : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %th = pf.tanh %t : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %one, %th : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: erf(x / 2).
// CHECK-LABEL: func.func @wrong_sqrt2(
// CHECK-NOT: pf.gelu
// CHECK: pf.erf
func.func @wrong_sqrt2(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = pf.constant dense<2.0> : tensor<f32>
  %q = pf.div %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: the outer factor is 0.6, not 0.5.
// CHECK-LABEL: func.func @wrong_half(
// CHECK-NOT: pf.gelu
// CHECK: pf.erf
func.func @wrong_half(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
  %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.6> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: 2 + erf.
// CHECK-LABEL: func.func @wrong_one(
// CHECK-NOT: pf.gelu
// CHECK: pf.erf
func.func @wrong_one(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
  %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<2.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: erf of another value than the one multiplied.
// CHECK-LABEL: func.func @other_operand(
// CHECK-NOT: pf.gelu
// CHECK: pf.erf
func.func @other_operand(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
  %q = pf.div %z, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: tanh form with the cubic coefficient 0.05.
// CHECK-LABEL: func.func @wrong_cubic(
// CHECK-NOT: pf.gelu
// CHECK: pf.tanh
func.func @wrong_cubic(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %three = pf.constant dense<3.0> : tensor<f32>
  %p = pf.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %k = pf.constant dense<0.05> : tensor<f32>
  %c = pf.mul %p, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s = pf.add %x, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = pf.constant dense<0.797884583> : tensor<f32>
  %t = pf.mul %s, %r : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %th = pf.tanh %t : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %th, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: tanh form with x^2 instead of x^3, and (next) with sqrt(2/pi)
// replaced by 0.8.
// CHECK-LABEL: func.func @wrong_power(
// CHECK-NOT: pf.gelu
// CHECK: pf.tanh
func.func @wrong_power(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %two = pf.constant dense<2.0> : tensor<f32>
  %p = pf.pow %x, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %k = pf.constant dense<0.044715> : tensor<f32>
  %c = pf.mul %p, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s = pf.add %x, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = pf.constant dense<0.797884583> : tensor<f32>
  %t = pf.mul %s, %r : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %th = pf.tanh %t : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %th, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @wrong_scale(
// CHECK-NOT: pf.gelu
// CHECK: pf.tanh
func.func @wrong_scale(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %three = pf.constant dense<3.0> : tensor<f32>
  %p = pf.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %k = pf.constant dense<0.044715> : tensor<f32>
  %c = pf.mul %p, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s = pf.add %x, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = pf.constant dense<0.8> : tensor<f32>
  %t = pf.mul %s, %r : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %th = pf.tanh %t : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %th, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A shared partial product (x * 0.5 also returned) is not folded into the GELU.
// CHECK-LABEL: func.func @shared_half(
// CHECK: %[[H:.*]] = pf.mul %arg0
// CHECK-NOT: pf.gelu
// CHECK: return %{{.*}}, %[[H]]
func.func @shared_half(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
  %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %one = pf.constant dense<1.0> : tensor<f32>
  %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %half = pf.constant dense<0.5> : tensor<f32>
  %h = pf.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = pf.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y, %h : tensor<2x8xf32>, tensor<2x8xf32>
}
