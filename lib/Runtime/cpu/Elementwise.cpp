//===- Elementwise.cpp - Broadcasting binary ops, where, unary ops, GELU ---===//
//
// Each op is a small functor; the dtype and the op are resolved by switches
// before the loops, so the loops themselves are templated, inlined and
// vectorized (no function pointers inside them).
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "BroadcastLoop.h"
#include "FastMath.h"
#include "Half.h"
#include "Parallel.h"

#include <cmath>
#include <type_traits>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

//===--------------------------- Binary functors -------------------------===//

// Signed overflow is undefined in C++; integers wrap through unsigned
// arithmetic instead, as they do in ONNX Runtime's generated code.
template <class T> T wrapping(std::make_unsigned_t<T> v) {
  return static_cast<T>(v);
}

struct AddOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrapping<T>(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrapping<T>(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrapping<T>(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
    else
      return a * b;
  }
};
struct DivOp {
  // Integer divisors were checked to be non-zero; -1 is special because
  // MIN / -1 overflows.
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return b == -1 ? wrapping<T>(std::make_unsigned_t<T>(0) -
                                   std::make_unsigned_t<T>(a))
                     : a / b;
    else
      return a / b;
  }
};
struct PowOp {
  template <class T> T operator()(T a, T b) const { return std::pow(a, b); }
};
// x^2, which decomposed LayerNorm graphs use, as one multiplication: the
// same correctly rounded result as pow, without a scalar libm call.
struct SquareOp {
  template <class T> T operator()(T a, T) const { return a * a; }
};
// NaN propagates from either side, as in numpy.minimum/maximum (a plain
// `a < b ? a : b` would drop a NaN in a).
struct MinOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a != a || a < b) ? a : b;
    else
      return a < b ? a : b;
  }
};
struct MaxOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a != a || a > b) ? a : b;
    else
      return a > b ? a : b;
  }
};

struct EqualOp {
  template <class T> uint8_t operator()(T a, T b) const { return a == b; }
};
struct GreaterOp {
  template <class T> uint8_t operator()(T a, T b) const { return a > b; }
};
struct GreaterEqualOp {
  template <class T> uint8_t operator()(T a, T b) const { return a >= b; }
};
struct LessOp {
  template <class T> uint8_t operator()(T a, T b) const { return a < b; }
};
struct LessEqualOp {
  template <class T> uint8_t operator()(T a, T b) const { return a <= b; }
};

// Bools are bytes; any non-zero byte reads as true and results are 0 or 1.
struct AndOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};
struct XorOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) ^ (b != 0); }
};

enum class Binary { Add, Sub, Mul, Div, Pow, Min, Max };

/// Runs out[i] = op(a[ia], b[ib]) over the plan; the four inner-stride
/// combinations get separate loops so that each one vectorizes.
template <class T, class R, class Op>
void runBinary(const pfrt_context *ctx, const BroadcastPlan &plan, const T *a,
               const T *b, R *out, Op op) {
  const int64_t sa = plan.strides[0][plan.rank - 1];
  const int64_t sb = plan.strides[1][plan.rank - 1];
  forEachRun(ctx, plan, [&](const int64_t *off, int64_t outOff, int64_t n) {
    const T *pa = a + off[0];
    const T *pb = b + off[1];
    R *po = out + outOff;
    if (sa && sb) {
      for (int64_t i = 0; i < n; ++i)
        po[i] = op(pa[i], pb[i]);
    } else if (sb) {
      const T x = pa[0];
      for (int64_t i = 0; i < n; ++i)
        po[i] = op(x, pb[i]);
    } else if (sa) {
      const T y = pb[0];
      for (int64_t i = 0; i < n; ++i)
        po[i] = op(pa[i], y);
    } else {
      const R v = op(pa[0], pb[0]);
      for (int64_t i = 0; i < n; ++i)
        po[i] = v;
    }
  });
}

/// Squares without libm when the exponent is the single scalar 2.
template <class T>
void runPow(const pfrt_context *ctx, const BroadcastPlan &plan,
            const pfrt_tensor &b, const T *pa, const T *pb, T *po) {
  if (Shape::of(b).numel() == 1 && pb[0] == T(2))
    return runBinary(ctx, plan, pa, pb, po, SquareOp{});
  runBinary(ctx, plan, pa, pb, po, PowOp{});
}

