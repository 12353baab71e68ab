//===- Kfac.cpp - Kronecker factors, damped inverses, preconditioning ------===//
//
// factor:       F = scale X^T X / n by SYRK into the lower triangle, the
//               bias column's row and corner from column sums, then the
//               upper triangle mirrored from the lower.
// inverse:      (F + d I)^-1 by Cholesky (potrf) and potri on a workspace
//               copy, so a failure leaves the caller's previous inverse.
// precondition: B^-1 G A^-1 (or its transpose for [in, out] weights) as two
//               GEMMs, with a bias column handled as [G | g_b] jointly.
// eigen:        F = Q diag(l) Q^T by syevd on a workspace copy; the eigen
//               preconditioning divides Qb^T G Qa by lb la^T + damping.
//
// LAPACK (column-major) is called with uplo 'U' on row-major buffers: for
// a symmetric matrix that is exactly its row-major lower triangle, so no
// transposing copy is needed.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Blas.h"
#include "Kernels.h"
#include "Parallel.h"
#include "Training.h"

#include <cblas.h>
#include <lapack.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

constexpr int64_t kTile = 64;

void syrk(int threads, int64_t d, int64_t n, double alpha, const float *x,
          double beta, float *f, int64_t ldf) {
  BlasThreadsScope team(threads);
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, int(d), int(n),
              float(alpha), x, int(d), float(beta), f, int(ldf));
}
void syrk(int threads, int64_t d, int64_t n, double alpha, const double *x,
          double beta, double *f, int64_t ldf) {
  BlasThreadsScope team(threads);
  cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, int(d), int(n), alpha, x,
              int(d), beta, f, int(ldf));
}

/// Calls a LAPACK routine of the form (uplo, n, a, lda, info) on the upper
/// triangle of the n x n matrix a. `routine` wraps lapack.h's prototype macro
/// (which adds the hidden string-length argument where the Fortran ABI has
/// one), so it cannot be passed as a function pointer.
template <typename T, typename Routine>
lapack_int onUpper(int64_t n, T *a, Routine routine) {
  const char uplo = 'U';
  const lapack_int dim = lapack_int(n);
  lapack_int info = 0;
  routine(&uplo, &dim, a, &dim, &info);
  return info;
}
lapack_int potrf(int64_t n, float *a) {
  return onUpper(n, a, [](auto... args) { LAPACK_spotrf(args...); });
}
lapack_int potrf(int64_t n, double *a) {
  return onUpper(n, a, [](auto... args) { LAPACK_dpotrf(args...); });
}
lapack_int potri(int64_t n, float *a) {
  return onUpper(n, a, [](auto... args) { LAPACK_spotri(args...); });
}
lapack_int potri(int64_t n, double *a) {
  return onUpper(n, a, [](auto... args) { LAPACK_dpotri(args...); });
}

/// syevd (eigenvalues and eigenvectors) of the symmetric n x n matrix a,
/// in place: afterwards a holds the eigenvectors column-major (row-major:
/// eigenvector k in row k) and w the eigenvalues, ascending.
template <typename T, typename Routine>
lapack_int syevd(int64_t n, T *a, T *w, Routine routine) {
  const char jobz = 'V', uplo = 'U';
  const lapack_int dim = lapack_int(n);
  lapack_int info = 0, lwork = -1, liwork = -1, iwork0 = 0;
  T work0 = 0;
  routine(&jobz, &uplo, &dim, a, &dim, w, &work0, &lwork, &iwork0, &liwork, &info);
  if (info != 0)
    return info;
  lwork = lapack_int(work0);
  liwork = iwork0;
  std::vector<T> work(size_t(lwork > 1 ? lwork : 1));
  std::vector<lapack_int> iwork(size_t(liwork > 1 ? liwork : 1));
  routine(&jobz, &uplo, &dim, a, &dim, w, work.data(), &lwork, iwork.data(), &liwork, &info);
  return info;
}
lapack_int syevd(int64_t n, float *a, float *w) {
  return syevd(n, a, w, [](auto... args) { LAPACK_ssyevd(args...); });
}
lapack_int syevd(int64_t n, double *a, double *w) {
  return syevd(n, a, w, [](auto... args) { LAPACK_dsyevd(args...); });
}

/// Copies the lower triangle of rows [ib, ib + kTile) of a row-major [n, n]
/// matrix onto the upper, a column tile at a time: the strided reads stay in
/// one band of kTile rows instead of sweeping the whole matrix per row.
template <class T>
void mirrorLowerTile(T *f, int64_t n, int64_t ib) {
  const int64_t iEnd = std::min(ib + kTile, n);
  for (int64_t jb = ib; jb < n; jb += kTile) {
    const int64_t jEnd = std::min(jb + kTile, n);
    for (int64_t i = ib; i < iEnd; ++i)
      for (int64_t j = std::max(jb, i + 1); j < jEnd; ++j)
        f[i * n + j] = f[j * n + i];
  }
}

/// Copies the lower triangle of a row-major [n, n] matrix onto the upper;
/// `ctx` null: on the calling thread (inside a team).
template <class T>
void mirrorLower(const pfrt_context *ctx, T *f, int64_t n) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (!ctx) {
    for (int64_t t = 0; t < tiles; ++t)
      mirrorLowerTile(f, n, t * kTile);
    return;
  }
  parallelFor(ctx, tiles, n * kTile / 2 + 1, [&](int64_t t) { mirrorLowerTile(f, n, t * kTile); });
}

/// `ctx` null: on the calling thread (inside a team).
template <class T> bool allFinite(const pfrt_context *ctx, const T *p,
                                  int64_t n) {
  // A sum of x * 0 is NaN exactly when some x is NaN or Inf; the
  // fixed-partition sum vectorizes and keeps the scan thread-count-free.
  auto partial = [&](int64_t begin, int64_t end) {
    return laneSum(begin, end, [&](int64_t i) { return double(p[i]) * 0.0; });
  };
  const double bad = ctx ? deterministicSum(ctx, n, partial) : partial(0, n);
  return bad == 0.0;
}

