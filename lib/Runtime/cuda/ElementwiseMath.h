//===- ElementwiseMath.h - Per-element arithmetic of the CUDA kernels -*- C++ -*-===//
//
// Binary ops with broadcasting, unary ops, GELU and their derivatives, f16
// conversion and casts: the formulas of cpu/Elementwise.cpp, cpu/Backward.cpp,
// cpu/DataMovement.cpp and cpu/Half.h, written once for host and device
// (HostDevice.h).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_ELEMENTWISEMATH_H
#define PF_RUNTIME_CUDA_ELEMENTWISEMATH_H

#include "../common/Shape.h"
#include "HostDevice.h"

#include <string.h> // memcpy, which device code has too
#include <type_traits>

namespace pfrt::cuda {

enum class Binary : int32_t { Add, Sub, Mul, Div, Pow, Min, Max };

template <class T> PFRT_HD bool isNan(T v) { return v != v; }

/// Integers wrap through unsigned arithmetic (signed overflow is undefined
/// in C++), as on the CPU; pow is not offered for them. Division truncates
/// toward zero; -1 negates (MIN / -1 overflows); a zero divisor gives 0
/// here and is reported apart (the kernel notes it in the context's
/// DeviceError, the CPU checks b first).
template <class T> PFRT_HD T integerOp(Binary kind, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (kind) {
  case Binary::Add:
    return T(U(a) + U(b));
  case Binary::Sub:
    return T(U(a) - U(b));
  case Binary::Mul:
    return T(U(a) * U(b));
  case Binary::Div:
    return b == T(-1) ? T(U(0) - U(a)) : b == T(0) ? T(0) : T(a / b);
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

/// Floats: every op; integers: only neg, wrapping (the caller checks).
template <class T> PFRT_HD T unaryOp(Unary kind, T x) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(0) - U(x));
  } else {
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

/// dL/da (which == 0) or dL/db (which == 1) of y = a (op) b at one element
/// of the broadcast result, for pfrt_binary_backward's kinds (PFRT_BINARY_*):
/// PyTorch's formulas, as cpu/Backward.cpp.
template <class T>
PFRT_HD T binaryGrad(int32_t kind, int which, T x, T y, T d) {
  switch (kind * 2 + which) {
  case PFRT_BINARY_ADD * 2:
  case PFRT_BINARY_ADD * 2 + 1:
  case PFRT_BINARY_SUB * 2:
    return d;
  case PFRT_BINARY_SUB * 2 + 1:
    return -d;
  case PFRT_BINARY_MUL * 2:
    return d * y;
  case PFRT_BINARY_MUL * 2 + 1:
    return d * x;
  case PFRT_BINARY_DIV * 2:
    return d / y;
  case PFRT_BINARY_DIV * 2 + 1:
    return -d * x / (y * y);
  case PFRT_BINARY_POW * 2: // 0 where the exponent is 0 (no 0 * inf)
    return y == T(0) ? T(0) : d * y * ::pow(x, y - T(1));
  default: // pow, exponent: 0 where x == 0 and y >= 0 (the limit)
    return (x == T(0) && y >= T(0)) ? T(0) : d * ::pow(x, y) * ::log(x);
  }
}

/// Whether binaryGrad reads the operands' values (add and sub do not: their
/// data need not be read at all).
PFRT_HD bool binaryGradReadsOperands(int32_t kind) {
  return kind != PFRT_BINARY_ADD && kind != PFRT_BINARY_SUB;
}

/// dL/dx of a unary op (pfrt_unary_backward's PFRT_UNARY_* kinds) from the
/// value the ABI passes (y for sqrt, tanh, exp; x for erf) and dL/dy.
template <class T>
PFRT_HD T unaryGrad(int32_t kind, T v, T d) {
  switch (kind) {
  case PFRT_UNARY_SQRT:
    return d / (T(2) * v);
  case PFRT_UNARY_ERF: // 2 / sqrt(pi) exp(-x^2)
    return d * T(1.12837916709551257390) * ::exp(-v * v);
  case PFRT_UNARY_TANH:
    return d * (T(1) - v * v);
  case PFRT_UNARY_EXP:
    return d * v;
  default: // PFRT_UNARY_NEG
    return -d;
  }
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

/// IEEE binary16 as its bits: a type of its own so that castValue can tell
/// it from the integers (pfrt's f16 is storage only).
struct Half {
  uint16_t bits;
};

PFRT_HD float floatFromBits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/// binary16 -> binary32, exact (cpu/Half.h's halfToFloat).
PFRT_HD float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf / NaN
    return floatFromBits(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) // normal
    return floatFromBits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) // +-0
    return floatFromBits(sign);
  int shift = 0; // subnormal: renormalize
  while (!(mant & 0x400u)) {
    mant <<= 1;
    ++shift;
  }
  mant &= 0x3ffu;
  return floatFromBits(sign | (uint32_t(113 - shift) << 23) | (mant << 13));
}

/// binary32 -> binary16, round to nearest even; overflow gives inf, NaN
/// stays a quiet NaN (cpu/Half.h's floatToHalf, bit for bit).
PFRT_HD uint16_t floatToHalf(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u)
    return sign | (absBits > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (absBits >= 0x477ff000u) // rounds to >= 65520: overflow
    return sign | 0x7c00u;
  if (absBits < 0x38800000u) { // below 2^-14: subnormal half or zero
    if (absBits < 0x33000000u)
      return sign;
    const uint32_t exp = absBits >> 23;
    const uint32_t mant = (absBits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u)))
      ++half;
    return sign | uint16_t(half);
  }
  uint32_t h = (absBits - 0x38000000u) >> 13;
  const uint32_t rem = absBits & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is still correct
  return sign | uint16_t(h);
}

/// One element from S to D with pfrt_cast's rules (cpu/DataMovement.cpp):
/// f16 goes through f32 both ways; anything to bool (uint8_t) is v != 0;
/// float to integer truncates toward zero and saturates, NaN giving 0; the
/// rest converts as C++ does.
template <class D, class S> PFRT_HD D castValue(S v) {
  if constexpr (std::is_same_v<S, Half>) {
    return castValue<D>(halfToFloat(v.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{floatToHalf(float(v))};
  } else if constexpr (std::is_same_v<D, uint8_t>) {
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

/// The element offset of index `linear` (row-major over s.dims) in a
/// strided index space (StridedIndex::offset, for host and device).
PFRT_HD int64_t indexOffset(const StridedIndex &s, int64_t linear) {
  int64_t off = 0;
  for (int32_t d = s.rank - 1; d >= 0; --d) {
    off += (linear % s.dims[d]) * s.strides[d];
    linear /= s.dims[d];
  }
  return off;
}

/// The gradient of an operand of shape `operand` broadcast to `full` as
/// two index spaces over full's contiguous elements: `kept` enumerates the
/// operand's elements in its row-major order, `reduced` the elements of
/// full that read each one (offsets add). Precondition: operand
/// broadcasts to full.
inline void splitBroadcastGradient(const Shape &full, const Shape &operand, StridedIndex &kept,
                                   StridedIndex &reduced) {
  int64_t strides[PFRT_MAX_RANK];
  contiguousStrides(full, strides);
  const int32_t shift = full.rank - operand.rank;
  for (int32_t d = 0; d < full.rank; ++d) {
    const bool summed = d < shift || (operand.dims[d - shift] == 1 && full.dims[d] != 1);
    (summed ? reduced : kept).push(full.dims[d], strides[d]);
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
