//===- Backward.cpp - Gradients of the elementwise and row-wise ops --------===//
//
// reduce_to_shape (the gradient of a broadcast operand), binary and unary
// backward, gelu', softmax', layer_norm' and the gather scatter-add. The
// GEMM-based gradients (linear, matmul) are in BackwardLinalg.cpp.
//
// Every reduction across rows (a broadcast operand's gradient, layer_norm's
// scale and bias gradients, the embedding scatter-add) is partitioned over
// its *outputs*: each output element is summed by one thread in a fixed
// order, so results do not depend on the thread count and no atomics are
// needed.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "../common/TensorChecks.h"
#include "BroadcastLoop.h"
#include "FastMath.h"
#include "Kernels.h"
#include "Parallel.h"
#include "Training.h"

#include <cmath>
#include <cstring>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

constexpr int64_t kFlatGrain = 16 * 1024;

/// The dimensions of `full` (a broadcast result) that an operand of shape
/// `operand` was broadcast along. Precondition: operand broadcasts to full.
void broadcastAxes(const Shape &operand, const Shape &full, bool *isReduced) {
  const int32_t shift = full.rank - operand.rank;
  for (int32_t d = 0; d < full.rank; ++d)
    isReduced[d] = d < shift || (operand.dims[d - shift] == 1 &&
                                 full.dims[d] != 1);
}

/// A descriptor of `shape` over `data` with `dtype`.
pfrt_tensor viewOf(void *data, int32_t dtype, const Shape &shape) {
  pfrt_tensor t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = shape.rank;
  for (int32_t i = 0; i < shape.rank; ++i)
    t.shape[i] = shape.dims[i];
  return t;
}

//===------------------------------ Binary --------------------------------===//

