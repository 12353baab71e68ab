//===- Dispatch.cpp - The exported kernel entry points ---------------------===//
//
// Generated from pfrt_abi.def: each pfrt_<name> forwards to the backend its
// context was created for (common/Backend.h). The CPU path costs one
// predictable branch per kernel call.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Call.h"
#include "Context.h"

namespace {

/// Calls the CUDA kernel, or says plainly that there is none yet. The
/// message names the entry point the generated code called.
template <class Fn, class... Args>
pfrt_status callCuda(pfrt_context *ctx, const char *name, Fn fn,
                     Args... args) {
  if (!fn)
    return pfrt::Call(ctx, name).fail(
        PFRT_UNSUPPORTED, "not implemented on the CUDA backend yet");
  return fn(ctx, args...);
}

} // namespace

extern "C" {
#define PFRT_KERNEL(name, ...)                                                 \
  pfrt_status name(pfrt_context *ctx PFRT_KIND_PARAMS(__VA_ARGS__)) {          \
    if (ctx && ctx->backend == PFRT_BACKEND_CUDA)                              \
      return callCuda(ctx, #name, pfrt::cuda::kernels().name                   \
                                      PFRT_KIND_ARGS(__VA_ARGS__));            \
    return name##_cpu(ctx PFRT_KIND_ARGS(__VA_ARGS__));                        \
  }
#include "pf/Runtime/pfrt_abi.def"
} // extern "C"
