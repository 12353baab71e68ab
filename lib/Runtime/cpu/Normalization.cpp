//===- Normalization.cpp - layer_norm and softmax --------------------------===//
//
// Both work on independent rows (layer_norm: the normalized block; softmax:
// one line along the axis), threaded over rows with vectorized passes
// inside each row.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "../common/Shape.h"
#include "../common/TensorChecks.h"
#include "FastMath.h"
#include "Parallel.h"

#include <cmath>
#include <limits>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

//===---------------------------- layer_norm ------------------------------===//

struct LayerNormArgs {
  int64_t rows = 0, cols = 0;
  double epsilon = 0;
};

/// Two passes over the row (mean, then the centred sum of squares) in
/// double: as cheap as E[x^2] - E[x]^2 here and without its cancellation.
template <class T>
void layerNormRow(const LayerNormArgs &args, const T *x, const T *scale,
                  const T *bias, T *y, T &meanOut, T &invStdOut) {
  const int64_t n = args.cols;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j)
    sum += x[j];
  const double mean = n ? sum / n : 0.0;
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < n; ++j) {
    const double d = x[j] - mean;
    squares += d * d;
  }
  const double variance = n ? squares / n : 0.0;
  const T m = T(mean);
  const T inv = T(1.0 / std::sqrt(variance + args.epsilon));
  if (bias) {
    for (int64_t j = 0; j < n; ++j)
      y[j] = (x[j] - m) * inv * scale[j] + bias[j];
  } else {
    for (int64_t j = 0; j < n; ++j)
      y[j] = (x[j] - m) * inv * scale[j];
  }
  meanOut = m;
  invStdOut = inv;
}

template <class T>
void layerNorm(const pfrt_context *ctx, const LayerNormArgs &args, const T *x,
               const T *scale, const T *bias, T *y, T *mean, T *invStd) {
  parallelFor(ctx, args.rows, args.cols, [&](int64_t r) {
    T m, inv;
    layerNormRow(args, x + r * args.cols, scale, bias, y + r * args.cols, m,
                 inv);
    if (mean)
      mean[r] = m;
    if (invStd)
      invStd[r] = inv;
  });
}

//===----------------------------- softmax --------------------------------===//

/// Softmax of one contiguous line.
template <class T> void softmaxLine(const T *x, T *y, int64_t n) {
  T maximum = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : maximum)
  for (int64_t i = 0; i < n; ++i)
    maximum = x[i] > maximum ? x[i] : maximum;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const T e = expOf(x[i] - maximum);
    y[i] = e;
    sum += e;
  }
  const T inv = T(1.0 / sum);
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
}

/// Columns of a strided block processed together: the axis has stride
/// `inner`, so the vectorized loops run across neighbouring columns.
constexpr int64_t kSoftmaxTile = 64;

/// Softmax along the middle dimension of an [n, inner] block, for columns
/// [c0, c0 + width).
template <class T>
void softmaxColumns(const T *x, T *y, int64_t n, int64_t inner, int64_t c0,
                    int64_t width) {
  T maximum[kSoftmaxTile];
  double sum[kSoftmaxTile];
  for (int64_t j = 0; j < width; ++j) {
    maximum[j] = -std::numeric_limits<T>::infinity();
    sum[j] = 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T *row = x + i * inner + c0;
    for (int64_t j = 0; j < width; ++j)
      maximum[j] = row[j] > maximum[j] ? row[j] : maximum[j];
  }
  for (int64_t i = 0; i < n; ++i) {
    const T *row = x + i * inner + c0;
    T *out = y + i * inner + c0;
    for (int64_t j = 0; j < width; ++j) {
      const T e = expOf(row[j] - maximum[j]);
      out[j] = e;
      sum[j] += e;
    }
  }
  T inv[kSoftmaxTile];
  for (int64_t j = 0; j < width; ++j)
    inv[j] = T(1.0 / sum[j]);
  for (int64_t i = 0; i < n; ++i) {
    T *out = y + i * inner + c0;
    for (int64_t j = 0; j < width; ++j)
      out[j] *= inv[j];
  }
}

/// x viewed as [outer, n, inner] with the softmax over n.
template <class T>
void softmax(const pfrt_context *ctx, const T *x, T *y, int64_t outer,
             int64_t n, int64_t inner) {
  if (inner == 1) {
    parallelFor(ctx, outer, n, [&](int64_t r) {
      softmaxLine(x + r * n, y + r * n, n);
    });
    return;
  }
  const int64_t tiles = (inner + kSoftmaxTile - 1) / kSoftmaxTile;
  parallelFor(ctx, outer * tiles, n * kSoftmaxTile, [&](int64_t task) {
    const int64_t o = task / tiles, c0 = (task % tiles) * kSoftmaxTile;
    const int64_t width = inner - c0 < kSoftmaxTile ? inner - c0 : kSoftmaxTile;
    softmaxColumns(x + o * n * inner, y + o * n * inner, n, inner, c0, width);
  });
}