template <class T>
void kfacFactor(const pfrt_context *ctx, const T *x, int64_t n, int64_t d,
                bool bias, double alpha, double beta, T *f) {
  const int64_t dp = d + (bias ? 1 : 0);
  if (n == 0 || d == 0) {
    // No rows: the new factor is 0, F's lower triangle becomes beta F.
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j <= i; ++j)
        f[i * dp + j] = beta == 0 ? T(0) : T(beta * double(f[i * dp + j]));
  } else {
    syrk(ctx->numThreads, d, n, alpha, x, beta, f, dp);
  }
  if (bias) {
    // The ones column: F[d, j] gets alpha * sum_r x[r, j], F[d, d] alpha n.
    T *last = f + d * dp;
    const int64_t tiles = (d + kTile - 1) / kTile;
    parallelFor(ctx, tiles, n * kTile, [&](int64_t t) {
      const int64_t c0 = t * kTile;
      const int64_t width = d - c0 < kTile ? d - c0 : kTile;
      double acc[kTile] = {};
      for (int64_t r = 0; r < n; ++r) {
        const T *row = x + r * d + c0;
        for (int64_t j = 0; j < width; ++j)
          acc[j] += double(row[j]);
      }
      for (int64_t j = 0; j < width; ++j) {
        const double old = beta == 0 ? 0.0 : beta * double(last[c0 + j]);
        last[c0 + j] = T(old + alpha * acc[j]);
      }
    });
    const double old = beta == 0 ? 0.0 : beta * double(last[d]);
    last[d] = T(old + alpha * double(n));
  }
  mirrorLower(ctx, f, dp);
}

template <class T> double traceOf(const T *f, int64_t n) {
  double t = 0;
  for (int64_t i = 0; i < n; ++i)
    t += double(f[i * n + i]);
  return t;
}

/// J = [G | g_b] ([out, in+1], G [out, in]) or [G ; g_b^T] ([in+1, out],
/// G [in, out]): a gradient with the bias as the extra input.
template <class T>
void joinBias(bool transposed, int64_t out, int64_t in, const T *gw, const T *gb, T *j) {
  const int64_t ia = in + 1;
  if (!transposed) {
    std::memcpy(j, gw, sizeof(T) * in * out);
    std::memcpy(j + in * out, gb, sizeof(T) * out);
    return;
  }
  for (int64_t r = 0; r < out; ++r) {
    std::memcpy(j + r * ia, gw + r * in, sizeof(T) * in);
    j[r * ia + in] = gb[r];
  }
}

/// The inverse of joinBias: j into the weight part ow and the bias ob.
template <class T>
void splitBias(bool transposed, int64_t out, int64_t in, const T *j, T *ow, T *ob) {
  const int64_t ia = in + 1;
  if (!transposed) {
    std::memcpy(ow, j, sizeof(T) * in * out);
    std::memcpy(ob, j + in * out, sizeof(T) * out);
    return;
  }
  for (int64_t r = 0; r < out; ++r) {
    std::memcpy(ow + r * in, j + r * ia, sizeof(T) * in);
    ob[r] = j[r * ia + in];
  }
}

/// L . J . R for the precondition kernel: t = L J, out = t R.
template <class T>
void sandwich(const pfrt_context *ctx, const T *l, const T *j, const T *r,
              int64_t rows, int64_t cols, T *t, T *out) {
  Gemm g;
  g.m = rows;
  g.n = cols;
  g.k = rows;
  gemm(ctx, g, l, j, t);
  g.k = cols;
  gemm(ctx, g, t, r, out);
}


/// The eigenbasis counterpart of `sandwich`: out = L ((L^T J R) / (lL lR^T
/// + damping)) R^T for J rows x cols, L rows x rows with eigenvalues lL,
/// R cols x cols with eigenvalues lR. `t` and `v` are rows x cols each.
template <class T>
void eigenSandwich(const pfrt_context *ctx, const T *l, const T *lL, const T *j,
                   const T *r, const T *lR, int64_t rows, int64_t cols, double damping,
                   T *t, T *v, T *out) {
  Gemm g;
  g.m = rows;
  g.n = cols;
  g.k = rows;
  g.transA = true;
  gemm(ctx, g, l, j, t); // t = L^T J
  g.transA = false;
  g.k = cols;
  gemm(ctx, g, t, r, v); // v = t R
  parallelFor(ctx, rows, cols, [&](int64_t i) {
    const double left = double(lL[i]);
    for (int64_t c = 0; c < cols; ++c)
      v[i * cols + c] = T(double(v[i * cols + c]) / (left * double(lR[c]) + damping));
  });
  g.k = rows;
  gemm(ctx, g, l, v, t); // t = L v
  g.k = cols;
  g.transB = true;
  gemm(ctx, g, t, r, out); // out = t R^T
}

/// Order from which a factor's Cholesky inverse uses the context's threads.
/// Below it OpenBLAS' threaded potrf/potri fork and join a team for every
/// panel, which gains little (2 cores: order 1024 in 13.4 ms on 2 threads,
/// 14.6 ms on one; 2048: 44 ms against 81 ms) and loses much when idle OpenMP
/// workers sleep at once (pf's passive wait policy: the BERT-mini K-FAC step
/// spent 1.1 s of its 1.2 s there). Smaller factors run on one thread each,
/// a layer's two side by side, and their bits do not depend on the threads.
constexpr int64_t kThreadedInverseOrder = 1536;

