//===- Indexing.cpp - gather_nd, scatter_nd, cumsum, trilu -----------------===//
//
// GatherND and ScatterND address slices by index tuples: every tuple is
// turned into a flat slice offset (common/IndexTuples.h: all tuples are
// checked before anything is written), then whole slices move as bytes, or
// are combined elementwise for ScatterND's reductions (cuda/IndexingMath.h,
// shared with the CUDA kernels). CumSum walks lines along its axis; Trilu masks the
// last two dimensions.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "../common/IndexTuples.h"
#include "../cuda/IndexingMath.h"
#include "Kernels.h"
#include "Parallel.h"

#include <cstring>
#include <type_traits>
#include <vector>

using namespace pfrt;
using namespace pfrt::cpu;

extern "C" {

pfrt_status pfrt_gather_nd_cpu(pfrt_context *ctx, const pfrt_tensor *data,
                               const pfrt_tensor *indices, int64_t batch_dims,
                               const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gather_nd");
  PFRT_TRY(call.begin());
  GatherNdPlan plan;
  PFRT_TRY(
      planGatherNd(call, data, indices, indices ? indices->data : nullptr, batch_dims, out, plan));
  const int64_t elem = dtypeSize(data->dtype);
  const int64_t sliceBytes = plan.slice * elem;
  if (sliceBytes == 0) // an empty output: data may be NULL
    return PFRT_OK;
  auto *src = static_cast<const char *>(data->data);
  auto *dst = static_cast<char *>(out->data);
  parallelFor(ctx, int64_t(plan.offsets.size()), sliceBytes, [&](int64_t t) {
    const int64_t batch = plan.perBatch ? t / plan.perBatch : 0;
    std::memcpy(dst + t * sliceBytes, src + (batch * plan.batchSize + plan.offsets[t]) * elem,
                sliceBytes);
  });
  return PFRT_OK;
}

pfrt_status pfrt_scatter_nd_cpu(pfrt_context *ctx, const pfrt_tensor *data,
                                const pfrt_tensor *indices,
                                const pfrt_tensor *updates, int32_t reduction,
                                const pfrt_tensor *out) {
  Call call(ctx, "pfrt_scatter_nd");
  PFRT_TRY(call.begin());
  ScatterNdPlan plan;
  PFRT_TRY(planScatterNd(call, data, indices, indices ? indices->data : nullptr, updates, reduction,
                         out, plan));
  const std::vector<int64_t> &offsets = plan.offsets;
  const Shape dataShape = Shape::of(*data);
  const int64_t elem = dtypeSize(data->dtype);
  if (dataShape.numel() == 0) // nothing to write (tuples checked above)
    return PFRT_OK;
  if (out->data != data->data)
    std::memcpy(out->data, data->data, dataShape.numel() * elem);
  const int64_t slice = plan.slice;
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
            pfrt::cuda::scatterCombine(reduction, po[offsets[t] + e], pu[t * slice + e]);
  });
  return PFRT_OK;
}

pfrt_status pfrt_cumsum_cpu(pfrt_context *ctx, const pfrt_tensor *x, int64_t axis,
                            int32_t exclusive, int32_t reverse,
                            const pfrt_tensor *out) {
  Call call(ctx, "pfrt_cumsum");
  PFRT_TRY(call.begin());
  int32_t ax;
  PFRT_TRY(checkCumsum(call, x, axis, out, ax));
  Shape shape = Shape::of(*x);
  const int64_t outer = product(shape, 0, ax), len = shape.dims[ax];
  const int64_t inner = product(shape, ax + 1, shape.rank);
  visitArith(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T *px = static_cast<const T *>(x->data);
    T *po = static_cast<T *>(out->data);
    // One task per line.
    parallelFor(ctx, outer * inner, len, [&](int64_t line) {
      pfrt::cuda::cumsumLine<T, Acc>(line, len, inner, exclusive != 0, reverse != 0, px, po);
    });
  });
  return PFRT_OK;
}

pfrt_status pfrt_trilu_cpu(pfrt_context *ctx, const pfrt_tensor *x, int64_t k,
                           int32_t upper, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_trilu");
  PFRT_TRY(call.begin());
  PFRT_TRY(checkTrilu(call, x, out));
  Shape shape = Shape::of(*x);
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
