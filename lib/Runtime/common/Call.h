//===- Call.h - Argument checking and error reporting ------------*- C++ -*-===//
//
// Every public entry point builds a Call, which knows the context and the
// function's name, and validates its arguments through it. Failures write
// "pfrt_<name>: <what is wrong>" into the context and return the status, so
// the entry points read as a list of checks followed by the work.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_CALL_H
#define PF_RUNTIME_COMMON_CALL_H

#include "Backend.h"
#include "Context.h"
#include "Shape.h"

#include <initializer_list>

/// Returns from the enclosing function if `expr` is not PFRT_OK.
#define PFRT_TRY(expr)                                                         \
  do {                                                                         \
    pfrt_status pfrtTryStatus_ = (expr);                                       \
    if (pfrtTryStatus_ != PFRT_OK)                                             \
      return pfrtTryStatus_;                                                   \
  } while (0)

namespace pfrt {

class Call {
public:
  Call(pfrt_context *ctx, const char *function) : ctx(ctx), fn(function) {}

  pfrt_context *context() const { return ctx; }
  int threads() const { return ctx->numThreads; }

  /// PFRT_INVALID_ARGUMENT for a null context (which cannot hold a message).
  pfrt_status begin() const { return ctx ? PFRT_OK : PFRT_INVALID_ARGUMENT; }

  /// Records "fn: message" on the context and returns `code`.
  pfrt_status fail(pfrt_status code, const char *format, ...) const
      __attribute__((format(printf, 3, 4)));

  /// A well-formed descriptor: non-null, known dtype, rank in range,
  /// non-negative dimensions, data present when there are elements.
  pfrt_status tensor(const char *name, const pfrt_tensor *t) const;
  /// Like tensor(), but NULL is accepted.
  pfrt_status optionalTensor(const char *name, const pfrt_tensor *t) const;
  /// A non-null pointer argument other than a tensor.
  pfrt_status pointer(const char *name, const void *p) const;

  /// PFRT_UNSUPPORTED unless t's dtype is one of `allowed`.
  pfrt_status dtypeIn(const char *name, const pfrt_tensor *t,
                      std::initializer_list<int32_t> allowed) const;
  /// PFRT_INVALID_ARGUMENT unless t has exactly `dtype`.
  pfrt_status dtypeIs(const char *name, const pfrt_tensor *t,
                      int32_t dtype) const;
  /// PFRT_INVALID_ARGUMENT unless t has exactly `expected` as shape.
  pfrt_status shapeIs(const char *name, const pfrt_tensor *t,
                      const Shape &expected) const;
  /// PFRT_INVALID_ARGUMENT unless t has rank in [lo, hi].
  pfrt_status rankIn(const char *name, const pfrt_tensor *t, int32_t lo,
                     int32_t hi) const;
  /// Normalizes `axis` against `rank` or fails naming `what`.
  pfrt_status axis(const char *what, int64_t axis, int32_t rank,
                   int32_t &out) const;

private:
  pfrt_context *ctx;
  const char *fn;
};

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_CALL_H