/// One damped inverse, (F + d I)^-1 into `inverse`, computed on a workspace
/// so a failure leaves `inverse` as it was. `threads` BLAS threads, or 0:
/// inside a team (OpenBLAS set to one thread before it; every scan on the
/// calling thread; no message recorded on the context, which the other
/// member of the team shares). Returns the status and, on failure, why.
struct InverseResult {
  pfrt_status status = PFRT_OK;
  std::string message;
};

template <class T>
InverseResult dampedInverse(const pfrt_context *ctx, const T *f, int64_t n, double damping,
                            T *inverse, int threads) {
  const pfrt_context *scans = threads > 0 ? ctx : nullptr;
  auto failed = [](pfrt_status status, std::string message) {
    return InverseResult{status, std::move(message)};
  };
  if (!allFinite(scans, f, n * n))
    return failed(PFRT_NUMERIC, "the factor contains NaN or Inf; the inverse was left unchanged");
  std::unique_ptr<T, decltype(&std::free)> work(
      static_cast<T *>(std::malloc(sizeof(T) * size_t(n) * size_t(n))), &std::free);
  if (!work)
    return failed(PFRT_OUT_OF_MEMORY,
                  "cannot allocate a workspace of " + std::to_string(sizeof(T) * n * n) + " bytes");
  T *w = work.get();
  std::memcpy(w, f, sizeof(T) * n * n);
  for (int64_t i = 0; i < n; ++i)
    w[i * n + i] = T(double(w[i * n + i]) + damping);
  lapack_int choleskyInfo = 0, inverseInfo = 0;
  {
    std::optional<BlasThreadsScope> team;
    if (threads > 0)
      team.emplace(threads);
    choleskyInfo = potrf(n, w);
    if (choleskyInfo == 0)
      inverseInfo = potri(n, w);
  }
  char text[256];
  if (choleskyInfo > 0 || inverseInfo > 0) {
    std::snprintf(text, sizeof(text),
                  choleskyInfo > 0 ? "factor + %g I is not positive definite (Cholesky failed "
                                     "at leading minor %d of %lld); the inverse was left "
                                     "unchanged"
                                   : "factor + %g I is singular (potri found a zero pivot at "
                                     "%d of %lld); the inverse was left unchanged",
                  damping, int(choleskyInfo > 0 ? choleskyInfo : inverseInfo),
                  static_cast<long long>(n));
    return failed(PFRT_NUMERIC, text);
  }
  if (choleskyInfo < 0 || inverseInfo < 0)
    return failed(PFRT_INTERNAL, "LAPACK returned " +
                                     std::to_string(choleskyInfo < 0 ? choleskyInfo : inverseInfo));
  mirrorLower(scans, w, n);
  if (!allFinite(scans, w, n * n)) {
    std::snprintf(text, sizeof(text),
                  "the inverse of factor + %g I overflowed (ill-conditioned); the inverse was "
                  "left unchanged",
                  damping);
    return failed(PFRT_NUMERIC, text);
  }
  std::memcpy(inverse, w, sizeof(T) * n * n);
  return {};
}

/// The eigendecomposition of one factor into `vectors` (eigenvector k in
/// column k) and `values` (ascending, clamped at 0), on a workspace so a
/// failure leaves both as they were. `threads` as for dampedInverse.
template <class T>
InverseResult eigenInto(const pfrt_context *ctx, const T *f, int64_t n, T *vectors, T *values,
                        int threads) {
  const pfrt_context *scans = threads > 0 ? ctx : nullptr;
  if (!allFinite(scans, f, n * n))
    return {PFRT_NUMERIC, "the factor contains NaN or Inf; its eigendecomposition was left "
                          "unchanged"};
  std::unique_ptr<T, decltype(&std::free)> work(
      static_cast<T *>(std::malloc(sizeof(T) * size_t(n) * size_t(n + 1))), &std::free);
  if (!work)
    return {PFRT_OUT_OF_MEMORY,
            "cannot allocate a workspace of " + std::to_string(sizeof(T) * n * (n + 1)) + " bytes"};
  T *q = work.get(), *w = q + n * n;
  std::memcpy(q, f, sizeof(T) * n * n);
  lapack_int info = 0;
  {
    std::optional<BlasThreadsScope> team;
    if (threads > 0)
      team.emplace(threads);
    info = syevd(n, q, w);
  }
  if (info > 0) {
    char text[192];
    std::snprintf(text, sizeof(text),
                  "the eigensolver did not converge (syevd info %d of %lld); the "
                  "eigendecomposition was left unchanged",
                  int(info), static_cast<long long>(n));
    return {PFRT_NUMERIC, text};
  }
  if (info < 0)
    return {PFRT_INTERNAL, "LAPACK returned " + std::to_string(info)};
  if (!allFinite(scans, q, n * n + n))
    return {PFRT_NUMERIC, "the eigendecomposition is not finite; it was left unchanged"};
  // q holds eigenvector k in its row k (LAPACK's column-major columns): the
  // result wants it in column k.
  auto transposeRow = [&](int64_t i) {
    for (int64_t k = 0; k < n; ++k)
      vectors[i * n + k] = q[k * n + i];
  };
  if (scans)
    parallelFor(scans, n, n, transposeRow);
  else
    for (int64_t i = 0; i < n; ++i)
      transposeRow(i);
  for (int64_t k = 0; k < n; ++k)
    values[k] = w[k] > T(0) ? w[k] : T(0);
  return {};
}

/// The BLAS threads of one factor's inverse on the context's threads.
int inverseThreads(const pfrt_context *ctx, int64_t n) {
  return n < kThreadedInverseOrder ? 1 : ctx->numThreads;
}

} // namespace

