//===- CudaKernelTest.cpp - Each CUDA kernel against the CPU backend -------===//
//
// Every test runs one kernel on a CPU context (host buffers) and on a CUDA
// context (device buffers from pfrt_alloc, filled with the same bytes) and
// compares the results. Inputs are random, with odd sizes and broadcasting.
// Without a usable GPU every test is skipped (GTEST_SKIP), so ctest counts
// them as skipped; scripts/gpu-check.sh runs this binary on a GPU machine.
//
// PF_CUDA_TESTS_ON_CPU=1 runs both sides on the CPU backend (a check of the
// tests where no GPU is). Benchmarks: with PF_CUDA_BENCH_JSON=FILE, CudaBench.* time BERT-sized
// kernels (median of repeated runs, after a warm-up) and write one JSON
// object per line to FILE; scripts/gpu-check.sh compares them with PyTorch.
//
//===----------------------------------------------------------------------===//

#include "pf/Runtime/pfrt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using Dims = std::vector<int64_t>;

int64_t numel(const Dims &d) {
  int64_t n = 1;
  for (int64_t v : d)
    n *= v;
  return n;
}

/// One tensor twice: host memory for the CPU backend, device memory for
/// the CUDA backend, with the same initial bytes.
struct Pair {
  std::vector<unsigned char> host;
  pfrt_tensor cpu{}, dev{};
  int64_t bytes = 0;
};

pfrt_context *gCpu = nullptr, *gGpu = nullptr;
std::string gNoGpu;

class CudaKernels : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (gCpu || !gNoGpu.empty())
      return;
    gCpu = pfrt_context_create(nullptr);
    pfrt_context_options options;
    pfrt_context_options_init(&options);
    // PF_CUDA_TESTS_ON_CPU=1 puts the "device" side on a second CPU context:
    // a check of the tests themselves (shapes, arguments, harness) where no
    // GPU is; every comparison is then exact.
    const char *onCpu = std::getenv("PF_CUDA_TESTS_ON_CPU");
    if (!(onCpu && std::string(onCpu) == "1"))
      options.backend = PFRT_BACKEND_CUDA;
    gGpu = pfrt_context_create(&options);
    if (!gGpu)
      gNoGpu = pfrt_last_error(nullptr);
  }

  void SetUp() override {
    if (!gGpu)
      GTEST_SKIP() << "no usable GPU: " << gNoGpu;
  }

  void TearDown() override {
    for (auto &p : pairs)
      if (p->dev.data)
        pfrt_free(gGpu, p->dev.data);
  }

  /// A tensor of `dtype` and `dims`; floats uniform in [lo, hi), integers
  /// uniform in [lo, hi] (as indices or labels).
  Pair &make(int32_t dtype, Dims dims, double lo = -1, double hi = 1,
             unsigned seed = 1) {
    auto p = std::make_unique<Pair>();
    const int64_t n = numel(dims), size = pfrt_dtype_size(dtype);
    p->bytes = n * size;
    p->host.resize(size_t(p->bytes > 0 ? p->bytes : 1));
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> real{lo, hi};
    std::uniform_int_distribution<int64_t> integer{int64_t(lo), int64_t(hi)};
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == PFRT_F32)
        reinterpret_cast<float *>(p->host.data())[i] = float(real(gen));
      else if (dtype == PFRT_F64)
        reinterpret_cast<double *>(p->host.data())[i] = real(gen);
      else if (dtype == PFRT_I32)
        reinterpret_cast<int32_t *>(p->host.data())[i] = int32_t(integer(gen));
      else if (dtype == PFRT_I64)
        reinterpret_cast<int64_t *>(p->host.data())[i] = integer(gen);
      else if (dtype == PFRT_BOOL) // 0 or 1, as the ABI's bool
        p->host[i] = uint8_t(integer(gen) % 2 != 0);
      else // i8 (wrapping), or f16 bits
        p->host[i * size] = uint8_t(integer(gen));
    }
    for (pfrt_tensor *t : {&p->cpu, &p->dev}) {
      t->dtype = dtype;
      t->rank = int32_t(dims.size());
      for (size_t i = 0; i < dims.size(); ++i)
        t->shape[i] = dims[i];
    }
    p->cpu.data = p->host.data();
    void *dev = nullptr;
    EXPECT_EQ(pfrt_alloc(gGpu, p->bytes, &dev), PFRT_OK) << pfrt_last_error(gGpu);
    p->dev.data = dev;
    EXPECT_EQ(pfrt_copy_from_host(gGpu, p->host.data(), &p->dev), PFRT_OK)
        << pfrt_last_error(gGpu);
    pairs.push_back(std::move(p));
    return *pairs.back();
  }

  /// Sets element i of a pair on both sides.
  template <class T> void set(Pair &p, int64_t i, T v) {
    reinterpret_cast<T *>(p.host.data())[i] = v;
    ASSERT_EQ(pfrt_copy_from_host(gGpu, p.host.data(), &p.dev), PFRT_OK);
  }

  /// Makes a square f32 pair symmetric (K-FAC inverses are), on both sides.
  void symmetrize(Pair &p) {
    const int64_t n = p.cpu.shape[0];
    auto *v = reinterpret_cast<float *>(p.host.data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j)
        v[i * n + j] = v[j * n + i];
    ASSERT_EQ(pfrt_copy_from_host(gGpu, p.host.data(), &p.dev), PFRT_OK);
  }

  /// Runs f(ctx, onDevice) on both backends; both must succeed.
  template <class F> void both(F f) {
    ASSERT_EQ(f(gCpu, false), PFRT_OK) << "cpu: " << pfrt_last_error(gCpu);
    ASSERT_EQ(f(gGpu, true), PFRT_OK) << "cuda: " << pfrt_last_error(gGpu);
    ASSERT_EQ(pfrt_synchronize(gGpu), PFRT_OK) << pfrt_last_error(gGpu);
  }

  /// The device result of p, as doubles, next to the host result.
  void expectClose(Pair &p, double rtol, double atol, const char *what = "") {
    std::vector<unsigned char> back(p.host.size());
    ASSERT_EQ(pfrt_copy_to_host(gGpu, &p.dev, back.data()), PFRT_OK)
        << pfrt_last_error(gGpu);
    const int64_t n = p.bytes / pfrt_dtype_size(p.cpu.dtype);
    int failures = 0;
    for (int64_t i = 0; i < n && failures < 10; ++i) {
      const double want = valueAt(p.host, p.cpu.dtype, i);
      const double got = valueAt(back, p.cpu.dtype, i);
      if (got == want || (std::isnan(got) && std::isnan(want)))
        continue;
      if (!(std::fabs(got - want) <= atol + rtol * std::fabs(want))) {
        ADD_FAILURE() << what << " element " << i << ": cuda " << got
                      << ", cpu " << want;
        ++failures;
      }
    }
  }

  static double valueAt(const std::vector<unsigned char> &b, int32_t dtype,
                        int64_t i) {
    switch (dtype) {
    case PFRT_F32:
      return reinterpret_cast<const float *>(b.data())[i];
    case PFRT_F64:
      return reinterpret_cast<const double *>(b.data())[i];
    case PFRT_I32:
      return reinterpret_cast<const int32_t *>(b.data())[i];
    case PFRT_I64:
      return double(reinterpret_cast<const int64_t *>(b.data())[i]);
    case PFRT_F16: // the bits: casts to f16 are compared exactly
      return reinterpret_cast<const uint16_t *>(b.data())[i];
    default:
      return b[i * pfrt_dtype_size(dtype)];
    }
  }

  /// The device side of p, as doubles.
  std::vector<double> fromDevice(Pair &p) {
    std::vector<unsigned char> back(p.host.size());
    EXPECT_EQ(pfrt_copy_to_host(gGpu, &p.dev, back.data()), PFRT_OK)
        << pfrt_last_error(gGpu);
    std::vector<double> v(size_t(p.bytes / pfrt_dtype_size(p.cpu.dtype)));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = valueAt(back, p.cpu.dtype, int64_t(i));
    return v;
  }

  /// The largest magnitude of the host side of a float pair.
  static double maxAbs(const Pair &p) {
    double m = 0;
    for (int64_t i = 0; i < p.bytes / pfrt_dtype_size(p.cpu.dtype); ++i)
      m = std::max(m, std::fabs(valueAt(p.host, p.cpu.dtype, i)));
    return m;
  }

  /// A K-FAC factor [d', d'] of random [rows, d] activations (d' = d + 1
  /// with the ones column), computed once on the CPU and copied to the
  /// device, so both sides start from the same bytes.
  Pair &factorOf(int32_t dtype, int64_t rows, int64_t d, int bias, unsigned seed) {
    Pair &x = make(dtype, {rows, d}, -1, 1, seed);
    Pair &f = make(dtype, {d + bias, d + bias});
    EXPECT_EQ(pfrt_kfac_factor(gCpu, &x.cpu, bias, 1.0, PFRT_KFAC_OVERWRITE, 0, &f.cpu),
              PFRT_OK) << pfrt_last_error(gCpu);
    EXPECT_EQ(pfrt_copy_from_host(gGpu, f.host.data(), &f.dev), PFRT_OK)
        << pfrt_last_error(gGpu);
    return f;
  }

  /// pfrt_gelu_backward accumulating into dx, in f64 on the CPU, of f32
  /// pairs' host values (taken before the kernels under test run).
  std::vector<double> geluBackwardF64(Pair &y, Pair &dy, Pair &dx, int32_t approx) {
    auto widen = [](Pair &p) {
      const auto *f = reinterpret_cast<const float *>(p.host.data());
      return std::vector<double>(f, f + p.bytes / 4);
    };
    std::vector<double> y64 = widen(y), dy64 = widen(dy), dx64 = widen(dx);
    pfrt_tensor ty = y.cpu, tdy = dy.cpu, tdx = y.cpu;
    ty.dtype = tdy.dtype = tdx.dtype = PFRT_F64;
    ty.data = y64.data();
    tdy.data = dy64.data();
    tdx.data = dx64.data();
    EXPECT_EQ(pfrt_gelu_backward(gCpu, &ty, &tdy, approx, 1, &tdx), PFRT_OK)
        << pfrt_last_error(gCpu);
    return dx64;
  }

  /// Both sides of p within atol + rtol |want| of the reference `want`.
  void expectNearReference(Pair &p, const std::vector<double> &want, double rtol, double atol,
                           const char *what) {
    std::vector<double> dev = fromDevice(p);
    int failures = 0;
    for (size_t i = 0; i < want.size() && failures < 10; ++i) {
      const double cpu = valueAt(p.host, p.cpu.dtype, int64_t(i));
      for (auto [side, got] : {std::pair{"cpu", cpu}, std::pair{"cuda", dev[i]}})
        if (!(std::fabs(got - want[i]) <= atol + rtol * std::fabs(want[i]))) {
          ADD_FAILURE() << what << " element " << i << ": " << side << " " << got
                        << ", f64 reference " << want[i];
          ++failures;
        }
    }
  }

  /// Random bits in every f16 element of p, on both sides (make() fills
  /// only the low byte).
  void randomHalfBits(Pair &p, unsigned seed) {
    std::mt19937 gen(seed);
    auto *bits = reinterpret_cast<uint16_t *>(p.host.data());
    for (int64_t i = 0; i < p.bytes / 2; ++i)
      bits[i] = uint16_t(gen());
    ASSERT_EQ(pfrt_copy_from_host(gGpu, p.host.data(), &p.dev), PFRT_OK);
  }

  /// The device side's status of a call: its own, or, when it succeeded,
  /// that of the next pfrt_synchronize, where the CUDA backend reports what
  /// its kernels found (DeviceError.h); the CPU side fails in the call.
  static pfrt_status deviceStatus(pfrt_status call) {
    return call != PFRT_OK ? call : pfrt_synchronize(gGpu);
  }

  /// Both sides failed alike: status and message.
  static void expectSameError(pfrt_status cpu, pfrt_status gpu, pfrt_status want) {
    EXPECT_EQ(cpu, want) << pfrt_last_error(gCpu);
    EXPECT_EQ(gpu, want) << pfrt_last_error(gGpu);
    EXPECT_EQ(std::string(pfrt_last_error(gGpu)), std::string(pfrt_last_error(gCpu)));
  }

  std::vector<std::unique_ptr<Pair>> pairs;
};

