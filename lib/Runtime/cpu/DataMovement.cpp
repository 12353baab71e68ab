//===- DataMovement.cpp - transpose, slice, expand, gather, concat, cast ---===//
//
// Transpose, slice and expand are the same operation: fill a contiguous
// output from the input viewed with other strides (permuted, scaled by the
// steps, or 0 along broadcast dimensions). stridedCopy does that for any
// dtype by moving same-sized unsigned integers.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "../common/SlicePlan.h"
#include "../common/TensorChecks.h"
#include "Half.h"
#include "Kernels.h"
#include "Parallel.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

//===--------------------------- strided copy -----------------------------===//

/// A strided view simplified for copying: unit dimensions dropped and
/// neighbours merged when the source walks them as one run.
struct StridedView {
  int32_t rank = 0;
  int64_t dims[PFRT_MAX_RANK] = {};
  int64_t src[PFRT_MAX_RANK] = {}; ///< source strides (elements, any sign)
  int64_t dst[PFRT_MAX_RANK] = {}; ///< contiguous output strides
};

StridedView simplify(const Shape &shape, const int64_t *srcStrides) {
  StridedView v;
  for (int32_t i = 0; i < shape.rank; ++i) {
    if (shape.dims[i] == 1)
      continue;
    if (v.rank > 0 && v.src[v.rank - 1] == srcStrides[i] * shape.dims[i]) {
      v.dims[v.rank - 1] *= shape.dims[i];
      v.src[v.rank - 1] = srcStrides[i];
      continue;
    }
    v.dims[v.rank] = shape.dims[i];
    v.src[v.rank++] = srcStrides[i];
  }
  int64_t stride = 1;
  for (int32_t i = v.rank - 1; i >= 0; --i) {
    v.dst[i] = stride;
    stride *= v.dims[i];
  }
  return v;
}

/// Square tile of the 2-D transposing copy: 32 x 32 elements keep both the
/// rows read and the rows written in L1.
constexpr int64_t kTile = 32;

/// The innermost output dimension is strided in the source but another
/// dimension q is contiguous there: copy (q, last) planes in tiles so that
/// both sides are read/written in cache-line runs.
template <class U>
void tiledCopy(const pfrt_context *ctx, const StridedView &v, int32_t q,
               const U *src, U *dst) {
  const int32_t last = v.rank - 1;
  StridedIndex srcOther, dstOther;
  for (int32_t d = 0; d < last; ++d)
    if (d != q) {
      srcOther.push(v.dims[d], v.src[d]);
      dstOther.push(v.dims[d], v.dst[d]);
    }
  const int64_t nq = v.dims[q], nl = v.dims[last];
  const int64_t sl = v.src[last], dq = v.dst[q];
  const int64_t qTiles = (nq + kTile - 1) / kTile;
  parallelFor(ctx, srcOther.count() * qTiles, kTile * nl, [&](int64_t task) {
    const int64_t o = task / qTiles, q0 = (task % qTiles) * kTile;
    const int64_t q1 = q0 + kTile < nq ? q0 + kTile : nq;
    const U *s = src + srcOther.offset(o);
    U *d = dst + dstOther.offset(o);
    for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
      const int64_t l1 = l0 + kTile < nl ? l0 + kTile : nl;
      for (int64_t i = q0; i < q1; ++i)
        for (int64_t j = l0; j < l1; ++j)
          d[i * dq + j] = s[i + j * sl];
    }
  });
}