/// dst[i] (=|+=) f(a, b, dy) over the broadcast result's index space; dst
/// has the result's shape.
template <class T, class F>
void binaryGradLoop(const pfrt_context *ctx, const BroadcastPlan &plan,
                    const T *a, const T *b, const T *dy, T *dst,
                    bool accumulate, F f) {
  const int32_t last = plan.rank - 1;
  const int64_t sa = plan.strides[0][last], sb = plan.strides[1][last];
  forEachRun(ctx, plan, [&](const int64_t *off, int64_t outOff, int64_t n) {
    const T *pa = a + off[0];
    const T *pb = b + off[1];
    const T *pd = dy + outOff;
    T *po = dst + outOff;
    if (accumulate) {
      for (int64_t i = 0; i < n; ++i)
        po[i] += f(pa[i * sa], pb[i * sb], pd[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        po[i] = f(pa[i * sa], pb[i * sb], pd[i]);
    }
  });
}

/// The gradient of one operand (which = 0: a, 1: b).
template <class T>
pfrt_status binaryOperandGrad(const Call &call, int32_t kind, int which,
                              const pfrt_tensor &a, const pfrt_tensor &b,
                              const pfrt_tensor &dy, const pfrt_tensor &grad,
                              bool accumulate) {
  const pfrt_context *ctx = call.context();
  const Shape full = Shape::of(dy);
  const Shape operand = Shape::of(which == 0 ? a : b);
  bool isReduced[PFRT_MAX_RANK];
  broadcastAxes(operand, full, isReduced);
  bool reduces = false;
  for (int32_t d = 0; d < full.rank; ++d)
    reduces |= isReduced[d];
  if (kind == PFRT_BINARY_ADD || kind == PFRT_BINARY_SUB) {
    const double sign = (kind == PFRT_BINARY_SUB && which == 1) ? -1.0 : 1.0;
    reduceSumInto(ctx, dy, isReduced, grad.data, sign, accumulate);
    return PFRT_OK;
  }
  Shape shapes[3] = {Shape::of(a), Shape::of(b), full};
  const BroadcastPlan plan = planBroadcast(full, shapes, 3);
  const T *pa = static_cast<const T *>(a.data);
  const T *pb = static_cast<const T *>(b.data);
  const T *pd = static_cast<const T *>(dy.data);
  // The op is resolved here, outside the loops (PyTorch's formulas).
  auto run = [&](T *dst, bool acc) {
    auto go = [&](auto f) {
      binaryGradLoop(ctx, plan, pa, pb, pd, dst, acc, f);
    };
    const T zero = T(0), one = T(1);
    switch (kind * 2 + which) {
    case PFRT_BINARY_MUL * 2:
      return go([](T, T y, T d) { return d * y; });
    case PFRT_BINARY_MUL * 2 + 1:
      return go([](T x, T, T d) { return d * x; });
    case PFRT_BINARY_DIV * 2:
      return go([](T, T y, T d) { return d / y; });
    case PFRT_BINARY_DIV * 2 + 1:
      return go([](T x, T y, T d) { return -d * x / (y * y); });
    case PFRT_BINARY_POW * 2: // 0 where the exponent is 0 (no 0 * inf)
      return go([=](T x, T y, T d) {
        return y == zero ? zero : d * y * std::pow(x, y - one);
      });
    default: // pow, exponent: 0 where x == 0 and y >= 0 (the limit)
      return go([=](T x, T y, T d) {
        return (x == zero && y >= zero) ? zero
                                        : d * std::pow(x, y) * std::log(x);
      });
    }
  };
  if (!reduces) {
    run(static_cast<T *>(grad.data), accumulate);
    return PFRT_OK;
  }
  Scratch<T> work;
  PFRT_TRY(work.allocate(call, full.numel()));
  run(work.data(), false);
  const pfrt_tensor view = viewOf(work.data(), dy.dtype, full);
  reduceSumInto(ctx, view, isReduced, grad.data, 1.0, accumulate);
  return PFRT_OK;
}

//===------------------------------ Unary ---------------------------------===//

template <class T, class F>
void unaryGradLoop(const pfrt_context *ctx, const T *v, const T *dy, T *dx,
                   int64_t n, bool accumulate, F f) {
  parallelChunks(ctx, n, kFlatGrain, [&](int64_t begin, int64_t end) {
    if (accumulate) {
      for (int64_t i = begin; i < end; ++i)
        dx[i] += f(v[i], dy[i]);
    } else {
      for (int64_t i = begin; i < end; ++i)
        dx[i] = f(v[i], dy[i]);
    }
  });
}

/// Kinds beyond the unary ops: the two GELUs.
enum { kGeluExact = 100, kGeluTanh = 101 };

template <class T>
void unaryGrad(const pfrt_context *ctx, int32_t kind, const T *v, const T *dy,
               T *dx, int64_t n, bool acc) {
  const T twoOverSqrtPi = T(1.12837916709551257390);
  const T invSqrt2 = T(0.70710678118654752440);
  const T invSqrt2Pi = T(0.39894228040143267794);
  const T sqrt2OverPi = T(0.79788456080286535588), cubic = T(0.044715);
  const T half = T(0.5), one = T(1);
  switch (kind) {
  case PFRT_UNARY_SQRT:
    return unaryGradLoop(ctx, v, dy, dx, n, acc,
                         [=](T y, T d) { return d / (T(2) * y); });
  case PFRT_UNARY_ERF:
    return unaryGradLoop(ctx, v, dy, dx, n, acc, [=](T x, T d) {
      return d * twoOverSqrtPi * expOf(-x * x);
    });
  case PFRT_UNARY_TANH:
    return unaryGradLoop(ctx, v, dy, dx, n, acc,
                         [=](T y, T d) { return d * (one - y * y); });
  case PFRT_UNARY_EXP:
    return unaryGradLoop(ctx, v, dy, dx, n, acc,
                         [=](T y, T d) { return d * y; });
  case PFRT_UNARY_NEG:
    return unaryGradLoop(ctx, v, dy, dx, n, acc, [=](T, T d) { return -d; });
  case kGeluExact:
    // gelu'(x) = Phi(x) + x phi(x)
    return unaryGradLoop(ctx, v, dy, dx, n, acc, [=](T x, T d) {
      const T cdf = half * (one + erfOf(x * invSqrt2));
      const T pdf = invSqrt2Pi * expOf(-half * x * x);
      return d * (cdf + x * pdf);
    });
  default: // kGeluTanh
    return unaryGradLoop(ctx, v, dy, dx, n, acc, [=](T x, T d) {
      const T x2 = x * x;
      const T t = tanhOf(sqrt2OverPi * (x + cubic * x2 * x));
      const T du = sqrt2OverPi * (one + T(3) * cubic * x2);
      return d * (half * (one + t) + half * x * (one - t * t) * du);
    });
  }
}

pfrt_status unaryGradEntry(const Call &call, int32_t kind,
                           const pfrt_tensor *v, const pfrt_tensor *dy,
                           int32_t accumulate, const pfrt_tensor *dx,
                           const char *vName) {
  PFRT_TRY(call.tensor(vName, v));
  PFRT_TRY(call.tensor("grad_out", dy));
  PFRT_TRY(call.tensor("grad_in", dx));
  PFRT_TRY(call.dtypeIn(vName, v, {PFRT_F32, PFRT_F64}));
  const Shape shape = Shape::of(*v);
  PFRT_TRY(floatLike(call, "grad_out", dy, v->dtype, shape));
  PFRT_TRY(floatLike(call, "grad_in", dx, v->dtype, shape));
  visitFloat(v->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryGrad(call.context(), kind, static_cast<const T *>(v->data),
              static_cast<const T *>(dy->data), static_cast<T *>(dx->data),
              shape.numel(), accumulate != 0);
  });
  return PFRT_OK;
}

//===----------------------------- Softmax --------------------------------===//

constexpr int64_t kTile = 64;

/// One contiguous line: dx = y (dy - sum(dy y)).
template <class T>
void softmaxGradLine(const T *y, const T *dy, T *dx, int64_t n, bool acc) {
  const T s = T(laneSum(0, n, [&](int64_t i) {
    return double(dy[i]) * double(y[i]);
  }));
  if (acc) {
    for (int64_t i = 0; i < n; ++i)
      dx[i] += y[i] * (dy[i] - s);
  } else {
    for (int64_t i = 0; i < n; ++i)
      dx[i] = y[i] * (dy[i] - s);
  }
}

/// The softmax axis has stride `inner`; columns [c0, c0 + width).
template <class T>
void softmaxGradColumns(const T *y, const T *dy, T *dx, int64_t n,
                        int64_t inner, int64_t c0, int64_t width, bool acc) {
  double dot[kTile] = {};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t off = i * inner + c0;
    for (int64_t j = 0; j < width; ++j)
      dot[j] += double(dy[off + j]) * double(y[off + j]);
  }
  T s[kTile];
  for (int64_t j = 0; j < width; ++j)
    s[j] = T(dot[j]);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t off = i * inner + c0;
    for (int64_t j = 0; j < width; ++j) {
      const T v = y[off + j] * (dy[off + j] - s[j]);
      dx[off + j] = acc ? dx[off + j] + v : v;
    }
  }
}

