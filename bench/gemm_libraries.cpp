//===- gemm_libraries.cpp - SGEMM GFLOP/s of one library on BERT shapes ---===//
//
// Built once per library by bench/gemm_libraries.sh (-DPF_BENCH_OPENBLAS,
// -DPF_BENCH_DNNL or -DPF_BENCH_BLIS): OpenBLAS and BLIS both export
// cblas_sgemm, so one binary cannot hold both. Prints one line per shape:
//   <library> <name> <transA><transB> <M> <N> <K> <batch> <best> <median>
// in GFLOP/s over the timed runs.
// Row-major throughout, as the runtime calls them. Batched shapes (attention)
// run as the runtime runs them: one single-threaded GEMM per OpenMP thread;
// the others run one GEMM with all threads.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <omp.h>

#if defined(PF_BENCH_OPENBLAS)
#include <cblas.h>
static const char *kLibrary = "openblas";
#elif defined(PF_BENCH_DNNL)
#include <oneapi/dnnl/dnnl.h>
static const char *kLibrary = "onednn";
#elif defined(PF_BENCH_BLIS)
#include <blis.h>
static const char *kLibrary = "blis";
#else
#error "define PF_BENCH_OPENBLAS, PF_BENCH_DNNL or PF_BENCH_BLIS"
#endif

namespace {

struct Shape {
  const char *name;
  bool transA, transB;
  long m, n, k, batch;
};

// BERT at batch 8 x 128 (1024 tokens); base: hidden 768, 12 heads, FFN 3072;
// mini: hidden 256, 4 heads, FFN 1024. NN: activations times [in, out]
// weights; NT/TN: the backward's data and weight gradients.
const Shape kShapes[] = {
    {"base.qkv", false, false, 1024, 768, 768, 1},
    {"base.ffn1", false, false, 1024, 3072, 768, 1},
    {"base.ffn2", false, false, 1024, 768, 3072, 1},
    {"base.dx_NT", false, true, 1024, 768, 3072, 1},
    {"base.dw_TN", true, false, 768, 3072, 1024, 1},
    {"base.scores_NT", false, true, 128, 128, 64, 96},
    {"base.context", false, false, 128, 64, 128, 96},
    {"mini.qkv", false, false, 1024, 256, 256, 1},
    {"mini.ffn1", false, false, 1024, 1024, 256, 1},
    {"mini.decoder_NT", false, true, 1024, 30522, 256, 1},
    {"mini.scores_NT", false, true, 128, 128, 64, 32},
    // Few rows (the routing keeps M < 16 on OpenBLAS).
    {"small_m.1", false, false, 1, 768, 768, 1},
    {"small_m.8", false, false, 8, 768, 768, 1},
    {"small_m.16", false, false, 16, 768, 768, 1},
    {"small_m.32", false, false, 32, 768, 768, 1},
    {"peak.2048", false, false, 2048, 2048, 2048, 1},
};

void setThreads(int threads) {
#if defined(PF_BENCH_OPENBLAS)
  openblas_set_num_threads(threads);
#elif defined(PF_BENCH_BLIS)
  bli_thread_set_num_threads(threads);
#endif
  omp_set_num_threads(threads); // oneDNN (OpenMP runtime) reads this
}

void sgemm(const Shape &s, const float *a, const float *b, float *c) {
  const long lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
#if defined(PF_BENCH_OPENBLAS)
  cblas_sgemm(CblasRowMajor, s.transA ? CblasTrans : CblasNoTrans,
              s.transB ? CblasTrans : CblasNoTrans, int(s.m), int(s.n),
              int(s.k), 1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(s.n));
#elif defined(PF_BENCH_DNNL)
  dnnl_sgemm(s.transA ? 'T' : 'N', s.transB ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
             a, lda, b, ldb, 0.0f, c, s.n);
#elif defined(PF_BENCH_BLIS)
  float one = 1.0f, zero = 0.0f;
  bli_sgemm(s.transA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
            s.transB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s.m, s.n, s.k, &one,
            const_cast<float *>(a), lda, 1, const_cast<float *>(b), ldb, 1,
            &zero, c, s.n, 1);
#endif
}

/// One timed run of the shape: all threads on one GEMM, or for batches one
/// single-threaded GEMM per OpenMP thread.
void runOnce(const Shape &s, int threads, const std::vector<float> &a,
             const std::vector<float> &b, std::vector<float> &c) {
  const long aSize = s.m * s.k, bSize = s.k * s.n, cSize = s.m * s.n;
  if (s.batch == 1) {
    sgemm(s, a.data(), b.data(), c.data());
    return;
  }
  setThreads(1);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < s.batch; ++i)
    sgemm(s, a.data() + i * aSize, b.data() + i * bSize, c.data() + i * cSize);
  setThreads(threads);
}

struct Rate {
  double best, median;
};

Rate measure(const Shape &s, int threads, double minSeconds) {
  std::vector<float> a(s.m * s.k * s.batch), b(s.k * s.n * s.batch),
      c(s.m * s.n * s.batch);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float((i * 7 + 3) % 13) / 13.0f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float((i * 5 + 1) % 11) / 11.0f - 0.5f;
  const double flop = 2.0 * s.m * s.n * s.k * s.batch;
  using Clock = std::chrono::steady_clock;
  runOnce(s, threads, a, b, c); // warm-up: packing buffers, JIT kernels
  runOnce(s, threads, a, b, c);
  std::vector<double> gflops;
  const auto start = Clock::now();
  while (gflops.size() < 5 ||
         (std::chrono::duration<double>(Clock::now() - start).count() <
              minSeconds &&
          gflops.size() < 200)) {
    const auto t0 = Clock::now();
    runOnce(s, threads, a, b, c);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    gflops.push_back(flop / dt * 1e-9);
  }
  std::sort(gflops.begin(), gflops.end());
  return {gflops.back(), gflops[gflops.size() / 2]};
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const Shape &s : kShapes)
      std::printf("%s\n", s.name);
    return 0;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double minSeconds = argc > 2 ? std::atof(argv[2]) : 0.5;
  const std::string only = argc > 3 ? argv[3] : "";
  if (threads < 1 || minSeconds <= 0) {
    std::fprintf(stderr, "usage: %s [threads >= 1] [seconds per shape > 0] "
                 "[shape]\n       %s --list\n", argv[0], argv[0]);
    return 2;
  }
  setThreads(threads);
  for (const Shape &s : kShapes) {
    if (!only.empty() && only != s.name)
      continue;
    const Rate r = measure(s, threads, minSeconds);
    std::printf("%s %s %c%c %ld %ld %ld %ld %.1f %.1f\n", kLibrary, s.name,
                s.transA ? 'T' : 'N', s.transB ? 'T' : 'N', s.m, s.n, s.k,
                s.batch, r.best, r.median);
  }
  return 0;
}
