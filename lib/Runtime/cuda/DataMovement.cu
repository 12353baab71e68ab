//===- DataMovement.cu - Copies, transpose, slice, expand, concat, gather -===//
//
// Data movement works on bytes, so these kernels are instantiated per
// element size (1, 2, 4, 8 bytes) and serve every dtype. Strided views
// (transpose, slice, expand) are one "gather by strides" kernel: output
// element i reads x at StridedIndex offset(i).
//
//===----------------------------------------------------------------------===//

#include "../common/SlicePlan.h"
#include "../common/TensorChecks.h"
#include "Launch.h"

namespace pfrt::cuda {
namespace {

/// Element offset of `linear` in a StridedIndex (Shape.h's offset(), which
/// is a host function).
__device__ inline int64_t offsetIn(const StridedIndex &s, int64_t linear) {
  int64_t off = 0;
  for (int32_t d = s.rank - 1; d >= 0; --d) {
    off += (linear % s.dims[d]) * s.strides[d];
    linear /= s.dims[d];
  }
  return off;
}

template <class E>
__global__ void stridedCopyKernel(StridedIndex view, int64_t n, const E *x,
                                  E *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = x[offsetIn(view, i)]; }
}

/// out (shape `shape`) = x viewed from `base` with element `strides`.
pfrt_status stridedCopy(const Call &call, int32_t dtype, const void *base,
                        const Shape &shape, const int64_t *strides, void *out) {
  StridedIndex view;
  for (int32_t d = 0; d < shape.rank; ++d)
    view.push(shape.dims[d], strides[d]);
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  return bySize(call, dtype, [&](auto tag) {
    using E = decltype(tag);
    stridedCopyKernel<<<blocksFor(n), kThreads, 0, streamOf(call.context())>>>(
        view, n, static_cast<const E *>(base), static_cast<E *>(out));
    return launched(call, "stridedCopyKernel");
  });
}

pfrt_status copyBytes(const Call &call, const pfrt_tensor *x,
                      const pfrt_tensor *out) {
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  const int64_t n = Shape::of(*x).numel(), m = Shape::of(*out).numel();
  if (n != m)
    return call.fail(PFRT_INVALID_ARGUMENT, "x %s has %lld elements but out "
                     "%s has %lld", ShapeStr(Shape::of(*x)).c_str(),
                     static_cast<long long>(n), ShapeStr(Shape::of(*out)).c_str(),
                     static_cast<long long>(m));
  if (n == 0 || x->data == out->data)
    return PFRT_OK;
  return check(call, cudaMemcpyAsync(out->data, x->data, n * dtypeSize(x->dtype),
                                     cudaMemcpyDeviceToDevice,
                                     streamOf(call.context())),
               "cudaMemcpyAsync");
}

pfrt_status copyEntry(pfrt_context *ctx, const pfrt_tensor *x,
                      const pfrt_tensor *out) {
  return copyBytes(Call(ctx, "pfrt_copy"), x, out);
}

pfrt_status reshapeEntry(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *out) {
  return copyBytes(Call(ctx, "pfrt_reshape"), x, out);
}

pfrt_status transposeEntry(pfrt_context *ctx, const pfrt_tensor *x,
                           const int64_t *perm, int32_t num_perm,
                           const pfrt_tensor *out) {
  Call call(ctx, "pfrt_transpose");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape outShape;
  int64_t strides[PFRT_MAX_RANK];
  PFRT_TRY(planTranspose(call, *x, perm, num_perm, outShape, strides));
  PFRT_TRY(call.shapeIs("out", out, outShape));
  return stridedCopy(call, x->dtype, x->data, outShape, strides, out->data);
}

pfrt_status sliceEntry(pfrt_context *ctx, const pfrt_tensor *x,
                       const int64_t *starts, const int64_t *ends,
                       const int64_t *axes, const int64_t *steps, int32_t n,
                       const pfrt_tensor *out) {
  Call call(ctx, "pfrt_slice");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  Shape outShape;
  int64_t offset = 0, strides[PFRT_MAX_RANK];
  PFRT_TRY(planSlice(call, *x, starts, ends, axes, steps, n, outShape, offset,
                     strides));
  PFRT_TRY(call.shapeIs("out", out, outShape));
  const char *base = static_cast<const char *>(x->data) + offset * dtypeSize(x->dtype);
  return stridedCopy(call, x->dtype, base, outShape, strides, out->data);
}

pfrt_status expandEntry(pfrt_context *ctx, const pfrt_tensor *x,
                        const pfrt_tensor *out) {
  Call call(ctx, "pfrt_expand");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  const Shape xShape = Shape::of(*x), outShape = Shape::of(*out);
  if (!broadcastsTo(xShape, outShape))
    return call.fail(PFRT_INVALID_ARGUMENT, "x %s does not broadcast to %s",
                     ShapeStr(xShape).c_str(), ShapeStr(outShape).c_str());
  // Broadcast dimensions get stride 0; x's dimensions align at the back.
  int64_t natural[PFRT_MAX_RANK], strides[PFRT_MAX_RANK];
  contiguousStrides(xShape, natural);
  const int32_t shift = outShape.rank - xShape.rank;
  for (int32_t i = 0; i < outShape.rank; ++i) {
    const int32_t j = i - shift;
    strides[i] = (j >= 0 && xShape.dims[j] != 1) ? natural[j] : 0;
  }
  return stridedCopy(call, x->dtype, x->data, outShape, strides, out->data);
}

pfrt_status concatEntry(pfrt_context *ctx, const pfrt_tensor *inputs,
                        int32_t n, int64_t axis, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_concat");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.pointer("inputs", inputs));
  PFRT_TRY(call.tensor("out", out));
  if (n < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "needs at least one input, got %d", n);
  PFRT_TRY(call.rankIn("out", out, 1, PFRT_MAX_RANK));
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, out->rank, ax));
  const Shape outShape = Shape::of(*out);
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i) {
    const pfrt_tensor *t = &inputs[i];
    PFRT_TRY(call.tensor("inputs[i]", t));
    PFRT_TRY(call.dtypeIs("inputs[i]", t, out->dtype));
    PFRT_TRY(call.rankIn("inputs[i]", t, out->rank, out->rank));
    for (int32_t d = 0; d < out->rank; ++d)
      if (d != ax && t->shape[d] != outShape.dims[d])
        return call.fail(PFRT_INVALID_ARGUMENT, "inputs[%d] %s does not match "
                         "out %s outside axis %d", i,
                         ShapeStr(Shape::of(*t)).c_str(),
                         ShapeStr(outShape).c_str(), ax);
    total += t->shape[ax];
  }
  if (total != outShape.dims[ax])
    return call.fail(PFRT_INVALID_ARGUMENT, "the inputs add up to %lld along "
                     "axis %d but out has %lld", static_cast<long long>(total),
                     ax, static_cast<long long>(outShape.dims[ax]));
  // Each input is a [outer, its axis * inner] block of out's rows: one 2D
  // copy per input.
  const int64_t size = dtypeSize(out->dtype);
  const int64_t outer = product(outShape, 0, ax);
  const int64_t inner = product(outShape, ax + 1, outShape.rank) * size;
  const int64_t outPitch = outShape.dims[ax] * inner;
  int64_t column = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t width = inputs[i].shape[ax] * inner;
    if (width > 0 && outer > 0)
      PFRT_TRY(check(call,
                     cudaMemcpy2DAsync(static_cast<char *>(out->data) + column,
                                       outPitch, inputs[i].data, width, width,
                                       outer, cudaMemcpyDeviceToDevice,
                                       streamOf(ctx)),
                     "cudaMemcpy2DAsync"));
    column += width;
  }
  return PFRT_OK;
}