template <class T>
void softmaxGrad(const pfrt_context *ctx, const T *y, const T *dy, T *dx,
                 int64_t outer, int64_t n, int64_t inner, bool acc) {
  if (inner == 1) {
    parallelFor(ctx, outer, n, [&](int64_t r) {
      softmaxGradLine(y + r * n, dy + r * n, dx + r * n, n, acc);
    });
    return;
  }
  const int64_t tiles = (inner + kTile - 1) / kTile;
  parallelFor(ctx, outer * tiles, n * kTile, [&](int64_t task) {
    const int64_t o = task / tiles, c0 = (task % tiles) * kTile;
    const int64_t width = inner - c0 < kTile ? inner - c0 : kTile;
    const int64_t base = o * n * inner;
    softmaxGradColumns(y + base, dy + base, dx + base, n, inner, c0, width,
                       acc);
  });
}

//===---------------------------- Layer norm ------------------------------===//

struct LayerNormGrad {
  int64_t rows = 0, cols = 0;
  bool accX = false, accParams = false;
};

/// Per-row statistics as doubles: given (x's dtype) or recomputed.
template <class T> struct RowStats {
  const T *mean = nullptr, *inv = nullptr; // given
  const double *dmean = nullptr, *dinv = nullptr; // recomputed
  double meanOf(int64_t r) const { return mean ? double(mean[r]) : dmean[r]; }
  double invOf(int64_t r) const { return inv ? double(inv[r]) : dinv[r]; }
};

template <class T>
void recomputeStats(const pfrt_context *ctx, const T *x, int64_t rows,
                    int64_t cols, double eps, double *mean, double *inv) {
  parallelFor(ctx, rows, cols, [&](int64_t r) {
    const T *p = x + r * cols;
    const double sum = laneSum(0, cols, [&](int64_t j) { return double(p[j]); });
    const double m = cols ? sum / cols : 0.0;
    const double squares = laneSum(0, cols, [&](int64_t j) {
      const double d = p[j] - m;
      return d * d;
    });
    mean[r] = m;
    inv[r] = 1.0 / std::sqrt((cols ? squares / cols : 0.0) + eps);
  });
}

