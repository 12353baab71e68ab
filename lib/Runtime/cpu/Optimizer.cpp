//===- Optimizer.cpp - SGD, AdamW, LAMB, global norm, clipping -------------===//
//
// In-place parameter updates, one tensor per call (the compiler emits one
// call per parameter). The per-element arithmetic is done in double and
// rounded once to the parameter's dtype. Norms use the fixed-partition sums
// of Training.h, so updates do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Parallel.h"
#include "Training.h"

#include <cmath>
#include <cstdio>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

constexpr int64_t kGrain = 16 * 1024;

/// param, grad and the optional state tensors: one float dtype and shape.
pfrt_status checkParamAndState(const Call &call, const pfrt_tensor *param,
                               const pfrt_tensor *grad,
                               std::initializer_list<const char *> names,
                               std::initializer_list<const pfrt_tensor *> state) {
  PFRT_TRY(call.tensor("param", param));
  PFRT_TRY(call.dtypeIn("param", param, {PFRT_F32, PFRT_F64}));
  const Shape shape = Shape::of(*param);
  PFRT_TRY(floatLike(call, "grad", grad, param->dtype, shape));
  auto name = names.begin();
  for (const pfrt_tensor *t : state) {
    PFRT_TRY(floatLike(call, *name, t, param->dtype, shape));
    ++name;
  }
  return PFRT_OK;
}

pfrt_status checkHyper(const Call &call, const char *name, double v,
                       double lo, double hi) {
  if (v >= lo && v <= hi && std::isfinite(v))
    return PFRT_OK;
  return call.fail(PFRT_INVALID_ARGUMENT, "%s %g is not a finite value in "
                   "[%g, %g]", name, v, lo, hi);
}

/// Adam's moment hyperparameters, shared by AdamW and LAMB.
pfrt_status checkAdam(const Call &call, double lr, double beta1, double beta2,
                      double eps, double weightDecay, int64_t step) {
  PFRT_TRY(checkHyper(call, "lr", lr, 0, HUGE_VAL));
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "beta1 %g and beta2 %g must lie "
                     "in [0, 1)", beta1, beta2);
  PFRT_TRY(checkHyper(call, "eps", eps, 0, HUGE_VAL));
  PFRT_TRY(checkHyper(call, "weight_decay", weightDecay, 0, HUGE_VAL));
  if (step < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "step %lld must be >= 1",
                     static_cast<long long>(step));
  return PFRT_OK;
}

struct AdamScalars {
  double b1, b2, eps, c1, c2; // c: bias corrections (1 when off)
};

AdamScalars adamScalars(double beta1, double beta2, double eps, int64_t step,
                        bool biasCorrection) {
  AdamScalars s{beta1, beta2, eps, 1.0, 1.0};
  if (biasCorrection) {
    s.c1 = 1.0 - std::pow(beta1, double(step));
    s.c2 = 1.0 - std::pow(beta2, double(step));
  }
  return s;
}

template <class T> T *dataOf(const pfrt_tensor *t) {
  return static_cast<T *>(t->data);
}

pfrt_status tensorList(const Call &call, const pfrt_tensor *tensors,
                       int32_t n) {
  if (n < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "n %d is negative", n);
  if (n > 0)
    PFRT_TRY(call.pointer("tensors", tensors));
  for (int32_t i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "tensors[%d]", i);
    PFRT_TRY(call.tensor(name, &tensors[i]));
    PFRT_TRY(call.dtypeIn(name, &tensors[i], {PFRT_F32, PFRT_F64}));
  }
  return PFRT_OK;
}

double normOf(const pfrt_context *ctx, const pfrt_tensor *tensors, int32_t n) {
  double squares = 0;
  for (int32_t i = 0; i < n; ++i)
    squares += visitFloat(tensors[i].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return sumOfSquares(ctx, static_cast<const T *>(tensors[i].data),
                          Shape::of(tensors[i]).numel());
    });
  return std::sqrt(squares);
}

template <class T>
void scaleInto(const pfrt_context *ctx, const T *x, T *out, int64_t n,
               double alpha) {
  const T a = T(alpha);
  parallelChunks(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = x[i] * a;
  });
}

} // namespace

