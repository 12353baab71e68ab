//===- Unavailable.cpp - The CUDA backend when it is not built -------------===//
//
// Linked instead of the cuda/ sources when CMake found no CUDA toolkit: a
// CUDA context cannot be created, so no CUDA kernel is ever reached; the
// functions below only say so.
//
//===----------------------------------------------------------------------===//

#include "../common/Backend.h"
#include "../common/Call.h"

#include <cstdio>

namespace pfrt::cuda {

bool built() { return false; }

int32_t deviceCount() { return 0; }

pfrt_status createState(pfrt_context *, char *why, size_t size) {
  std::snprintf(why, size, "this libpfrt was built without the CUDA backend "
                           "(no CUDA toolkit was found at configure time)");
  return PFRT_UNSUPPORTED;
}

void destroyState(pfrt_context *) {}

const KernelTable &kernels() {
  static const KernelTable none;
  return none;
}

pfrt_status allocate(pfrt_context *ctx, int64_t, void **, const char *fn) {
  return Call(ctx, fn).fail(PFRT_UNSUPPORTED, "the CUDA backend is not built");
}

void release(pfrt_context *, void *) {}

pfrt_status copyToDevice(pfrt_context *ctx, void *, const void *, int64_t) {
  return Call(ctx, "pfrt_copy_from_host")
      .fail(PFRT_UNSUPPORTED, "the CUDA backend is not built");
}

pfrt_status copyToHost(pfrt_context *ctx, void *, const void *, int64_t) {
  return Call(ctx, "pfrt_copy_to_host")
      .fail(PFRT_UNSUPPORTED, "the CUDA backend is not built");
}

pfrt_status synchronize(pfrt_context *ctx) {
  return Call(ctx, "pfrt_synchronize")
      .fail(PFRT_UNSUPPORTED, "the CUDA backend is not built");
}

const char *deviceDescription(const pfrt_context *) { return "cuda"; }

} // namespace pfrt::cuda