/// grad_scale and grad_bias: column tiles, each summing over all rows.
template <class T>
void layerNormParamGrads(const pfrt_context *ctx, const LayerNormGrad &a,
                         const T *x, const T *dy, const RowStats<T> &st,
                         T *dscale, T *dbias) {
  const int64_t tiles = (a.cols + kTile - 1) / kTile;
  parallelFor(ctx, tiles, a.rows * kTile, [&](int64_t t) {
    const int64_t c0 = t * kTile;
    const int64_t width = a.cols - c0 < kTile ? a.cols - c0 : kTile;
    double accS[kTile] = {}, accB[kTile] = {};
    for (int64_t r = 0; r < a.rows; ++r) {
      const double m = st.meanOf(r), inv = st.invOf(r);
      const T *px = x + r * a.cols + c0;
      const T *pd = dy + r * a.cols + c0;
      for (int64_t j = 0; j < width; ++j) {
        accS[j] += double(pd[j]) * ((double(px[j]) - m) * inv);
        accB[j] += double(pd[j]);
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      if (dscale)
        put(dscale + c0 + j, a.accParams, T(accS[j]));
      if (dbias)
        put(dbias + c0 + j, a.accParams, T(accB[j]));
    }
  });
}

template <class T>
void layerNormInputGrad(const pfrt_context *ctx, const LayerNormGrad &a,
                        const T *x, const T *scale, const T *dy,
                        const RowStats<T> &st, T *dx) {
  const int64_t n = a.cols;
  parallelFor(ctx, a.rows, 3 * n, [&](int64_t r) {
    const double m = st.meanOf(r), inv = st.invOf(r);
    const T *px = x + r * n;
    const T *pd = dy + r * n;
    T *po = dx + r * n;
    double sumG, sumGX;
    laneSum2(0, n, [&](int64_t j, double &g0, double &g1) {
      const double g = double(pd[j]) * double(scale[j]);
      g0 += g;
      g1 += g * ((double(px[j]) - m) * inv);
    }, sumG, sumGX);
    const T meanG = T(n ? sumG / n : 0.0), meanGX = T(n ? sumGX / n : 0.0);
    const T tm = T(m), ti = T(inv);
    for (int64_t j = 0; j < n; ++j) {
      const T xhat = (px[j] - tm) * ti;
      const T v = ti * (pd[j] * scale[j] - meanG - xhat * meanGX);
      po[j] = a.accX ? po[j] + v : v;
    }
  });
}

//===------------------------------ Gather --------------------------------===//

template <class I> int64_t indexAt(const void *p, int64_t i) {
  return static_cast<int64_t>(static_cast<const I *>(p)[i]);
}

/// Scatter-add: grad_data viewed as [outer, n, inner], grad_out as [outer,
/// count, inner]. Tasks own (outer slice, block of rows of n).
template <class T, class I>
void gatherGrad(const pfrt_context *ctx, const I *idx, int64_t count,
                const T *dy, T *dd, int64_t outer, int64_t n, int64_t inner) {
  const int threads = ctx->numThreads;
  int64_t blocks = outer >= threads ? 1 : (4 * threads + outer - 1) / outer;
  if (blocks > n)
    blocks = n;
  if (blocks < 1)
    blocks = 1;
  const int64_t rowsPerBlock = (n + blocks - 1) / blocks;
  parallelFor(ctx, outer * blocks, (count * inner) / blocks + count,
              [&](int64_t task) {
    const int64_t o = task / blocks, blk = task % blocks;
    const int64_t r0 = blk * rowsPerBlock;
    const int64_t r1 = r0 + rowsPerBlock < n ? r0 + rowsPerBlock : n;
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = static_cast<int64_t>(idx[i]);
      if (row < 0)
        row += n;
      if (row < r0 || row >= r1)
        continue;
      const T *src = dy + (o * count + i) * inner;
      T *dst = dd + (o * n + row) * inner;
      for (int64_t j = 0; j < inner; ++j)
        dst[j] += src[j];
    }
  });
}

} // namespace