//===-------------------------------- Cast -------------------------------===//

template <class D, class S>
__global__ void castKernel(int64_t n, const S *x, D *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = castValue<D>(x[i]); }
}

/// Calls f with a value of the C type of a dtype (f16 as Half, bool as
/// uint8_t).
template <class F> pfrt_status byCastType(int32_t dtype, F &&f) {
  switch (dtype) {
  case PFRT_F32:
    return f(float());
  case PFRT_F64:
    return f(double());
  case PFRT_F16:
    return f(Half());
  case PFRT_I8:
    return f(int8_t());
  case PFRT_I32:
    return f(int32_t());
  case PFRT_I64:
    return f(int64_t());
  default: // PFRT_BOOL
    return f(uint8_t());
  }
}

pfrt_status castEntry(pfrt_context *ctx, const pfrt_tensor *x,
                      const pfrt_tensor *out) {
  Call call(ctx, "pfrt_cast");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.shapeIs("out", out, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  if (x->dtype == out->dtype) // the bytes, as on the CPU (NaN payloads kept)
    return check(call,
                 cudaMemcpyAsync(out->data, x->data, n * dtypeSize(x->dtype),
                                 cudaMemcpyDeviceToDevice, streamOf(ctx)),
                 "cudaMemcpyAsync");
  return byCastType(x->dtype, [&](auto from) {
    using S = decltype(from);
    return byCastType(out->dtype, [&](auto to) {
      using D = decltype(to);
      castKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
          n, dataAs<const S>(x), dataAs<D>(out));
      return launched(call, "castKernel");
    });
  });
}

