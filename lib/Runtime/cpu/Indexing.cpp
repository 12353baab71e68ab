//===- Indexing.cpp - gather_nd, scatter_nd, cumsum, trilu -----------------===//
//
// GatherND and ScatterND address slices by index tuples: every tuple is
// turned into a flat slice offset (all tuples are checked before anything is
// written), then whole slices move as bytes, or are combined elementwise for
// ScatterND's reductions. CumSum walks lines along its axis; Trilu masks the
// last two dimensions.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Kernels.h"
#include "Parallel.h"

#include <cstring>
#include <type_traits>
#include <vector>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

/// Index tuples (the last dimension of `indices`, m entries each) as flat
/// offsets, in elements, into dimensions [first, first + m) of `data`;
/// negatives count from the back. Fails naming the first bad entry.
pfrt_status tupleOffsets(const Call &call, const pfrt_tensor *indices,
                         const Shape &data, int32_t first, int64_t m,
                         std::vector<int64_t> &offsets) {
  const int64_t count = m ? Shape::of(*indices).numel() / m : 0;
  int64_t strides[PFRT_MAX_RANK];
  contiguousStrides(data, strides);
  offsets.assign(count, 0);
  const bool wide = indices->dtype == PFRT_I64;
  for (int64_t t = 0; t < count; ++t)
    for (int64_t j = 0; j < m; ++j) {
      const int64_t at = t * m + j;
      int64_t v = wide ? static_cast<const int64_t *>(indices->data)[at]
                       : static_cast<const int32_t *>(indices->data)[at];
      const int64_t dim = data.dims[first + j];
      if (v < -dim || v >= dim)
        return call.fail(PFRT_INVALID_ARGUMENT,
                         "index %lld (element %lld of indices) is out of "
                         "range for dimension %lld of size %lld",
                         static_cast<long long>(v), static_cast<long long>(at),
                         static_cast<long long>(first + j),
                         static_cast<long long>(dim));
      offsets[t] += (v < 0 ? v + dim : v) * strides[first + j];
    }
  return PFRT_OK;
}

/// Shared checks: indices' dtype and rank, and m within [1, limit].
pfrt_status indexTuples(const Call &call, const pfrt_tensor *indices,
                        int32_t limit, int64_t &m) {
  PFRT_TRY(call.dtypeIn("indices", indices, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.rankIn("indices", indices, 1, PFRT_MAX_RANK));
  m = indices->shape[indices->rank - 1];
  if (m < 1 || m > limit)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "the last dimension of indices (%lld) must be in [1, %d]",
                     static_cast<long long>(m), limit);
  return PFRT_OK;
}

template <class T> T combine(int32_t reduction, T a, T b) {
  switch (reduction) {
  case PFRT_SCATTER_ADD:
    return a + b;
  case PFRT_SCATTER_MUL:
    return a * b;
  case PFRT_SCATTER_MAX:
    return (b > a || b != b) ? b : a;
  default: // PFRT_SCATTER_MIN
    return (b < a || b != b) ? b : a;
  }
}

} // namespace

extern "C" {

pfrt_status pfrt_gather_nd_cpu(pfrt_context *ctx, const pfrt_tensor *data,
                               const pfrt_tensor *indices, int64_t batch_dims,
                               const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gather_nd");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("data", data));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, data->dtype));
  if (batch_dims < 0 || batch_dims >= data->rank || batch_dims >= indices->rank)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "batch_dims %lld must be in [0, min(rank(data), "
                     "rank(indices)))",
                     static_cast<long long>(batch_dims));
  const int32_t b = static_cast<int32_t>(batch_dims);
  int64_t m;
  PFRT_TRY(indexTuples(call, indices, data->rank - b, m));
  Shape dataShape = Shape::of(*data), expected;
  for (int32_t i = 0; i < b; ++i)
    if (indices->shape[i] != data->shape[i])
      return call.fail(PFRT_INVALID_ARGUMENT,
                       "batch dimension %d differs: %lld in data, %lld in "
                       "indices",
                       i, static_cast<long long>(data->shape[i]),
                       static_cast<long long>(indices->shape[i]));
  for (int32_t i = 0; i + 1 < indices->rank; ++i)
    expected.push(indices->shape[i]);
  if (expected.rank + data->rank - b - m > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "result rank exceeds %d",
                     PFRT_MAX_RANK);
  for (int32_t i = b + static_cast<int32_t>(m); i < data->rank; ++i)
    expected.push(data->shape[i]);
  PFRT_TRY(call.shapeIs("out", out, expected));
  std::vector<int64_t> offsets;
  PFRT_TRY(tupleOffsets(call, indices, dataShape, b, m, offsets));
  const int64_t batches = product(dataShape, 0, b);
  const int64_t batchSize = product(dataShape, b, dataShape.rank);
  const int64_t perBatch = batches ? int64_t(offsets.size()) / batches : 0;
  const int64_t elem = dtypeSize(data->dtype);
  const int64_t sliceBytes =
      product(dataShape, b + static_cast<int32_t>(m), dataShape.rank) * elem;
  if (sliceBytes == 0) // an empty output: data may be NULL
    return PFRT_OK;
  auto *src = static_cast<const char *>(data->data);
  auto *dst = static_cast<char *>(out->data);
  parallelFor(ctx, int64_t(offsets.size()), sliceBytes, [&](int64_t t) {
    const int64_t batch = perBatch ? t / perBatch : 0;
    std::memcpy(dst + t * sliceBytes,
                src + (batch * batchSize + offsets[t]) * elem, sliceBytes);
  });
  return PFRT_OK;
}

