//===- Blas.h - Row-major GEMM/SYRK through CBLAS ----------------*- C++ -*-===//
//
// The thin layer every BLAS-backed kernel (Linalg, Backward, Kfac) uses:
// OpenBLAS' process-wide thread count follows the calling context, K == 0
// is handled here (implementations differ on it), and dimensions beyond
// BLAS' int are refused rather than truncated.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_BLAS_H
#define PF_RUNTIME_CPU_BLAS_H

#include "../common/Call.h"
#include "../common/Context.h"

#include <cblas.h>
#include <climits>
#include <cstdint>

namespace pfrt::cpu {

/// OpenBLAS' thread count is process-wide; set it to what the calling
/// context wants before each call (cheap when unchanged).
inline void setBlasThreads(int threads) {
#ifdef PFRT_HAVE_OPENBLAS_THREADS
  if (openblas_get_num_threads() != threads)
    openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

/// One row-major GEMM: C[M,N] = alpha op(A) op(B) + beta C. Leading
/// dimensions default to contiguous storage (0 = implied).
struct Gemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;

  int ldA() const { return int(lda ? lda : (transA ? m : k)); }
  int ldB() const { return int(ldb ? ldb : (transB ? k : n)); }
  int ldC() const { return int(ldc ? ldc : n); }
};

inline void blasGemm(const Gemm &g, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, int(g.m), int(g.n),
              int(g.k), float(g.alpha), a, g.ldA(), b, g.ldB(), float(g.beta),
              c, g.ldC());
}

inline void blasGemm(const Gemm &g, const double *a, const double *b,
                     double *c) {
  cblas_dgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, int(g.m), int(g.n),
              int(g.k), g.alpha, a, g.ldA(), b, g.ldB(), g.beta, c, g.ldC());
}

/// Whether any of the given dimensions exceeds BLAS' int.
inline bool exceedsBlasInt(int64_t a, int64_t b, int64_t c) {
  return a > INT_MAX || b > INT_MAX || c > INT_MAX;
}

/// BLAS takes int dimensions; larger problems are refused, not truncated.
inline pfrt_status checkBlasDims(const Call &call, const Gemm &g) {
  if (exceedsBlasInt(g.m, g.n, g.k))
    return call.fail(PFRT_UNSUPPORTED, "GEMM dimensions %lld x %lld x %lld "
                     "exceed the BLAS int range", static_cast<long long>(g.m),
                     static_cast<long long>(g.n), static_cast<long long>(g.k));
  return PFRT_OK;
}

/// Runs one GEMM with `threads` BLAS threads (0: leave OpenBLAS' setting
/// alone, for calls inside a parallel team). K == 0 is handled here:
/// op(A) op(B) is then zero and C becomes beta C.
template <class T>
void gemmWith(int threads, const Gemm &g, const T *a, const T *b, T *c) {
  if (g.m == 0 || g.n == 0)
    return;
  if (g.k == 0) {
    const int64_t ldc = g.ldC();
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j)
        c[i * ldc + j] = g.beta == 0 ? T(0) : T(g.beta) * c[i * ldc + j];
    return;
  }
  if (threads > 0)
    setBlasThreads(threads);
  blasGemm(g, a, b, c);
}

/// Runs one GEMM with the context's threads.
template <class T>
void gemm(const pfrt_context *ctx, const Gemm &g, const T *a, const T *b,
          T *c) {
  gemmWith(ctx->numThreads, g, a, b, c);
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_BLAS_H
