//===- SlicePlan.cpp - Slice and Transpose as strided views ---------------===//

#include "SlicePlan.h"

namespace pfrt {
namespace {

int64_t clampTo(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

/// ONNX Slice's normalization of one (start, end) pair for a dimension of
/// size dim, exactly as the spec and ONNX Runtime do it (negative values
/// count from the back, then clamp); returns the number of elements.
int64_t normalizeSlice(int64_t dim, int64_t step, int64_t &start,
                       int64_t end) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = clampTo(start, 0, dim);
    end = clampTo(end, 0, dim);
    // (end - start - 1) / step + 1 rounds up without overflowing for huge
    // steps.
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = clampTo(start, 0, dim - 1);
  end = clampTo(end, -1, dim - 1);
  return start > end ? (start - end - 1) / -step + 1 : 0;
}

} // namespace

pfrt_status planSlice(const Call &call, const pfrt_tensor &x,
                      const int64_t *starts, const int64_t *ends,
                      const int64_t *axes, const int64_t *steps, int32_t n,
                      Shape &outShape, int64_t &offset,
                      int64_t strides[PFRT_MAX_RANK]) {
  if (n < 0 || n > x.rank)
    return call.fail(PFRT_INVALID_ARGUMENT, "n = %d slices for rank %d", n,
                     x.rank);
  if (n > 0) {
    PFRT_TRY(call.pointer("starts", starts));
    PFRT_TRY(call.pointer("ends", ends));
  }
  const Shape xShape = Shape::of(x);
  outShape = xShape;
  int64_t natural[PFRT_MAX_RANK];
  contiguousStrides(xShape, natural);
  for (int32_t i = 0; i < x.rank; ++i)
    strides[i] = natural[i];
  bool seen[PFRT_MAX_RANK] = {};
  offset = 0;
  for (int32_t i = 0; i < n; ++i) {
    int32_t ax = i;
    if (axes)
      PFRT_TRY(call.axis("axis", axes[i], x.rank, ax));
    if (seen[ax])
      return call.fail(PFRT_INVALID_ARGUMENT, "axis %d is repeated", ax);
    seen[ax] = true;
    int64_t step = steps ? steps[i] : 1;
    if (step == 0)
      return call.fail(PFRT_INVALID_ARGUMENT, "step of axis %d is 0", ax);
    // A step longer than the dimension selects at most one element; capping
    // it keeps the stride arithmetic below from overflowing.
    const int64_t longest = xShape.dims[ax] > 1 ? xShape.dims[ax] : 1;
    step = step > longest ? longest : (step < -longest ? -longest : step);
    int64_t start = starts[i];
    outShape.dims[ax] = normalizeSlice(xShape.dims[ax], step, start, ends[i]);
    if (outShape.dims[ax] > 0)
      offset += start * natural[ax];
    strides[ax] = natural[ax] * step;
  }
  return PFRT_OK;
}

pfrt_status planTranspose(const Call &call, const pfrt_tensor &x,
                          const int64_t *perm, int32_t numPerm,
                          Shape &outShape, int64_t strides[PFRT_MAX_RANK]) {
  int32_t order[PFRT_MAX_RANK];
  if (numPerm == 0 && !perm) {
    for (int32_t i = 0; i < x.rank; ++i)
      order[i] = x.rank - 1 - i;
  } else {
    PFRT_TRY(call.pointer("perm", perm));
    if (numPerm != x.rank)
      return call.fail(PFRT_INVALID_ARGUMENT, "perm has %d entries but x has "
                       "rank %d", numPerm, x.rank);
    bool seen[PFRT_MAX_RANK] = {};
    for (int32_t i = 0; i < numPerm; ++i) {
      PFRT_TRY(call.axis("perm entry", perm[i], x.rank, order[i]));
      if (seen[order[i]])
        return call.fail(PFRT_INVALID_ARGUMENT, "perm repeats axis %d",
                         order[i]);
      seen[order[i]] = true;
    }
  }
  const Shape xShape = Shape::of(x);
  int64_t natural[PFRT_MAX_RANK];
  contiguousStrides(xShape, natural);
  outShape = Shape();
  for (int32_t i = 0; i < x.rank; ++i) {
    outShape.push(xShape.dims[order[i]]);
    strides[i] = natural[order[i]];
  }
  return PFRT_OK;
}

} // namespace pfrt