pfrt_status pfrt_scatter_nd_cpu(pfrt_context *ctx, const pfrt_tensor *data,
                                const pfrt_tensor *indices,
                                const pfrt_tensor *updates, int32_t reduction,
                                const pfrt_tensor *out) {
  Call call(ctx, "pfrt_scatter_nd");
  PFRT_TRY(call.begin());
  if (reduction < PFRT_SCATTER_NONE || reduction > PFRT_SCATTER_MIN)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown reduction %d", reduction);
  PFRT_TRY(call.tensor("data", data));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("updates", updates));
  PFRT_TRY(call.tensor("out", out));
  if (reduction != PFRT_SCATTER_NONE)
    PFRT_TRY(call.dtypeIn("data", data, {PFRT_F32, PFRT_F64, PFRT_I32,
                                         PFRT_I64}));
  PFRT_TRY(call.dtypeIs("updates", updates, data->dtype));
  PFRT_TRY(call.dtypeIs("out", out, data->dtype));
  Shape dataShape = Shape::of(*data), expected;
  PFRT_TRY(call.shapeIs("out", out, dataShape));
  int64_t m;
  PFRT_TRY(indexTuples(call, indices, data->rank, m));
  for (int32_t i = 0; i + 1 < indices->rank; ++i)
    expected.push(indices->shape[i]);
  if (expected.rank + data->rank - m > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "updates rank exceeds %d",
                     PFRT_MAX_RANK);
  for (int32_t i = static_cast<int32_t>(m); i < data->rank; ++i)
    expected.push(data->shape[i]);
  PFRT_TRY(call.shapeIs("updates", updates, expected));
  std::vector<int64_t> offsets;
  PFRT_TRY(tupleOffsets(call, indices, dataShape, 0, m, offsets));
  const int64_t elem = dtypeSize(data->dtype);
  if (dataShape.numel() == 0) // nothing to write (tuples checked above)
    return PFRT_OK;
  if (out->data != data->data)
    std::memcpy(out->data, data->data, dataShape.numel() * elem);
  const int64_t slice =
      product(dataShape, static_cast<int32_t>(m), dataShape.rank);
  // Tuples may repeat, so they apply one after the other, in order.
  if (reduction == PFRT_SCATTER_NONE) {
    for (size_t t = 0; t < offsets.size(); ++t)
      std::memcpy(static_cast<char *>(out->data) + offsets[t] * elem,
                  static_cast<const char *>(updates->data) + t * slice * elem,
                  slice * elem);
    return PFRT_OK;
  }
  visitArith(data->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *po = static_cast<T *>(out->data);
    const T *pu = static_cast<const T *>(updates->data);
    for (size_t t = 0; t < offsets.size(); ++t)
      for (int64_t e = 0; e < slice; ++e)
        po[offsets[t] + e] =
            combine(reduction, po[offsets[t] + e], pu[t * slice + e]);
  });
  return PFRT_OK;
}

pfrt_status pfrt_cumsum_cpu(pfrt_context *ctx, const pfrt_tensor *x, int64_t axis,
                            int32_t exclusive, int32_t reverse,
                            const pfrt_tensor *out) {
  Call call(ctx, "pfrt_cumsum");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, x->rank, ax));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t outer = product(shape, 0, ax), len = shape.dims[ax];
  const int64_t inner = product(shape, ax + 1, shape.rank);
  visitArith(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T *px = static_cast<const T *>(x->data);
    T *po = static_cast<T *>(out->data);
    // One task per line; out may be x itself (each element is read before
    // it is written).
    parallelFor(ctx, outer * inner, len, [&](int64_t line) {
      const int64_t base = (line / inner) * len * inner + line % inner;
      Acc acc = 0;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t at = base + (reverse ? len - 1 - s : s) * inner;
        const Acc v = px[at];
        po[at] = static_cast<T>(exclusive ? acc : acc + v);
        acc += v;
      }
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_trilu_cpu(pfrt_context *ctx, const pfrt_tensor *x, int64_t k,
                           int32_t upper, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_trilu");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 2, PFRT_MAX_RANK));
  Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  const int64_t rows = shape.dims[shape.rank - 2];
  const int64_t cols = shape.dims[shape.rank - 1];
  const int64_t elem = dtypeSize(x->dtype);
  const int64_t matrices = rows > 0 && cols > 0 ? shape.numel() / (rows * cols) : 0;
  auto *src = static_cast<const char *>(x->data);
  auto *dst = static_cast<char *>(out->data);
  parallelFor(ctx, matrices * rows, cols, [&](int64_t r) {
    const int64_t i = r % rows;
    // Kept columns: [i + k, cols) for upper, [0, i + k] for lower.
    int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
    lo = lo < 0 ? 0 : lo > cols ? cols : lo;
    hi = hi < lo ? lo : hi > cols ? cols : hi;
    const char *s = src + r * cols * elem;
    char *d = dst + r * cols * elem;
    std::memset(d, 0, lo * elem); // all-zero bytes are 0 in every dtype
    if (d != s)
      std::memmove(d + lo * elem, s + lo * elem, (hi - lo) * elem);
    std::memset(d + hi * elem, 0, (cols - hi) * elem);
  });
  return PFRT_OK;
}

} // extern "C"