//===------------------------------- Gather ------------------------------===//

/// Notes the first index outside [-dim, dim) in the context's DeviceError.
template <class I>
__global__ void badIndexKernel(int64_t n, int64_t dim, const I *indices, DeviceError *error) {
  PFRT_GRID_STRIDE(i, n) {
    const int64_t v = indices[i];
    if (v < -dim || v >= dim)
      noteBadElement(error, i);
  }
}

/// The row an index selects, or -1 when it is out of range (the check
/// above reports it; the kernels below only stay in bounds).
__device__ inline int64_t rowOf(int64_t index, int64_t dim) {
  if (index < -dim || index >= dim)
    return -1;
  return index < 0 ? index + dim : index;
}

/// out [outer, count, inner] = data [outer, dim, inner] at the indices (0
/// where an index is out of range).
template <class E, class I>
__global__ void gatherKernel(int64_t outer, int64_t dim, int64_t count,
                             int64_t inner, const E *data, const I *indices,
                             E *out) {
  PFRT_GRID_STRIDE(e, outer * count * inner) {
    const int64_t r = e % inner, t = (e / inner) % count, o = e / (inner * count);
    const int64_t k = rowOf(indices[t], dim);
    out[e] = k < 0 ? E(0) : data[(o * dim + k) * inner + r];
  }
}

/// grad [outer, dim, inner] += grad_out [outer, count, inner] at the
/// indices (out-of-range ones skipped). atomicAdd: repeated indices sum in
/// an unspecified order (the CPU backend's order is fixed; results agree to
/// rounding).
template <class T, class I>
__global__ void scatterAddKernel(int64_t outer, int64_t dim, int64_t count,
                                 int64_t inner, const T *gradOut,
                                 const I *indices, T *grad) {
  PFRT_GRID_STRIDE(e, outer * count * inner) {
    const int64_t r = e % inner, t = (e / inner) % count, o = e / (inner * count);
    const int64_t k = rowOf(indices[t], dim);
    if (k >= 0)
      atomicAdd(&grad[(o * dim + k) * inner + r], gradOut[e]);
  }
}

/// Queues the index check of gather / gather_backward: an index outside
/// [-dim, dim) is reported with the CPU's message at the next host wait
/// (DeviceError.h), not by waiting for the GPU here.
pfrt_status queueIndexCheck(const Call &call, DeviceCheck which, const pfrt_tensor *indices,
                            int64_t dim, int32_t axis) {
  const int64_t n = Shape::of(*indices).numel();
  if (n == 0)
    return PFRT_OK;
  DeviceError *error = stateOf(call.context()).deviceError;
  cudaStream_t s = streamOf(call.context());
  auto queue = [&](auto tag) {
    using I = decltype(tag);
    badIndexKernel<<<blocksFor(n), kThreads, 0, s>>>(n, dim, dataAs<const I>(indices), error);
    settleCheckKernel<<<1, 1, 0, s>>>(error, PFRT_INVALID_ARGUMENT, which, dataAs<const I>(indices),
                                      axis, dim);
    return launched(call, "badIndexKernel");
  };
  return indices->dtype == PFRT_I64 ? queue(int64_t()) : queue(int32_t());
}

/// Gather's geometry: data [outer, dim, inner] and the out shape.
struct GatherDims {
  int64_t outer, dim, count, inner;
  Shape outShape;
};

pfrt_status gatherDims(const Call &call, const Shape &dataShape,
                       const pfrt_tensor *indices, int64_t axis, int32_t &ax,
                       GatherDims &g) {
  PFRT_TRY(call.dtypeIn("indices", indices, {PFRT_I32, PFRT_I64}));
  if (dataShape.rank < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "data must have rank >= 1");
  PFRT_TRY(call.axis("axis", axis, dataShape.rank, ax));
  if (dataShape.rank - 1 + indices->rank > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "result rank %d exceeds %d",
                     dataShape.rank - 1 + indices->rank, PFRT_MAX_RANK);
  for (int32_t i = 0; i < ax; ++i)
    g.outShape.push(dataShape.dims[i]);
  for (int32_t i = 0; i < indices->rank; ++i)
    g.outShape.push(indices->shape[i]);
  for (int32_t i = ax + 1; i < dataShape.rank; ++i)
    g.outShape.push(dataShape.dims[i]);
  g.outer = product(dataShape, 0, ax);
  g.dim = dataShape.dims[ax];
  g.count = Shape::of(*indices).numel();
  g.inner = product(dataShape, ax + 1, dataShape.rank);
  return PFRT_OK;
}