template <class T>
void dispatchBinary(const pfrt_context *ctx, Binary op,
                    const BroadcastPlan &plan, const pfrt_tensor &a,
                    const pfrt_tensor &b, const pfrt_tensor &out) {
  const T *pa = static_cast<const T *>(a.data);
  const T *pb = static_cast<const T *>(b.data);
  T *po = static_cast<T *>(out.data);
  switch (op) {
  case Binary::Add:
    return runBinary(ctx, plan, pa, pb, po, AddOp{});
  case Binary::Sub:
    return runBinary(ctx, plan, pa, pb, po, SubOp{});
  case Binary::Mul:
    return runBinary(ctx, plan, pa, pb, po, MulOp{});
  case Binary::Div:
    return runBinary(ctx, plan, pa, pb, po, DivOp{});
  case Binary::Pow:
    if constexpr (std::is_floating_point_v<T>)
      runPow(ctx, plan, b, pa, pb, po);
    return;
  case Binary::Min:
    return runBinary(ctx, plan, pa, pb, po, MinOp{});
  case Binary::Max:
    return runBinary(ctx, plan, pa, pb, po, MaxOp{});
  }
}

/// Index of the first zero in an integer tensor, or -1.
template <class T> int64_t firstZero(const pfrt_tensor &t) {
  const T *p = static_cast<const T *>(t.data);
  const int64_t n = Shape::of(t).numel();
  for (int64_t i = 0; i < n; ++i)
    if (p[i] == 0)
      return i;
  return -1;
}

/// Checks two broadcasting operands and the output, and builds the plan.
pfrt_status checkBroadcastPair(const Call &call, const pfrt_tensor *a,
                               const pfrt_tensor *b, const pfrt_tensor *out,
                               BroadcastPlan &plan) {
  Shape shapes[2] = {Shape::of(*a), Shape::of(*b)};
  Shape joined;
  if (!broadcastShapes(shapes[0], shapes[1], joined))
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "shapes %s and %s do not broadcast",
                     ShapeStr(shapes[0]).c_str(), ShapeStr(shapes[1]).c_str());
  PFRT_TRY(call.shapeIs("out", out, joined));
  plan = planBroadcast(joined, shapes, 2);
  return PFRT_OK;
}

pfrt_status binaryEntry(pfrt_context *ctx, const char *fn, Binary op,
                        const pfrt_tensor *a, const pfrt_tensor *b,
                        const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  // min/max also take i8 (ONNX Clip and Min/Max on int8 models).
  const bool extreme = op == Binary::Min || op == Binary::Max;
  if (op == Binary::Pow)
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  else if (extreme)
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32,
                                   PFRT_I64}));
  else
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  BroadcastPlan plan;
  PFRT_TRY(checkBroadcastPair(call, a, b, out, plan));
  if (op == Binary::Div && (a->dtype == PFRT_I32 || a->dtype == PFRT_I64)) {
    int64_t zero = a->dtype == PFRT_I32 ? firstZero<int32_t>(*b)
                                        : firstZero<int64_t>(*b);
    if (zero >= 0)
      return call.fail(PFRT_NUMERIC, "integer division by zero (element %lld "
                       "of b)", static_cast<long long>(zero));
  }
  if (a->dtype == PFRT_I8) {
    dispatchBinary<int8_t>(ctx, op, plan, *a, *b, *out);
    return PFRT_OK;
  }
  visitArith(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatchBinary<T>(ctx, op, plan, *a, *b, *out);
  });
  return PFRT_OK;
}

//===------------------------- Comparison and logic -------------------------===//