/// NumPy's broadcast of two shapes (the tests' shapes do broadcast).
Dims broadcastDims(const Dims &a, const Dims &b) {
  Dims out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

/// The descriptor of p for the side being run.
const pfrt_tensor *on(Pair &p, bool dev) { return dev ? &p.dev : &p.cpu; }

using Binary = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                               const pfrt_tensor *, const pfrt_tensor *);
using Unary = pfrt_status (*)(pfrt_context *, const pfrt_tensor *,
                              const pfrt_tensor *);

TEST_F(CudaKernels, BinaryOpsBroadcast) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (Binary op : {pfrt_add, pfrt_sub, pfrt_mul, pfrt_div, pfrt_pow, pfrt_min, pfrt_max}) {
      Pair &a = make(dtype, {3, 1, 5, 7}, 0.1, 2, 1), &b = make(dtype, {4, 1, 7}, -2, 2, 2);
      Pair &out = make(dtype, {3, 4, 5, 7});
      both([&](pfrt_context *c, bool d) { return op(c, on(a, d), on(b, d), on(out, d)); });
      expectClose(out, dtype == PFRT_F32 ? 1e-6 : 1e-14, 0, "binary");
    }
}

TEST_F(CudaKernels, IntegerBinaryCompareWhere) {
  for (int32_t dtype : {PFRT_I32, PFRT_I64})
    for (Binary op : {pfrt_add, pfrt_sub, pfrt_mul, pfrt_min, pfrt_max}) {
      Pair &a = make(dtype, {3, 1, 5}, -1000, 1000, 60), &b = make(dtype, {4, 1}, -9, 9, 61);
      Pair &out = make(dtype, {3, 4, 5});
      both([&](pfrt_context *c, bool d) { return op(c, on(a, d), on(b, d), on(out, d)); });
      expectClose(out, 0, 0, "integer binary");
    }
  for (int32_t dtype : {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64})
    for (int32_t kind = PFRT_COMPARE_EQUAL; kind <= PFRT_COMPARE_LESS_EQUAL; ++kind) {
      Pair &a = make(dtype, {2, 3, 7}, -3, 3, 62), &b = make(dtype, {3, 1}, -3, 3, 63);
      Pair &out = make(PFRT_BOOL, {2, 3, 7});
      both([&](pfrt_context *c, bool d) {
        return pfrt_compare(c, on(a, d), on(b, d), kind, on(out, d));
      });
      expectClose(out, 0, 0, "compare");
    }
  for (int32_t dtype : {PFRT_F32, PFRT_I64, PFRT_BOOL}) {
    Pair &cond = make(PFRT_BOOL, {5, 1}, 0, 1, 64), &x = make(dtype, {5, 9}, -4, 4, 65);
    Pair &y = make(dtype, {9}, -4, 4, 66), &out = make(dtype, {5, 9});
    both([&](pfrt_context *c, bool d) {
      return pfrt_where(c, on(cond, d), on(x, d), on(y, d), on(out, d));
    });
    expectClose(out, 0, 0, "where");
  }
}

TEST_F(CudaKernels, BoolOpsAndClassification) {
  for (int32_t kind : {PFRT_LOGICAL_AND, PFRT_LOGICAL_OR, PFRT_LOGICAL_XOR}) {
    Pair &a = make(PFRT_BOOL, {3, 1, 9}, 0, 1, 74), &b = make(PFRT_BOOL, {5, 1}, 0, 1, 75);
    Pair &out = make(PFRT_BOOL, {3, 5, 9});
    both([&](pfrt_context *c, bool d) {
      return pfrt_logical(c, on(a, d), on(b, d), kind, on(out, d));
    });
    expectClose(out, 0, 0, "logical");
  }
  Pair &x = make(PFRT_BOOL, {77}, 0, 1, 76), &nx = make(PFRT_BOOL, {77});
  both([&](pfrt_context *c, bool d) { return pfrt_not(c, on(x, d), on(nx, d)); });
  expectClose(nx, 0, 0, "not");
  Pair &f = make(PFRT_F64, {6}, -1, 1, 77);
  set<double>(f, 0, INFINITY);
  set<double>(f, 2, -INFINITY);
  set<double>(f, 4, NAN);
  Pair &isNan = make(PFRT_BOOL, {6}), &isInf = make(PFRT_BOOL, {6});
  both([&](pfrt_context *c, bool d) { return pfrt_is_nan(c, on(f, d), on(isNan, d)); });
  both([&](pfrt_context *c, bool d) { return pfrt_is_inf(c, on(f, d), 1, 0, on(isInf, d)); });
  expectClose(isNan, 0, 0, "is_nan");
  expectClose(isInf, 0, 0, "is_inf");
}

TEST_F(CudaKernels, ReduceToShape) {
  Pair &grad = make(PFRT_F32, {4, 3, 5, 7}, -1, 1, 78);
  for (const Dims &dims : {Dims{5, 1}, Dims{3, 1, 7}, Dims{1}, Dims{4, 3, 5, 7}}) {
    Pair &out = make(PFRT_F32, dims, -1, 1, 79);
    both([&](pfrt_context *c, bool d) { return pfrt_reduce_to_shape(c, on(grad, d), 1, on(out, d)); });
    expectClose(out, 1e-5, 1e-6, "reduce_to_shape");
  }
}

TEST_F(CudaKernels, CastBetweenDtypes) {
  const int32_t dtypes[] = {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL};
  for (int32_t from : dtypes)
    for (int32_t to : dtypes) {
      Pair &x = make(from, {3, 37}, -300, 300, 67), &out = make(to, {3, 37});
      both([&](pfrt_context *c, bool d) { return pfrt_cast(c, on(x, d), on(out, d)); });
      expectClose(out, 0, 0, "cast");
    }
}

TEST_F(CudaKernels, BinaryLargeAndInPlace) {
  Pair &a = make(PFRT_F32, {1000003}, -1, 1, 3), &b = make(PFRT_F32, {1000003}, -1, 1, 4);
  both([&](pfrt_context *c, bool d) { return pfrt_mul(c, on(a, d), on(b, d), on(a, d)); });
  expectClose(a, 0, 0, "in-place mul");
}

// The accumulate functions' one pass: the CPU's bits (mul, add, div each
// rounded, no fused multiply-add), in place on the running sum.
TEST_F(CudaKernels, WeightedAddInPlace) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
    Pair &sum = make(dtype, {100003}, -3, 3, 80), &x = make(dtype, {100003}, -1e3, 1e3, 81);
    both([&](pfrt_context *c, bool d) {
      return pfrt_weighted_add(c, on(sum, d), on(x, d), 37, 1, on(sum, d));
    });
    expectClose(sum, 0, 0, "running sum");
    both([&](pfrt_context *c, bool d) {
      return pfrt_weighted_add(c, on(sum, d), on(x, d), 41, 151, on(sum, d));
    });
    expectClose(sum, 0, 0, "divided by the total");
  }
}

