//===- GemmRoutingTest.cpp - oneDNN and OpenBLAS GEMMs agree ---------------===//
//
// The runtime sends f32 GEMMs to oneDNN and f64 ones to OpenBLAS, and fell
// back to OpenBLAS for f32 before (lib/Runtime/cpu/Blas.h). Both are called here
// directly on the same operands (transposes, padded leading dimensions,
// alpha/beta) and compared with each other and with a double-precision
// reference, so that the routing cannot change a result beyond f32 rounding.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/cpu/Blas.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

using pfrt::cpu::Gemm;

namespace {

struct Case {
  bool transA, transB;
  int64_t m, n, k;
  int64_t pad; // extra elements per row of A, B and C (0: contiguous)
  double alpha, beta;
};

/// How gtest names a failing case.
void PrintTo(const Case &c, std::ostream *os) {
  *os << (c.transA ? 'T' : 'N') << (c.transB ? 'T' : 'N') << ' ' << c.m << 'x'
      << c.n << 'x' << c.k << " pad " << c.pad << " alpha " << c.alpha
      << " beta " << c.beta;
}

/// Rows x cols of op(X) stored row-major with leading dimension ld.
std::vector<float> randomMatrix(int64_t rows, int64_t ld, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(rows * ld);
  for (float &v : x)
    v = dist(rng);
  return x;
}

Gemm gemmOf(const Case &c) {
  Gemm g;
  g.transA = c.transA;
  g.transB = c.transB;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.lda = (c.transA ? c.m : c.k) + c.pad;
  g.ldb = (c.transB ? c.k : c.n) + c.pad;
  g.ldc = c.n + c.pad;
  return g;
}

/// The operands of one case: A and B as stored, C's initial contents.
struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(const Gemm &g) {
    a = randomMatrix(g.transA ? g.k : g.m, g.lda, 1);
    b = randomMatrix(g.transB ? g.n : g.k, g.ldb, 2);
    c = randomMatrix(g.m, g.ldc, 3);
    if (g.beta == 0) // BLAS: C is not read when beta == 0
      for (float &v : c)
        v = std::numeric_limits<float>::quiet_NaN();
  }
};

/// alpha op(A) op(B) + beta C in double; padding left as it was.
std::vector<double> reference(const Gemm &g, const Operands &x) {
  std::vector<double> out(x.c.begin(), x.c.end());
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double a = g.transA ? x.a[l * g.lda + i] : x.a[i * g.lda + l];
        const double b = g.transB ? x.b[j * g.ldb + l] : x.b[l * g.ldb + j];
        s += a * b;
      }
      const double c = g.beta == 0 ? 0.0 : g.beta * x.c[i * g.ldc + j];
      out[i * g.ldc + j] = g.alpha * s + c;
    }
  return out;
}

/// Compares the M x N block (and that the padding is untouched).
void expectMatches(const Gemm &g, const std::vector<float> &got,
                   const std::vector<double> &want, const char *what) {
  // f32 rounding of K products of values in [-1, 1].
  const double tol = 1e-6 * double(g.k) * (std::fabs(g.alpha) + 1) + 1e-5;
  int64_t bad = 0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.ldc; ++j) {
      const int64_t at = i * g.ldc + j;
      const bool inBlock = j < g.n;
      const bool ok = inBlock ? std::fabs(got[at] - want[at]) <= tol
                              : std::isnan(got[at]) == std::isnan(want[at]) &&
                                    (std::isnan(want[at]) || got[at] == want[at]);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << what << ": C[" << i << "," << j << "] = " << got[at]
                      << ", expected " << want[at] << (inBlock ? "" : " (padding)");
    }
  EXPECT_EQ(bad, 0) << what;
}

class GemmRouting : public ::testing::TestWithParam<Case> {};