extern "C" {

pfrt_status pfrt_kfac_factor_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                 int32_t bias_column, double scale, int32_t mode,
                                 double decay, const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_factor");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  const int64_t d = x->shape[x->rank - 1];
  const int64_t n = product(Shape::of(*x), 0, x->rank - 1);
  const bool bias = bias_column != 0;
  Shape fShape;
  fShape.push(d + (bias ? 1 : 0));
  fShape.push(d + (bias ? 1 : 0));
  PFRT_TRY(floatLike(call, "factor", factor, x->dtype, fShape));
  if (mode < PFRT_KFAC_OVERWRITE || mode > PFRT_KFAC_RUNNING_AVERAGE)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown mode %d", mode);
  if (!std::isfinite(scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "scale %g is not finite", scale);
  if (mode == PFRT_KFAC_RUNNING_AVERAGE && !(decay >= 0 && decay <= 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "decay %g is outside [0, 1]",
                     decay);
  if (exceedsBlasInt(d + 1, n, 1))
    return call.fail(PFRT_UNSUPPORTED, "x of %lld rows x %lld exceeds the "
                     "BLAS int range", static_cast<long long>(n),
                     static_cast<long long>(d));
  const FactorUpdateCoefficients update = factorUpdateCoefficients(n, scale, mode, decay);
  const double alpha = update.alpha, beta = update.beta;
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kfacFactor(ctx, static_cast<const T *>(x->data), n, d, bias, alpha, beta,
               static_cast<T *>(factor->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_kfac_pi_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                             const pfrt_tensor *b, double *pi) {
  Call call(ctx, "pfrt_kfac_pi");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("pi", pi));
  PFRT_TRY(checkSquare(call, "a", a, 0));
  PFRT_TRY(checkSquare(call, "b", b, 0));
  const int64_t da = a->shape[0], db = b->shape[0];
  auto trace = [](const pfrt_tensor *t) {
    return visitFloat(t->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return traceOf(static_cast<const T *>(t->data), t->shape[0]);
    });
  };
  const double ta = trace(a), tb = trace(b);
  if (!std::isfinite(ta) || !std::isfinite(tb))
    return call.fail(PFRT_NUMERIC, "a factor trace is not finite (tr a = %g, "
                     "tr b = %g)", ta, tb);
  if (!(ta > 0) || !(tb > 0) || da == 0 || db == 0) {
    *pi = 1.0;
    return PFRT_OK;
  }
  *pi = std::sqrt((ta / double(da)) / (tb / double(db)));
  return PFRT_OK;
}

pfrt_status pfrt_kfac_inverse_cpu(pfrt_context *ctx, const pfrt_tensor *factor,
                                  double damping, const pfrt_tensor *inverse) {
  Call call(ctx, "pfrt_kfac_inverse");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkSquare(call, "factor", factor, 0));
  PFRT_TRY(floatLike(call, "inverse", inverse, factor->dtype,
                     Shape::of(*factor)));
  if (!(damping >= 0) || !std::isfinite(damping))
    return call.fail(PFRT_INVALID_ARGUMENT, "damping %g must be finite and "
                     ">= 0", damping);
  const int64_t n = factor->shape[0];
  if (n == 0)
    return PFRT_OK;
  return visitFloat(factor->dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    InverseResult result = dampedInverse(ctx, static_cast<const T *>(factor->data), n, damping,
                                         static_cast<T *>(inverse->data), inverseThreads(ctx, n));
    if (result.status != PFRT_OK)
      return call.fail(result.status, "%s", result.message.c_str());
    return PFRT_OK;
  });
}

pfrt_status pfrt_all_finite_cpu(pfrt_context *ctx, const pfrt_tensor *t,
                                int32_t *result) {
  Call call(ctx, "pfrt_all_finite");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("t", t));
  PFRT_TRY(call.pointer("result", result));
  const int64_t n = Shape::of(*t).numel();
  switch (t->dtype) {
  case PFRT_F32:
    *result = allFinite(ctx, static_cast<const float *>(t->data), n);
    break;
  case PFRT_F64:
    *result = allFinite(ctx, static_cast<const double *>(t->data), n);
    break;
  case PFRT_F16: {
    const uint16_t *p = static_cast<const uint16_t *>(t->data);
    int32_t ok = 1;
    for (int64_t i = 0; i < n; ++i)
      ok &= (p[i] & 0x7C00) != 0x7C00; // exponent all ones: Inf or NaN
    *result = ok;
    break;
  }
  default:
    *result = 1;
  }
  return PFRT_OK;
}

pfrt_status pfrt_kfac_precondition_cpu(pfrt_context *ctx, const pfrt_tensor *a_inv,
                                       const pfrt_tensor *b_inv,
                                       const pfrt_tensor *grad_w,
                                       const pfrt_tensor *grad_b,
                                       int32_t w_transposed,
                                       const pfrt_tensor *out_w,
                                       const pfrt_tensor *out_b) {
  Call call(ctx, "pfrt_kfac_precondition");
  PFRT_TRY(call.begin());
  PreconditionDims dims;
  PFRT_TRY(checkPrecondition(call, a_inv, b_inv, grad_w, grad_b, w_transposed,
                             out_w, out_b, dims));
  const bool transposed = dims.transposed, joint = dims.joint;
  const int64_t out = dims.out, in = dims.in, ia = dims.ia;
  const int32_t dtype = dims.dtype;
  // The gradient as J = rows x cols with L (rows x rows) on the left and R
  // (cols x cols) on the right: [out, in'] between b_inv and a_inv, or
  // [in', out] between a_inv and b_inv.
  const int64_t rows = transposed ? out : ia, cols = transposed ? ia : out;
  const int64_t size = rows * cols;
  return visitFloat(dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a_inv->data);
    const T *pb = static_cast<const T *>(b_inv->data);
    const T *gw = static_cast<const T *>(grad_w->data);
    const T *gb = grad_b ? static_cast<const T *>(grad_b->data) : nullptr;
    T *ow = static_cast<T *>(out_w->data);
    T *ob = out_b ? static_cast<T *>(out_b->data) : nullptr;
    const T *left = transposed ? pb : pa, *right = transposed ? pa : pb;
    Scratch<T> work;
    if (!joint) {
      // t = L G, out_w = t R (out_w may be grad_w: G is consumed first);
      // the bias (if any) separately: out_b = b_inv g_b.
      PFRT_TRY(work.allocate(call, size + out));
      sandwich(ctx, left, gw, right, rows, cols, work.data(), ow);
      if (gb) {
        Gemm g;
        g.m = out;
        g.n = 1;
        g.k = out;
        gemm(ctx, g, pb, gb, work.data() + size);
        std::memcpy(ob, work.data() + size, sizeof(T) * out);
      }
      return PFRT_OK;
    }
    // Joint: J = [G | g_b] ([out, in+1]) or [G ; g_b^T] ([in+1, out]).
    PFRT_TRY(work.allocate(call, 3 * size));
    T *j = work.data(), *t = j + size, *res = t + size;
    joinBias(transposed, out, in, gw, gb, j);
    sandwich(ctx, left, j, right, rows, cols, t, res);
    splitBias(transposed, out, in, res, ow, ob);
    return PFRT_OK;
  });
}