TEST_F(CudaKernels, UnaryOpsAndGelu) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
    const double rtol = dtype == PFRT_F32 ? 4e-6 : 1e-13, atol = dtype == PFRT_F32 ? 1e-6 : 1e-15;
    for (Unary op : {pfrt_erf, pfrt_tanh, pfrt_exp, pfrt_neg, pfrt_abs, pfrt_sign,
                     pfrt_reciprocal}) {
      Pair &x = make(dtype, {17, 33}, -4, 4, 5), &out = make(dtype, {17, 33});
      both([&](pfrt_context *c, bool d) { return op(c, on(x, d), on(out, d)); });
      expectClose(out, rtol, atol, "unary");
    }
    Pair &x = make(dtype, {17, 33}, 0, 4, 6), &out = make(dtype, {17, 33});
    both([&](pfrt_context *c, bool d) { return pfrt_sqrt(c, on(x, d), on(out, d)); });
    expectClose(out, rtol, atol, "sqrt");
    for (int32_t approx : {PFRT_GELU_EXACT, PFRT_GELU_TANH}) {
      Pair &y = make(dtype, {5, 1001}, -5, 5, 7), &g = make(dtype, {5, 1001});
      Pair &dy = make(dtype, {5, 1001}, -1, 1, 8), &dx = make(dtype, {5, 1001}, -1, 1, 9);
      // f32 gelu': the CPU's vectorized erf/exp and CUDA's erff/expf round
      // differently (1.7e-5 apart relative where gelu' crosses zero), so each
      // side is held to the f64 result of the same inputs instead.
      std::vector<double> want;
      if (dtype == PFRT_F32)
        want = geluBackwardF64(y, dy, dx, approx);
      both([&](pfrt_context *c, bool d) { return pfrt_gelu(c, on(y, d), approx, on(g, d)); });
      both([&](pfrt_context *c, bool d) {
        return pfrt_gelu_backward(c, on(y, d), on(dy, d), approx, 1, on(dx, d));
      });
      expectClose(g, rtol, atol, "gelu");
      if (dtype == PFRT_F64) {
        expectClose(dx, rtol, atol, "gelu_backward");
        continue;
      }
      expectNearReference(dx, want, 4e-6, 1e-5, "gelu_backward");
    }
  }
}

TEST_F(CudaKernels, ReadScalar) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL}) {
    Pair &x = make(dtype, {1, 1}, -100, 100, 21);
    double onCpu = 0, onGpu = 0;
    ASSERT_EQ(pfrt_read_scalar(gCpu, &x.cpu, &onCpu), PFRT_OK) << pfrt_last_error(gCpu);
    ASSERT_EQ(pfrt_read_scalar(gGpu, &x.dev, &onGpu), PFRT_OK) << pfrt_last_error(gGpu);
    EXPECT_EQ(onGpu, onCpu) << pfrt_dtype_name(dtype);
  }
  Pair &two = make(PFRT_F32, {2});
  double v = 0;
  EXPECT_EQ(pfrt_read_scalar(gGpu, &two.dev, &v), PFRT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error(gGpu)).find("has 2 elements"), std::string::npos)
      << pfrt_last_error(gGpu);
}

TEST_F(CudaKernels, Fill) {
  // i8: how the drivers zero a whole output buffer (a byte view of it).
  for (int32_t dtype : {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL}) {
    Pair &out = make(dtype, {3, 77});
    both([&](pfrt_context *c, bool d) { return pfrt_fill(c, on(out, d), -3.0); });
    expectClose(out, 0, 0, "fill");
  }
}

TEST_F(CudaKernels, SoftmaxForwardBackward) {
  for (int64_t axis : {-1, 1}) {
    Pair &x = make(PFRT_F32, {3, 37, 1001}, -8, 8, 10), &y = make(PFRT_F32, {3, 37, 1001});
    Pair &dy = make(PFRT_F32, {3, 37, 1001}, -1, 1, 11), &dx = make(PFRT_F32, {3, 37, 1001});
    both([&](pfrt_context *c, bool d) { return pfrt_softmax(c, on(x, d), axis, on(y, d)); });
    expectClose(y, 1e-5, 1e-9, "softmax");
    both([&](pfrt_context *c, bool d) {
      return pfrt_softmax_backward(c, on(y, d), on(dy, d), axis, 0, on(dx, d));
    });
    expectClose(dx, 1e-4, 1e-8, "softmax_backward");
  }
}

TEST_F(CudaKernels, LayerNormForwardBackward) {
  const Dims dims = {4, 33, 769}, param = {769}, stats = {4, 33, 1};
  Pair &x = make(PFRT_F32, dims, -3, 3, 12), &scale = make(PFRT_F32, param, 0.5, 1.5, 13);
  Pair &bias = make(PFRT_F32, param, -1, 1, 14), &y = make(PFRT_F32, dims);
  Pair &mean = make(PFRT_F32, stats), &inv = make(PFRT_F32, stats);
  both([&](pfrt_context *c, bool d) {
    return pfrt_layer_norm(c, on(x, d), on(scale, d), on(bias, d), -1, 1e-12, on(y, d),
                           on(mean, d), on(inv, d));
  });
  expectClose(y, 1e-5, 1e-5, "layer_norm");
  expectClose(mean, 1e-5, 1e-6, "mean");
  expectClose(inv, 1e-5, 1e-6, "inv_std_dev");
  Pair &dy = make(PFRT_F32, dims, -1, 1, 15), &dx = make(PFRT_F32, dims, -1, 1, 16);
  Pair &ds = make(PFRT_F32, param, -1, 1, 17), &db = make(PFRT_F32, param, -1, 1, 18);
  for (bool given : {true, false}) {
    both([&](pfrt_context *c, bool d) {
      return pfrt_layer_norm_backward(c, on(x, d), on(scale, d),
                                      given ? on(mean, d) : nullptr,
                                      given ? on(inv, d) : nullptr, on(dy, d), -1,
                                      1e-12, 1, 1, on(dx, d), on(ds, d), on(db, d));
    });
    expectClose(dx, 1e-4, 1e-5, "grad_x");
    expectClose(ds, 1e-4, 1e-4, "grad_scale");
    expectClose(db, 1e-4, 1e-4, "grad_bias");
  }
}

TEST_F(CudaKernels, MaskedCrossEntropy) {
  const int64_t rows = 67, v = 30522;
  Pair &logits = make(PFRT_F32, {rows, v}, -6, 6, 19);
  Pair &labels = make(PFRT_I64, {rows}, 0, v - 1, 20);
  for (int64_t r = 0; r < rows; r += 3)
    set<int64_t>(labels, r, -100);
  Pair &loss = make(PFRT_F32, {}), &grad = make(PFRT_F32, {rows, v});
  Pair &count = make(PFRT_I64, {});
  both([&](pfrt_context *c, bool d) {
    return pfrt_softmax_cross_entropy(c, on(logits, d), on(labels, d), -100, 0.5,
                                      on(loss, d), on(grad, d), on(count, d));
  });
  expectClose(loss, 1e-5, 0, "loss");
  expectClose(grad, 1e-4, 1e-9, "grad_logits");
  expectClose(count, 0, 0, "count");
  // Labels out of range: the CPU's status and message (the first bad row),
  // reported by CUDA at the next synchronize without a wait in the call.
  set<int64_t>(labels, 1, v);
  set<int64_t>(labels, 5, -2);
  expectSameError(pfrt_softmax_cross_entropy(gCpu, &logits.cpu, &labels.cpu, -100, 1.0, &loss.cpu,
                                             &grad.cpu, nullptr),
                  deviceStatus(pfrt_softmax_cross_entropy(gGpu, &logits.dev, &labels.dev, -100, 1.0,
                                                          &loss.dev, &grad.dev, nullptr)),
                  PFRT_INVALID_ARGUMENT);
}

TEST_F(CudaKernels, ReduceSumMean) {
  Pair &x = make(PFRT_F32, {5, 7, 9, 3}, -1, 1, 21);
  const int64_t axes[] = {0, 2};
  Pair &s = make(PFRT_F32, {1, 7, 1, 3}), &m = make(PFRT_F32, {7, 3}), &all = make(PFRT_F32, {});
  both([&](pfrt_context *c, bool d) { return pfrt_reduce_sum(c, on(x, d), axes, 2, 1, on(s, d)); });
  both([&](pfrt_context *c, bool d) { return pfrt_reduce_mean(c, on(x, d), axes, 2, 0, on(m, d)); });
  both([&](pfrt_context *c, bool d) { return pfrt_reduce_sum(c, on(x, d), nullptr, 0, 0, on(all, d)); });
  expectClose(s, 1e-5, 1e-6, "reduce_sum");
  expectClose(m, 1e-5, 1e-6, "reduce_mean");
  expectClose(all, 1e-5, 1e-5, "reduce_sum all");
}

TEST_F(CudaKernels, ReduceMaxMin) {
  const int64_t axes[] = {1, 3};
  for (int32_t dtype : {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL})
    for (auto fn : {pfrt_reduce_max, pfrt_reduce_min}) {
      Pair &x = make(dtype, {5, 7, 3, 9}, -100, 100, 80);
      Pair &out = make(dtype, {5, 1, 3, 1}), &all = make(dtype, {});
      both([&](pfrt_context *c, bool d) { return fn(c, on(x, d), axes, 2, 1, on(out, d)); });
      both([&](pfrt_context *c, bool d) { return fn(c, on(x, d), nullptr, 0, 0, on(all, d)); });
      expectClose(out, 0, 0, "reduce max/min");
      expectClose(all, 0, 0, "reduce max/min over all");
    }
  Pair &f = make(PFRT_F32, {4, 6}, -1, 1, 81), &m = make(PFRT_F32, {4});
  set<float>(f, 7, NAN);
  const int64_t last = -1;
  both([&](pfrt_context *c, bool d) { return pfrt_reduce_max(c, on(f, d), &last, 1, 0, on(m, d)); });
  expectClose(m, 0, 0, "reduce_max with NaN");
}

TEST_F(CudaKernels, MatmulShapes) {
  struct Case {
    Dims a, b, out;
  } cases[] = {{{2, 3, 37, 19}, {19, 23}, {2, 3, 37, 23}},
               {{6, 37, 19}, {6, 19, 23}, {6, 37, 23}},
               {{5, 7}, {7}, {5}},
               {{7}, {7, 4}, {4}},
               {{1, 64}, {8, 64, 65}, {8, 1, 65}}};
  for (const Case &k : cases)
    for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
      Pair &a = make(dtype, k.a, -1, 1, 22), &b = make(dtype, k.b, -1, 1, 23);
      Pair &out = make(dtype, k.out);
      both([&](pfrt_context *c, bool d) { return pfrt_matmul(c, on(a, d), on(b, d), on(out, d)); });
      expectClose(out, dtype == PFRT_F32 ? 1e-4 : 1e-12, 1e-5, "matmul");
    }
}

