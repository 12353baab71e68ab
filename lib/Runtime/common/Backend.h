//===- Backend.h - Kernel dispatch between the CPU and CUDA backends -*- C++ -*-===//
//
// Every kernel of pfrt_abi.def exists three times:
//   pfrt_add        the exported entry point (common/Dispatch.cpp, generated
//                   from pfrt_abi.def): looks at ctx->backend and forwards;
//   pfrt_add_cpu    the CPU backend's implementation (cpu/*.cpp, comm/);
//   a CUDA kernel   registered in the CUDA backend's KernelTable (cuda/),
//                   or absent there: the entry point then answers
//                   PFRT_UNSUPPORTED "not implemented on the CUDA backend yet".
// The table is generated from pfrt_abi.def, so a kernel added to the ABI is
// dispatched without touching this file, and its CUDA slot starts empty.
//
// No CUDA header is included here: the CUDA state hangs off the context as
// an opaque pointer and is reached only through the functions below, which
// cuda/Unavailable.cpp implements when the toolkit was not found.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_BACKEND_H
#define PF_RUNTIME_COMMON_BACKEND_H

#include "pf/Runtime/pfrt.h"
#include "AbiKinds.h"

#include <cstddef>
#include <cstdint>

// The CPU implementations: pfrt_<name>_cpu with the entry point's signature.
extern "C" {
#define PFRT_KERNEL(name, ...)                                                 \
  pfrt_status name##_cpu(pfrt_context *ctx PFRT_KIND_PARAMS(__VA_ARGS__));
#include "pf/Runtime/pfrt_abi.def"
}

namespace pfrt {

/// One function pointer per kernel of pfrt_abi.def, typed as pfrt.h declares
/// the entry point; null where a backend has no implementation.
struct KernelTable {
#define PFRT_KERNEL(name, ...) decltype(&::name) name = nullptr;
#include "pf/Runtime/pfrt_abi.def"
};

/// A layer's refresh made only of dispatching entry points (pfrt_kfac_pi,
/// pfrt_kfac_inverse, pfrt_kfac_eigen): what a backend without its own
/// composite registers (common/KfacRefresh.cpp).
pfrt_status kfacDampedInversesComposed(pfrt_context *ctx, const pfrt_tensor *a,
                                       const pfrt_tensor *b, double damping, int32_t retries,
                                       const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
                                       int32_t *outcome);
pfrt_status kfacEigenRefreshComposed(pfrt_context *ctx, const pfrt_tensor *a, const pfrt_tensor *b,
                                     const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
                                     const pfrt_tensor *b_vectors, const pfrt_tensor *b_values,
                                     int32_t *outcome);

namespace cuda {

/// Whether this library was built with the CUDA backend.
bool built();

/// The GPUs the driver reports; 0 without a driver or GPU, or unbuilt.
int32_t deviceCount();

/// Creates the CUDA state of ctx (device, stream, library handles) for
/// ctx->device. On failure writes why into `why` (of `size` bytes) and
/// leaves ctx->cuda null; never throws or aborts.
pfrt_status createState(pfrt_context *ctx, char *why, size_t size);
/// Frees what createState made; a context without state is a no-op.
void destroyState(pfrt_context *ctx);

/// The kernels the CUDA backend implements (the others stay null).
const KernelTable &kernels();

/// Device memory for pfrt_alloc / pfrt_arena_create (cudaMalloc: 256-byte
/// aligned, more than PFRT_DEFAULT_ALIGNMENT) and its release.
pfrt_status allocate(pfrt_context *ctx, int64_t bytes, void **out,
                     const char *function);
void release(pfrt_context *ctx, void *ptr);

/// Host <-> device copies of `bytes` on the context's stream; the copy to
/// the host waits for the stream (its data is read right after).
pfrt_status copyToDevice(pfrt_context *ctx, void *device, const void *host,
                         int64_t bytes);
pfrt_status copyToHost(pfrt_context *ctx, void *host, const void *device,
                       int64_t bytes);
/// Waits until every kernel queued on the context's stream has finished.
pfrt_status synchronize(pfrt_context *ctx);

/// "cuda (NVIDIA H200, sm_90)" or the like, for pfrt_backend_name callers
/// that want more; a static "cuda" when no state exists.
const char *deviceDescription(const pfrt_context *ctx);

} // namespace cuda
} // namespace pfrt

#endif // PF_RUNTIME_COMMON_BACKEND_H