pfrt_status pfrt_kfac_eigen_cpu(pfrt_context *ctx, const pfrt_tensor *factor,
                                const pfrt_tensor *vectors, const pfrt_tensor *values) {
  Call call(ctx, "pfrt_kfac_eigen");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkEigen(call, factor, vectors, values));
  const int64_t n = factor->shape[0];
  if (n == 0)
    return PFRT_OK;
  return visitFloat(factor->dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    InverseResult result =
        eigenInto(ctx, static_cast<const T *>(factor->data), n, static_cast<T *>(vectors->data),
                  static_cast<T *>(values->data), inverseThreads(ctx, n));
    if (result.status != PFRT_OK)
      return call.fail(result.status, "%s", result.message.c_str());
    return PFRT_OK;
  });
}

pfrt_status pfrt_kfac_precondition_eigen_cpu(
    pfrt_context *ctx, const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
    const pfrt_tensor *b_vectors, const pfrt_tensor *b_values, double damping,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_b, int32_t w_transposed,
    const pfrt_tensor *out_w, const pfrt_tensor *out_b) {
  Call call(ctx, "pfrt_kfac_precondition_eigen");
  PFRT_TRY(call.begin());
  PreconditionDims dims;
  PFRT_TRY(checkPreconditionEigen(call, a_vectors, a_values, b_vectors, b_values, damping, grad_w,
                                  grad_b, w_transposed, out_w, out_b, dims));
  const bool transposed = dims.transposed, joint = dims.joint;
  const int64_t out = dims.out, in = dims.in, ia = dims.ia;
  // As in pfrt_kfac_precondition: J = rows x cols between L and R.
  const int64_t rows = transposed ? out : ia, cols = transposed ? ia : out;
  const int64_t size = rows * cols;
  return visitFloat(dims.dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    const T *qa = static_cast<const T *>(a_vectors->data);
    const T *la = static_cast<const T *>(a_values->data);
    const T *qb = static_cast<const T *>(b_vectors->data);
    const T *lb = static_cast<const T *>(b_values->data);
    const T *gw = static_cast<const T *>(grad_w->data);
    const T *gb = grad_b ? static_cast<const T *>(grad_b->data) : nullptr;
    T *ow = static_cast<T *>(out_w->data);
    T *ob = out_b ? static_cast<T *>(out_b->data) : nullptr;
    const T *left = transposed ? qb : qa, *right = transposed ? qa : qb;
    const T *lLeft = transposed ? lb : la, *lRight = transposed ? la : lb;
    Scratch<T> work;
    PFRT_TRY(work.allocate(call, 4 * size + 2 * out + 1));
    T *j = work.data(), *t = j + size, *v = t + size, *res = v + size;
    if (!joint) {
      std::memcpy(j, gw, sizeof(T) * size);
      eigenSandwich(ctx, left, lLeft, j, right, lRight, rows, cols, damping, t, v, ow);
      if (gb) {
        // A separate bias: its A factor is the scalar 1.
        T *bt = res, *bv = res + out, *one = res + 2 * out;
        *one = T(1);
        std::memcpy(j, gb, sizeof(T) * out);
        eigenSandwich(ctx, qb, lb, j, one, one, out, 1, damping, bt, bv, ob);
      }
      return PFRT_OK;
    }
    joinBias(transposed, out, in, gw, gb, j);
    eigenSandwich(ctx, left, lLeft, j, right, lRight, rows, cols, damping, t, v, res);
    splitBias(transposed, out, in, res, ow, ob);
    return PFRT_OK;
  });
}

} // extern "C"

//===------------------------- damped inverses --------------------------===//

namespace {
/// One factor of a layer: inverted with `damping`, raised tenfold up to
/// `retries` times while the factor is numerically bad (NaN/Inf, not
/// positive definite, overflow); `outcome` says which. Any other failure
/// is returned with its message.
struct RetriedInverse {
  InverseResult result;
  int32_t outcome = PFRT_KFAC_KEPT_PREVIOUS;
};

RetriedInverse invertWithRetries(const pfrt_context *ctx, const pfrt_tensor *factor, double damping,
                                 int32_t retries, const pfrt_tensor *inverse, int threads) {
  RetriedInverse retried;
  const int64_t n = factor->shape[0];
  if (n == 0) {
    retried.outcome = PFRT_KFAC_INVERTED;
    return retried;
  }
  for (int32_t attempt = 0; attempt <= retries; ++attempt) {
    retried.result = visitFloat(factor->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return dampedInverse(ctx, static_cast<const T *>(factor->data), n, damping,
                           static_cast<T *>(inverse->data), threads);
    });
    if (retried.result.status == PFRT_OK) {
      retried.outcome = attempt == 0 ? PFRT_KFAC_INVERTED : PFRT_KFAC_MORE_DAMPING;
      return retried;
    }
    if (retried.result.status != PFRT_NUMERIC)
      return retried;
    damping = damping > 0 ? damping * 10 : 1e-6;
  }
  retried.outcome = PFRT_KFAC_KEPT_PREVIOUS; // the last attempt's message says why
  return retried;
}
} // namespace

