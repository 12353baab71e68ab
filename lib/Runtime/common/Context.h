//===- Context.h - The runtime's opaque handle types -------------*- C++ -*-===//
//
// Definitions of the structs pfrt.h declares opaquely. Backend-neutral: the
// CUDA backend keeps its stream and library handles behind `cuda` (opaque
// here, so no CUDA header reaches the CPU code).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_CONTEXT_H
#define PF_RUNTIME_COMMON_CONTEXT_H

#include "pf/Runtime/pfrt.h"

namespace pfrt::cuda {
struct State;
} // namespace pfrt::cuda

struct pfrt_context {
  int32_t backend = PFRT_BACKEND_CPU;
  /// Resolved worker-thread count (>= 1); every parallel region uses it.
  int32_t numThreads = 1;
  int32_t device = 0;
  /// PFRT_GEMM_*: the model GEMMs' compute precision (CUDA only).
  int32_t gemmPrecision = PFRT_GEMM_FP32;
  /// Message of the last failing call; kept per context so that contexts on
  /// different threads never share state.
  char lastError[1024] = {0};
  /// Device, stream and cuBLAS/cuSOLVER handles when backend is CUDA.
  pfrt::cuda::State *cuda = nullptr;
};

struct pfrt_arena {
  pfrt_context *ctx = nullptr;
  /// Host memory on the CPU backend, device memory on CUDA (one
  /// cudaMalloc); the bump logic is the same for both.
  char *base = nullptr;
  /// What to free: base, or (device) the block base was rounded up in.
  void *allocation = nullptr;
  int64_t capacity = 0;
  int64_t used = 0;
  int64_t peak = 0;
};

#endif // PF_RUNTIME_COMMON_CONTEXT_H
