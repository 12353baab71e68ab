//===- Context.h - The runtime's opaque handle types -------------*- C++ -*-===//
//
// Definitions of the structs pfrt.h declares opaquely. Backend-neutral: a
// CUDA backend adds its stream/handles here behind `backend`.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_CONTEXT_H
#define PF_RUNTIME_COMMON_CONTEXT_H

#include "pf/Runtime/pfrt.h"

struct pfrt_context {
  int32_t backend = PFRT_BACKEND_CPU;
  /// Resolved worker-thread count (>= 1); every parallel region uses it.
  int32_t numThreads = 1;
  int32_t device = 0;
  /// Message of the last failing call; kept per context so that contexts on
  /// different threads never share state.
  char lastError[1024] = {0};
};

struct pfrt_arena {
  pfrt_context *ctx = nullptr;
  char *base = nullptr;
  int64_t capacity = 0;
  int64_t used = 0;
  int64_t peak = 0;
};

#endif // PF_RUNTIME_COMMON_CONTEXT_H