pfrt_status pfrt_kfac_damped_inverses_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                                          const pfrt_tensor *b, double damping, int32_t retries,
                                          const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
                                          int32_t *outcome) {
  Call call(ctx, "pfrt_kfac_damped_inverses");
  PFRT_TRY(call.begin());
  if (!(damping >= 0) || !std::isfinite(damping) || retries < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "damping must be finite and >= 0 and retries >= 0");
  PFRT_TRY(checkSquare(call, "a", a, 0));
  PFRT_TRY(floatLike(call, "a_inv", a_inv, a->dtype, Shape::of(*a)));
  PFRT_TRY(checkSquare(call, "b", b, 0));
  PFRT_TRY(floatLike(call, "b_inv", b_inv, b->dtype, Shape::of(*b)));
  double pi = 1;
  if (pfrt_kfac_pi(ctx, a, b, &pi) != PFRT_OK) {
    // Non-finite traces: neither factor can be inverted; keep both inverses.
    if (outcome)
      *outcome = PFRT_KFAC_KEPT_PREVIOUS;
    return PFRT_OK;
  }
  const double root = std::sqrt(damping);
  const pfrt_tensor *factors[2] = {a, b}, *inverses[2] = {a_inv, b_inv};
  const double dampings[2] = {root * pi, root / pi};
  RetriedInverse done[2];
  const int64_t largest = std::max(a->shape[0], b->shape[0]);
  if (ctx->numThreads >= 2 && largest < kThreadedInverseOrder) {
    // Side by side, one thread each (see kThreadedInverseOrder); the
    // scope restores the caller's OpenMP default, which OpenBLAS also sets.
    BlasThreadsScope oneEach(1);
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int k = 0; k < 2; ++k)
      done[k] = invertWithRetries(ctx, factors[k], dampings[k], retries, inverses[k], 0);
  } else {
    for (int k = 0; k < 2; ++k)
      done[k] = invertWithRetries(ctx, factors[k], dampings[k], retries, inverses[k],
                                  inverseThreads(ctx, factors[k]->shape[0]));
  }
  for (const RetriedInverse &one : done) {
    if (one.result.status == PFRT_OK)
      continue;
    if (one.result.status != PFRT_NUMERIC)
      return call.fail(one.result.status, "%s", one.result.message.c_str());
    (void)call.fail(PFRT_NUMERIC, "%s", one.result.message.c_str()); // kept: the message only
  }
  if (outcome)
    *outcome = std::max(done[0].outcome, done[1].outcome);
  return PFRT_OK;
}

pfrt_status pfrt_kfac_eigen_refresh_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                                        const pfrt_tensor *b, const pfrt_tensor *a_vectors,
                                        const pfrt_tensor *a_values,
                                        const pfrt_tensor *b_vectors,
                                        const pfrt_tensor *b_values, int32_t *outcome) {
  Call call(ctx, "pfrt_kfac_eigen");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkEigen(call, a, a_vectors, a_values));
  PFRT_TRY(checkEigen(call, b, b_vectors, b_values));
  const pfrt_tensor *factors[2] = {a, b}, *vectors[2] = {a_vectors, b_vectors},
                    *values[2] = {a_values, b_values};
  auto decompose = [&](int k, int threads) -> InverseResult {
    const int64_t n = factors[k]->shape[0];
    if (n == 0)
      return {};
    return visitFloat(factors[k]->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return eigenInto(ctx, static_cast<const T *>(factors[k]->data), n,
                       static_cast<T *>(vectors[k]->data), static_cast<T *>(values[k]->data),
                       threads);
    });
  };
  InverseResult done[2];
  if (ctx->numThreads >= 2 && std::max(a->shape[0], b->shape[0]) < kThreadedInverseOrder) {
    // Side by side, one thread each (see kThreadedInverseOrder); the
    // scope restores the caller's OpenMP default, which OpenBLAS also sets.
    BlasThreadsScope oneEach(1);
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int k = 0; k < 2; ++k)
      done[k] = decompose(k, 0);
  } else {
    for (int k = 0; k < 2; ++k)
      done[k] = decompose(k, inverseThreads(ctx, factors[k]->shape[0]));
  }
  int32_t worst = PFRT_KFAC_INVERTED;
  for (const InverseResult &one : done) {
    if (one.status == PFRT_OK)
      continue;
    if (one.status != PFRT_NUMERIC)
      return call.fail(one.status, "%s", one.message.c_str());
    (void)call.fail(PFRT_NUMERIC, "%s", one.message.c_str()); // kept: the message only
    worst = PFRT_KFAC_KEPT_PREVIOUS;
  }
  if (outcome)
    *outcome = worst;
  return PFRT_OK;
}

//===------------------------ LayerNorm scale and shift ------------------===//