//===------------------- fused inference kernels ---------------------===//
//
// The attention softmax with its scaling and mask, and LayerNorm of a
// residual sum, each one pass over the data (the graph's fusions for
// inference, lib/Transforms/Graph). Each row is built in the output row
// first (in cache) and then normalized there with the unfused kernels'
// arithmetic (LayerNorm by its own row function): with a scale whose product
// is exact (1/8 for 64-wide heads) the results differ from the unfused ones
// only by the order of the vectorized row sums. The f32 rows are compiled
// for AVX-512 and AVX2 too (PFRT_VECTOR_CLONES): these loops are bound by
// the exp and the row statistics, not by memory.

/// One row of softmax(scale * x + mask); maskStep is 1 (a mask row), 0 (one
/// value for the row) or the mask is null. softmaxLine's arithmetic (max,
/// exp of the difference, sum in double, one reciprocal), with the exp in a
/// loop of its own: a loop that also sums into a double is not vectorized,
/// and the scalar exp was most of pfrt_softmax's time.
template <class T>
inline void scaledMaskedSoftmaxRow(const T *x, const T *mask, int64_t maskStep, T scale, T *y,
                                   int64_t n) {
  if (!mask) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * scale;
  } else if (maskStep == 1) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * scale + mask[i];
  } else {
    const T m = mask[0];
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * scale + m;
  }
  T maximum = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : maximum)
  for (int64_t i = 0; i < n; ++i)
    maximum = y[i] > maximum ? y[i] : maximum;
  for (int64_t i = 0; i < n; ++i)
    y[i] = expOf(y[i] - maximum);
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += y[i];
  const T inv = T(1.0 / sum);
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
}

PFRT_VECTOR_CLONES void scaledMaskedSoftmaxRowF32(const float *x, const float *mask,
                                                  int64_t maskStep, float scale, float *y,
                                                  int64_t n) {
  scaledMaskedSoftmaxRow(x, mask, maskStep, scale, y, n);
}

void scaledMaskedSoftmaxRowOf(const float *x, const float *mask, int64_t maskStep, float scale,
                              float *y, int64_t n) {
  scaledMaskedSoftmaxRowF32(x, mask, maskStep, scale, y, n);
}
void scaledMaskedSoftmaxRowOf(const double *x, const double *mask, int64_t maskStep, double scale,
                              double *y, int64_t n) {
  scaledMaskedSoftmaxRow(x, mask, maskStep, scale, y, n);
}

/// Rows of x (all dimensions but the last) and where each row's mask row
/// starts (mask broadcast to x's shape, right-aligned).
struct MaskRows {
  StridedIndex rows; ///< over x's leading dims, strides into the mask
  int64_t step = 0;  ///< 1: the mask varies along the row; 0: it does not
};

MaskRows planMaskRows(const Shape &x, const Shape &mask) {
  MaskRows plan;
  const int32_t offset = x.rank - mask.rank;
  int64_t maskStrides[PFRT_MAX_RANK];
  contiguousStrides(mask, maskStrides);
  for (int32_t d = 0; d + 1 < x.rank; ++d) {
    const int32_t md = d - offset;
    const bool broadcast = md < 0 || mask.dims[md] == 1;
    plan.rows.push(x.dims[d], broadcast ? 0 : maskStrides[md]);
  }
  plan.step = mask.rank > 0 && mask.dims[mask.rank - 1] != 1 ? 1 : 0;
  return plan;
}

template <class T>
void scaledMaskedSoftmax(const pfrt_context *ctx, const T *x, const T *mask,
                         const MaskRows &maskRows, int64_t rows, int64_t n, T scale, T *y) {
  parallelFor(ctx, rows, 4 * n, [&](int64_t r) {
    const T *maskRow = mask ? mask + maskRows.rows.offset(r) : nullptr;
    scaledMaskedSoftmaxRowOf(x + r * n, maskRow, maskRows.step, scale, y + r * n, n);
  });
}

/// LayerNorm of one row of x + residual, the sum built in y first.
template <class T>
inline void addLayerNormRow(const LayerNormArgs &args, const T *x, const T *residual,
                            const T *scale, const T *bias, T *y) {
  for (int64_t j = 0; j < args.cols; ++j)
    y[j] = x[j] + residual[j];
  T mean, invStd;
  layerNormRow(args, y, scale, bias, y, mean, invStd);
}

PFRT_VECTOR_CLONES void addLayerNormRowF32(const LayerNormArgs &args, const float *x,
                                           const float *residual, const float *scale,
                                           const float *bias, float *y) {
  addLayerNormRow(args, x, residual, scale, bias, y);
}

