//===- ElementwiseMath.h - Per-element arithmetic of the CUDA kernels -*- C++ -*-===//
//
// Binary ops with broadcasting, unary ops, GELU and its derivative: the
// formulas of cpu/Elementwise.cpp and cpu/Backward.cpp, written once for
// host and device (HostDevice.h). Floating dtypes only (f32, f64).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_ELEMENTWISEMATH_H
#define PF_RUNTIME_CUDA_ELEMENTWISEMATH_H

#include "../common/Shape.h"
#include "HostDevice.h"

#include <type_traits>

namespace pfrt::cuda {

enum class Binary : int32_t { Add, Sub, Mul, Div, Pow, Min, Max };

template <class T> PFRT_HD bool isNan(T v) { return v != v; }

/// Integers wrap through unsigned arithmetic (signed overflow is undefined
/// in C++), as on the CPU; their div and pow are not offered on CUDA.
template <class T> PFRT_HD T integerOp(Binary kind, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (kind) {
  case Binary::Add:
    return T(U(a) + U(b));
  case Binary::Sub:
    return T(U(a) - U(b));
  case Binary::Mul:
    return T(U(a) * U(b));
  case Binary::Min:
    return b < a ? b : a;
  case Binary::Max:
    return b > a ? b : a;
  default:
    return a;
  }
}

template <class T> PFRT_HD T binaryOp(Binary kind, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return integerOp(kind, a, b);
  } else {
    switch (kind) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
    case Binary::Div:
      return a / b;
    case Binary::Pow:
      return ::pow(a, b);
    case Binary::Min: // NaN from either side, as numpy.minimum
      return isNan(a) ? a : isNan(b) ? b : (b < a ? b : a);
    case Binary::Max:
      return isNan(a) ? a : isNan(b) ? b : (b > a ? b : a);
    }
    return a;
  }
}

enum class Unary : int32_t {
  Sqrt, Erf, Tanh, Exp, Neg, Abs, Sign, Reciprocal, GeluExact, GeluTanh
};

template <class T> PFRT_HD T geluExact(T x) {
  return T(0.5) * x * (T(1) + ::erf(x * T(0.70710678118654752440)));
}

template <class T> PFRT_HD T geluTanh(T x) {
  const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + ::tanh(inner));
}

template <class T> PFRT_HD T unaryOp(Unary kind, T x) {
  switch (kind) {
  case Unary::Sqrt:
    return ::sqrt(x);
  case Unary::Erf:
    return ::erf(x);
  case Unary::Tanh:
    return ::tanh(x);
  case Unary::Exp:
    return ::exp(x);
  case Unary::Neg:
    return -x;
  case Unary::Abs:
    return ::fabs(x);
  case Unary::Sign: // NaN fails both tests and stays NaN
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;
  case Unary::Reciprocal:
    return T(1) / x;
  case Unary::GeluExact:
    return geluExact(x);
  case Unary::GeluTanh:
    return geluTanh(x);
  }
  return x;
}

/// dL/dx of gelu at x given dL/dy = dy.
template <class T> PFRT_HD T geluGrad(bool exact, T x, T dy) {
  if (exact) { // gelu'(x) = Phi(x) + x phi(x)
    const T cdf = T(0.5) * (T(1) + ::erf(x * T(0.70710678118654752440)));
    const T pdf = T(0.39894228040143267794) * ::exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
  const T k = T(0.79788456080286535588), c = T(0.044715);
  const T x2 = x * x;
  const T t = ::tanh(k * (x + c * x2 * x));
  const T du = k * (T(1) + T(3) * c * x2);
  return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
}

/// pfrt_compare's kinds (PFRT_COMPARE_*); a NaN compares false.
template <class T> PFRT_HD uint8_t compareOp(int32_t kind, T a, T b) {
  switch (kind) {
  case PFRT_COMPARE_EQUAL:
    return a == b;
  case PFRT_COMPARE_GREATER:
    return a > b;
  case PFRT_COMPARE_GREATER_EQUAL:
    return a >= b;
  case PFRT_COMPARE_LESS:
    return a < b;
  default: // PFRT_COMPARE_LESS_EQUAL
    return a <= b;
  }
}

/// pfrt_logical's kinds (PFRT_LOGICAL_*) on truth values.
PFRT_HD uint8_t logicalOp(int32_t kind, bool a, bool b) {
  switch (kind) {
  case PFRT_LOGICAL_AND:
    return a && b;
  case PFRT_LOGICAL_OR:
    return a || b;
  default: // PFRT_LOGICAL_XOR
    return a != b;
  }
}

/// Whether v is an infinity the caller asked about (pfrt_is_inf).
template <class T> PFRT_HD uint8_t isInfOf(T v, bool negative, bool positive) {
  const T inf = T(INFINITY);
  return (positive && v == inf) || (negative && v == -inf);
}

/// The range of the integer dtypes, for pfrt_cast's saturation.
template <class D> struct IntRange;
template <> struct IntRange<int8_t> {
  static constexpr int8_t lo = -128, hi = 127;
};
template <> struct IntRange<int32_t> {
  static constexpr int32_t lo = -2147483647 - 1, hi = 2147483647;
};
template <> struct IntRange<int64_t> {
  static constexpr int64_t lo = -9223372036854775807LL - 1, hi = 9223372036854775807LL;
};

template <> struct IntRange<uint8_t> { // bool
  static constexpr uint8_t lo = 0, hi = 1;
};

/// The identity of max (isMax) or min over T: -inf/+inf for floats, the
/// lowest/highest value otherwise (pfrt_reduce_max/min of an empty set).
template <class T> PFRT_HD T extremeIdentity(bool isMax) {
  if constexpr (std::is_floating_point_v<T>)
    return isMax ? T(-INFINITY) : T(INFINITY);
  else
    return isMax ? IntRange<T>::lo : IntRange<T>::hi;
}

/// max or min of two values, a NaN in either winning (floats).
template <class T> PFRT_HD T extremeOf(bool isMax, T a, T b) {
  return binaryOp(isMax ? Binary::Max : Binary::Min, a, b);
}

/// One element from S to D with pfrt_cast's rules (cpu/DataMovement.cpp):
/// anything to bool (uint8_t) is v != 0; float to integer truncates toward
/// zero and saturates, NaN giving 0; the rest converts as C++ does.
template <class D, class S> PFRT_HD D castValue(S v) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S(0) ? 1 : 0;
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    const double x = double(v);
    if (x != x)
      return D(0);
    if (x <= double(IntRange<D>::lo))
      return IntRange<D>::lo;
    if (x >= double(IntRange<D>::hi))
      return IntRange<D>::hi;
    return D(x);
  } else {
    return D(v);
  }
}

/// The element offset into input `input` of the output element `linear`
/// (row-major over plan.dims) of a broadcast plan (common/Shape.h).
PFRT_HD int64_t broadcastOffset(const BroadcastPlan &plan, int input,
                                int64_t linear) {
  int64_t offset = 0;
  for (int32_t d = plan.rank - 1; d >= 0; --d) {
    const int64_t i = linear % plan.dims[d];
    linear /= plan.dims[d];
    offset += i * plan.strides[input][d];
  }
  return offset;
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_ELEMENTWISEMATH_H
