//===- Indexing.cu - gather_nd, scatter_nd, cumsum, trilu ----------------===//
//
// The index tuples of GatherND and ScatterND are read on the host (one copy
// of the indices, then common/IndexTuples.h checks them and turns them into
// slice offsets exactly as the CPU backend does) and the offsets go back to
// the device for the copy kernels. ScatterND gives each thread one element
// of a slice and walks the tuples in order, so repeated tuples combine in
// the CPU backend's order without atomics (slices start at multiples of the
// slice length, so two threads never touch one element). CumSum walks each
// line sequentially with the CPU's accumulator type; Trilu masks element by
// element. Every result equals the CPU backend's bits.
//
//===----------------------------------------------------------------------===//

#include "../common/IndexTuples.h"
#include "IndexingMath.h"
#include "Launch.h"

#include <type_traits>
#include <vector>

namespace pfrt::cuda {
namespace {

template <class E>
__global__ void gatherNdKernel(int64_t n, int64_t slice, int64_t perBatch, int64_t batchSize,
                               const int64_t *offsets, const E *src, E *dst) {
  PFRT_GRID_STRIDE(i, n) {
    const int64_t t = i / slice, e = i % slice;
    const int64_t batch = perBatch ? t / perBatch : 0;
    dst[i] = src[batch * batchSize + offsets[t] + e];
  }
}

template <class E>
__global__ void scatterNdReplaceKernel(int64_t count, int64_t slice, const int64_t *offsets,
                                       const E *updates, E *out) {
  PFRT_GRID_STRIDE(e, slice) {
    for (int64_t t = 0; t < count; ++t)
      out[offsets[t] + e] = updates[t * slice + e];
  }
}

template <class T>
__global__ void scatterNdCombineKernel(int64_t count, int64_t slice, int32_t reduction,
                                       const int64_t *offsets, const T *updates, T *out) {
  PFRT_GRID_STRIDE(e, slice) {
    for (int64_t t = 0; t < count; ++t) {
      T &o = out[offsets[t] + e];
      o = scatterCombine(reduction, o, updates[t * slice + e]);
    }
  }
}

template <class T, class Acc>
__global__ void cumsumKernel(int64_t lines, int64_t len, int64_t inner, bool exclusive,
                             bool reverse, const T *x, T *out) {
  PFRT_GRID_STRIDE(line, lines) {
    cumsumLine<T, Acc>(line, len, inner, exclusive, reverse, x, out);
  }
}

template <class E>
__global__ void triluKernel(int64_t n, int64_t rows, int64_t cols, int64_t k, bool upper,
                            const E *x, E *out) {
  PFRT_GRID_STRIDE(idx, n) {
    const int64_t j = idx % cols, i = (idx / cols) % rows;
    out[idx] = triluKeeps(i, j, k, upper) ? x[idx] : E(0);
  }
}

/// The indices' elements in host memory (one copy; the stream is waited for).
pfrt_status indicesOnHost(const Call &call, const pfrt_tensor *indices, std::vector<char> &host) {
  if (!indices || !indices->data)
    return PFRT_OK; // the plan reports the bad tensor
  const int64_t bytes = Shape::of(*indices).numel() * dtypeSize(indices->dtype);
  host.resize(size_t(bytes > 0 ? bytes : 1));
  if (bytes == 0)
    return PFRT_OK;
  return copyToHost(call.context(), host.data(), indices->data, bytes);
}

/// The plan's offsets in device scratch memory.
pfrt_status offsetsOnDevice(const Call &call, const std::vector<int64_t> &offsets,
                            const int64_t **out) {
  void *ws = nullptr;
  const size_t bytes = (offsets.empty() ? 1 : offsets.size()) * sizeof(int64_t);
  PFRT_TRY(scratch(call, bytes, &ws));
  if (!offsets.empty())
    PFRT_TRY(copyToDevice(call.context(), ws, offsets.data(), int64_t(bytes)));
  *out = static_cast<const int64_t *>(ws);
  return PFRT_OK;
}

pfrt_status gatherNdEntry(pfrt_context *ctx, const pfrt_tensor *data, const pfrt_tensor *indices,
                          int64_t batch_dims, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gather_nd");
  PFRT_TRY(beginCuda(call));
  std::vector<char> host;
  PFRT_TRY(indicesOnHost(call, indices, host));
  GatherNdPlan plan;
  PFRT_TRY(planGatherNd(call, data, indices, host.data(), batch_dims, out, plan));
  const int64_t n = int64_t(plan.offsets.size()) * plan.slice;
  if (n == 0)
    return PFRT_OK;
  const int64_t *offsets = nullptr;
  PFRT_TRY(offsetsOnDevice(call, plan.offsets, &offsets));
  return bySize(call, data->dtype, [&](auto tag) {
    using E = decltype(tag);
    gatherNdKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, plan.slice, plan.perBatch, plan.batchSize, offsets, dataAs<const E>(data),
        dataAs<E>(out));
    return launched(call, "gatherNdKernel");
  });
}

pfrt_status scatterNdEntry(pfrt_context *ctx, const pfrt_tensor *data, const pfrt_tensor *indices,
                           const pfrt_tensor *updates, int32_t reduction, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_scatter_nd");
  PFRT_TRY(beginCuda(call));
  std::vector<char> host;
  PFRT_TRY(indicesOnHost(call, indices, host));
  ScatterNdPlan plan;
  PFRT_TRY(planScatterNd(call, data, indices, host.data(), updates, reduction, out, plan));
  const int64_t total = Shape::of(*data).numel();
  if (total == 0)
    return PFRT_OK;
  cudaStream_t s = streamOf(ctx);
  if (out->data != data->data)
    PFRT_TRY(check(call,
                   cudaMemcpyAsync(out->data, data->data, total * dtypeSize(data->dtype),
                                   cudaMemcpyDeviceToDevice, s),
                   "cudaMemcpyAsync"));
  const int64_t count = int64_t(plan.offsets.size());
  if (count == 0 || plan.slice == 0)
    return PFRT_OK;
  const int64_t *offsets = nullptr;
  PFRT_TRY(offsetsOnDevice(call, plan.offsets, &offsets));
  if (reduction == PFRT_SCATTER_NONE)
    return bySize(call, data->dtype, [&](auto tag) {
      using E = decltype(tag);
      scatterNdReplaceKernel<<<blocksFor(plan.slice), kThreads, 0, s>>>(
          count, plan.slice, offsets, dataAs<const E>(updates), dataAs<E>(out));
      return launched(call, "scatterNdReplaceKernel");
    });
  // f32, f64, i32 or i64: the plan checked.
  return visitArith(data->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatterNdCombineKernel<<<blocksFor(plan.slice), kThreads, 0, s>>>(
        count, plan.slice, reduction, offsets, dataAs<const T>(updates), dataAs<T>(out));
    return launched(call, "scatterNdCombineKernel");
  });
}