TEST_F(CudaKernels, GemmTransposesAndBias) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t m = 33, n = 17, k = 29;
      Pair &a = make(PFRT_F32, ta ? Dims{k, m} : Dims{m, k}, -1, 1, 24);
      Pair &b = make(PFRT_F32, tb ? Dims{n, k} : Dims{k, n}, -1, 1, 25);
      Pair &c = make(PFRT_F32, {n}, -1, 1, 26), &out = make(PFRT_F32, {m, n});
      both([&](pfrt_context *x, bool d) {
        return pfrt_gemm(x, on(a, d), on(b, d), on(c, d), 0.5, 2.0, ta, tb, on(out, d));
      });
      expectClose(out, 1e-4, 1e-5, "gemm");
    }
}

TEST_F(CudaKernels, LinearForwardBackward) {
  for (int wt = 0; wt < 2; ++wt) {
    const int64_t in = 67, outF = 45;
    Pair &x = make(PFRT_F32, {3, 11, in}, -1, 1, 27);
    Pair &w = make(PFRT_F32, wt ? Dims{outF, in} : Dims{in, outF}, -1, 1, 28);
    Pair &bias = make(PFRT_F32, {outF}, -1, 1, 29), &y = make(PFRT_F32, {3, 11, outF});
    both([&](pfrt_context *c, bool d) {
      return pfrt_linear(c, on(x, d), on(w, d), on(bias, d), wt, on(y, d));
    });
    expectClose(y, 1e-4, 1e-5, "linear");
    Pair &dy = make(PFRT_F32, {3, 11, outF}, -1, 1, 30), &dx = make(PFRT_F32, {3, 11, in}, -1, 1, 31);
    Pair &dw = make(PFRT_F32, wt ? Dims{outF, in} : Dims{in, outF}, -1, 1, 32);
    Pair &db = make(PFRT_F32, {outF}, -1, 1, 33);
    both([&](pfrt_context *c, bool d) {
      return pfrt_linear_backward(c, on(x, d), on(w, d), on(dy, d), wt, 1, 1, on(dx, d),
                                  on(dw, d), on(db, d));
    });
    expectClose(dx, 1e-4, 1e-5, "grad_x");
    expectClose(dw, 1e-4, 1e-5, "grad_w");
    expectClose(db, 1e-4, 1e-5, "grad_bias");
  }
}

TEST_F(CudaKernels, GemmPrecisionTf32AndBf16) {
  // The model GEMMs at TF32 / BF16 stay within their inputs' rounding of
  // the CPU's f32 result (relative to the output's largest magnitude: 10
  // and 7 mantissa bits, 257-long sums); K-FAC's factor stays f32.
  Pair &x = make(PFRT_F32, {300, 257}, -1, 1, 61), &w = make(PFRT_F32, {129, 257}, -1, 1, 62);
  Pair &y = make(PFRT_F32, {300, 129});
  Pair &a = make(PFRT_F32, {4, 33, 257}, -1, 1, 63), &b = make(PFRT_F32, {4, 257, 17}, -1, 1, 64);
  Pair &ab = make(PFRT_F32, {4, 33, 17});
  Pair &dy = make(PFRT_F32, {300, 129}, -1, 1, 65), &dw = make(PFRT_F32, {129, 257});
  Pair &factor = make(PFRT_F32, {258, 258});
  auto expectScaled = [&](Pair &p, double tol, const char *what) {
    std::vector<double> dev = fromDevice(p);
    const double scale = maxAbs(p);
    double worst = 0;
    for (size_t i = 0; i < dev.size(); ++i)
      worst = std::max(worst, std::fabs(dev[i] - valueAt(p.host, PFRT_F32, int64_t(i))));
    EXPECT_LE(worst, tol * scale) << what << ": max |cuda - cpu| " << worst << " of " << scale;
  };
  for (auto [precision, tol] : {std::pair{PFRT_GEMM_TF32, 5e-3}, std::pair{PFRT_GEMM_BF16, 4e-2}}) {
    ASSERT_EQ(pfrt_context_set_gemm_precision(gGpu, precision), PFRT_OK);
    both([&](pfrt_context *c, bool d) {
      return pfrt_linear(c, on(x, d), on(w, d), nullptr, 1, on(y, d));
    });
    expectScaled(y, tol, "linear");
    both([&](pfrt_context *c, bool d) { return pfrt_matmul(c, on(a, d), on(b, d), on(ab, d)); });
    expectScaled(ab, tol, "matmul");
    both([&](pfrt_context *c, bool d) {
      return pfrt_linear_backward(c, on(x, d), on(w, d), on(dy, d), 1, 0, 0, nullptr, on(dw, d),
                                  nullptr);
    });
    expectScaled(dw, tol, "grad_w");
    both([&](pfrt_context *c, bool d) {
      return pfrt_kfac_factor(c, on(x, d), 1, 1.0, PFRT_KFAC_OVERWRITE, 0, on(factor, d));
    });
    expectClose(factor, 1e-4, 1e-5, "K-FAC factor (f32 whatever the GEMM precision)");
  }
  ASSERT_EQ(pfrt_context_set_gemm_precision(gGpu, PFRT_GEMM_FP32), PFRT_OK);
}

TEST_F(CudaKernels, GatherNdScatterNdCumsumTrilu) {
  // gather_nd with a batch dimension and negative indices (i64 and i32).
  Pair &data = make(PFRT_F32, {3, 5, 4, 6}, -1, 1, 71);
  for (int32_t dtype : {PFRT_I64, PFRT_I32}) {
    Pair &idx = make(dtype, {3, 7, 2}, -4, 3, 72);
    Pair &out = make(PFRT_F32, {3, 7, 6});
    both([&](pfrt_context *c, bool d) {
      return pfrt_gather_nd(c, on(data, d), on(idx, d), 1, on(out, d));
    });
    expectClose(out, 0, 0, "gather_nd");
  }
  // scatter_nd with repeated tuples: every reduction, in the CPU's order.
  for (int32_t reduction : {PFRT_SCATTER_NONE, PFRT_SCATTER_ADD, PFRT_SCATTER_MUL, PFRT_SCATTER_MAX,
                            PFRT_SCATTER_MIN}) {
    Pair &base = make(PFRT_F32, {9, 33}, -1, 1, 73);
    Pair &idx = make(PFRT_I64, {21, 1}, -9, 8, 74); // repeats: 21 tuples over 9 rows
    Pair &upd = make(PFRT_F32, {21, 33}, -1, 1, 75), &out = make(PFRT_F32, {9, 33});
    both([&](pfrt_context *c, bool d) {
      return pfrt_scatter_nd(c, on(base, d), on(idx, d), on(upd, d), reduction, on(out, d));
    });
    expectClose(out, 0, 0, "scatter_nd");
  }
  // The masked-LM gather of --predictions and its gradient: [B, S, H] data,
  // [B, P, 1] positions with batch_dims 1, scatter-added back in place.
  Pair &hidden = make(PFRT_F32, {4, 37, 65}, -1, 1, 76);
  Pair &pos = make(PFRT_I64, {4, 9, 1}, 0, 36, 77), &picked = make(PFRT_F32, {4, 9, 65});
  both([&](pfrt_context *c, bool d) {
    return pfrt_gather_nd(c, on(hidden, d), on(pos, d), 1, on(picked, d));
  });
  expectClose(picked, 0, 0, "gather_nd (predictions)");
  for (int32_t dtype : {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64})
    for (auto [exclusive, reverse] :
         {std::pair{0, 0}, std::pair{1, 0}, std::pair{0, 1}, std::pair{1, 1}}) {
      Pair &x = make(dtype, {3, 129, 5}, -50, 50, 78), &y = make(dtype, {3, 129, 5});
      both([&](pfrt_context *c, bool d) {
        return pfrt_cumsum(c, on(x, d), 1, exclusive, reverse, on(y, d));
      });
      expectClose(y, 0, 0, "cumsum");
    }
  for (int upper : {0, 1})
    for (int64_t k : {-3, 0, 2}) {
      Pair &x = make(PFRT_F64, {2, 7, 11}, -1, 1, 79), &y = make(PFRT_F64, {2, 7, 11});
      both([&](pfrt_context *c, bool d) { return pfrt_trilu(c, on(x, d), k, upper, on(y, d)); });
      expectClose(y, 0, 0, "trilu");
    }
  // Bad indices: the same message on both sides, nothing launched.
  Pair &bad = make(PFRT_I64, {3, 7, 2}, 10, 20, 80), &sink = make(PFRT_F32, {3, 7, 6});
  EXPECT_EQ(pfrt_gather_nd(gGpu, &data.dev, &bad.dev, 1, &sink.dev), PFRT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error(gGpu)).find("out of range"), std::string::npos)
      << pfrt_last_error(gGpu);
}

TEST_F(CudaKernels, DataMovement) {
  Pair &x = make(PFRT_F32, {3, 5, 7}, -1, 1, 34);
  const int64_t perm[] = {2, 0, 1};
  Pair &t = make(PFRT_F32, {7, 3, 5});
  both([&](pfrt_context *c, bool d) { return pfrt_transpose(c, on(x, d), perm, 3, on(t, d)); });
  expectClose(t, 0, 0, "transpose");
  const int64_t starts[] = {-1, 1}, ends[] = {INT64_MIN, 6}, axes[] = {2, 1}, steps[] = {-2, 2};
  // axis 2: 6, 4, 2, 0; axis 1: 1, 3.
  Pair &s = make(PFRT_F32, {3, 2, 4});
  both([&](pfrt_context *c, bool d) {
    return pfrt_slice(c, on(x, d), starts, ends, axes, steps, 2, on(s, d));
  });
  expectClose(s, 0, 0, "slice");
  Pair &small = make(PFRT_I64, {5, 1}, -9, 9, 35), &e = make(PFRT_I64, {2, 5, 4});
  both([&](pfrt_context *c, bool d) { return pfrt_expand(c, on(small, d), on(e, d)); });
  expectClose(e, 0, 0, "expand");
  Pair &p0 = make(PFRT_F64, {2, 1, 3}, -1, 1, 36), &p1 = make(PFRT_F64, {2, 4, 3}, -1, 1, 37);
  Pair &p2 = make(PFRT_F64, {2, 2, 3}, -1, 1, 38), &cat = make(PFRT_F64, {2, 7, 3});
  both([&](pfrt_context *c, bool d) {
    const pfrt_tensor list[3] = {*on(p0, d), *on(p1, d), *on(p2, d)};
    return pfrt_concat(c, list, 3, 1, on(cat, d));
  });
  expectClose(cat, 0, 0, "concat");
  Pair &cp = make(PFRT_F32, {15, 7});
  both([&](pfrt_context *c, bool d) { return pfrt_reshape(c, on(x, d), on(cp, d)); });
  expectClose(cp, 0, 0, "reshape");
}

