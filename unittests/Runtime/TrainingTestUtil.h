//===- TrainingTestUtil.h - Helpers for the training-kernel tests -*- C++ -*-===//
//
// Central finite differences (in double, over the runtime's f64 forward
// kernels or a reference), a relative-error measure, and extra contexts
// with other thread counts for determinism checks.
//
//===----------------------------------------------------------------------===//

#ifndef PF_UNITTESTS_RUNTIME_TRAININGTESTUTIL_H
#define PF_UNITTESTS_RUNTIME_TRAININGTESTUTIL_H

#include "RuntimeTestUtil.h"

#include <functional>

namespace pfrt_test {

/// d f / d x_i by central differences, for every coordinate of x. f reads
/// x (which is perturbed in place and restored).
inline std::vector<double>
numericGradient(std::vector<double> &x,
                const std::function<double()> &f, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = f();
    x[i] = saved - h;
    const double minus = f();
    x[i] = saved;
    g[i] = (plus - minus) / (2 * h);
  }
  return g;
}

/// max_i |a_i - b_i| / (atol + |b_i|): a mixed error, relative for values
/// above atol and absolute below it.
template <class A, class B>
double relErr(const std::vector<A> &a, const std::vector<B> &b,
              double atol = 1.0) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i])) /
                     (atol + std::fabs(double(b[i])));
    if (!(d <= m))
      m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

/// sum_i w_i y_i: a scalar "loss" whose gradient with respect to y is w.
template <class T>
double weighted(const std::vector<T> &y, const std::vector<T> &w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += double(y[i]) * double(w[i]);
  return s;
}

/// A context with a given thread count (for thread-count independence).
struct ScopedContext {
  pfrt_context *ctx = nullptr;
  explicit ScopedContext(int threads) {
    pfrt_context_options opts;
    pfrt_context_options_init(&opts);
    opts.num_threads = threads;
    ctx = pfrt_context_create(&opts);
  }
  ~ScopedContext() { pfrt_context_destroy(ctx); }
};

/// Converts a tensor's values to double.
template <class T> std::vector<double> asDouble(const Tensor<T> &t) {
  return std::vector<double>(t.data.begin(), t.data.end());
}

} // namespace pfrt_test

#endif // PF_UNITTESTS_RUNTIME_TRAININGTESTUTIL_H