/// dst (contiguous, `shape`) = src viewed with `srcStrides`.
template <class U>
void stridedCopy(const pfrt_context *ctx, const U *src, const Shape &shape,
                 const int64_t *srcStrides, U *dst) {
  if (shape.numel() == 0)
    return;
  StridedView v = simplify(shape, srcStrides);
  if (v.rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int32_t last = v.rank - 1;
  const int64_t n = v.dims[last], s = v.src[last];
  if (s != 0 && s != 1)
    for (int32_t q = 0; q < last; ++q)
      if (v.src[q] == 1)
        return tiledCopy(ctx, v, q, src, dst);
  StridedIndex rows;
  for (int32_t d = 0; d < last; ++d)
    rows.push(v.dims[d], v.src[d]);
  parallelFor(ctx, rows.count(), n, [&](int64_t r) {
    const U *in = src + rows.offset(r);
    U *out = dst + r * n;
    if (s == 1) {
      std::memcpy(out, in, sizeof(U) * n);
    } else if (s == 0) {
      const U value = in[0];
      for (int64_t j = 0; j < n; ++j)
        out[j] = value;
    } else {
      for (int64_t j = 0; j < n; ++j)
        out[j] = in[j * s];
    }
  });
}

/// stridedCopy for any dtype, by element size.
void stridedCopyBytes(const pfrt_context *ctx, int32_t dtype, const void *src,
                      const Shape &shape, const int64_t *srcStrides,
                      void *dst) {
  visitBytes(dtypeSize(dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    stridedCopy(ctx, static_cast<const U *>(src), shape, srcStrides,
                static_cast<U *>(dst));
  });
}

//===------------------------------ cast ----------------------------------===//

/// Saturating float -> integer conversion (C++ leaves out-of-range
/// conversions undefined); NaN becomes 0.
template <class D> D saturate(double v) {
  if (v != v)
    return D(0);
  if (v <= static_cast<double>(std::numeric_limits<D>::min()))
    return std::numeric_limits<D>::min();
  if (v >= static_cast<double>(std::numeric_limits<D>::max()))
    return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

/// One element from S to D with pfrt_cast's rules. bool is uint8_t (the
/// runtime has no u8 dtype); f16 goes through f32.
template <class D, class S> D castValue(S v) {
  if constexpr (std::is_same_v<S, Half>) {
    return castValue<D>(halfToFloat(v.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{floatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S(0) ? 1 : 0;
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    return saturate<D>(static_cast<double>(v));
  } else {
    return static_cast<D>(v);
  }
}

template <class D, class S>
void castLoop(const pfrt_context *ctx, const S *x, D *out, int64_t n) {
  parallelChunks(ctx, n, 16 * 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = castValue<D>(x[i]);
  });
}

//===----------------------------- gather ---------------------------------===//

/// Position of the first index outside [-dim, dim), or -1.
template <class I> int64_t firstBadIndex(const I *idx, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < -dim || idx[i] >= dim)
      return i;
  return -1;
}

struct GatherArgs {
  int64_t outer = 1, dim = 0, count = 0, innerBytes = 0;
};

template <class I>
void gather(const pfrt_context *ctx, const GatherArgs &g, const char *data,
            const I *idx, char *out) {
  parallelFor(ctx, g.outer * g.count, g.innerBytes, [&](int64_t task) {
    const int64_t o = task / g.count, k = task % g.count;
    const int64_t i = idx[k] < 0 ? idx[k] + g.dim : idx[k];
    std::memcpy(out + task * g.innerBytes,
                data + (o * g.dim + i) * g.innerBytes, g.innerBytes);
  });
}

//===----------------------------- helpers --------------------------------===//

/// Parallel memcpy of non-overlapping buffers.
void copyBytes(const pfrt_context *ctx, const void *src, void *dst,
               int64_t bytes) {
  if (src == dst || bytes == 0)
    return;
  parallelChunks(ctx, bytes, 1 << 20, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char *>(dst) + begin,
                static_cast<const char *>(src) + begin, end - begin);
  });
}

pfrt_status copyEntry(const char *fn, pfrt_context *ctx, const pfrt_tensor *x,
                      const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  const int64_t n = Shape::of(*x).numel(), m = Shape::of(*out).numel();
  if (n != m)
    return call.fail(PFRT_INVALID_ARGUMENT, "x %s has %lld elements but out "
                     "%s has %lld", ShapeStr(Shape::of(*x)).c_str(),
                     static_cast<long long>(n),
                     ShapeStr(Shape::of(*out)).c_str(),
                     static_cast<long long>(m));
  copyBytes(ctx, x->data, out->data, n * dtypeSize(x->dtype));
  return PFRT_OK;
}

} // namespace

namespace pfrt::cpu {

void broadcastCopy(const pfrt_context *ctx, const pfrt_tensor &x,
                   const Shape &outShape, void *outData) {
  Shape xShape = Shape::of(x);
  if (x.data == outData && xShape == outShape)
    return;
  int64_t natural[PFRT_MAX_RANK], strides[PFRT_MAX_RANK];
  contiguousStrides(xShape, natural);
  const int32_t shift = outShape.rank - xShape.rank;
  for (int32_t i = 0; i < outShape.rank; ++i) {
    const int32_t j = i - shift;
    strides[i] = (j >= 0 && xShape.dims[j] != 1) ? natural[j] : 0;
  }
  stridedCopyBytes(ctx, x.dtype, x.data, outShape, strides, outData);
}

} // namespace pfrt::cpu

