//===- Dtype.h - dtype codes, sizes and C++ types ----------------*- C++ -*-===//

#ifndef PF_RUNTIME_COMMON_DTYPE_H
#define PF_RUNTIME_COMMON_DTYPE_H

#include "pf/Runtime/pfrt.h"

#include <cstdint>

namespace pfrt {

/// IEEE binary16 as raw bits; storage only (see Half.h for conversions).
struct Half {
  uint16_t bits;
};

/// Compile-time tag passed to dtype-generic lambdas: `using T = typename
/// decltype(tag)::type;`.
template <class T> struct TypeTag {
  using type = T;
};

int64_t dtypeSize(int32_t dtype);
const char *dtypeName(int32_t dtype);
inline bool isKnownDtype(int32_t dtype) { return dtypeSize(dtype) != 0; }
/// The element at `bytes` as a double, for f32, f64, i8, i32, i64 and bool
/// (pfrt_read_scalar on every backend); 0 for other dtypes.
double elementAsDouble(int32_t dtype, const void *bytes);

/// Calls f(TypeTag<T>{}) for the C++ type of `dtype`, for every dtype (bool
/// as uint8_t, f16 as Half). Precondition: isKnownDtype(dtype).
template <class F> decltype(auto) visitDtype(int32_t dtype, F &&f) {
  switch (dtype) {
  case PFRT_F32:
    return f(TypeTag<float>{});
  case PFRT_F64:
    return f(TypeTag<double>{});
  case PFRT_I64:
    return f(TypeTag<int64_t>{});
  case PFRT_I32:
    return f(TypeTag<int32_t>{});
  case PFRT_I8:
    return f(TypeTag<int8_t>{});
  case PFRT_F16:
    return f(TypeTag<Half>{});
  default: // PFRT_BOOL
    return f(TypeTag<uint8_t>{});
  }
}

/// Calls f(TypeTag<T>{}) for f32 / f64. Precondition: one of them.
template <class F> decltype(auto) visitFloat(int32_t dtype, F &&f) {
  if (dtype == PFRT_F64)
    return f(TypeTag<double>{});
  return f(TypeTag<float>{});
}

/// Calls f(TypeTag<T>{}) for the arithmetic dtypes f32, f64, i32, i64.
template <class F> decltype(auto) visitArith(int32_t dtype, F &&f) {
  switch (dtype) {
  case PFRT_F64:
    return f(TypeTag<double>{});
  case PFRT_I64:
    return f(TypeTag<int64_t>{});
  case PFRT_I32:
    return f(TypeTag<int32_t>{});
  default:
    return f(TypeTag<float>{});
  }
}

/// Calls f(TypeTag<T>{}) for every dtype with a C++ arithmetic type (all
/// but f16). Precondition: dtype is known and not f16.
template <class F> decltype(auto) visitNumeric(int32_t dtype, F &&f) {
  switch (dtype) {
  case PFRT_F64:
    return f(TypeTag<double>{});
  case PFRT_I64:
    return f(TypeTag<int64_t>{});
  case PFRT_I32:
    return f(TypeTag<int32_t>{});
  case PFRT_I8:
    return f(TypeTag<int8_t>{});
  case PFRT_BOOL:
    return f(TypeTag<uint8_t>{});
  default:
    return f(TypeTag<float>{});
  }
}

/// Calls f(TypeTag<U>{}) with an unsigned integer type of the dtype's size:
/// data movement only needs to move bytes, so 7 dtypes share 4 instances.
template <class F> decltype(auto) visitBytes(int64_t elemSize, F &&f) {
  switch (elemSize) {
  case 8:
    return f(TypeTag<uint64_t>{});
  case 4:
    return f(TypeTag<uint32_t>{});
  case 2:
    return f(TypeTag<uint16_t>{});
  default:
    return f(TypeTag<uint8_t>{});
  }
}

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_DTYPE_H
