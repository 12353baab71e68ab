//===- RuntimeTestUtil.h - Helpers for the pfrt kernel tests -----*- C++ -*-===//
//
// Owned test tensors, a context fixture, and index arithmetic for the naive
// reference implementations the tests compare the kernels against (those
// accumulate in double and use no code from the runtime).
//
//===----------------------------------------------------------------------===//

#ifndef PF_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
#define PF_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H

#include "pf/Runtime/pfrt.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace pfrt_test {

using Dims = std::vector<int64_t>;

template <class T> constexpr int32_t dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return PFRT_F32;
  else if constexpr (std::is_same_v<T, double>)
    return PFRT_F64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return PFRT_I64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return PFRT_I32;
  else if constexpr (std::is_same_v<T, int8_t>)
    return PFRT_I8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return PFRT_F16; // raw binary16 bits
  else
    return PFRT_BOOL; // uint8_t
}

inline int64_t numel(const Dims &d) {
  int64_t n = 1;
  for (int64_t x : d)
    n *= x;
  return n;
}

/// A tensor that owns its data; desc() is the ABI descriptor over it.
template <class T> struct Tensor {
  Dims dims;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(Dims d) : dims(std::move(d)), data(numel(dims)) {}
  Tensor(Dims d, std::vector<T> values) : dims(std::move(d)), data(values) {
    EXPECT_EQ(static_cast<int64_t>(data.size()), numel(dims));
  }

  pfrt_tensor desc(int32_t dtype = dtypeOf<T>()) {
    pfrt_tensor t;
    std::memset(&t, 0, sizeof t);
    t.data = data.empty() ? nullptr : data.data();
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i)
      t.shape[i] = dims[i];
    return t;
  }
  T &operator[](int64_t i) { return data[i]; }
  const T &operator[](int64_t i) const { return data[i]; }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
};

/// Uniform random values in [lo, hi) from a fixed seed per call site.
template <class T>
Tensor<T> random(Dims dims, double lo = -1.0, double hi = 1.0,
                 unsigned seed = 1) {
  Tensor<T> t(std::move(dims));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (auto &v : t.data)
    v = static_cast<T>(dist(gen));
  return t;
}

/// Row-major strides of dims.
inline Dims stridesOf(const Dims &dims) {
  Dims s(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = stride;
    stride *= dims[i];
  }
  return s;
}

/// Multi-index of linear index i in dims.
inline Dims unravel(int64_t i, const Dims &dims) {
  Dims idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}

/// Linear index in `dims` of the element that output index `outIdx`
/// (of a broadcast result with outIdx.size() >= dims.size()) reads.
inline int64_t broadcastIndex(const Dims &outIdx, const Dims &dims) {
  const size_t shift = outIdx.size() - dims.size();
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d)
    i = i * dims[d] + (dims[d] == 1 ? 0 : outIdx[d + shift]);
  return i;
}

/// NumPy broadcast of two shapes (the tests only pass compatible ones).
inline Dims broadcast(const Dims &a, const Dims &b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Every test gets a fresh context with two threads, so the OpenMP paths
/// run even on small machines; PFRT_TEST_THREADS=n overrides the count.
class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    pfrt_context_options opts;
    pfrt_context_options_init(&opts);
    const char *env = std::getenv("PFRT_TEST_THREADS");
    opts.num_threads = env ? std::atoi(env) : 2;
    ctx = pfrt_context_create(&opts);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override { pfrt_context_destroy(ctx); }

  /// Asserts OK, printing the runtime's message otherwise.
  void ok(pfrt_status s) {
    ASSERT_EQ(s, PFRT_OK) << pfrt_status_string(s) << ": "
                          << pfrt_last_error(ctx);
  }
  /// Asserts `expected` with a message that names `function`.
  void fails(pfrt_status s, pfrt_status expected, const char *function) {
    EXPECT_EQ(s, expected) << "got " << pfrt_status_string(s);
    std::string message = pfrt_last_error(ctx);
    EXPECT_FALSE(message.empty());
    EXPECT_NE(message.find(function), std::string::npos) << message;
  }

  pfrt_context *ctx = nullptr;
};

/// Maximum |a - b| over two same-sized tensors (b may be double).
template <class A, class B>
double maxAbsDiff(const std::vector<A> &a, const std::vector<B> &b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) // also catches NaN
      m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

} // namespace pfrt_test

#endif // PF_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