TEST_F(CudaKernels, BinaryBackwardBroadcast) {
  // Both operands broadcast, neither, a scalar, and partial broadcasts on
  // each side; a's gradient accumulates, b's is overwritten.
  const std::pair<Dims, Dims> cases[] = {
      {{3, 1, 5, 7}, {4, 1, 7}}, {{5, 9}, {5, 9}}, {{}, {6, 3}}, {{2, 1, 1}, {1, 3, 33}}};
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (int32_t kind = PFRT_BINARY_ADD; kind <= PFRT_BINARY_POW; ++kind)
      for (const auto &[da, db] : cases) {
        const Dims full = broadcastDims(da, db);
        // |b| >= 0.25 keeps div's gradients moderate; pow's base positive.
        Pair &a = make(dtype, da, 0.2, 2, 81), &b = make(dtype, db, 0.25, 2, 82);
        Pair &dy = make(dtype, full, -1, 1, 83);
        Pair &ga = make(dtype, da, -1, 1, 84), &gb = make(dtype, db, -1, 1, 85);
        both([&](pfrt_context *c, bool d) {
          return pfrt_binary_backward(c, kind, on(a, d), on(b, d), on(dy, d), 1, 0, on(ga, d),
                                      on(gb, d));
        });
        const double rtol = dtype == PFRT_F32 ? 1e-5 : 1e-12, atol = rtol;
        expectClose(ga, rtol, atol, "binary_backward grad_a");
        expectClose(gb, rtol, atol, "binary_backward grad_b");
        both([&](pfrt_context *c, bool d) { // only one gradient wanted
          return pfrt_binary_backward(c, kind, on(a, d), on(b, d), on(dy, d), 0, 0, nullptr,
                                      on(gb, d));
        });
        expectClose(gb, rtol, atol, "binary_backward grad_b alone");
      }
  // A wrong gradient shape: the CPU's message.
  Pair &a = make(PFRT_F32, {3, 4}), &b = make(PFRT_F32, {4}), &dy = make(PFRT_F32, {3, 4});
  Pair &wrong = make(PFRT_F32, {3});
  expectSameError(pfrt_binary_backward(gCpu, PFRT_BINARY_MUL, &a.cpu, &b.cpu, &dy.cpu, 0, 0,
                                       nullptr, &wrong.cpu),
                  pfrt_binary_backward(gGpu, PFRT_BINARY_MUL, &a.dev, &b.dev, &dy.dev, 0, 0,
                                       nullptr, &wrong.dev),
                  PFRT_INVALID_ARGUMENT);
}

TEST_F(CudaKernels, UnaryBackward) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (int32_t kind = PFRT_UNARY_SQRT; kind <= PFRT_UNARY_NEG; ++kind) {
      const double lo = kind == PFRT_UNARY_SQRT ? 0.1 : -0.99;
      Pair &v = make(dtype, {17, 33}, lo, 0.99, 86), &dy = make(dtype, {17, 33}, -1, 1, 87);
      Pair &dx = make(dtype, {17, 33}, -1, 1, 88);
      const double rtol = dtype == PFRT_F32 ? 4e-6 : 1e-13;
      both([&](pfrt_context *c, bool d) {
        return pfrt_unary_backward(c, kind, on(v, d), on(dy, d), 1, on(dx, d));
      });
      expectClose(dx, rtol, 1e-7, "unary_backward accumulating");
      both([&](pfrt_context *c, bool d) { // in place: grad_in is grad_out
        return pfrt_unary_backward(c, kind, on(v, d), on(dy, d), 0, on(dy, d));
      });
      expectClose(dy, rtol, 1e-7, "unary_backward in place");
    }
  Pair &x = make(PFRT_F32, {4}), &dy = make(PFRT_F32, {4}), &dx = make(PFRT_F32, {4});
  expectSameError(pfrt_unary_backward(gCpu, 9, &x.cpu, &dy.cpu, 0, &dx.cpu),
                  pfrt_unary_backward(gGpu, 9, &x.dev, &dy.dev, 0, &dx.dev), PFRT_INVALID_ARGUMENT);
}

TEST_F(CudaKernels, MatmulBackward) {
  struct Case {
    Dims a, b, out;
  } cases[] = {{{2, 3, 37, 19}, {19, 23}, {2, 3, 37, 23}}, // one GEMM per gradient
               {{6, 37, 19}, {6, 19, 23}, {6, 37, 23}},    // strided batched
               {{1, 64}, {8, 64, 65}, {8, 1, 65}},         // a shared: summed over 8
               {{2, 1, 9, 5}, {1, 3, 5, 4}, {2, 3, 9, 4}}, // partial broadcasts
               {{5, 7}, {7}, {5}},
               {{7}, {7, 4}, {4}},
               {{3, 0, 5}, {5, 6}, {3, 0, 6}}}; // empty rows: grad_b is 0
  for (const Case &k : cases)
    for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
      Pair &a = make(dtype, k.a, -1, 1, 89), &b = make(dtype, k.b, -1, 1, 90);
      Pair &dy = make(dtype, k.out, -1, 1, 91);
      Pair &ga = make(dtype, k.a, -1, 1, 92), &gb = make(dtype, k.b, -1, 1, 93);
      const double rtol = dtype == PFRT_F32 ? 1e-4 : 1e-12, atol = dtype == PFRT_F32 ? 1e-5 : 1e-12;
      for (auto [accA, accB] : {std::pair{1, 0}, std::pair{0, 1}}) {
        both([&](pfrt_context *c, bool d) {
          return pfrt_matmul_backward(c, on(a, d), on(b, d), on(dy, d), accA, accB, on(ga, d),
                                      on(gb, d));
        });
        expectClose(ga, rtol, atol, "matmul_backward grad_a");
        expectClose(gb, rtol, atol, "matmul_backward grad_b");
      }
    }
  Pair &a = make(PFRT_F32, {3, 4}), &b = make(PFRT_F32, {5, 6}), &dy = make(PFRT_F32, {3, 6});
  expectSameError(pfrt_matmul_backward(gCpu, &a.cpu, &b.cpu, &dy.cpu, 0, 0, nullptr, nullptr),
                  pfrt_matmul_backward(gGpu, &a.dev, &b.dev, &dy.dev, 0, 0, nullptr, nullptr),
                  PFRT_INVALID_ARGUMENT);
}

TEST_F(CudaKernels, IntegerDivisionAndNeg) {
  for (int32_t dtype : {PFRT_I32, PFRT_I64}) {
    Pair &a = make(dtype, {3, 1, 5}, -1000, 1000, 94), &b = make(dtype, {4, 1}, 1, 9, 95);
    Pair &out = make(dtype, {3, 4, 5});
    if (dtype == PFRT_I32) {
      set<int32_t>(b, 0, -1);
      set<int32_t>(b, 2, -7);
    } else {
      set<int64_t>(b, 0, -1);
      set<int64_t>(b, 2, -7);
    }
    both([&](pfrt_context *c, bool d) { return pfrt_div(c, on(a, d), on(b, d), on(out, d)); });
    expectClose(out, 0, 0, "integer div");
    // A zero divisor: PFRT_NUMERIC with the CPU's message (at the next
    // synchronize on CUDA), then the context works again.
    if (dtype == PFRT_I32)
      set<int32_t>(b, 3, 0);
    else
      set<int64_t>(b, 3, 0);
    expectSameError(pfrt_div(gCpu, &a.cpu, &b.cpu, &out.cpu),
                    deviceStatus(pfrt_div(gGpu, &a.dev, &b.dev, &out.dev)), PFRT_NUMERIC);
    both([&](pfrt_context *c, bool d) { return pfrt_mul(c, on(a, d), on(b, d), on(out, d)); });
    expectClose(out, 0, 0, "mul after the error");
  }
  for (int32_t dtype : {PFRT_I8, PFRT_I32, PFRT_I64}) {
    Pair &x = make(dtype, {3, 37}, -128, 127, 96), &out = make(dtype, {3, 37});
    both([&](pfrt_context *c, bool d) { return pfrt_neg(c, on(x, d), on(out, d)); });
    expectClose(out, 0, 0, "integer neg");
  }
}

TEST_F(CudaKernels, CastToAndFromF16) {
  const int32_t dtypes[] = {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL};
  Pair &half = make(PFRT_F16, {3, 1001});
  randomHalfBits(half, 97);
  for (int32_t to : dtypes) {
    Pair &out = make(to, {3, 1001});
    both([&](pfrt_context *c, bool d) { return pfrt_cast(c, on(half, d), on(out, d)); });
    expectClose(out, 0, 0, "cast from f16");
  }
  for (int32_t from : dtypes) {
    // Past f16's largest finite value (65504) and into its subnormals.
    Pair &x = make(from, {3, 1001}, -70000, 70000, 98), &out = make(PFRT_F16, {3, 1001});
    both([&](pfrt_context *c, bool d) { return pfrt_cast(c, on(x, d), on(out, d)); });
    expectClose(out, 0, 0, "cast to f16 (bits)");
    Pair &small = make(from, {3, 1001}, -1e-4, 1e-4, 99), &tiny = make(PFRT_F16, {3, 1001});
    both([&](pfrt_context *c, bool d) { return pfrt_cast(c, on(small, d), on(tiny, d)); });
    expectClose(tiny, 0, 0, "cast to f16, subnormals (bits)");
  }
}