extern "C" {

pfrt_status pfrt_transpose_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                               const int64_t *perm, int32_t num_perm,
                               const pfrt_tensor *out) {
  Call call(ctx, "pfrt_transpose");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape outShape;
  int64_t strides[PFRT_MAX_RANK];
  PFRT_TRY(planTranspose(call, *x, perm, num_perm, outShape, strides));
  PFRT_TRY(call.shapeIs("out", out, outShape));
  stridedCopyBytes(ctx, x->dtype, x->data, outShape, strides, out->data);
  return PFRT_OK;
}

pfrt_status pfrt_gather_cpu(pfrt_context *ctx, const pfrt_tensor *data,
                            const pfrt_tensor *indices, int64_t axis,
                            const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gather");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("data", data));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("indices", indices, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("out", out, data->dtype));
  PFRT_TRY(call.rankIn("data", data, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, data->rank, ax));
  if (data->rank - 1 + indices->rank > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "result rank %d exceeds %d",
                     data->rank - 1 + indices->rank, PFRT_MAX_RANK);
  Shape dataShape = Shape::of(*data), expected;
  for (int32_t i = 0; i < ax; ++i)
    expected.push(dataShape.dims[i]);
  for (int32_t i = 0; i < indices->rank; ++i)
    expected.push(indices->shape[i]);
  for (int32_t i = ax + 1; i < data->rank; ++i)
    expected.push(dataShape.dims[i]);
  PFRT_TRY(call.shapeIs("out", out, expected));
  GatherArgs g;
  g.outer = product(dataShape, 0, ax);
  g.dim = dataShape.dims[ax];
  g.count = Shape::of(*indices).numel();
  g.innerBytes = product(dataShape, ax + 1, dataShape.rank) *
                 dtypeSize(data->dtype);
  // All indices are checked before anything is written.
  const bool wide = indices->dtype == PFRT_I64;
  const int64_t bad =
      wide ? firstBadIndex(static_cast<const int64_t *>(indices->data),
                           g.count, g.dim)
           : firstBadIndex(static_cast<const int32_t *>(indices->data),
                           g.count, g.dim);
  if (bad >= 0) {
    const long long value =
        wide ? static_cast<const int64_t *>(indices->data)[bad]
             : static_cast<const int32_t *>(indices->data)[bad];
    return call.fail(PFRT_INVALID_ARGUMENT, "index %lld (element %lld of "
                     "indices) is out of range for axis %d of size %lld",
                     value, static_cast<long long>(bad), ax,
                     static_cast<long long>(g.dim));
  }
  if (Shape::of(*out).numel() == 0)
    return PFRT_OK;
  const char *src = static_cast<const char *>(data->data);
  char *dst = static_cast<char *>(out->data);
  if (wide)
    gather(ctx, g, src, static_cast<const int64_t *>(indices->data), dst);
  else
    gather(ctx, g, src, static_cast<const int32_t *>(indices->data), dst);
  return PFRT_OK;
}

pfrt_status pfrt_slice_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                           const int64_t *starts, const int64_t *ends,
                           const int64_t *axes, const int64_t *steps, int32_t n,
                           const pfrt_tensor *out) {
  Call call(ctx, "pfrt_slice");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape outShape;
  int64_t offset = 0, strides[PFRT_MAX_RANK];
  PFRT_TRY(planSlice(call, *x, starts, ends, axes, steps, n, outShape, offset,
                     strides));
  PFRT_TRY(call.shapeIs("out", out, outShape));
  if (outShape.numel() == 0)
    return PFRT_OK;
  const char *base =
      static_cast<const char *>(x->data) + offset * dtypeSize(x->dtype);
  stridedCopyBytes(ctx, x->dtype, base, outShape, strides, out->data);
  return PFRT_OK;
}

