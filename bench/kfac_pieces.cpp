//===- kfac_pieces.cpp - pf's K-FAC kernels against the bare library calls -===//
//
// Built by bench/kfac_pieces.sh against build/lib/libpfrt.so and the OpenBLAS
// pf links. For each K-FAC linear of BERT-mini and BERT-base at batch 8 x 128
// (1024 rows), times pf's kernel and the bare call(s) of the same work with
// the same threads, and prints one line per piece:
//   <piece> <layer> <dims> <pf best ms> <pf median> <bare best ms> <bare median> <bare/pf>
// bare/pf is the throughput pf reaches relative to the library on its own
// (issue 16's goal: >= 0.7). The pieces:
//   factor:       pfrt_kfac_factor (running average) vs cblas_ssyrk
//   inverses:     pfrt_kfac_damped_inverses of A and B vs spotrf + spotri of
//                 each with the library's threads, one after the other (what
//                 a caller of LAPACK writes)
//   precondition: pfrt_kfac_precondition vs the two cblas_sgemm of B^-1 G A^-1
// Not a test; nothing is asserted.
//
//===----------------------------------------------------------------------===//

#include "pf/Runtime/pfrt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>
#include <lapack.h>

namespace {

struct Layer {
  const char *name;
  long in, out;
};

// The encoder linears K-FAC covers (pf's factor A is in x in: the bias takes
// the optimizer), weights [out, in].
const Layer kLayers[] = {
    {"mini.attention", 256, 256}, {"mini.ffn1", 256, 1024}, {"mini.ffn2", 1024, 256},
    {"base.attention", 768, 768}, {"base.ffn1", 768, 3072}, {"base.ffn2", 3072, 768},
};
constexpr long kRows = 1024;

struct Timing {
  double best, median; // ms
};

Timing timeIt(double seconds, const std::function<void()> &run) {
  using Clock = std::chrono::steady_clock;
  run(); // warm-up: workspaces, OpenMP teams, page faults
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         (std::chrono::duration<double>(Clock::now() - start).count() < seconds &&
          times.size() < 200)) {
    const auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2]};
}

std::vector<float> randomMatrix(long rows, long cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> m(size_t(rows * cols));
  for (float &v : m)
    v = dist(gen);
  return m;
}

pfrt_tensor desc(std::vector<float> &data, long rows, long cols) {
  pfrt_tensor t{};
  t.data = data.data();
  t.dtype = PFRT_F32;
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

/// An SPD factor of order n, as K-FAC's: X^T X / rows of random data.
std::vector<float> spdFactor(long n, unsigned seed) {
  std::vector<float> x = randomMatrix(kRows, n, seed), f(size_t(n * n));
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, int(n), int(kRows), 1.0f / kRows, x.data(),
              int(n), 0.0f, f.data(), int(n));
  for (long i = 0; i < n; ++i)
    for (long j = i + 1; j < n; ++j)
      f[size_t(i * n + j)] = f[size_t(j * n + i)];
  return f;
}

void bareInverse(std::vector<float> &work, const std::vector<float> &f, long n, float damping) {
  std::memcpy(work.data(), f.data(), sizeof(float) * size_t(n * n));
  for (long i = 0; i < n; ++i)
    work[size_t(i * n + i)] += damping;
  const char uplo = 'U';
  const lapack_int dim = lapack_int(n);
  lapack_int info = 0;
  LAPACK_spotrf(&uplo, &dim, work.data(), &dim, &info);
  LAPACK_spotri(&uplo, &dim, work.data(), &dim, &info);
}

void print(const char *piece, const Layer &layer, const std::string &dims, Timing pf, Timing bare) {
  std::printf("%-13s %-15s %-22s %9.3f %9.3f %9.3f %9.3f %6.2f\n", piece, layer.name, dims.c_str(),
              pf.best, pf.median, bare.best, bare.median, bare.best / pf.best);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  const std::string only = argc > 3 ? argv[3] : "";
  pfrt_context_options options;
  pfrt_context_options_init(&options);
  options.num_threads = threads;
  pfrt_context *ctx = pfrt_context_create(&options);
  if (!ctx) {
    std::fprintf(stderr, "kfac_pieces: %s\n", pfrt_last_error(nullptr));
    return 1;
  }
  std::printf("# piece         layer           dims                   pf best  pf median  "
              "bare best bare median bare/pf (best)\n");
  const float damping = 1e-3f;
  for (const Layer &layer : kLayers) {
    if (!only.empty() && only != layer.name)
      continue;
    const long in = layer.in, out = layer.out;
    // Factors: A from the layer's inputs, B from its output gradients.
    for (auto [which, n] : {std::pair{"A", in}, std::pair{"B", out}}) {
      std::vector<float> x = randomMatrix(kRows, n, 1), f(size_t(n * n), 0.0f);
      pfrt_tensor tx = desc(x, kRows, n), tf = desc(f, n, n);
      Timing pf = timeIt(seconds, [&] {
        pfrt_kfac_factor(ctx, &tx, 0, 1.0, PFRT_KFAC_RUNNING_AVERAGE, 0.5, &tf);
      });
      Timing bare = timeIt(seconds, [&] {
        openblas_set_num_threads(threads); // pf's kernels set their own count
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, int(n), int(kRows), 0.5f / kRows,
                    x.data(), int(n), 0.5f, f.data(), int(n));
      });
      print(which[0] == 'A' ? "factor A" : "factor B", layer,
            std::to_string(kRows) + "x" + std::to_string(n), pf, bare);
    }
    std::vector<float> a = spdFactor(in, 2), b = spdFactor(out, 3);
    std::vector<float> ai(size_t(in * in)), bi(size_t(out * out));
    pfrt_tensor ta = desc(a, in, in), tb = desc(b, out, out), tai = desc(ai, in, in),
                tbi = desc(bi, out, out);
    int32_t outcome = 0;
    Timing pfInv = timeIt(seconds, [&] {
      pfrt_kfac_damped_inverses(ctx, &ta, &tb, double(damping), 3, &tai, &tbi, &outcome);
    });
    std::vector<float> wa(size_t(in * in)), wb(size_t(out * out));
    Timing bareInv = timeIt(seconds, [&] {
      openblas_set_num_threads(threads);
      bareInverse(wa, a, in, damping);
      bareInverse(wb, b, out, damping);
    });
    print("inverses", layer, std::to_string(in) + "+" + std::to_string(out), pfInv, bareInv);
    if (outcome != PFRT_KFAC_INVERTED)
      std::printf("# inverses of %s: outcome %d\n", layer.name, outcome);
    std::vector<float> g = randomMatrix(out, in, 4), o(size_t(out * in)), t(size_t(out * in));
    pfrt_tensor tg = desc(g, out, in), to = desc(o, out, in);
    Timing pfPre = timeIt(
        seconds, [&] { pfrt_kfac_precondition(ctx, &tai, &tbi, &tg, nullptr, 1, &to, nullptr); });
    Timing barePre = timeIt(seconds, [&] {
      openblas_set_num_threads(threads);
      // t = B^-1 G, o = t A^-1.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(out), int(in), int(out), 1.0f,
                  wb.data(), int(out), g.data(), int(in), 0.0f, t.data(), int(in));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(out), int(in), int(in), 1.0f,
                  t.data(), int(in), wa.data(), int(in), 0.0f, o.data(), int(in));
    });
    print("precondition", layer, std::to_string(out) + "x" + std::to_string(in), pfPre, barePre);
  }
  pfrt_context_destroy(ctx);
  return 0;
}
