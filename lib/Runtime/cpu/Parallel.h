//===- Parallel.h - OpenMP loops with the context's thread count -*- C++ -*-===//
//
// Kernels parallelize over independent rows (or chunks) with these helpers.
// The body is a lambda inlined into the OpenMP loop, so the vectorizable
// inner loops it contains stay free of indirect calls. Small problems run on
// the calling thread: waking a team costs more than a few thousand
// elements of work.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_PARALLEL_H
#define PF_RUNTIME_CPU_PARALLEL_H

#include "../common/Context.h"

#include <cstdint>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace pfrt::cpu {

/// Flushes denormal floats to zero on this thread while alive (FTZ and DAZ,
/// as deep-learning runtimes run). Optimizer states such as Adam's second
/// moment decay into the denormal range, where every SSE/AVX operation takes
/// a microcode assist: a BERT-tiny training step ran 8x slower without it.
class DenormalsAreZero {
public:
  DenormalsAreZero() {
#if defined(__SSE__) || defined(__x86_64__)
    saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u); // FTZ (bit 15) | DAZ (bit 6)
#endif
  }
  ~DenormalsAreZero() {
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  }
  DenormalsAreZero(const DenormalsAreZero &) = delete;
  DenormalsAreZero &operator=(const DenormalsAreZero &) = delete;

private:
  unsigned saved = 0;
};

/// Work (roughly: elements touched) below which one thread is used, and the
/// minimum work each additional thread must get.
constexpr int64_t kWorkPerThread = 32 * 1024;

/// Threads worth waking for `work` units, capped by the context.
inline int threadsFor(const pfrt_context *ctx, int64_t work) {
  int64_t useful = work / kWorkPerThread;
  if (useful < 1)
    return 1;
  return useful < ctx->numThreads ? static_cast<int>(useful) : ctx->numThreads;
}

/// body(i) for i in [0, n), each item costing about `workPerItem`.
template <class Body>
void parallelFor(const pfrt_context *ctx, int64_t n, int64_t workPerItem,
                 Body &&body) {
  int threads = n > 1 ? threadsFor(ctx, n * workPerItem) : 1;
  if (threads <= 1) {
    DenormalsAreZero ftz;
    for (int64_t i = 0; i < n; ++i)
      body(i);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    DenormalsAreZero ftz;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      body(i);
  }
}

/// body(begin, end) over static chunks of [0, n) of about `grain` items,
/// for flat loops whose vectorized body should see long ranges.
template <class Body>
void parallelChunks(const pfrt_context *ctx, int64_t n, int64_t grain,
                    Body &&body) {
  if (n <= 0)
    return;
  int64_t chunks = (n + grain - 1) / grain;
  parallelFor(ctx, chunks, grain, [&](int64_t c) {
    int64_t begin = c * grain;
    body(begin, begin + grain < n ? begin + grain : n);
  });
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_PARALLEL_H