pfrt_status pfrt_concat_cpu(pfrt_context *ctx, const pfrt_tensor *inputs,
                            int32_t n, int64_t axis, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_concat");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("inputs", inputs));
  PFRT_TRY(call.tensor("out", out));
  if (n < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "needs at least one input, got %d",
                     n);
  PFRT_TRY(call.rankIn("out", out, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, out->rank, ax));
  Shape outShape = Shape::of(*out);
  int64_t total = 0;
  for (int32_t k = 0; k < n; ++k) {
    const pfrt_tensor *in = &inputs[k];
    char name[32];
    std::snprintf(name, sizeof name, "inputs[%d]", k);
    PFRT_TRY(call.tensor(name, in));
    PFRT_TRY(call.dtypeIs(name, in, out->dtype));
    Shape expected = outShape;
    expected.dims[ax] = in->rank == out->rank ? in->shape[ax] : 0;
    if (Shape::of(*in) != expected)
      return call.fail(PFRT_INVALID_ARGUMENT, "inputs[%d] has shape %s, which "
                       "does not match out %s outside axis %d", k,
                       ShapeStr(Shape::of(*in)).c_str(),
                       ShapeStr(outShape).c_str(), ax);
    total += in->shape[ax];
  }
  if (total != outShape.dims[ax])
    return call.fail(PFRT_INVALID_ARGUMENT, "inputs add up to %lld along axis "
                     "%d but out has %lld", static_cast<long long>(total), ax,
                     static_cast<long long>(outShape.dims[ax]));
  const int64_t elem = dtypeSize(out->dtype);
  const int64_t outer = product(outShape, 0, ax);
  const int64_t innerBytes = product(outShape, ax + 1, outShape.rank) * elem;
  const int64_t outRow = outShape.dims[ax] * innerBytes;
  char *dst = static_cast<char *>(out->data);
  parallelFor(ctx, outer, outRow, [&](int64_t o) {
    int64_t at = o * outRow;
    for (int32_t k = 0; k < n; ++k) {
      const int64_t bytes = inputs[k].shape[ax] * innerBytes;
      if (bytes)
        std::memcpy(dst + at,
                    static_cast<const char *>(inputs[k].data) + o * bytes,
                    bytes);
      at += bytes;
    }
  });
  return PFRT_OK;
}

pfrt_status pfrt_expand_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                            const pfrt_tensor *out) {
  Call call(ctx, "pfrt_expand");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape xShape = Shape::of(*x), outShape = Shape::of(*out);
  if (!broadcastsTo(xShape, outShape))
    return call.fail(PFRT_INVALID_ARGUMENT, "x of shape %s does not "
                     "broadcast to out %s", ShapeStr(xShape).c_str(),
                     ShapeStr(outShape).c_str());
  broadcastCopy(ctx, *x, outShape, out->data);
  return PFRT_OK;
}

pfrt_status pfrt_cast_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  Call call(ctx, "pfrt_cast");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t n = shape.numel();
  if (x->dtype == out->dtype) {
    copyBytes(ctx, x->data, out->data, n * dtypeSize(x->dtype));
    return PFRT_OK;
  }
  visitDtype(x->dtype, [&](auto from) {
    using S = typename decltype(from)::type;
    visitDtype(out->dtype, [&](auto to) {
      using D = typename decltype(to)::type;
      castLoop(ctx, static_cast<const S *>(x->data), static_cast<D *>(out->data),
               n);
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_copy_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  return copyEntry("pfrt_copy", ctx, x, out);
}

pfrt_status pfrt_reshape_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                             const pfrt_tensor *out) {
  return copyEntry("pfrt_reshape", ctx, x, out);
}

pfrt_status pfrt_read_scalar_cpu(pfrt_context *ctx, const pfrt_tensor *x, double *value) {
  Call call(ctx, "pfrt_read_scalar");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("value", value));
  PFRT_TRY(checkReadScalar(call, x));
  *value = elementAsDouble(x->dtype, x->data);
  return PFRT_OK;
}

pfrt_status pfrt_fill_cpu(pfrt_context *ctx, const pfrt_tensor *out,
                          double value) {
  Call call(ctx, "pfrt_fill");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("out", out));
  const int64_t n = Shape::of(*out).numel();
  visitDtype(out->dtype, [&](auto tag) {
    using D = typename decltype(tag)::type;
    const D v = castValue<D>(value);
    D *o = static_cast<D *>(out->data);
    parallelChunks(ctx, n, 16 * 1024, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        o[i] = v;
    });
  });
  return PFRT_OK;
}

} // extern "C"