pfrt_status compareEntry(pfrt_context *ctx, const char *fn, int32_t kind,
                         const pfrt_tensor *a, const pfrt_tensor *b,
                         const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  if (kind < PFRT_COMPARE_EQUAL || kind > PFRT_COMPARE_LESS_EQUAL)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown comparison kind %d", kind);
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  // Only equality is defined on bools (ONNX orders numbers only).
  if (kind == PFRT_COMPARE_EQUAL)
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32,
                                   PFRT_I64, PFRT_BOOL}));
  else
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32,
                                   PFRT_I64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  BroadcastPlan plan;
  PFRT_TRY(checkBroadcastPair(call, a, b, out, plan));
  visitNumeric(a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = [&](auto op) {
      runBinary(ctx, plan, static_cast<const T *>(a->data),
                static_cast<const T *>(b->data),
                static_cast<uint8_t *>(out->data), op);
    };
    switch (kind) {
    case PFRT_COMPARE_EQUAL:
      return run(EqualOp{});
    case PFRT_COMPARE_GREATER:
      return run(GreaterOp{});
    case PFRT_COMPARE_GREATER_EQUAL:
      return run(GreaterEqualOp{});
    case PFRT_COMPARE_LESS:
      return run(LessOp{});
    default:
      return run(LessEqualOp{});
    }
  });
  return PFRT_OK;
}

//===------------------------------ Unary ---------------------------------===//

enum class Unary { Sqrt, Erf, Tanh, Exp, Neg, Abs, Sign, Reciprocal, GeluExact, GeluTanh };

/// Elements per parallel chunk of a flat loop.
constexpr int64_t kFlatGrain = 16 * 1024;

template <class T, class Op>
void runUnary(const pfrt_context *ctx, const T *x, T *out, int64_t n, Op op) {
  parallelChunks(ctx, n, kFlatGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = op(x[i]);
  });
}

/// f32 GELU over one chunk, exact (erf) or tanh: the arithmetic of the
/// double-template lambdas below, also compiled for AVX-512 and AVX2 (bit
/// for bit the same results: elementwise, no FMA). GELU follows the widest
/// GEMM of BERT's blocks and is bound by its erf polynomial at SSE width.
PFRT_VECTOR_CLONES void geluChunkF32(const float *x, float *out, int64_t n, bool exact) {
  const float half = 0.5f, invSqrt2 = float(0.70710678118654752440);
  const float sqrt2OverPi = float(0.79788456080286535588), cubic = 0.044715f;
  if (exact) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      out[i] = half * v * (1.0f + erfOf(v * invSqrt2));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = half * v * (1.0f + tanhOf(sqrt2OverPi * (v + cubic * v * v * v)));
  }
}

template <class T>
void dispatchUnary(const pfrt_context *ctx, Unary op, const T *x, T *out,
                   int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (op == Unary::GeluExact || op == Unary::GeluTanh) {
      const bool exact = op == Unary::GeluExact;
      parallelChunks(ctx, n, kFlatGrain, [&](int64_t begin, int64_t end) {
        geluChunkF32(x + begin, out + begin, end - begin, exact);
      });
      return;
    }
  }
  if constexpr (std::is_integral_v<T>) {
    // Only neg accepts integers (checked by the caller).
    runUnary(ctx, x, out, n, [](T v) {
      return wrapping<T>(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(v));
    });
  } else {
    const T half = T(0.5), invSqrt2 = T(0.70710678118654752440);
    const T sqrt2OverPi = T(0.79788456080286535588), cubic = T(0.044715);
    switch (op) {
    case Unary::Sqrt:
      return runUnary(ctx, x, out, n, [](T v) { return std::sqrt(v); });
    case Unary::Erf:
      return runUnary(ctx, x, out, n, [](T v) { return erfOf(v); });
    case Unary::Tanh:
      return runUnary(ctx, x, out, n, [](T v) { return tanhOf(v); });
    case Unary::Exp:
      return runUnary(ctx, x, out, n, [](T v) { return expOf(v); });
    case Unary::Neg:
      return runUnary(ctx, x, out, n, [](T v) { return -v; });
    case Unary::Abs:
      return runUnary(ctx, x, out, n, [](T v) { return std::fabs(v); });
    case Unary::Sign:
      // NaN fails both tests and stays NaN; +-0 stay as they are.
      return runUnary(ctx, x, out, n, [](T v) {
        return v > T(0) ? T(1) : v < T(0) ? T(-1) : v;
      });
    case Unary::Reciprocal:
      return runUnary(ctx, x, out, n, [](T v) { return T(1) / v; });
    case Unary::GeluExact:
      return runUnary(ctx, x, out, n, [=](T v) {
        return half * v * (T(1) + erfOf(v * invSqrt2));
      });
    case Unary::GeluTanh:
      return runUnary(ctx, x, out, n, [=](T v) {
        return half * v * (T(1) + tanhOf(sqrt2OverPi * (v + cubic * v * v * v)));
      });
    }
  }
}

