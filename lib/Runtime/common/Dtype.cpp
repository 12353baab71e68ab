//===- Dtype.cpp - dtype sizes and names -----------------------------------===//

#include "Dtype.h"

#include <cstring>

namespace pfrt {

int64_t dtypeSize(int32_t dtype) {
  switch (dtype) {
  case PFRT_F64:
  case PFRT_I64:
    return 8;
  case PFRT_F32:
  case PFRT_I32:
    return 4;
  case PFRT_F16:
    return 2;
  case PFRT_I8:
  case PFRT_BOOL:
    return 1;
  default:
    return 0;
  }
}

const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case PFRT_F32:
    return "f32";
  case PFRT_F64:
    return "f64";
  case PFRT_F16:
    return "f16";
  case PFRT_I64:
    return "i64";
  case PFRT_I32:
    return "i32";
  case PFRT_I8:
    return "i8";
  case PFRT_BOOL:
    return "bool";
  default:
    return "unknown";
  }
}

double elementAsDouble(int32_t dtype, const void *bytes) {
  auto as = [bytes](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, bytes, sizeof v);
    return double(v);
  };
  switch (dtype) {
  case PFRT_F32:
    return as(float());
  case PFRT_F64:
    return as(double());
  case PFRT_I64:
    return as(int64_t());
  case PFRT_I32:
    return as(int32_t());
  case PFRT_I8:
    return as(int8_t());
  case PFRT_BOOL:
    return as(uint8_t());
  default:
    return 0.0;
  }
}

} // namespace pfrt