pfrt_status gatherEntry(pfrt_context *ctx, const pfrt_tensor *data,
                        const pfrt_tensor *indices, int64_t axis,
                        const pfrt_tensor *out) {
  Call call(ctx, "pfrt_gather");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("data", data));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("out", out, data->dtype));
  int32_t ax;
  GatherDims g;
  PFRT_TRY(gatherDims(call, Shape::of(*data), indices, axis, ax, g));
  PFRT_TRY(call.shapeIs("out", out, g.outShape));
  PFRT_TRY(queueIndexCheck(call, DeviceCheck::GatherIndex, indices, g.dim, ax));
  const int64_t n = g.outer * g.count * g.inner;
  if (n == 0)
    return PFRT_OK;
  return bySize(call, data->dtype, [&](auto tag) {
    using E = decltype(tag);
    if (indices->dtype == PFRT_I64)
      gatherKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
          g.outer, g.dim, g.count, g.inner, dataAs<const E>(data),
          dataAs<const int64_t>(indices), dataAs<E>(out));
    else
      gatherKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
          g.outer, g.dim, g.count, g.inner, dataAs<const E>(data),
          dataAs<const int32_t>(indices), dataAs<E>(out));
    return launched(call, "gatherKernel");
  });
}

pfrt_status gatherBackwardEntry(pfrt_context *ctx, const pfrt_tensor *indices,
                                const pfrt_tensor *grad_out, int64_t axis,
                                int32_t accumulate,
                                const pfrt_tensor *grad_data) {
  Call call(ctx, "pfrt_gather_backward");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("indices", indices));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_data", grad_data));
  PFRT_TRY(floatDtype(call, "grad_data", grad_data));
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, grad_data->dtype));
  int32_t ax;
  GatherDims g;
  PFRT_TRY(gatherDims(call, Shape::of(*grad_data), indices, axis, ax, g));
  PFRT_TRY(call.shapeIs("grad_out", grad_out, g.outShape));
  PFRT_TRY(queueIndexCheck(call, DeviceCheck::GatherBackwardIndex, indices, g.dim, ax));
  cudaStream_t s = streamOf(ctx);
  const int64_t total = Shape::of(*grad_data).numel();
  if (!accumulate && total > 0)
    PFRT_TRY(check(call, cudaMemsetAsync(grad_data->data, 0,
                                         total * dtypeSize(grad_data->dtype), s),
                   "cudaMemsetAsync"));
  const int64_t n = g.outer * g.count * g.inner;
  if (n == 0)
    return PFRT_OK;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (indices->dtype == PFRT_I64)
      scatterAddKernel<<<blocksFor(n), kThreads, 0, s>>>(
          g.outer, g.dim, g.count, g.inner, dataAs<const T>(grad_out),
          dataAs<const int64_t>(indices), dataAs<T>(grad_data));
    else
      scatterAddKernel<<<blocksFor(n), kThreads, 0, s>>>(
          g.outer, g.dim, g.count, g.inner, dataAs<const T>(grad_out),
          dataAs<const int32_t>(indices), dataAs<T>(grad_data));
  };
  grad_data->dtype == PFRT_F32 ? run(float()) : run(double());
  return launched(call, "scatterAddKernel");
}

pfrt_status readScalarEntry(pfrt_context *ctx, const pfrt_tensor *x, double *value) {
  Call call(ctx, "pfrt_read_scalar");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.pointer("value", value));
  PFRT_TRY(checkReadScalar(call, x));
  alignas(8) unsigned char bytes[8] = {};
  PFRT_TRY(check(
      call,
      cudaMemcpyAsync(bytes, x->data, dtypeSize(x->dtype), cudaMemcpyDeviceToHost, streamOf(ctx)),
      "cudaMemcpyAsync (device to host)"));
  PFRT_TRY(check(call, cudaStreamSynchronize(streamOf(ctx)), "cudaStreamSynchronize"));
  *value = elementAsDouble(x->dtype, bytes);
  return PFRT_OK;
}

} // namespace

void registerDataMovement(KernelTable &t) {
  t.pfrt_copy = copyEntry;
  t.pfrt_read_scalar = readScalarEntry;
  t.pfrt_cast = castEntry;
  t.pfrt_reshape = reshapeEntry;
  t.pfrt_transpose = transposeEntry;
  t.pfrt_slice = sliceEntry;
  t.pfrt_expand = expandEntry;
  t.pfrt_concat = concatEntry;
  t.pfrt_gather = gatherEntry;
  t.pfrt_gather_backward = gatherBackwardEntry;
}

} // namespace pfrt::cuda