extern "C" {

pfrt_status pfrt_reduce_to_shape_cpu(pfrt_context *ctx, const pfrt_tensor *grad,
                                     int32_t accumulate, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_reduce_to_shape");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("grad", grad));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("grad", grad, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("out", out, grad->dtype));
  const Shape full = Shape::of(*grad), target = Shape::of(*out);
  if (!broadcastsTo(target, full))
    return call.fail(PFRT_INVALID_ARGUMENT, "out of shape %s does not "
                     "broadcast to grad's shape %s", ShapeStr(target).c_str(),
                     ShapeStr(full).c_str());
  bool isReduced[PFRT_MAX_RANK];
  broadcastAxes(target, full, isReduced);
  reduceSumInto(ctx, *grad, isReduced, out->data, 1.0, accumulate != 0);
  return PFRT_OK;
}

pfrt_status pfrt_binary_backward_cpu(pfrt_context *ctx, int32_t kind,
                                     const pfrt_tensor *a, const pfrt_tensor *b,
                                     const pfrt_tensor *grad_out,
                                     int32_t accumulate_a, int32_t accumulate_b,
                                     const pfrt_tensor *grad_a,
                                     const pfrt_tensor *grad_b) {
  Call call(ctx, "pfrt_binary_backward");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkBinaryBackward(call, kind, a, b, grad_out, grad_a, grad_b));
  return visitFloat(a->dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    if (grad_a)
      PFRT_TRY(binaryOperandGrad<T>(call, kind, 0, *a, *b, *grad_out, *grad_a,
                                    accumulate_a != 0));
    if (grad_b)
      PFRT_TRY(binaryOperandGrad<T>(call, kind, 1, *a, *b, *grad_out, *grad_b,
                                    accumulate_b != 0));
    return PFRT_OK;
  });
}

pfrt_status pfrt_unary_backward_cpu(pfrt_context *ctx, int32_t kind,
                                    const pfrt_tensor *x_or_y,
                                    const pfrt_tensor *grad_out,
                                    int32_t accumulate,
                                    const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_unary_backward");
  PFRT_TRY(call.begin());
  if (kind < PFRT_UNARY_SQRT || kind > PFRT_UNARY_NEG)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown kind %d", kind);
  return unaryGradEntry(call, kind, x_or_y, grad_out, accumulate, grad_in,
                        "x_or_y");
}

pfrt_status pfrt_gelu_backward_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                   const pfrt_tensor *grad_out,
                                   int32_t approximation, int32_t accumulate,
                                   const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_gelu_backward");
  PFRT_TRY(call.begin());
  if (approximation != PFRT_GELU_EXACT && approximation != PFRT_GELU_TANH)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown approximation %d",
                     approximation);
  return unaryGradEntry(call,
                        approximation == PFRT_GELU_EXACT ? kGeluExact
                                                         : kGeluTanh,
                        x, grad_out, accumulate, grad_in, "x");
}

pfrt_status pfrt_softmax_backward_cpu(pfrt_context *ctx, const pfrt_tensor *y,
                                      const pfrt_tensor *grad_out, int64_t axis,
                                      int32_t accumulate,
                                      const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_softmax_backward");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("y", y));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_in", grad_in));
  PFRT_TRY(call.dtypeIn("y", y, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("y", y, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, y->rank, ax));
  const Shape shape = Shape::of(*y);
  PFRT_TRY(floatLike(call, "grad_out", grad_out, y->dtype, shape));
  PFRT_TRY(floatLike(call, "grad_in", grad_in, y->dtype, shape));
  if (shape.numel() == 0)
    return PFRT_OK;
  const int64_t outer = product(shape, 0, ax), n = shape.dims[ax],
                inner = product(shape, ax + 1, shape.rank);
  visitFloat(y->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmaxGrad(ctx, static_cast<const T *>(y->data),
                static_cast<const T *>(grad_out->data),
                static_cast<T *>(grad_in->data), outer, n, inner,
                accumulate != 0);
  });
  return PFRT_OK;
}