TEST_F(CudaKernels, GatherAndScatterAdd) {
  Pair &table = make(PFRT_F32, {101, 33}, -1, 1, 39);
  Pair &idx = make(PFRT_I32, {4, 9}, -101, 100, 40), &out = make(PFRT_F32, {4, 9, 33});
  both([&](pfrt_context *c, bool d) { return pfrt_gather(c, on(table, d), on(idx, d), 0, on(out, d)); });
  expectClose(out, 0, 0, "gather");
  Pair &dy = make(PFRT_F32, {4, 9, 33}, -1, 1, 41), &grad = make(PFRT_F32, {101, 33}, -1, 1, 42);
  both([&](pfrt_context *c, bool d) {
    return pfrt_gather_backward(c, on(idx, d), on(dy, d), 0, 1, on(grad, d));
  });
  expectClose(grad, 1e-5, 1e-6, "gather_backward (atomic order)");
  // Out-of-range indices: the CPU's status and message (the first bad
  // element, not the largest), reported by CUDA at the next synchronize
  // without a wait in the call; then the context works again.
  set<int32_t>(idx, 5, 101);
  set<int32_t>(idx, 30, -102);
  expectSameError(pfrt_gather(gCpu, &table.cpu, &idx.cpu, 0, &out.cpu),
                  deviceStatus(pfrt_gather(gGpu, &table.dev, &idx.dev, 0, &out.dev)),
                  PFRT_INVALID_ARGUMENT);
  expectSameError(pfrt_gather_backward(gCpu, &idx.cpu, &dy.cpu, 0, 1, &grad.cpu),
                  deviceStatus(pfrt_gather_backward(gGpu, &idx.dev, &dy.dev, 0, 1, &grad.dev)),
                  PFRT_INVALID_ARGUMENT);
  set<int32_t>(idx, 5, 3);
  set<int32_t>(idx, 30, -3);
  both([&](pfrt_context *c, bool d) {
    return pfrt_gather(c, on(table, d), on(idx, d), 0, on(out, d));
  });
  expectClose(out, 0, 0, "gather after the error");
}

TEST_F(CudaKernels, Optimizers) {
  const Dims dims = {100003};
  for (int nesterov = 0; nesterov < 2; ++nesterov) {
    Pair &p = make(PFRT_F32, dims, -1, 1, 43), &g = make(PFRT_F32, dims, -1, 1, 44);
    Pair &buf = make(PFRT_F32, dims, -0.1, 0.1, 45);
    both([&](pfrt_context *c, bool d) {
      return pfrt_sgd_step(c, on(p, d), on(g, d), on(buf, d), 0.1, 0.9, 0.01, nesterov);
    });
    expectClose(p, 1e-6, 1e-7, "sgd");
    expectClose(buf, 1e-6, 1e-7, "sgd momentum");
  }
  Pair &p = make(PFRT_F32, dims, -1, 1, 46), &g = make(PFRT_F32, dims, -1, 1, 47);
  Pair &m = make(PFRT_F32, dims, -0.1, 0.1, 48), &v = make(PFRT_F32, dims, 0, 0.1, 49);
  both([&](pfrt_context *c, bool d) {
    return pfrt_adamw_step(c, on(p, d), on(g, d), on(m, d), on(v, d), 1e-3, 0.9, 0.999,
                           1e-8, 0.01, 7, 1);
  });
  expectClose(p, 1e-6, 1e-7, "adamw");
  expectClose(m, 1e-6, 1e-9, "adamw m");
  expectClose(v, 1e-6, 1e-9, "adamw v");
  for (int nvlamb = 0; nvlamb < 2; ++nvlamb) {
    Pair &lp = make(PFRT_F32, dims, -1, 1, 70), &lg = make(PFRT_F32, dims, -1, 1, 71);
    Pair &lm = make(PFRT_F32, dims, -0.1, 0.1, 72), &lv = make(PFRT_F32, dims, 0, 0.1, 73);
    both([&](pfrt_context *c, bool d) {
      return pfrt_lamb_step(c, on(lp, d), on(lg, d), on(lm, d), on(lv, d), 1e-2, 0.9,
                            0.999, 1e-6, nvlamb ? 0.0 : 0.01, 5, 1, nvlamb, 10.0);
    });
    expectClose(lp, 1e-5, 1e-7, "lamb");
    expectClose(lm, 1e-6, 1e-9, "lamb m");
    expectClose(lv, 1e-6, 1e-9, "lamb v");
  }
  double dc = 0, dg = 0, nc = 0, ng = 0;
  ASSERT_EQ(pfrt_dot(gCpu, &p.cpu, &g.cpu, &dc), PFRT_OK);
  ASSERT_EQ(pfrt_dot(gGpu, &p.dev, &g.dev, &dg), PFRT_OK) << pfrt_last_error(gGpu);
  EXPECT_NEAR(dg, dc, 1e-9 * std::fabs(dc) + 1e-9);
  const pfrt_tensor listC[2] = {p.cpu, g.cpu}, listG[2] = {p.dev, g.dev};
  ASSERT_EQ(pfrt_global_norm(gCpu, listC, 2, &nc), PFRT_OK);
  ASSERT_EQ(pfrt_global_norm(gGpu, listG, 2, &ng), PFRT_OK) << pfrt_last_error(gGpu);
  EXPECT_NEAR(ng, nc, 1e-9 * nc);
  both([&](pfrt_context *c, bool d) {
    double norm;
    return pfrt_clip_by_global_norm(c, d ? listG : listC, 2, 1.0, &norm);
  });
  expectClose(g, 1e-6, 1e-9, "clipped");
  // Without a norm output (the lowering's call) CUDA clips on the device.
  both([&](pfrt_context *c, bool d) {
    return pfrt_clip_by_global_norm(c, d ? listG : listC, 2, 0.5, nullptr);
  });
  expectClose(p, 1e-6, 1e-9, "clipped on the device");
  expectClose(g, 1e-6, 1e-9, "clipped on the device");
  both([&](pfrt_context *c, bool d) { // within max_norm: unchanged
    return pfrt_clip_by_global_norm(c, d ? listG : listC, 2, 1e6, nullptr);
  });
  expectClose(g, 1e-6, 1e-9, "not clipped");
  // A non-finite norm: PFRT_NUMERIC with the CPU's message, unscaled.
  set<float>(g, 7, INFINITY);
  expectSameError(pfrt_clip_by_global_norm(gCpu, listC, 2, 0.5, nullptr),
                  deviceStatus(pfrt_clip_by_global_norm(gGpu, listG, 2, 0.5, nullptr)),
                  PFRT_NUMERIC);
  expectClose(p, 1e-6, 1e-9, "left unscaled");
  expectClose(g, 1e-6, 1e-9, "left unscaled");
}

TEST_F(CudaKernels, KfacFactorPiInverse) {
  for (int32_t mode : {PFRT_KFAC_OVERWRITE, PFRT_KFAC_ACCUMULATE, PFRT_KFAC_RUNNING_AVERAGE})
    for (int bias = 0; bias < 2; ++bias) {
      Pair &x = make(PFRT_F64, {3, 41, 37}, -1, 1, 50);
      Pair &f = make(PFRT_F64, {37 + bias, 37 + bias}, 0, 0, 51);
      both([&](pfrt_context *c, bool d) {
        return pfrt_kfac_factor(c, on(x, d), bias, 2.0, mode, 0.9, on(f, d));
      });
      expectClose(f, 1e-12, 1e-12, "kfac_factor");
    }
  Pair &xa = make(PFRT_F64, {257, 65}, -1, 1, 52), &a = make(PFRT_F64, {65, 65});
  Pair &xb = make(PFRT_F64, {257, 31}, -1, 1, 53), &b = make(PFRT_F64, {31, 31});
  both([&](pfrt_context *c, bool d) { return pfrt_kfac_factor(c, on(xa, d), 0, 1.0, 0, 0, on(a, d)); });
  both([&](pfrt_context *c, bool d) { return pfrt_kfac_factor(c, on(xb, d), 0, 1.0, 0, 0, on(b, d)); });
  double pc = 0, pg = 0;
  ASSERT_EQ(pfrt_kfac_pi(gCpu, &a.cpu, &b.cpu, &pc), PFRT_OK);
  ASSERT_EQ(pfrt_kfac_pi(gGpu, &a.dev, &b.dev, &pg), PFRT_OK) << pfrt_last_error(gGpu);
  EXPECT_NEAR(pg, pc, 1e-12 * pc);
  Pair &ai = make(PFRT_F64, {65, 65}), &bi = make(PFRT_F64, {31, 31});
  both([&](pfrt_context *c, bool d) { return pfrt_kfac_inverse(c, on(a, d), 0.01, on(ai, d)); });
  expectClose(ai, 1e-9, 1e-9, "kfac_inverse");
  int32_t oc = -1, og = -1;
  ASSERT_EQ(pfrt_kfac_damped_inverses(gCpu, &a.cpu, &b.cpu, 1e-3, 2, &ai.cpu, &bi.cpu, &oc), PFRT_OK);
  ASSERT_EQ(pfrt_kfac_damped_inverses(gGpu, &a.dev, &b.dev, 1e-3, 2, &ai.dev, &bi.dev, &og), PFRT_OK);
  EXPECT_EQ(og, oc);
  expectClose(ai, 1e-9, 1e-9, "damped a_inv");
  expectClose(bi, 1e-9, 1e-9, "damped b_inv");
  // Not positive definite: NUMERIC, the inverse left as it was.
  Pair &neg = make(PFRT_F64, {4, 4}, 0, 0, 54), &keep = make(PFRT_F64, {4, 4}, -1, 1, 55);
  for (int64_t i = 0; i < 4; ++i)
    set<double>(neg, i * 5, -1.0);
  EXPECT_EQ(pfrt_kfac_inverse(gGpu, &neg.dev, 0.0, &keep.dev), PFRT_NUMERIC);
  expectClose(keep, 0, 0, "inverse unchanged");
  int32_t finite = -1;
  set<double>(keep, 3, NAN);
  ASSERT_EQ(pfrt_all_finite(gGpu, &keep.dev, &finite), PFRT_OK);
  EXPECT_EQ(finite, 0);
}