namespace {

/// Per-feature sums over the rows of (g_γ², g_γ g_β, g_β²), g_γ = dy·x̂ and
/// g_β = dy, with each row's statistics in double as the forward's.
template <typename T>
void layerNormFisherSums(const T *x, const T *dy, int64_t rows, int64_t h, double epsilon,
                         std::vector<double> &ss, std::vector<double> &sb,
                         std::vector<double> &bb) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * h, *dr = dy + r * h;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < h; ++j)
      mean += double(xr[j]);
    mean /= double(h);
    for (int64_t j = 0; j < h; ++j)
      var += (double(xr[j]) - mean) * (double(xr[j]) - mean);
    const double rstd = 1.0 / std::sqrt(var / double(h) + epsilon);
    for (int64_t j = 0; j < h; ++j) {
      const double d = double(dr[j]), g = d * (double(xr[j]) - mean) * rstd;
      ss[j] += g * g;
      sb[j] += g * d;
      bb[j] += d * d;
    }
  }
}

} // namespace

extern "C" {

pfrt_status pfrt_kfac_layer_norm_factor_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                            const pfrt_tensor *dy, double epsilon, double scale,
                                            int32_t mode, double decay, const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_layer_norm_factor");
  PFRT_TRY(call.begin());
  LayerNormFactorDims d;
  PFRT_TRY(checkLayerNormFactor(call, x, dy, epsilon, scale, mode, decay, factor, d));
  // The same alpha/beta as pfrt_kfac_factor's.
  const FactorUpdateCoefficients update = factorUpdateCoefficients(d.rows, scale, mode, decay);
  const double alpha = update.alpha, beta = update.beta;
  std::vector<double> ss(size_t(d.width), 0.0), sb(size_t(d.width), 0.0), bb(size_t(d.width), 0.0);
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (d.width > 0)
      layerNormFisherSums(static_cast<const T *>(x->data), static_cast<const T *>(dy->data), d.rows,
                          d.width, epsilon, ss, sb, bb);
    T *f = static_cast<T *>(factor->data);
    for (int64_t j = 0; j < d.width; ++j) {
      const double columns[3] = {ss[size_t(j)], sb[size_t(j)], bb[size_t(j)]};
      for (int64_t c = 0; c < d.columns; ++c) {
        // With 2 columns (the diagonal) column 1 is β-β.
        const double value = columns[d.columns == 3 ? c : 2 * c];
        T &entry = f[j * d.columns + c];
        // A zero beta ignores the old entry (it may be uninitialized).
        entry = T((beta == 0 ? 0.0 : beta * double(entry)) + alpha * value);
      }
    }
  });
  return PFRT_OK;
}

pfrt_status pfrt_kfac_precondition_layer_norm_cpu(pfrt_context *ctx, const pfrt_tensor *factor,
                                                  double damping, const pfrt_tensor *grad_scale,
                                                  const pfrt_tensor *grad_bias,
                                                  const pfrt_tensor *out_scale,
                                                  const pfrt_tensor *out_bias) {
  Call call(ctx, "pfrt_kfac_precondition_layer_norm");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkLayerNormPrecondition(call, factor, damping, grad_scale, grad_bias, out_scale,
                                      out_bias));
  const int64_t h = factor->shape[0], columns = factor->shape[1];
  const bool diagonal = columns == 2;
  visitFloat(factor->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *f = static_cast<const T *>(factor->data);
    const T *gs = static_cast<const T *>(grad_scale->data);
    const T *gb = static_cast<const T *>(grad_bias->data);
    T *us = static_cast<T *>(out_scale->data);
    T *ub = static_cast<T *>(out_bias->data);
    for (int64_t j = 0; j < h; ++j) {
      const T *row = f + j * columns;
      const double ss = row[0], sb = diagonal ? 0.0 : double(row[1]), bb = row[columns - 1];
      const double a = ss + damping, c = bb + damping;
      // Read both gradients before writing: the outputs may alias them.
      const double g0 = gs[j], g1 = gb[j];
      double u0 = g0, u1 = g1;
      if (diagonal) {
        if (a > 0)
          u0 = g0 / a;
        if (c > 0)
          u1 = g1 / c;
      } else if (const double det = a * c - sb * sb; det > 0) {
        u0 = (c * g0 - sb * g1) / det;
        u1 = (a * g1 - sb * g0) / det;
      }
      us[j] = T(u0);
      ub[j] = T(u1);
    }
  });
  return PFRT_OK;
}

} // extern "C"

//===------------------------------ embeddings ----------------------------===//

namespace {

/// The diagonal damping of an embedding's factor A after raising it tenfold
/// (from 1e-6 when 0) until `smallest` + damping > 0, at most `retries`
/// times; `outcome` says which of the refresh outcomes that was.
double diagonalDamping(double smallest, double damping, int32_t retries, int32_t &outcome) {
  for (int32_t attempt = 0; attempt <= retries; ++attempt) {
    if (smallest + damping > 0) {
      outcome = attempt == 0 ? PFRT_KFAC_INVERTED : PFRT_KFAC_MORE_DAMPING;
      return damping;
    }
    damping = damping > 0 ? damping * 10 : 1e-6;
  }
  outcome = PFRT_KFAC_KEPT_PREVIOUS;
  return damping;
}

} // namespace

extern "C" {

pfrt_status pfrt_kfac_embedding_factor_cpu(pfrt_context *ctx, const pfrt_tensor *ids, double scale,
                                           int32_t mode, double decay, const pfrt_tensor *factor) {
  Call call(ctx, "pfrt_kfac_embedding_factor");
  PFRT_TRY(call.begin());
  EmbeddingFactorDims d;
  PFRT_TRY(checkEmbeddingFactor(call, ids, scale, mode, decay, factor, d));
  // Counts first: a bad id leaves the factor as it was.
  std::vector<double> counts(size_t(d.vocab), 0.0);
  for (int64_t i = 0; i < d.ids; ++i) {
    const int64_t id = ids->dtype == PFRT_I64 ? static_cast<const int64_t *>(ids->data)[i]
                                              : static_cast<const int32_t *>(ids->data)[i];
    const int64_t row = embeddingRow(id, d.vocab);
    if (row < 0)
      return call.fail(PFRT_INVALID_ARGUMENT, "ids[%lld] = %lld is outside [-%lld, %lld)",
                       static_cast<long long>(i), static_cast<long long>(id),
                       static_cast<long long>(d.vocab), static_cast<long long>(d.vocab));
    counts[size_t(row)] += 1;
  }
  // The same alpha/beta as pfrt_kfac_factor's, over the ids as rows.
  const FactorUpdateCoefficients update = factorUpdateCoefficients(d.ids, scale, mode, decay);
  visitFloat(factor->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *f = static_cast<T *>(factor->data);
    for (int64_t v = 0; v < d.vocab; ++v) {
      // A zero beta ignores the old entry (it may be uninitialized).
      const double old = update.beta == 0 ? 0.0 : update.beta * double(f[v]);
      f[v] = T(old + update.alpha * counts[size_t(v)]);
    }
  });
  return PFRT_OK;
}