void addLayerNormRowOf(const LayerNormArgs &args, const float *x, const float *residual,
                       const float *scale, const float *bias, float *y) {
  addLayerNormRowF32(args, x, residual, scale, bias, y);
}
void addLayerNormRowOf(const LayerNormArgs &args, const double *x, const double *residual,
                       const double *scale, const double *bias, double *y) {
  addLayerNormRow(args, x, residual, scale, bias, y);
}

} // namespace

extern "C" {

pfrt_status pfrt_layer_norm_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                const pfrt_tensor *scale, const pfrt_tensor *bias,
                                int64_t axis, double epsilon,
                                const pfrt_tensor *out, const pfrt_tensor *mean,
                                const pfrt_tensor *inv_std_dev) {
  Call call(ctx, "pfrt_layer_norm");
  PFRT_TRY(call.begin());
  NormBlocks blocks;
  PFRT_TRY(
      checkLayerNorm(call, x, nullptr, scale, bias, axis, epsilon, out, mean, inv_std_dev, blocks));
  LayerNormArgs args;
  args.rows = blocks.rows;
  args.cols = blocks.cols;
  args.epsilon = epsilon;
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    layerNorm(ctx, args, static_cast<const T *>(x->data),
              static_cast<const T *>(scale->data),
              bias ? static_cast<const T *>(bias->data) : nullptr,
              static_cast<T *>(out->data),
              mean ? static_cast<T *>(mean->data) : nullptr,
              inv_std_dev ? static_cast<T *>(inv_std_dev->data) : nullptr);
  });
  return PFRT_OK;
}

pfrt_status pfrt_softmax_cpu(pfrt_context *ctx, const pfrt_tensor *x, int64_t axis,
                             const pfrt_tensor *out) {
  Call call(ctx, "pfrt_softmax");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, x->rank, ax));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t outer = product(shape, 0, ax), n = shape.dims[ax],
                inner = product(shape, ax + 1, shape.rank);
  if (shape.numel() == 0)
    return PFRT_OK;
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax(ctx, static_cast<const T *>(x->data), static_cast<T *>(out->data),
            outer, n, inner);
  });
  return PFRT_OK;
}

pfrt_status pfrt_softmax_scaled_masked_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                           const pfrt_tensor *mask, double scale,
                                           const pfrt_tensor *out) {
  Call call(ctx, "pfrt_softmax_scaled_masked");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.optionalTensor("mask", mask));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  const Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  if (!std::isfinite(scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "scale %g is not finite", scale);
  MaskRows maskRows;
  if (mask) {
    PFRT_TRY(call.dtypeIs("mask", mask, x->dtype));
    const Shape maskShape = Shape::of(*mask);
    if (!broadcastsTo(maskShape, shape))
      return call.fail(PFRT_INVALID_ARGUMENT, "mask %s does not broadcast to x %s",
                       ShapeStr(maskShape).c_str(), ShapeStr(shape).c_str());
    maskRows = planMaskRows(shape, maskShape);
  }
  const int64_t n = shape.dims[shape.rank - 1], rows = product(shape, 0, shape.rank - 1);
  if (shape.numel() == 0)
    return PFRT_OK;
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scaledMaskedSoftmax(ctx, static_cast<const T *>(x->data),
                        mask ? static_cast<const T *>(mask->data) : nullptr, maskRows, rows, n,
                        T(scale), static_cast<T *>(out->data));
  });
  return PFRT_OK;
}

pfrt_status pfrt_add_layer_norm_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                    const pfrt_tensor *residual, const pfrt_tensor *scale,
                                    const pfrt_tensor *bias, int64_t axis, double epsilon,
                                    const pfrt_tensor *out) {
  Call call(ctx, "pfrt_add_layer_norm");
  PFRT_TRY(call.begin());
  NormBlocks blocks;
  PFRT_TRY(
      checkLayerNorm(call, x, residual, scale, bias, axis, epsilon, out, nullptr, nullptr, blocks));
  LayerNormArgs args;
  args.rows = blocks.rows;
  args.cols = blocks.cols;
  args.epsilon = epsilon;
  visitFloat(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xs = static_cast<const T *>(x->data), *rs = static_cast<const T *>(residual->data);
    const T *g = static_cast<const T *>(scale->data);
    const T *b = bias ? static_cast<const T *>(bias->data) : nullptr;
    T *y = static_cast<T *>(out->data);
    parallelFor(ctx, args.rows, 2 * args.cols, [&](int64_t r) {
      const int64_t at = r * args.cols;
      addLayerNormRowOf(args, xs + at, rs + at, g, b, y + at);
    });
  });
  return PFRT_OK;
}

} // extern "C"