TEST_F(CudaKernels, KfacPrecondition) {
  for (int wt = 0; wt < 2; ++wt)
    for (int joint = 0; joint < 2; ++joint) {
      const int64_t in = 23, out = 11, ia = in + joint;
      Pair &ai = make(PFRT_F32, {ia, ia}, -1, 1, 56), &bi = make(PFRT_F32, {out, out}, -1, 1, 57);
      symmetrize(ai);
      symmetrize(bi);
      Pair &gw = make(PFRT_F32, wt ? Dims{out, in} : Dims{in, out}, -1, 1, 58);
      Pair &gb = make(PFRT_F32, {out}, -1, 1, 59);
      Pair &ow = make(PFRT_F32, wt ? Dims{out, in} : Dims{in, out});
      Pair &ob = make(PFRT_F32, {out});
      both([&](pfrt_context *c, bool d) {
        return pfrt_kfac_precondition(c, on(ai, d), on(bi, d), on(gw, d), on(gb, d), wt,
                                      on(ow, d), on(ob, d));
      });
      expectClose(ow, 1e-4, 1e-4, "out_w");
      expectClose(ob, 1e-4, 1e-4, "out_b");
    }
}

/// The LayerNorm factor (blocks and diagonal, every mode, f32 and f64,
/// rows > threads per block) and its damped solve against the CPU backend.
TEST_F(CudaKernels, KfacLayerNorm) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (int64_t columns : {3, 2})
      for (int32_t mode : {PFRT_KFAC_OVERWRITE, PFRT_KFAC_ACCUMULATE, PFRT_KFAC_RUNNING_AVERAGE}) {
        const double tol = dtype == PFRT_F32 ? 1e-5 : 1e-11;
        Pair &x = make(dtype, {3, 97, 300}, -2, 3, 60), &dy = make(dtype, {3, 97, 300}, -1, 1, 61);
        Pair &f = make(dtype, {300, columns}, 0, 1, 62);
        both([&](pfrt_context *c, bool d) {
          return pfrt_kfac_layer_norm_factor(c, on(x, d), on(dy, d), 1e-5, 9.0, mode, 0.5,
                                             on(f, d));
        });
        expectClose(f, tol, tol * maxAbs(f), "kfac_layer_norm_factor");
        Pair &gs = make(dtype, {300}, -1, 1, 63), &gb = make(dtype, {300}, -1, 1, 64);
        Pair &us = make(dtype, {300}), &ub = make(dtype, {300});
        both([&](pfrt_context *c, bool d) {
          return pfrt_kfac_precondition_layer_norm(c, on(f, d), 0.01, on(gs, d), on(gb, d),
                                                   on(us, d), on(ub, d));
        });
        expectClose(us, tol, tol * maxAbs(us), "out_scale");
        expectClose(ub, tol, tol * maxAbs(ub), "out_bias");
      }
}

TEST_F(CudaKernels, KfacEmbedding) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
    const double tol = dtype == PFRT_F32 ? 1e-5 : 1e-11;
    // Ids of both widths, negative ones counting from the end.
    for (int32_t idType : {PFRT_I32, PFRT_I64})
      for (int32_t mode : {PFRT_KFAC_OVERWRITE, PFRT_KFAC_ACCUMULATE, PFRT_KFAC_RUNNING_AVERAGE}) {
        Pair &ids = make(idType, {4, 97}, -300, 299, 65);
        Pair &a = make(dtype, {300}, 0, 1, 66);
        both([&](pfrt_context *c, bool d) {
          return pfrt_kfac_embedding_factor(c, on(ids, d), 2.0, mode, 0.5, on(a, d));
        });
        expectClose(a, tol, tol * maxAbs(a), "kfac_embedding_factor");
      }
    // An id out of range: the CPU's status and message, the factor unchanged.
    Pair &bad = make(PFRT_I64, {5}, 300, 300, 67), &keep = make(dtype, {300}, 0, 1, 68);
    expectSameError(pfrt_kfac_embedding_factor(gCpu, &bad.cpu, 1.0, 0, 0, &keep.cpu),
                    pfrt_kfac_embedding_factor(gGpu, &bad.dev, 1.0, 0, 0, &keep.dev),
                    PFRT_INVALID_ARGUMENT);
    expectClose(keep, 0, 0, "factor unchanged");
    // The refresh: A's diagonal (one entry 0: retried at damping 0) and B.
    Pair &a = make(dtype, {300}, 0, 1, 69);
    if (dtype == PFRT_F32)
      set<float>(a, 7, 0.0f);
    else
      set<double>(a, 7, 0.0);
    Pair &b = factorOf(dtype, 97, 37, 0, 70);
    Pair &ai = make(dtype, {300}), &bi = make(dtype, {37, 37});
    for (double damping : {1e-3, 0.0}) {
      int32_t oc = -1, og = -1;
      ASSERT_EQ(
          pfrt_kfac_embedding_inverses(gCpu, &a.cpu, &b.cpu, damping, 3, &ai.cpu, &bi.cpu, &oc),
          PFRT_OK);
      ASSERT_EQ(
          pfrt_kfac_embedding_inverses(gGpu, &a.dev, &b.dev, damping, 3, &ai.dev, &bi.dev, &og),
          PFRT_OK)
          << pfrt_last_error(gGpu);
      EXPECT_EQ(og, oc);
      expectClose(ai, tol, 0, "embedding a_inv");
      expectClose(bi, dtype == PFRT_F32 ? 1e-3 : 1e-9, 1e-4 * maxAbs(bi), "embedding b_inv");
    }
    // The preconditioning in both layouts, in place for [h, vocab].
    Pair &g = make(dtype, {300, 37}, -1, 1, 71), &out = make(dtype, {300, 37});
    both([&](pfrt_context *c, bool d) {
      return pfrt_kfac_precondition_embedding(c, on(ai, d), on(bi, d), on(g, d), 0, on(out, d));
    });
    expectClose(out, tol * 10, tol * 10 * maxAbs(out), "precondition_embedding");
    Pair &gt = make(dtype, {37, 300}, -1, 1, 72);
    both([&](pfrt_context *c, bool d) {
      return pfrt_kfac_precondition_embedding(c, on(ai, d), on(bi, d), on(gt, d), 1, on(gt, d));
    });
    expectClose(gt, tol * 10, tol * 10 * maxAbs(gt), "precondition_embedding [h, vocab]");
  }
}

TEST_F(CudaKernels, KfacEigen) {
  // Full-rank factors with and without the ones column, and a rank-5 one
  // whose zero eigenvalues come out of syevd as +-round-off (clamped to 0).
  struct Case {
    int64_t rows, d;
    int bias;
  } cases[] = {{97, 37, 1}, {97, 37, 0}, {5, 37, 0}};
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (const Case &k : cases) {
      const bool f32 = dtype == PFRT_F32;
      const int64_t n = k.d + k.bias;
      Pair &f = factorOf(dtype, k.rows, k.d, k.bias, 82);
      Pair &vec = make(dtype, {n, n}), &val = make(dtype, {n});
      both([&](pfrt_context *c, bool d) {
        return pfrt_kfac_eigen(c, on(f, d), on(vec, d), on(val, d));
      });
      const double scale = maxAbs(f), tol = (f32 ? 5e-5 : 1e-12) * scale;
      expectClose(val, 0, tol, "kfac_eigen values");
      // Eigenvector signs (and the bases of repeated eigenvalues) may differ
      // from the CPU's: check V diag(l) V^T = factor and V^T V = I instead.
      const std::vector<double> v = fromDevice(vec), l = fromDevice(val);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_GE(l[i], 0) << "eigenvalue " << i;
        if (i > 0) {
          EXPECT_LE(l[i - 1], l[i]) << "eigenvalues ascending at " << i;
        }
      }
      int failures = 0;
      for (int64_t i = 0; i < n && failures < 10; ++i)
        for (int64_t j = 0; j < n && failures < 10; ++j) {
          double rec = 0, dot = 0;
          for (int64_t k2 = 0; k2 < n; ++k2) {
            rec += v[i * n + k2] * l[k2] * v[j * n + k2];
            dot += v[k2 * n + i] * v[k2 * n + j];
          }
          const double want = valueAt(f.host, dtype, i * n + j);
          if (!(std::fabs(rec - want) <= 5 * tol)) {
            ADD_FAILURE() << "(V diag(l) V^T)[" << i << ", " << j << "] = " << rec
                          << ", factor " << want;
            ++failures;
          }
          if (!(std::fabs(dot - (i == j ? 1.0 : 0.0)) <= (f32 ? 1e-4 : 1e-11))) {
            ADD_FAILURE() << "(V^T V)[" << i << ", " << j << "] = " << dot;
            ++failures;
          }
        }
    }
}