pfrt_status pfrt_kfac_embedding_inverses_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                                             const pfrt_tensor *b, double damping, int32_t retries,
                                             const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
                                             int32_t *outcome) {
  Call call(ctx, "pfrt_kfac_embedding_inverses");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkEmbeddingInverses(call, a, b, damping, retries, a_inv, b_inv));
  const int64_t vocab = a->shape[0], h = b->shape[0];
  double sumA = 0, smallest = 0, traceB = 0;
  visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a->data);
    smallest = vocab ? double(pa[0]) : 0.0;
    for (int64_t v = 0; v < vocab; ++v) {
      sumA += double(pa[v]);
      smallest = std::min(smallest, double(pa[v]));
    }
    traceB = traceOf(static_cast<const T *>(b->data), h);
  });
  if (!std::isfinite(sumA) || !std::isfinite(traceB)) {
    // As pfrt_kfac_damped_inverses: non-finite traces keep both inverses.
    if (outcome)
      *outcome = PFRT_KFAC_KEPT_PREVIOUS;
    (void)call.fail(PFRT_NUMERIC,
                    "a factor trace is not finite (sum a = %g, tr b = %g); the "
                    "inverses were left unchanged",
                    sumA, traceB);
    return PFRT_OK;
  }
  const double pi = sumA > 0 && traceB > 0 && vocab > 0 && h > 0
                        ? std::sqrt((sumA / double(vocab)) / (traceB / double(h)))
                        : 1.0;
  const double root = std::sqrt(damping);
  int32_t outcomeA = PFRT_KFAC_INVERTED;
  const double dampingA = diagonalDamping(smallest, root * pi, retries, outcomeA);
  if (outcomeA == PFRT_KFAC_KEPT_PREVIOUS) {
    (void)call.fail(PFRT_NUMERIC,
                    "factor A + %g has an entry <= 0 (smallest %g); its "
                    "inverse was left unchanged",
                    dampingA, smallest);
  } else {
    visitFloat(a->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *pa = static_cast<const T *>(a->data);
      T *inv = static_cast<T *>(a_inv->data);
      for (int64_t v = 0; v < vocab; ++v)
        inv[v] = T(1.0 / (double(pa[v]) + dampingA));
    });
  }
  RetriedInverse doneB =
      invertWithRetries(ctx, b, root / pi, retries, b_inv, inverseThreads(ctx, h));
  if (doneB.result.status != PFRT_OK) {
    if (doneB.result.status != PFRT_NUMERIC)
      return call.fail(doneB.result.status, "%s", doneB.result.message.c_str());
    (void)call.fail(PFRT_NUMERIC, "%s", doneB.result.message.c_str()); // kept: the message only
  }
  if (outcome)
    *outcome = std::max(outcomeA, doneB.outcome);
  return PFRT_OK;
}

pfrt_status pfrt_kfac_precondition_embedding_cpu(pfrt_context *ctx, const pfrt_tensor *a_inv,
                                                 const pfrt_tensor *b_inv,
                                                 const pfrt_tensor *grad_w, int32_t w_transposed,
                                                 const pfrt_tensor *out_w) {
  Call call(ctx, "pfrt_kfac_precondition_embedding");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkEmbeddingPrecondition(call, a_inv, b_inv, grad_w, w_transposed, out_w));
  const bool transposed = w_transposed != 0;
  const int64_t vocab = a_inv->shape[0], h = b_inv->shape[0];
  if (vocab == 0 || h == 0)
    return PFRT_OK;
  return visitFloat(a_inv->dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a_inv->data);
    const T *pb = static_cast<const T *>(b_inv->data);
    const T *g = static_cast<const T *>(grad_w->data);
    T *out = static_cast<T *>(out_w->data);
    Scratch<T> work;
    PFRT_TRY(work.allocate(call, vocab * h));
    T *t = work.data();
    Gemm gemmShape;
    if (!transposed) {
      // t = diag(a_inv) G (rows scaled), out = t B^-1.
      parallelFor(ctx, vocab, h, [&](int64_t v) {
        const double scale = double(pa[v]);
        for (int64_t j = 0; j < h; ++j)
          t[v * h + j] = T(scale * double(g[v * h + j]));
      });
      gemmShape.m = vocab;
      gemmShape.n = h;
      gemmShape.k = h;
      gemm(ctx, gemmShape, t, pb, out);
      return PFRT_OK;
    }
    // t = B^-1 G ([h, vocab]), out = t diag(a_inv) (columns scaled).
    gemmShape.m = h;
    gemmShape.n = vocab;
    gemmShape.k = h;
    gemm(ctx, gemmShape, pb, g, t);
    parallelFor(ctx, h, vocab, [&](int64_t i) {
      for (int64_t v = 0; v < vocab; ++v)
        out[i * vocab + v] = T(double(t[i * vocab + v]) * double(pa[v]));
    });
    return PFRT_OK;
  });
}

} // extern "C"
