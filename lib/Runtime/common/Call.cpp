//===- Call.cpp - Argument checking and error reporting --------------------===//

#include "Call.h"
#include "Dtype.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace pfrt {

pfrt_status Call::fail(pfrt_status code, const char *format, ...) const {
  if (!ctx)
    return code;
  int n = std::snprintf(ctx->lastError, sizeof(ctx->lastError), "%s: ", fn);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(ctx->lastError))
    return code;
  va_list args;
  va_start(args, format);
  std::vsnprintf(ctx->lastError + n, sizeof(ctx->lastError) - n, format, args);
  va_end(args);
  return code;
}

pfrt_status Call::pointer(const char *name, const void *p) const {
  return p ? PFRT_OK : fail(PFRT_INVALID_ARGUMENT, "%s is NULL", name);
}

pfrt_status Call::tensor(const char *name, const pfrt_tensor *t) const {
  if (!t)
    return fail(PFRT_INVALID_ARGUMENT, "tensor %s is NULL", name);
  if (t->rank < 0 || t->rank > PFRT_MAX_RANK)
    return fail(PFRT_INVALID_ARGUMENT, "%s has rank %d; ranks 0..%d are valid",
                name, t->rank, PFRT_MAX_RANK);
  if (!isKnownDtype(t->dtype))
    return fail(PFRT_INVALID_ARGUMENT, "%s has unknown dtype code %d", name,
                t->dtype);
  // Bound the element count so that byte offsets never overflow int64.
  const int64_t limit = INT64_MAX / 16;
  int64_t numel = 1;
  for (int32_t i = 0; i < t->rank; ++i) {
    int64_t d = t->shape[i];
    if (d < 0)
      return fail(PFRT_INVALID_ARGUMENT, "%s has negative dimension %lld at %d",
                  name, static_cast<long long>(d), i);
    if (d != 0 && numel > limit / d)
      return fail(PFRT_INVALID_ARGUMENT, "%s has too many elements", name);
    numel *= d;
  }
  if (!t->data && numel > 0)
    return fail(PFRT_INVALID_ARGUMENT, "%s has NULL data but %lld elements",
                name, static_cast<long long>(numel));
  return PFRT_OK;
}

pfrt_status Call::optionalTensor(const char *name,
                                 const pfrt_tensor *t) const {
  return t ? tensor(name, t) : PFRT_OK;
}

pfrt_status Call::dtypeIn(const char *name, const pfrt_tensor *t,
                          std::initializer_list<int32_t> allowed) const {
  for (int32_t d : allowed)
    if (t->dtype == d)
      return PFRT_OK;
  return fail(PFRT_UNSUPPORTED, "%s has dtype %s, which this kernel does not "
              "support", name, dtypeName(t->dtype));
}

pfrt_status Call::dtypeIs(const char *name, const pfrt_tensor *t,
                          int32_t dtype) const {
  if (t->dtype == dtype)
    return PFRT_OK;
  return fail(PFRT_INVALID_ARGUMENT, "%s has dtype %s, expected %s", name,
              dtypeName(t->dtype), dtypeName(dtype));
}

pfrt_status Call::shapeIs(const char *name, const pfrt_tensor *t,
                          const Shape &expected) const {
  Shape actual = Shape::of(*t);
  if (actual == expected)
    return PFRT_OK;
  return fail(PFRT_INVALID_ARGUMENT, "%s has shape %s, expected %s", name,
              ShapeStr(actual).c_str(), ShapeStr(expected).c_str());
}

pfrt_status Call::rankIn(const char *name, const pfrt_tensor *t, int32_t lo,
                         int32_t hi) const {
  if (t->rank >= lo && t->rank <= hi)
    return PFRT_OK;
  if (lo == hi)
    return fail(PFRT_INVALID_ARGUMENT, "%s has rank %d, expected %d", name,
                t->rank, lo);
  return fail(PFRT_INVALID_ARGUMENT, "%s has rank %d, expected %d..%d", name,
              t->rank, lo, hi);
}

pfrt_status Call::axis(const char *what, int64_t axis, int32_t rank,
                       int32_t &out) const {
  if (normalizeAxis(axis, rank, out))
    return PFRT_OK;
  return fail(PFRT_INVALID_ARGUMENT, "%s %lld is out of range for rank %d",
              what, static_cast<long long>(axis), rank);
}

} // namespace pfrt