TEST_F(CudaKernels, KfacEigenNumericAndRefresh) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64}) {
    const int64_t n = 9;
    Pair &a = factorOf(dtype, 40, n, 0, 83), &b = factorOf(dtype, 40, n, 0, 84);
    Pair &av = make(dtype, {n, n}, -1, 1, 85), &al = make(dtype, {n}, -1, 1, 86);
    // NaN or Inf in the factor: NUMERIC, the outputs left as they were.
    for (double bad : {double(NAN), double(INFINITY)}) {
      if (dtype == PFRT_F32)
        set<float>(a, 3 * n + 4, float(bad));
      else
        set<double>(a, 3 * n + 4, bad);
      EXPECT_EQ(pfrt_kfac_eigen(gGpu, &a.dev, &av.dev, &al.dev), PFRT_NUMERIC);
      EXPECT_NE(std::strstr(pfrt_last_error(gGpu), "NaN or Inf"), nullptr)
          << pfrt_last_error(gGpu);
      expectClose(av, 0, 0, "vectors unchanged");
      expectClose(al, 0, 0, "values unchanged");
    }
    // The refresh keeps a's previous decomposition and decomposes b.
    Pair &bv = make(dtype, {n, n}), &bl = make(dtype, {n});
    int32_t oc = -1, og = -1;
    ASSERT_EQ(pfrt_kfac_eigen_refresh(gCpu, &a.cpu, &b.cpu, &av.cpu, &al.cpu, &bv.cpu,
                                      &bl.cpu, &oc), PFRT_OK) << pfrt_last_error(gCpu);
    ASSERT_EQ(pfrt_kfac_eigen_refresh(gGpu, &a.dev, &b.dev, &av.dev, &al.dev, &bv.dev,
                                      &bl.dev, &og), PFRT_OK) << pfrt_last_error(gGpu);
    EXPECT_EQ(oc, PFRT_KFAC_KEPT_PREVIOUS);
    EXPECT_EQ(og, oc);
    expectClose(av, 0, 0, "a_vectors kept");
    expectClose(al, 0, 0, "a_values kept");
    expectClose(bl, 0, (dtype == PFRT_F32 ? 5e-5 : 1e-12) * maxAbs(b), "b_values");
  }
}

TEST_F(CudaKernels, KfacPreconditionEigen) {
  for (int32_t dtype : {PFRT_F32, PFRT_F64})
    for (int wt = 0; wt < 2; ++wt)
      for (int bias = 0; bias < 3; ++bias) { // none, separate, joint column
        const bool joint = bias == 2, withBias = bias != 0;
        const int64_t in = 23, out = 11, ia = in + (joint ? 1 : 0);
        // Real eigenbases (the CPU's, copied to the device) keep the
        // magnitudes those of a training step.
        Pair &fa = factorOf(dtype, 97, in, joint ? 1 : 0, 86);
        Pair &fb = factorOf(dtype, 97, out, 0, 87);
        Pair &qa = make(dtype, {ia, ia}), &la = make(dtype, {ia});
        Pair &qb = make(dtype, {out, out}), &lb = make(dtype, {out});
        ASSERT_EQ(pfrt_kfac_eigen(gCpu, &fa.cpu, &qa.cpu, &la.cpu), PFRT_OK);
        ASSERT_EQ(pfrt_kfac_eigen(gCpu, &fb.cpu, &qb.cpu, &lb.cpu), PFRT_OK);
        for (Pair *p : {&qa, &la, &qb, &lb})
          ASSERT_EQ(pfrt_copy_from_host(gGpu, p->host.data(), &p->dev), PFRT_OK);
        const Dims w = wt ? Dims{out, in} : Dims{in, out};
        Pair &gw = make(dtype, w, -1, 1, 88), &gb = make(dtype, {out}, -1, 1, 89);
        Pair &ow = make(dtype, w), &ob = make(dtype, {out});
        const double damping = 1e-3;
        both([&](pfrt_context *c, bool d) {
          return pfrt_kfac_precondition_eigen(c, on(qa, d), on(la, d), on(qb, d), on(lb, d),
                                              damping, on(gw, d),
                                              withBias ? on(gb, d) : nullptr, wt, on(ow, d),
                                              withBias ? on(ob, d) : nullptr);
        });
        const double rtol = dtype == PFRT_F32 ? 1e-4 : 1e-11;
        expectClose(ow, rtol, rtol * maxAbs(ow), "eigen out_w");
        if (withBias)
          expectClose(ob, rtol, rtol * maxAbs(ob), "eigen out_b");
        // In place (out_w = grad_w, out_b = grad_b).
        both([&](pfrt_context *c, bool d) {
          return pfrt_kfac_precondition_eigen(c, on(qa, d), on(la, d), on(qb, d), on(lb, d),
                                              damping, on(gw, d),
                                              withBias ? on(gb, d) : nullptr, wt, on(gw, d),
                                              withBias ? on(gb, d) : nullptr);
        });
        expectClose(gw, rtol, rtol * maxAbs(gw), "eigen out_w in place");
        if (withBias)
          expectClose(gb, rtol, rtol * maxAbs(gb), "eigen out_b in place");
      }
}

//===----------------------------- Benchmarks ----------------------------===//

/// Median milliseconds of `run` on the GPU over `reps` runs after warm-up.
/// A failing kernel is a test failure and NaN ms.
template <class F> double medianMs(F run, int reps = 20) {
  for (int i = 0; i < 3; ++i)
    if (run() != PFRT_OK) {
      ADD_FAILURE() << pfrt_last_error(gGpu);
      return NAN;
    }
  pfrt_synchronize(gGpu);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    pfrt_synchronize(gGpu);
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

class CudaBench : public CudaKernels {
protected:
  void SetUp() override {
    CudaKernels::SetUp();
    if (IsSkipped())
      return;
    const char *path = std::getenv("PF_CUDA_BENCH_JSON");
    if (!path)
      GTEST_SKIP() << "set PF_CUDA_BENCH_JSON=FILE to run the benchmarks";
    file = std::fopen(path, "a");
    ASSERT_NE(file, nullptr) << path;
  }
  void TearDown() override {
    if (file)
      std::fclose(file);
    CudaKernels::TearDown();
  }
  void report(const char *op, const std::string &shape, double ms) {
    std::fprintf(file, "{\"op\": \"%s\", \"shape\": \"%s\", \"pf_ms\": %.5f}\n", op,
                 shape.c_str(), ms);
    std::printf("%-24s %-28s %9.4f ms\n", op, shape.c_str(), ms);
  }
  FILE *file = nullptr;
};

/// BERT-base-sized kernels at batch 8 x 128 tokens (scripts/gpu-check.sh
/// times the same ops with PyTorch; keep the shapes in step with it).
TEST_F(CudaBench, BertBaseKernels) {
  const int64_t rows = 1024, h = 768, ff = 3072, heads = 12, seq = 128, vocab = 30522;
  Pair &x = make(PFRT_F32, {rows, h}), &w = make(PFRT_F32, {ff, h}), &b = make(PFRT_F32, {ff});
  Pair &y = make(PFRT_F32, {rows, ff});
  report("linear", "1024x768 -> 3072", medianMs([&] {
           return pfrt_linear(gGpu, &x.dev, &w.dev, &b.dev, 1, &y.dev);
         }));
  Pair &q = make(PFRT_F32, {8, heads, seq, 64}), &k = make(PFRT_F32, {8, heads, 64, seq});
  Pair &s = make(PFRT_F32, {8, heads, seq, seq});
  report("matmul", "8x12x128x64 @ 8x12x64x128", medianMs([&] {
           return pfrt_matmul(gGpu, &q.dev, &k.dev, &s.dev);
         }));
  Pair &p = make(PFRT_F32, {8, heads, seq, seq});
  report("softmax", "8x12x128x128", medianMs([&] { return pfrt_softmax(gGpu, &s.dev, -1, &p.dev); }));
  Pair &g = make(PFRT_F32, {h}), &bb = make(PFRT_F32, {h}), &ln = make(PFRT_F32, {rows, h});
  report("layer_norm", "1024x768", medianMs([&] {
           return pfrt_layer_norm(gGpu, &x.dev, &g.dev, &bb.dev, -1, 1e-12, &ln.dev, nullptr, nullptr);
         }));
  Pair &act = make(PFRT_F32, {rows, ff});
  report("gelu", "1024x3072", medianMs([&] { return pfrt_gelu(gGpu, &y.dev, PFRT_GELU_EXACT, &act.dev); }));
  Pair &logits = make(PFRT_F32, {rows, vocab}), &labels = make(PFRT_I64, {rows}, 0, vocab - 1);
  Pair &loss = make(PFRT_F32, {}), &dl = make(PFRT_F32, {rows, vocab});
  report("cross_entropy", "1024x30522 (+grad)", medianMs([&] {
           return pfrt_softmax_cross_entropy(gGpu, &logits.dev, &labels.dev, -100, 1.0, &loss.dev,
                                      &dl.dev, nullptr);
         }));
  Pair &pw = make(PFRT_F32, {ff, h}), &gw = make(PFRT_F32, {ff, h});
  Pair &m = make(PFRT_F32, {ff, h}, 0, 0), &v = make(PFRT_F32, {ff, h}, 0, 0);
  report("adamw", "3072x768", medianMs([&] {
           return pfrt_adamw_step(gGpu, &pw.dev, &gw.dev, &m.dev, &v.dev, 1e-4, 0.9, 0.999, 1e-8,
                           0.01, 1, 1);
         }));
  Pair &fa = make(PFRT_F32, {h + 1, h + 1});
  report("kfac_factor", "1024x768 (+bias) -> 769^2", medianMs([&] {
           return pfrt_kfac_factor(gGpu, &x.dev, 1, 1.0, PFRT_KFAC_OVERWRITE, 0, &fa.dev);
         }));
  Pair &fi = make(PFRT_F32, {h + 1, h + 1});
  pfrt_kfac_factor(gGpu, &x.dev, 1, 1.0, PFRT_KFAC_OVERWRITE, 0, &fa.dev);
  report("kfac_inverse", "769x769", medianMs([&] {
           return pfrt_kfac_inverse(gGpu, &fa.dev, 0.03, &fi.dev);
         }, 10));
  Pair &fb = make(PFRT_F32, {ff, ff}), &fbi = make(PFRT_F32, {ff, ff});
  pfrt_kfac_factor(gGpu, &y.dev, 0, 1.0, PFRT_KFAC_OVERWRITE, 0, &fb.dev);
  report("kfac_inverse", "3072x3072", medianMs([&] {
           return pfrt_kfac_inverse(gGpu, &fb.dev, 0.03, &fbi.dev);
         }, 5));
}

} // namespace
