//===- Blas.h - Row-major GEMMs through oneDNN and CBLAS ----------*- C++ -*-===//
//
// The thin layer every BLAS-backed kernel (Linalg, Backward, Kfac) uses:
// f32 GEMMs go to oneDNN's dnnl_sgemm, f64 ones to OpenBLAS; thread counts
// follow the calling context; K == 0 is handled here (implementations differ
// on it), and dimensions beyond BLAS' int are refused rather than truncated.
//
// Why oneDNN: it picks its kernels from CPUID at run time. OpenBLAS 0.3.21
// (Debian 12) falls back to its SSE3 "Prescott" kernels on processors newer
// than it knows (this project's Xeon, model 207: 10-40 GFLOP/s on 2 cores),
// and environments that set OPENBLAS_CORETYPE=Haswell to dodge old bugs
// confine it to AVX2; oneDNN ran BERT's GEMMs at 2-5x either, and GEMMs of
// 1 to 32 rows faster too (bench/gemm_libraries.sh, bench/README.md).
// Both use the same libgomp, so their threads are one pool with ours.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_BLAS_H
#define PF_RUNTIME_CPU_BLAS_H

#include "../common/Call.h"
#include "../common/Context.h"

#include <cblas.h>
#include <climits>
#include <cstdint>
#include <omp.h>
#ifdef PFRT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

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

/// The CBLAS (OpenBLAS) calls.
inline void openblasGemm(const Gemm &g, const float *a, const float *b,
                         float *c) {
  cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, int(g.m), int(g.n),
              int(g.k), float(g.alpha), a, g.ldA(), b, g.ldB(), float(g.beta),
              c, g.ldC());
}

inline void openblasGemm(const Gemm &g, const double *a, const double *b,
                         double *c) {
  cblas_dgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, int(g.m), int(g.n),
              int(g.k), g.alpha, a, g.ldA(), b, g.ldB(), g.beta, c, g.ldC());
}

/// Whether blasGemm sends f32 GEMMs to oneDNN (built with it). All shapes
/// go: oneDNN was measured ahead of OpenBLAS from 1 row up.
constexpr bool kF32GemmsOnDnnl =
#ifdef PFRT_HAVE_DNNL
    true;
#else
    false;
#endif

/// oneDNN's row-major SGEMM. Its team has omp_get_max_threads() threads,
/// one inside a parallel region. Returns false if oneDNN refused (it only
/// does for bad arguments or a failed scratch allocation).
inline bool dnnlGemm(const Gemm &g, const float *a, const float *b,
                     float *c) {
#ifdef PFRT_HAVE_DNNL
  return dnnl_sgemm(g.transA ? 'T' : 'N', g.transB ? 'T' : 'N', g.m, g.n, g.k,
                    float(g.alpha), a, g.ldA(), b, g.ldB(), float(g.beta), c,
                    g.ldC()) == dnnl_success;
#else
  (void)g, (void)a, (void)b, (void)c;
  return false;
#endif
}

/// One f32 GEMM: oneDNN, or OpenBLAS when built without it or if it refused.
inline void blasGemm(const Gemm &g, const float *a, const float *b, float *c) {
  if (kF32GemmsOnDnnl && dnnlGemm(g, a, b, c))
    return;
  openblasGemm(g, a, b, c);
}

/// f64 GEMMs: OpenBLAS (oneDNN has no DGEMM).
inline void blasGemm(const Gemm &g, const double *a, const double *b,
                     double *c) {
  openblasGemm(g, a, b, c);
}

/// Sets the calling thread's OpenMP thread count while alive and restores it
/// after, so the context's count holds for the GEMM without leaking into the
/// caller's own parallel regions. Both libraries size their team from it:
/// oneDNN reads omp_get_max_threads(), and OpenBLAS' OpenMP build re-syncs
/// its count to it on every call (openblas_set_num_threads also calls
/// omp_set_num_threads). Cheap: one per-thread variable.
class OmpThreadsScope {
public:
  explicit OmpThreadsScope(int threads) : saved(omp_get_max_threads()) {
    if (threads > 0 && threads != saved)
      omp_set_num_threads(threads);
  }
  ~OmpThreadsScope() {
    if (omp_get_max_threads() != saved)
      omp_set_num_threads(saved);
  }
  OmpThreadsScope(const OmpThreadsScope &) = delete;
  OmpThreadsScope &operator=(const OmpThreadsScope &) = delete;

private:
  int saved;
};

/// `threads` threads for the BLAS or LAPACK calls made while alive: the
/// calling thread's OpenMP count and OpenBLAS' own. Both, because OpenBLAS'
/// OpenMP build re-syncs its count to omp_get_max_threads() on every call:
/// setting only OpenBLAS' count (which is cheap to leave unchanged) lets a
/// call run with the process' OpenMP default instead, say 2 threads in a
/// rank that mpirun did not bind, and a SYRK with 2 threads sums in another
/// order than with 1.
class BlasThreadsScope {
public:
  explicit BlasThreadsScope(int threads) : team(threads) { setBlasThreads(threads); }

private:
  OmpThreadsScope team; // first: openblas_set_num_threads sets it too
};

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

/// Runs one GEMM with `threads` threads (0: inside a parallel team, where
/// OpenBLAS was set to one thread before the team and oneDNN runs on the
/// calling thread by itself). K == 0 is handled here: op(A) op(B) is then
/// zero and C becomes beta C.
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
  if (threads <= 0) {
    blasGemm(g, a, b, c);
    return;
  }
  BlasThreadsScope team(threads);
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
