//===- IndexTuples.cpp - GatherND / ScatterND geometry, shared --------------===//

#include "IndexTuples.h"

#include "Dtype.h"

namespace pfrt {

namespace {

/// Index tuples (the last dimension of `indices`, m entries each, read from
/// `host`) as flat offsets, in elements, into dimensions [first, first + m)
/// of `data`; negatives count from the back. Fails naming the first bad
/// entry.
pfrt_status tupleOffsets(const Call &call, const pfrt_tensor *indices, const void *host,
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
      int64_t v =
          wide ? static_cast<const int64_t *>(host)[at] : static_cast<const int32_t *>(host)[at];
      const int64_t dim = data.dims[first + j];
      if (v < -dim || v >= dim)
        return call.fail(PFRT_INVALID_ARGUMENT,
                         "index %lld (element %lld of indices) is out of "
                         "range for dimension %lld of size %lld",
                         static_cast<long long>(v), static_cast<long long>(at),
                         static_cast<long long>(first + j), static_cast<long long>(dim));
      offsets[t] += (v < 0 ? v + dim : v) * strides[first + j];
    }
  return PFRT_OK;
}

/// Shared checks: indices' dtype and rank, and m within [1, limit].
pfrt_status indexTuples(const Call &call, const pfrt_tensor *indices, int32_t limit, int64_t &m) {
  PFRT_TRY(call.dtypeIn("indices", indices, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.rankIn("indices", indices, 1, PFRT_MAX_RANK));
  m = indices->shape[indices->rank - 1];
  if (m < 1 || m > limit)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "the last dimension of indices (%lld) must be in [1, %d]",
                     static_cast<long long>(m), limit);
  return PFRT_OK;
}

} // namespace

pfrt_status planGatherNd(const Call &call, const pfrt_tensor *data, const pfrt_tensor *indices,
                         const void *hostIndices, int64_t batch_dims, const pfrt_tensor *out,
                         GatherNdPlan &plan) {
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
    return call.fail(PFRT_INVALID_ARGUMENT, "result rank exceeds %d", PFRT_MAX_RANK);
  for (int32_t i = b + static_cast<int32_t>(m); i < data->rank; ++i)
    expected.push(data->shape[i]);
  PFRT_TRY(call.shapeIs("out", out, expected));
  PFRT_TRY(tupleOffsets(call, indices, hostIndices, dataShape, b, m, plan.offsets));
  const int64_t batches = product(dataShape, 0, b);
  plan.batchSize = product(dataShape, b, dataShape.rank);
  plan.perBatch = batches ? int64_t(plan.offsets.size()) / batches : 0;
  plan.slice = product(dataShape, b + static_cast<int32_t>(m), dataShape.rank);
  return PFRT_OK;
}

pfrt_status planScatterNd(const Call &call, const pfrt_tensor *data, const pfrt_tensor *indices,
                          const void *hostIndices, const pfrt_tensor *updates, int32_t reduction,
                          const pfrt_tensor *out, ScatterNdPlan &plan) {
  if (reduction < PFRT_SCATTER_NONE || reduction > PFRT_SCATTER_MIN)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown reduction %d", reduction);
  PFRT_TRY(call.tensor("data", data));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("updates", updates));
  PFRT_TRY(call.tensor("out", out));
  if (reduction != PFRT_SCATTER_NONE)
    PFRT_TRY(call.dtypeIn("data", data, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("updates", updates, data->dtype));
  PFRT_TRY(call.dtypeIs("out", out, data->dtype));
  Shape dataShape = Shape::of(*data), expected;
  PFRT_TRY(call.shapeIs("out", out, dataShape));
  int64_t m;
  PFRT_TRY(indexTuples(call, indices, data->rank, m));
  for (int32_t i = 0; i + 1 < indices->rank; ++i)
    expected.push(indices->shape[i]);
  if (expected.rank + data->rank - m > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "updates rank exceeds %d", PFRT_MAX_RANK);
  for (int32_t i = static_cast<int32_t>(m); i < data->rank; ++i)
    expected.push(data->shape[i]);
  PFRT_TRY(call.shapeIs("updates", updates, expected));
  PFRT_TRY(tupleOffsets(call, indices, hostIndices, dataShape, 0, m, plan.offsets));
  plan.slice = product(dataShape, static_cast<int32_t>(m), dataShape.rank);
  return PFRT_OK;
}

pfrt_status checkCumsum(const Call &call, const pfrt_tensor *x, int64_t axis,
                        const pfrt_tensor *out, int32_t &ax) {
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.axis("axis", axis, x->rank, ax));
  return call.shapeIs("out", out, Shape::of(*x));
}

pfrt_status checkTrilu(const Call &call, const pfrt_tensor *x, const pfrt_tensor *out) {
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.rankIn("x", x, 2, PFRT_MAX_RANK));
  return call.shapeIs("out", out, Shape::of(*x));
}

} // namespace pfrt