pfrt_status cumsumEntry(pfrt_context *ctx, const pfrt_tensor *x, int64_t axis, int32_t exclusive,
                        int32_t reverse, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_cumsum");
  PFRT_TRY(beginCuda(call));
  int32_t ax;
  PFRT_TRY(checkCumsum(call, x, axis, out, ax));
  Shape shape = Shape::of(*x);
  const int64_t outer = product(shape, 0, ax), len = shape.dims[ax];
  const int64_t inner = product(shape, ax + 1, shape.rank), lines = outer * inner;
  if (lines == 0 || len == 0)
    return PFRT_OK;
  return visitArith(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The CPU backend's accumulator: double for floats.
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    cumsumKernel<T, Acc><<<blocksFor(lines), kThreads, 0, streamOf(ctx)>>>(
        lines, len, inner, exclusive != 0, reverse != 0, dataAs<const T>(x), dataAs<T>(out));
    return launched(call, "cumsumKernel");
  });
}

pfrt_status triluEntry(pfrt_context *ctx, const pfrt_tensor *x, int64_t k, int32_t upper,
                       const pfrt_tensor *out) {
  Call call(ctx, "pfrt_trilu");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkTrilu(call, x, out));
  Shape shape = Shape::of(*x);
  const int64_t rows = shape.dims[shape.rank - 2], cols = shape.dims[shape.rank - 1];
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  return bySize(call, x->dtype, [&](auto tag) {
    using E = decltype(tag);
    triluKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(n, rows, cols, k, upper != 0,
                                                              dataAs<const E>(x), dataAs<E>(out));
    return launched(call, "triluKernel");
  });
}

} // namespace

void registerIndexing(KernelTable &t) {
  t.pfrt_gather_nd = gatherNdEntry;
  t.pfrt_scatter_nd = scatterNdEntry;
  t.pfrt_cumsum = cumsumEntry;
  t.pfrt_trilu = triluEntry;
}

} // namespace pfrt::cuda