extern "C" {

pfrt_status pfrt_sgd_step_cpu(pfrt_context *ctx, const pfrt_tensor *param,
                              const pfrt_tensor *grad,
                              const pfrt_tensor *momentum_buf, double lr,
                              double momentum, double weight_decay,
                              int32_t nesterov) {
  Call call(ctx, "pfrt_sgd_step");
  PFRT_TRY(call.begin());
  if (momentum != 0 || momentum_buf)
    PFRT_TRY(checkParamAndState(call, param, grad, {"momentum_buf"},
                                {momentum_buf}));
  else
    PFRT_TRY(checkParamAndState(call, param, grad, {}, {}));
  PFRT_TRY(checkHyper(call, "lr", lr, 0, HUGE_VAL));
  PFRT_TRY(checkHyper(call, "momentum", momentum, 0, HUGE_VAL));
  PFRT_TRY(checkHyper(call, "weight_decay", weight_decay, 0, HUGE_VAL));
  if (nesterov && momentum == 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "nesterov needs momentum > 0");
  const int64_t n = Shape::of(*param).numel();
  visitFloat(param->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = dataOf<T>(param);
    const T *g = dataOf<const T>(grad);
    T *buf = momentum_buf ? dataOf<T>(momentum_buf) : nullptr;
    const bool useMomentum = momentum != 0;
    const bool nest = nesterov != 0;
    parallelChunks(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double w = p[i];
        double d = double(g[i]) + weight_decay * w;
        if (useMomentum) {
          const double b = momentum * double(buf[i]) + d;
          buf[i] = T(b);
          d = nest ? d + momentum * b : b;
        }
        p[i] = T(w - lr * d);
      }
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_adamw_step_cpu(pfrt_context *ctx, const pfrt_tensor *param,
                                const pfrt_tensor *grad, const pfrt_tensor *exp_avg,
                                const pfrt_tensor *exp_avg_sq, double lr,
                                double beta1, double beta2, double eps,
                                double weight_decay, int64_t step,
                                int32_t bias_correction) {
  Call call(ctx, "pfrt_adamw_step");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkParamAndState(call, param, grad, {"exp_avg", "exp_avg_sq"},
                              {exp_avg, exp_avg_sq}));
  PFRT_TRY(checkAdam(call, lr, beta1, beta2, eps, weight_decay, step));
  const AdamScalars s =
      adamScalars(beta1, beta2, eps, step, bias_correction != 0);
  const double decay = 1.0 - lr * weight_decay;
  const int64_t n = Shape::of(*param).numel();
  visitFloat(param->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = dataOf<T>(param), *m = dataOf<T>(exp_avg),
      *v = dataOf<T>(exp_avg_sq);
    const T *g = dataOf<const T>(grad);
    parallelChunks(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double gi = g[i];
        const double mi = s.b1 * double(m[i]) + (1 - s.b1) * gi;
        const double vi = s.b2 * double(v[i]) + (1 - s.b2) * gi * gi;
        m[i] = T(mi);
        v[i] = T(vi);
        const double update = (mi / s.c1) / (std::sqrt(vi / s.c2) + s.eps);
        p[i] = T(double(p[i]) * decay - lr * update);
      }
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_lamb_step_cpu(pfrt_context *ctx, const pfrt_tensor *param,
                               const pfrt_tensor *grad, const pfrt_tensor *exp_avg,
                               const pfrt_tensor *exp_avg_sq, double lr,
                               double beta1, double beta2, double eps,
                               double weight_decay, int64_t step,
                               int32_t bias_correction, int32_t nvlamb,
                               double max_trust_ratio) {
  Call call(ctx, "pfrt_lamb_step");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkParamAndState(call, param, grad, {"exp_avg", "exp_avg_sq"},
                              {exp_avg, exp_avg_sq}));
  PFRT_TRY(checkAdam(call, lr, beta1, beta2, eps, weight_decay, step));
  PFRT_TRY(checkHyper(call, "max_trust_ratio", max_trust_ratio, 0, HUGE_VAL));
  const AdamScalars s =
      adamScalars(beta1, beta2, eps, step, bias_correction != 0);
  const int64_t n = Shape::of(*param).numel();
  const bool adapt = nvlamb != 0 || weight_decay != 0;
  visitFloat(param->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = dataOf<T>(param), *m = dataOf<T>(exp_avg),
      *v = dataOf<T>(exp_avg_sq);
    const T *g = dataOf<const T>(grad);
    auto updateAt = [&](int64_t i) {
      return (double(m[i]) / s.c1) / (std::sqrt(double(v[i]) / s.c2) + s.eps) +
             weight_decay * double(p[i]);
    };
    // Pass 1: the moments, and ||p||^2 and ||u||^2 over a fixed partition.
    double pieces[2][kSumPieces] = {};
    const int64_t count = n < kSumPieces ? n : kSumPieces;
    const int64_t size = count ? (n + count - 1) / count : 0;
    parallelFor(ctx, count, size, [&](int64_t c) {
      const int64_t begin = c * size, end = begin + size < n ? begin + size : n;
      laneSum2(begin, end, [&](int64_t i, double &ww, double &uu) {
        const double gi = g[i];
        m[i] = T(s.b1 * double(m[i]) + (1 - s.b1) * gi);
        v[i] = T(s.b2 * double(v[i]) + (1 - s.b2) * gi * gi);
        const double u = updateAt(i);
        ww += double(p[i]) * double(p[i]);
        uu += u * u;
      }, pieces[0][c], pieces[1][c]);
    });
    double ww = 0, uu = 0;
    for (int64_t c = 0; c < count; ++c) {
      ww += pieces[0][c];
      uu += pieces[1][c];
    }
    double ratio = 1;
    if (adapt) {
      const double wn = std::sqrt(ww), un = std::sqrt(uu);
      ratio = (wn > 0 && un > 0) ? wn / un : 1.0;
      if (max_trust_ratio > 0 && ratio > max_trust_ratio)
        ratio = max_trust_ratio;
    }
    // Pass 2: p -= lr r u, with u recomputed from the stored moments.
    const double rate = lr * ratio;
    parallelChunks(ctx, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        p[i] = T(double(p[i]) - rate * updateAt(i));
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_global_norm_cpu(pfrt_context *ctx, const pfrt_tensor *tensors,
                                 int32_t n, double *norm) {
  Call call(ctx, "pfrt_global_norm");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("norm", norm));
  PFRT_TRY(tensorList(call, tensors, n));
  *norm = normOf(ctx, tensors, n);
  return PFRT_OK;
}

namespace {
/// The clipping of a global norm `total` (the one rule of both kernels).
pfrt_status clipTo(pfrt_context *ctx, const Call &call, const pfrt_tensor *tensors, int32_t n,
                   double max_norm, double total) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    return call.fail(PFRT_INVALID_ARGUMENT, "max_norm %g must be positive "
                     "and finite", max_norm);
  if (!std::isfinite(total))
    return call.fail(PFRT_NUMERIC, "the global gradient norm is %g; the "
                     "gradients were left unscaled", total);
  if (total <= max_norm)
    return PFRT_OK;
  const double coefficient = max_norm / (total + 1e-6);
  for (int32_t i = 0; i < n; ++i)
    visitFloat(tensors[i].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *p = static_cast<T *>(tensors[i].data);
      scaleInto(ctx, p, p, Shape::of(tensors[i]).numel(), coefficient);
    });
  return PFRT_OK;
}
} // namespace

pfrt_status pfrt_clip_by_global_norm_cpu(pfrt_context *ctx,
                                         const pfrt_tensor *tensors, int32_t n,
                                         double max_norm, double *norm) {
  Call call(ctx, "pfrt_clip_by_global_norm");
  PFRT_TRY(call.begin());
  PFRT_TRY(tensorList(call, tensors, n));
  const double total = normOf(ctx, tensors, n);
  if (norm)
    *norm = total;
  return clipTo(ctx, call, tensors, n, max_norm, total);
}

pfrt_status pfrt_clip_to_norm_cpu(pfrt_context *ctx, const pfrt_tensor *tensors,
                                  int32_t n, double max_norm, double norm) {
  Call call(ctx, "pfrt_clip_to_norm");
  PFRT_TRY(call.begin());
  PFRT_TRY(tensorList(call, tensors, n));
  return clipTo(ctx, call, tensors, n, max_norm, norm);
}

pfrt_status pfrt_weighted_add_cpu(pfrt_context *ctx, const pfrt_tensor *sum,
                                  const pfrt_tensor *x, int64_t count, int64_t total,
                                  const pfrt_tensor *out) {
  Call call(ctx, "pfrt_weighted_add");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(floatLike(call, "sum", sum, x->dtype, Shape::of(*x)));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, Shape::of(*x)));
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T c = T(count), t = T(total);
    const T *s = static_cast<const T *>(sum->data);
    const T *g = static_cast<const T *>(x->data);
    T *o = static_cast<T *>(out->data);
    // Built with -ffp-contract=off: s + g * c is two roundings, as
    // pfrt_mul then pfrt_add.
    parallelChunks(ctx, Shape::of(*x).numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T term = g[i] * c;
        const T added = s[i] + term;
        o[i] = added / t;
      }
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_scale_cpu(pfrt_context *ctx, const pfrt_tensor *x, double alpha,
                           const pfrt_tensor *out) {
  Call call(ctx, "pfrt_scale");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, Shape::of(*x)));
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scaleInto(ctx, static_cast<const T *>(x->data), static_cast<T *>(out->data),
              Shape::of(*x).numel(), alpha);
  });
  return PFRT_OK;
}

pfrt_status pfrt_dot_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, double *result) {
  Call call(ctx, "pfrt_dot");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("result", result));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(floatLike(call, "b", b, a->dtype, Shape::of(*a)));
  *result = visitFloat(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a->data);
    const T *pb = static_cast<const T *>(b->data);
    return deterministicSum(ctx, Shape::of(*a).numel(),
                            [&](int64_t begin, int64_t end) {
                              return laneSum(begin, end, [&](int64_t i) {
                                return double(pa[i]) * double(pb[i]);
                              });
                            });
  });
  return PFRT_OK;
}

} // extern "C"