TEST_P(GemmRouting, OneDnnMatchesOpenBlasAndReference) {
#ifndef PFRT_HAVE_DNNL
  GTEST_SKIP() << "built with PF_RUNTIME_DNNL=OFF: every GEMM is OpenBLAS'";
#else
  const Gemm g = gemmOf(GetParam());
  Operands x(g);
  const std::vector<double> want = reference(g, x);
  std::vector<float> viaDnnl = x.c, viaOpenBlas = x.c;
  ASSERT_TRUE(pfrt::cpu::dnnlGemm(g, x.a.data(), x.b.data(), viaDnnl.data()));
  pfrt::cpu::openblasGemm(g, x.a.data(), x.b.data(), viaOpenBlas.data());
  expectMatches(g, viaDnnl, want, "oneDNN");
  expectMatches(g, viaOpenBlas, want, "OpenBLAS");
  // And the two libraries within f32 rounding of each other.
  std::vector<double> openBlasAsDouble(viaOpenBlas.begin(), viaOpenBlas.end());
  expectMatches(g, viaDnnl, openBlasAsDouble, "oneDNN vs OpenBLAS");
#endif
}

TEST_P(GemmRouting, RoutedGemmWithThreadsMatchesReference) {
  // What the kernels call: the routing, the thread count, and inside a
  // team of OpenMP threads (one GEMM per thread, as batched matmuls run).
  const Gemm g = gemmOf(GetParam());
  Operands x(g);
  const std::vector<double> want = reference(g, x);
  for (int threads : {1, 2, 3}) {
    std::vector<float> c = x.c;
    pfrt::cpu::gemmWith(threads, g, x.a.data(), x.b.data(), c.data());
    expectMatches(g, c, want, "gemmWith");
  }
  std::vector<std::vector<float>> perThread(4, x.c);
  pfrt::cpu::setBlasThreads(1);
#pragma omp parallel for num_threads(2)
  for (int t = 0; t < 4; ++t)
    pfrt::cpu::gemmWith(0, g, x.a.data(), x.b.data(), perThread[t].data());
  for (const std::vector<float> &c : perThread)
    expectMatches(g, c, want, "gemmWith inside a team");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmRouting,
    ::testing::Values(
        // Few rows (GEMV-like) and a lone column.
        Case{false, false, 1, 33, 17, 0, 1, 0},
        Case{false, true, 15, 33, 17, 0, 1, 0},
        Case{true, false, 16, 1, 17, 0, 1, 1},
        // BERT-like: activations x weights, and the backward's NT / TN.
        Case{false, false, 128, 96, 64, 0, 1, 0},
        Case{false, true, 128, 128, 64, 0, 0.125, 0},
        Case{true, false, 64, 80, 128, 0, 1, 1},
        Case{true, true, 37, 29, 41, 0, -0.5, 2},
        // Padded leading dimensions (column blocks of larger matrices).
        Case{false, false, 40, 24, 56, 7, 1, 0},
        Case{false, true, 33, 65, 19, 3, 2, 0.5},
        Case{true, false, 48, 17, 23, 5, 1, 1},
        // Odd sizes that leave remainders in every kernel tile.
        Case{false, false, 257, 129, 300, 1, 1, 0}));

/// The thread count given to gemmWith is the one the GEMM uses, and the
/// caller's OpenMP setting is back afterwards.
TEST(GemmThreads, OmpThreadCountRestored) {
  const int before = omp_get_max_threads();
  const Gemm g = gemmOf(Case{false, false, 64, 64, 64, 0, 1, 0});
  Operands x(g);
  pfrt::cpu::gemmWith(before + 1, g, x.a.data(), x.b.data(), x.c.data());
  EXPECT_EQ(omp_get_max_threads(), before);
  int seen = 0;
  {
    pfrt::cpu::OmpThreadsScope scope(before + 2);
    seen = omp_get_max_threads();
  }
  EXPECT_EQ(seen, before + 2);
  EXPECT_EQ(omp_get_max_threads(), before);
}

} // namespace
