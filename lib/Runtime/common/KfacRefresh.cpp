//===- KfacRefresh.cpp - A layer's K-FAC refresh composed of entry points --===//
//
// pfrt_kfac_damped_inverses and pfrt_kfac_eigen_refresh written only with the
// dispatching entry points (pfrt_kfac_pi, pfrt_kfac_inverse, pfrt_kfac_eigen),
// so they run on any backend whose context holds the tensors: the CUDA
// backend registers these. The CPU backend has its own (cpu/Kfac.cpp), which
// inverts a layer's two factors side by side on the host.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Call.h"

#include <cmath>
#include <tuple>

namespace {
/// Inverts `factor` with `damping`, raising it tenfold up to `retries` times
/// when the factor is numerically bad; other errors are returned as they are.
pfrt_status invertWithRetries(pfrt_context *ctx, const pfrt_tensor *factor, double damping,
                              int32_t retries, const pfrt_tensor *inverse, int32_t *outcome) {
  for (int32_t attempt = 0; attempt <= retries; ++attempt) {
    pfrt_status status = pfrt_kfac_inverse(ctx, factor, damping, inverse);
    if (status == PFRT_OK) {
      *outcome = attempt == 0 ? PFRT_KFAC_INVERTED : PFRT_KFAC_MORE_DAMPING;
      return PFRT_OK;
    }
    if (status != PFRT_NUMERIC)
      return status;
    damping = damping > 0 ? damping * 10 : 1e-6;
  }
  *outcome = PFRT_KFAC_KEPT_PREVIOUS;
  return PFRT_OK;
}
} // namespace

namespace pfrt {

pfrt_status kfacDampedInversesComposed(pfrt_context *ctx, const pfrt_tensor *a,
                                       const pfrt_tensor *b, double damping, int32_t retries,
                                       const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
                                       int32_t *outcome) {
  if (!ctx)
    return PFRT_INVALID_ARGUMENT;
  if (!(damping >= 0) || retries < 0) {
    Call call(ctx, "pfrt_kfac_damped_inverses");
    return call.fail(PFRT_INVALID_ARGUMENT, "damping must be >= 0 and retries >= 0");
  }
  double pi = 1;
  if (pfrt_kfac_pi(ctx, a, b, &pi) != PFRT_OK) {
    // Non-finite traces: neither factor can be inverted; keep both inverses.
    if (outcome)
      *outcome = PFRT_KFAC_KEPT_PREVIOUS;
    return PFRT_OK;
  }
  const double root = std::sqrt(damping);
  int32_t ra = 0, rb = 0;
  if (pfrt_status s = invertWithRetries(ctx, a, root * pi, retries, a_inv, &ra))
    return s;
  if (pfrt_status s = invertWithRetries(ctx, b, root / pi, retries, b_inv, &rb))
    return s;
  if (outcome)
    *outcome = ra > rb ? ra : rb;
  return PFRT_OK;
}

pfrt_status kfacEigenRefreshComposed(pfrt_context *ctx, const pfrt_tensor *a, const pfrt_tensor *b,
                                     const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
                                     const pfrt_tensor *b_vectors, const pfrt_tensor *b_values,
                                     int32_t *outcome) {
  if (!ctx)
    return PFRT_INVALID_ARGUMENT;
  int32_t worst = PFRT_KFAC_INVERTED;
  for (auto [factor, vectors, values] :
       {std::tuple{a, a_vectors, a_values}, std::tuple{b, b_vectors, b_values}}) {
    pfrt_status status = pfrt_kfac_eigen(ctx, factor, vectors, values);
    if (status == PFRT_NUMERIC)
      worst = PFRT_KFAC_KEPT_PREVIOUS;
    else if (status != PFRT_OK)
      return status;
  }
  if (outcome)
    *outcome = worst;
  return PFRT_OK;
}

} // namespace pfrt
