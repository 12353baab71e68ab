//===- OptimizerMath.h - Per-element optimizer updates ------------*- C++ -*-===//
//
// SGD (momentum, Nesterov, coupled weight decay), AdamW and LAMB as in
// cpu/Optimizer.cpp: each element in double, stored back in T; and the
// gradient clipping factor.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_OPTIMIZERMATH_H
#define PF_RUNTIME_CUDA_OPTIMIZERMATH_H

#include "HostDevice.h"

namespace pfrt::cuda {

struct SgdParams {
  double lr, momentum, weightDecay;
  bool useMomentum, nesterov;
};

template <class T> PFRT_HD void sgdElement(const SgdParams &s, T &p, T g, T *buf) {
  const double w = p;
  double d = double(g) + s.weightDecay * w;
  if (s.useMomentum) {
    const double b = s.momentum * double(*buf) + d;
    *buf = T(b);
    d = s.nesterov ? d + s.momentum * b : b;
  }
  p = T(w - s.lr * d);
}

struct AdamParams {
  double lr, b1, b2, eps;
  double c1, c2;  ///< bias corrections (1 when off)
  double decay;   ///< 1 - lr * weight_decay
};

PFRT_HD AdamParams adamParams(double lr, double beta1, double beta2,
                              double eps, double weightDecay, int64_t step,
                              bool biasCorrection) {
  AdamParams a{lr, beta1, beta2, eps, 1.0, 1.0, 1.0 - lr * weightDecay};
  if (biasCorrection) {
    a.c1 = 1.0 - ::pow(beta1, double(step));
    a.c2 = 1.0 - ::pow(beta2, double(step));
  }
  return a;
}

template <class T>
PFRT_HD void adamwElement(const AdamParams &a, T &p, T g, T &m, T &v) {
  const double gi = g;
  const double mi = a.b1 * double(m) + (1 - a.b1) * gi;
  const double vi = a.b2 * double(v) + (1 - a.b2) * gi * gi;
  m = T(mi);
  v = T(vi);
  const double update = (mi / a.c1) / (::sqrt(vi / a.c2) + a.eps);
  p = T(double(p) * a.decay - a.lr * update);
}

/// LAMB's moments: AdamW's, stored back in T.
template <class T> PFRT_HD void lambMoments(const AdamParams &a, T g, T &m, T &v) {
  const double gi = g;
  m = T(a.b1 * double(m) + (1 - a.b1) * gi);
  v = T(a.b2 * double(v) + (1 - a.b2) * gi * gi);
}

/// LAMB's update direction u = (m / c1) / (sqrt(v / c2) + eps) + wd p, from
/// the stored moments (as the CPU's second pass recomputes it).
template <class T>
PFRT_HD double lambDirection(const AdamParams &a, double weightDecay, T p, T m,
                             T v) {
  return (double(m) / a.c1) / (::sqrt(double(v) / a.c2) + a.eps) +
         weightDecay * double(p);
}

/// The trust ratio ||p|| / ||u|| from the squared norms (1 if either is 0
/// or the tensor does not adapt), clamped to maxTrustRatio when that is > 0.
PFRT_HD double lambTrustRatio(double pSquares, double uSquares, bool adapt,
                              double maxTrustRatio) {
  if (!adapt)
    return 1.0;
  const double wn = ::sqrt(pSquares), un = ::sqrt(uSquares);
  double ratio = (wn > 0 && un > 0) ? wn / un : 1.0;
  if (maxTrustRatio > 0 && ratio > maxTrustRatio)
    ratio = maxTrustRatio;
  return ratio;
}

/// pfrt_clip_by_global_norm's factor for a global norm `total`: max_norm /
/// (total + 1e-6) when total exceeds max_norm, else 1 (no scaling; also for
/// a non-finite norm, which the caller reports and leaves unscaled).
PFRT_HD double clipCoefficient(double total, double maxNorm) {
  if (!(total > maxNorm) || total - total != 0.0) // within, NaN or inf
    return 1.0;
  return maxNorm / (total + 1e-6);
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_OPTIMIZERMATH_H