pfrt_status unaryEntry(pfrt_context *ctx, const char *fn, Unary op,
                       const pfrt_tensor *x, const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  if (op == Unary::Neg)
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32,
                                   PFRT_I64}));
  else
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t n = shape.numel();
  visitNumeric(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, uint8_t>)
      dispatchUnary<T>(ctx, op, static_cast<const T *>(x->data),
                       static_cast<T *>(out->data), n);
  });
  return PFRT_OK;
}

//===---------------------------- IsNaN / IsInf ---------------------------===//

/// out[i] = test(x[i]) as a bool byte; f16 is widened first.
template <class Test>
pfrt_status classifyEntry(pfrt_context *ctx, const char *fn,
                          const pfrt_tensor *x, const pfrt_tensor *out,
                          Test test) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_F16}));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t n = shape.numel();
  auto *po = static_cast<uint8_t *>(out->data);
  auto run = [&](auto *px, auto widen) {
    parallelChunks(ctx, n, kFlatGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        po[i] = test(widen(px[i]));
    });
  };
  if (x->dtype == PFRT_F64)
    run(static_cast<const double *>(x->data), [](double v) { return v; });
  else if (x->dtype == PFRT_F32)
    run(static_cast<const float *>(x->data), [](float v) { return double(v); });
  else
    run(static_cast<const uint16_t *>(x->data),
        [](uint16_t h) { return double(halfToFloat(h)); });
  return PFRT_OK;
}

//===------------------------------ Where ---------------------------------===//

template <class U>
void runWhere(const pfrt_context *ctx, const BroadcastPlan &plan,
              const uint8_t *cond, const U *x, const U *y, U *out) {
  const int32_t last = plan.rank - 1;
  const int64_t sc = plan.strides[0][last], sx = plan.strides[1][last],
                sy = plan.strides[2][last];
  forEachRun(ctx, plan, [&](const int64_t *off, int64_t outOff, int64_t n) {
    const uint8_t *pc = cond + off[0];
    const U *px = x + off[1];
    const U *py = y + off[2];
    U *po = out + outOff;
    if (sc && sx && sy) {
      for (int64_t i = 0; i < n; ++i)
        po[i] = pc[i] ? px[i] : py[i];
    } else {
      for (int64_t i = 0; i < n; ++i)
        po[i] = pc[i * sc] ? px[i * sx] : py[i * sy];
    }
  });
}

} // namespace

extern "C" {

pfrt_status pfrt_add_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_add", Binary::Add, a, b, out);
}
pfrt_status pfrt_sub_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_sub", Binary::Sub, a, b, out);
}
pfrt_status pfrt_mul_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_mul", Binary::Mul, a, b, out);
}
pfrt_status pfrt_div_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_div", Binary::Div, a, b, out);
}
pfrt_status pfrt_pow_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_pow", Binary::Pow, a, b, out);
}

pfrt_status pfrt_min_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_min", Binary::Min, a, b, out);
}
pfrt_status pfrt_max_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, const pfrt_tensor *out) {
  return binaryEntry(ctx, "pfrt_max", Binary::Max, a, b, out);
}

pfrt_status pfrt_equal_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                           const pfrt_tensor *b, const pfrt_tensor *out) {
  return compareEntry(ctx, "pfrt_equal", PFRT_COMPARE_EQUAL, a, b, out);
}

pfrt_status pfrt_compare_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                             const pfrt_tensor *b, int32_t kind,
                             const pfrt_tensor *out) {
  return compareEntry(ctx, "pfrt_compare", kind, a, b, out);
}

