//===- Shape.cpp - Shapes, broadcasting and axis helpers -------------------===//

#include "Shape.h"

#include <cstdio>

namespace pfrt {

Shape Shape::of(const pfrt_tensor &t) {
  Shape s;
  s.rank = t.rank;
  for (int32_t i = 0; i < t.rank; ++i)
    s.dims[i] = t.shape[i];
  return s;
}

int64_t Shape::numel() const { return product(*this, 0, rank); }

bool Shape::operator==(const Shape &o) const {
  if (rank != o.rank)
    return false;
  for (int32_t i = 0; i < rank; ++i)
    if (dims[i] != o.dims[i])
      return false;
  return true;
}

ShapeStr::ShapeStr(const Shape &s) {
  size_t pos = 0;
  text[pos++] = '[';
  for (int32_t i = 0; i < s.rank && pos < sizeof(text); ++i)
    pos += std::snprintf(text + pos, sizeof(text) - pos, i ? ", %lld" : "%lld",
                         static_cast<long long>(s.dims[i]));
  if (pos > sizeof(text) - 2)
    pos = sizeof(text) - 2;
  text[pos++] = ']';
  text[pos] = '\0';
}

int64_t product(const Shape &s, int32_t begin, int32_t end) {
  int64_t n = 1;
  for (int32_t i = begin; i < end; ++i)
    n *= s.dims[i];
  return n;
}

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  out.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int32_t i = 0; i < out.rank; ++i) {
    // Aligned at the back: dimension i of out is a's i - (out.rank - a.rank).
    int32_t ia = i - (out.rank - a.rank), ib = i - (out.rank - b.rank);
    int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    out.dims[i] = da == 1 ? db : da;
  }
  return true;
}

bool broadcastsTo(const Shape &from, const Shape &to) {
  Shape joined;
  return from.rank <= to.rank && broadcastShapes(from, to, joined) &&
         joined == to;
}

void contiguousStrides(const Shape &s, int64_t strides[PFRT_MAX_RANK]) {
  int64_t stride = 1;
  for (int32_t i = s.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= s.dims[i];
  }
}

BroadcastPlan planBroadcast(const Shape &out, const Shape *inputs,
                            int numInputs) {
  BroadcastPlan plan;
  plan.numInputs = numInputs;
  plan.numel = out.numel();

  // Aligned strides of every input, 0 where the input is broadcast.
  int64_t aligned[BroadcastPlan::kMaxInputs][PFRT_MAX_RANK] = {};
  for (int k = 0; k < numInputs; ++k) {
    int64_t natural[PFRT_MAX_RANK];
    contiguousStrides(inputs[k], natural);
    int32_t shift = out.rank - inputs[k].rank;
    for (int32_t i = 0; i < out.rank; ++i) {
      int32_t j = i - shift;
      aligned[k][i] = (j >= 0 && inputs[k].dims[j] != 1) ? natural[j] : 0;
    }
  }

  // Keep the non-unit output dimensions and merge an outer dimension into
  // its inner neighbour when every input steps over both as one run.
  int32_t rank = 0;
  for (int32_t i = 0; i < out.rank; ++i) {
    if (out.dims[i] == 1)
      continue;
    bool mergeable = rank > 0;
    for (int k = 0; k < numInputs && mergeable; ++k)
      mergeable = plan.strides[k][rank - 1] == aligned[k][i] * out.dims[i];
    if (mergeable) {
      plan.dims[rank - 1] *= out.dims[i];
      for (int k = 0; k < numInputs; ++k)
        plan.strides[k][rank - 1] = aligned[k][i];
      continue;
    }
    plan.dims[rank] = out.dims[i];
    for (int k = 0; k < numInputs; ++k)
      plan.strides[k][rank] = aligned[k][i];
    ++rank;
  }
  if (rank == 0) { // a single element
    plan.dims[0] = 1;
    for (int k = 0; k < numInputs; ++k)
      plan.strides[k][0] = 0;
    rank = 1;
  }
  plan.rank = rank;
  return plan;
}

bool normalizeAxis(int64_t axis, int32_t rank, int32_t &out) {
  if (axis < -static_cast<int64_t>(rank) || axis >= rank)
    return false;
  out = static_cast<int32_t>(axis < 0 ? axis + rank : axis);
  return true;
}

} // namespace pfrt