pfrt_status pfrt_layer_norm_backward_cpu(
    pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *scale,
    const pfrt_tensor *mean, const pfrt_tensor *inv_std_dev,
    const pfrt_tensor *grad_out, int64_t axis, double epsilon,
    int32_t accumulate_x, int32_t accumulate_params, const pfrt_tensor *grad_x,
    const pfrt_tensor *grad_scale, const pfrt_tensor *grad_bias) {
  Call call(ctx, "pfrt_layer_norm_backward");
  PFRT_TRY(call.begin());
  NormBlocks blocks;
  PFRT_TRY(checkLayerNormBackward(call, x, scale, mean, inv_std_dev, grad_out, axis, epsilon,
                                  grad_x, grad_scale, grad_bias, blocks));
  LayerNormGrad args;
  args.rows = blocks.rows;
  args.cols = blocks.cols;
  args.accX = accumulate_x != 0;
  args.accParams = accumulate_params != 0;
  if (args.cols == 0)
    return PFRT_OK; // empty blocks: every output is empty
  Scratch<double> stats;
  if (!mean)
    PFRT_TRY(stats.allocate(call, 2 * args.rows));
  return visitFloat(x->dtype, [&](auto tag) -> pfrt_status {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x->data);
    const T *pd = static_cast<const T *>(grad_out->data);
    RowStats<T> st;
    if (mean) {
      st.mean = static_cast<const T *>(mean->data);
      st.inv = static_cast<const T *>(inv_std_dev->data);
    } else {
      recomputeStats(ctx, px, args.rows, args.cols, epsilon, stats.data(),
                     stats.data() + args.rows);
      st.dmean = stats.data();
      st.dinv = stats.data() + args.rows;
    }
    // Parameter gradients first: grad_x may overwrite grad_out.
    if (grad_scale || grad_bias)
      layerNormParamGrads(
          ctx, args, px, pd, st,
          grad_scale ? static_cast<T *>(grad_scale->data) : nullptr,
          grad_bias ? static_cast<T *>(grad_bias->data) : nullptr);
    if (grad_x)
      layerNormInputGrad(ctx, args, px, static_cast<const T *>(scale->data),
                         pd, st, static_cast<T *>(grad_x->data));
    return PFRT_OK;
  });
}

pfrt_status pfrt_gather_backward_cpu(pfrt_context *ctx, const pfrt_tensor *indices,
                                     const pfrt_tensor *grad_out, int64_t axis,
                                     int32_t accumulate,
                                     const pfrt_tensor *grad_data) {
  Call call(ctx, "pfrt_gather_backward");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_data", grad_data));
  PFRT_TRY(call.dtypeIn("indices", indices, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIn("grad_data", grad_data, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, grad_data->dtype));
  PFRT_TRY(call.rankIn("grad_data", grad_data, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, grad_data->rank, ax));
  if (grad_data->rank - 1 + indices->rank > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "the gathered rank %d exceeds %d",
                     grad_data->rank - 1 + indices->rank, PFRT_MAX_RANK);
  const Shape dataShape = Shape::of(*grad_data);
  Shape expected;
  for (int32_t i = 0; i < ax; ++i)
    expected.push(dataShape.dims[i]);
  for (int32_t i = 0; i < indices->rank; ++i)
    expected.push(indices->shape[i]);
  for (int32_t i = ax + 1; i < dataShape.rank; ++i)
    expected.push(dataShape.dims[i]);
  PFRT_TRY(call.shapeIs("grad_out", grad_out, expected));
  const int64_t n = dataShape.dims[ax];
  const int64_t count = Shape::of(*indices).numel();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = indices->dtype == PFRT_I32
                          ? indexAt<int32_t>(indices->data, i)
                          : indexAt<int64_t>(indices->data, i);
    if (v < -n || v >= n)
      return call.fail(PFRT_INVALID_ARGUMENT, "index %lld (element %lld) is "
                       "out of range for axis %d of size %lld",
                       static_cast<long long>(v), static_cast<long long>(i),
                       ax, static_cast<long long>(n));
  }
  const int64_t outer = product(dataShape, 0, ax);
  const int64_t inner = product(dataShape, ax + 1, dataShape.rank);
  const int64_t total = dataShape.numel();
  visitFloat(grad_data->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *dd = static_cast<T *>(grad_data->data);
    if (!accumulate)
      parallelChunks(ctx, total, kFlatGrain, [&](int64_t begin, int64_t end) {
        std::memset(dd + begin, 0, sizeof(T) * (end - begin));
      });
    if (total == 0 || count == 0)
      return;
    const T *dy = static_cast<const T *>(grad_out->data);
    if (indices->dtype == PFRT_I32)
      gatherGrad(ctx, static_cast<const int32_t *>(indices->data), count, dy,
                 dd, outer, n, inner);
    else
      gatherGrad(ctx, static_cast<const int64_t *>(indices->data), count, dy,
                 dd, outer, n, inner);
  });
  return PFRT_OK;
}

} // extern "C"