pfrt_status pfrt_logical_cpu(pfrt_context *ctx, const pfrt_tensor *a,
                             const pfrt_tensor *b, int32_t kind,
                             const pfrt_tensor *out) {
  Call call(ctx, "pfrt_logical");
  PFRT_TRY(call.begin());
  if (kind < PFRT_LOGICAL_AND || kind > PFRT_LOGICAL_XOR)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown logical kind %d", kind);
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("a", a, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("b", b, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  BroadcastPlan plan;
  PFRT_TRY(checkBroadcastPair(call, a, b, out, plan));
  auto pa = static_cast<const uint8_t *>(a->data);
  auto pb = static_cast<const uint8_t *>(b->data);
  auto po = static_cast<uint8_t *>(out->data);
  switch (kind) {
  case PFRT_LOGICAL_AND:
    runBinary(ctx, plan, pa, pb, po, AndOp{});
    break;
  case PFRT_LOGICAL_OR:
    runBinary(ctx, plan, pa, pb, po, OrOp{});
    break;
  default:
    runBinary(ctx, plan, pa, pb, po, XorOp{});
    break;
  }
  return PFRT_OK;
}

pfrt_status pfrt_not_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  Call call(ctx, "pfrt_not");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("x", x, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  runUnary(ctx, static_cast<const uint8_t *>(x->data),
           static_cast<uint8_t *>(out->data), shape.numel(),
           [](uint8_t v) -> uint8_t { return v == 0; });
  return PFRT_OK;
}

pfrt_status pfrt_where_cpu(pfrt_context *ctx, const pfrt_tensor *cond,
                           const pfrt_tensor *x, const pfrt_tensor *y,
                           const pfrt_tensor *out) {
  Call call(ctx, "pfrt_where");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("cond", cond));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("y", y));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("cond", cond, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("y", y, x->dtype));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape shapes[3] = {Shape::of(*cond), Shape::of(*x), Shape::of(*y)};
  Shape partial, joined;
  if (!broadcastShapes(shapes[0], shapes[1], partial) ||
      !broadcastShapes(partial, shapes[2], joined))
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "shapes %s (cond), %s (x) and %s (y) do not broadcast",
                     ShapeStr(shapes[0]).c_str(), ShapeStr(shapes[1]).c_str(),
                     ShapeStr(shapes[2]).c_str());
  PFRT_TRY(call.shapeIs("out", out, joined));
  BroadcastPlan plan = planBroadcast(joined, shapes, 3);
  visitBytes(dtypeSize(x->dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    runWhere(ctx, plan, static_cast<const uint8_t *>(cond->data),
             static_cast<const U *>(x->data), static_cast<const U *>(y->data),
             static_cast<U *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_sqrt_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_sqrt", Unary::Sqrt, x, out);
}
pfrt_status pfrt_erf_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_erf", Unary::Erf, x, out);
}
pfrt_status pfrt_tanh_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_tanh", Unary::Tanh, x, out);
}
pfrt_status pfrt_exp_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_exp", Unary::Exp, x, out);
}
pfrt_status pfrt_neg_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_neg", Unary::Neg, x, out);
}

pfrt_status pfrt_abs_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_abs", Unary::Abs, x, out);
}
pfrt_status pfrt_sign_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_sign", Unary::Sign, x, out);
}
pfrt_status pfrt_reciprocal_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                const pfrt_tensor *out) {
  return unaryEntry(ctx, "pfrt_reciprocal", Unary::Reciprocal, x, out);
}

pfrt_status pfrt_is_nan_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                            const pfrt_tensor *out) {
  return classifyEntry(ctx, "pfrt_is_nan", x, out,
                       [](double v) -> uint8_t { return std::isnan(v); });
}

pfrt_status pfrt_is_inf_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                            int32_t detect_negative, int32_t detect_positive,
                            const pfrt_tensor *out) {
  const bool neg = detect_negative != 0, pos = detect_positive != 0;
  return classifyEntry(ctx, "pfrt_is_inf", x, out, [=](double v) -> uint8_t {
    return std::isinf(v) && (v < 0 ? neg : pos);
  });
}

pfrt_status pfrt_gelu_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          int32_t approximation, const pfrt_tensor *out) {
  if (approximation != PFRT_GELU_EXACT && approximation != PFRT_GELU_TANH) {
    Call call(ctx, "pfrt_gelu");
    PFRT_TRY(call.begin());
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown approximation %d",
                     approximation);
  }
  return unaryEntry(ctx, "pfrt_gelu",
                    approximation == PFRT_GELU_EXACT ? Unary::GeluExact
                                                     : Unary::GeluTanh,
                    x, out);
}

} // extern "C"
