//===- Rows.cu - Softmax, LayerNorm, cross-entropy and sum/mean reductions ===//
//
// Block-per-row kernels: a block reduces its row's statistics in double
// (Launch.h's blockSum/blockMaxNan), then every thread applies RowMath.h's
// per-element formulas to its strided share of the row.
//
//===----------------------------------------------------------------------===//

#include "../common/TensorChecks.h"
#include "ElementwiseMath.h"
#include "Launch.h"
#include "RowMath.h"

namespace pfrt::cuda {
namespace {

//===------------------------------ Softmax -----------------------------===//

template <class T>
__global__ void softmaxKernel(RowLayout l, int64_t rows, const T *x, T *out) {
  PFRT_BLOCK_STRIDE(row, rows) {
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x)
      m = maxNan(m, double(x[rowElement(l, row, j)]));
    m = blockMaxNan(m);
    double s = 0;
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x)
      s += ::exp(double(x[rowElement(l, row, j)]) - m);
    s = blockSum(s);
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = rowElement(l, row, j);
      out[e] = T(softmaxElement(double(x[e]), m, s));
    }
  }
}

template <class T>
__global__ void softmaxGradKernel(RowLayout l, int64_t rows, bool accumulate,
                                  const T *y, const T *dy, T *dx) {
  PFRT_BLOCK_STRIDE(row, rows) {
    double dot = 0;
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = rowElement(l, row, j);
      dot += double(y[e]) * double(dy[e]);
    }
    dot = blockSum(dot);
    for (int64_t j = threadIdx.x; j < l.n; j += blockDim.x) {
      const int64_t e = rowElement(l, row, j);
      const T g = T(softmaxGradElement(double(y[e]), double(dy[e]), dot));
      dx[e] = accumulate ? dx[e] + g : g;
    }
  }
}

/// The rows of x along `axis` (already normalized).
RowLayout layoutAlong(const Shape &s, int32_t axis, int64_t &rows) {
  RowLayout l;
  l.n = s.dims[axis];
  l.inner = product(s, axis + 1, s.rank);
  rows = product(s, 0, axis) * l.inner;
  return l;
}

pfrt_status softmaxEntry(pfrt_context *ctx, const pfrt_tensor *x, int64_t axis,
                         const pfrt_tensor *out) {
  Call call(ctx, "pfrt_softmax");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  const Shape shape = Shape::of(*x);
  PFRT_TRY(call.shapeIs("out", out, shape));
  if (shape.rank == 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "x is a scalar");
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, shape.rank, ax));
  int64_t rows;
  const RowLayout l = layoutAlong(shape, ax, rows);
  if (rows == 0 || l.n == 0)
    return PFRT_OK;
  if (x->dtype == PFRT_F32)
    softmaxKernel<<<blocksForRows(rows), kThreads, 0, streamOf(ctx)>>>(
        l, rows, dataAs<const float>(x), dataAs<float>(out));
  else
    softmaxKernel<<<blocksForRows(rows), kThreads, 0, streamOf(ctx)>>>(
        l, rows, dataAs<const double>(x), dataAs<double>(out));
  return launched(call, "softmaxKernel");
}

pfrt_status softmaxBackwardEntry(pfrt_context *ctx, const pfrt_tensor *y,
                                 const pfrt_tensor *grad_out, int64_t axis,
                                 int32_t accumulate,
                                 const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_softmax_backward");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("y", y));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_in", grad_in));
  PFRT_TRY(floatDtype(call, "y", y));
  const Shape shape = Shape::of(*y);
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, y->dtype));
  PFRT_TRY(call.dtypeIs("grad_in", grad_in, y->dtype));
  PFRT_TRY(call.shapeIs("grad_out", grad_out, shape));
  PFRT_TRY(call.shapeIs("grad_in", grad_in, shape));
  if (shape.rank == 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "y is a scalar");
  int32_t ax;
  PFRT_TRY(call.axis("axis", axis, shape.rank, ax));
  int64_t rows;
  const RowLayout l = layoutAlong(shape, ax, rows);
  if (rows == 0 || l.n == 0)
    return PFRT_OK;
  if (y->dtype == PFRT_F32)
    softmaxGradKernel<<<blocksForRows(rows), kThreads, 0, streamOf(ctx)>>>(
        l, rows, accumulate != 0, dataAs<const float>(y),
        dataAs<const float>(grad_out), dataAs<float>(grad_in));
  else
    softmaxGradKernel<<<blocksForRows(rows), kThreads, 0, streamOf(ctx)>>>(
        l, rows, accumulate != 0, dataAs<const double>(y),
        dataAs<const double>(grad_out), dataAs<double>(grad_in));
  return launched(call, "softmaxGradKernel");
}

//===----------------------------- LayerNorm ----------------------------===//

template <class T>
__global__ void layerNormKernel(int64_t rows, int64_t n, double epsilon,
                                const T *x, const T *scale, const T *bias,
                                T *out, T *mean, T *invStd) {
  PFRT_BLOCK_STRIDE(row, rows) {
    const T *xr = x + row * n;
    double s = 0, ss = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double v = xr[j];
      s += v;
      ss += v * v;
    }
    s = blockSum(s);
    ss = blockSum(ss);
    const NormStats st = normStats(s, ss, n, epsilon);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[row * n + j] = T(layerNormElement(double(xr[j]), st, double(scale[j]),
                                            bias ? double(bias[j]) : 0.0));
    if (threadIdx.x == 0 && mean)
      mean[row] = T(st.mean);
    if (threadIdx.x == 0 && invStd)
      invStd[row] = T(st.invStd);
  }
}

/// grad_x of LayerNorm, one block per row; statistics from the forward's
/// outputs or recomputed from x.
template <class T>
__global__ void layerNormGradKernel(int64_t rows, int64_t n, double epsilon,
                                    bool accumulate, const T *x, const T *scale,
                                    const T *mean, const T *invStd,
                                    const T *dy, T *dx) {
  PFRT_BLOCK_STRIDE(row, rows) {
    const T *xr = x + row * n, *dyr = dy + row * n;
    NormStats st;
    if (mean) {
      st = {double(mean[row]), double(invStd[row])};
    } else {
      double s = 0, ss = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const double v = xr[j];
        s += v;
        ss += v * v;
      }
      st = normStats(blockSum(s), blockSum(ss), n, epsilon);
    }
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double g = double(dyr[j]) * double(scale[j]);
      sg += g;
      sgx += g * (double(xr[j]) - st.mean) * st.invStd;
    }
    const double meanG = blockSum(sg) / double(n);
    const double meanGX = blockSum(sgx) / double(n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double xhat = (double(xr[j]) - st.mean) * st.invStd;
      const double g = double(dyr[j]) * double(scale[j]);
      const T v = T(layerNormGradElement(xhat, g, meanG, meanGX, st.invStd));
      dx[row * n + j] = accumulate ? dx[row * n + j] + v : v;
    }
  }
}

/// grad_scale and grad_bias: one thread per column, summing over rows in
/// row order (deterministic, as the CPU backend).
template <class T>
__global__ void layerNormParamGradKernel(int64_t rows, int64_t n,
                                         double epsilon, bool accumulate,
                                         const T *x, const T *mean,
                                         const T *invStd, const T *dy,
                                         T *dscale, T *dbias) {
  PFRT_GRID_STRIDE(j, n) {
    double sScale = 0, sBias = 0;
    for (int64_t row = 0; row < rows; ++row) {
      const double d = dy[row * n + j];
      sBias += d;
      if (dscale)
        sScale += d * (double(x[row * n + j]) - double(mean[row])) *
                  double(invStd[row]);
    }
    if (dscale)
      dscale[j] = accumulate ? dscale[j] + T(sScale) : T(sScale);
    if (dbias)
      dbias[j] = accumulate ? dbias[j] + T(sBias) : T(sBias);
  }
}

pfrt_status layerNormEntry(pfrt_context *ctx, const pfrt_tensor *x,
                           const pfrt_tensor *scale, const pfrt_tensor *bias,
                           int64_t axis, double epsilon, const pfrt_tensor *out,
                           const pfrt_tensor *mean,
                           const pfrt_tensor *inv_std_dev) {
  Call call(ctx, "pfrt_layer_norm");
  PFRT_TRY(beginCuda(call));
  NormBlocks blocks;
  PFRT_TRY(checkLayerNorm(call, x, nullptr, scale, bias, axis, epsilon, out, mean, inv_std_dev,
                          blocks));
  const int64_t rows = blocks.rows, n = blocks.cols;
  if (rows == 0 || n == 0)
    return PFRT_OK;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    layerNormKernel<<<blocksForRows(rows), kThreads, 0, streamOf(ctx)>>>(
        rows, n, epsilon, dataAs<const T>(x), dataAs<const T>(scale),
        bias ? dataAs<const T>(bias) : nullptr, dataAs<T>(out),
        mean ? dataAs<T>(mean) : nullptr,
        inv_std_dev ? dataAs<T>(inv_std_dev) : nullptr);
  };
  if (x->dtype == PFRT_F32)
    launch(float());
  else
    launch(double());
  return launched(call, "layerNormKernel");
}

pfrt_status layerNormBackwardEntry(
    pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *scale,
    const pfrt_tensor *mean, const pfrt_tensor *inv_std_dev,
    const pfrt_tensor *grad_out, int64_t axis, double epsilon,
    int32_t accumulate_x, int32_t accumulate_params, const pfrt_tensor *grad_x,
    const pfrt_tensor *grad_scale, const pfrt_tensor *grad_bias) {
  Call call(ctx, "pfrt_layer_norm_backward");
  PFRT_TRY(beginCuda(call));
  NormBlocks blocks;
  PFRT_TRY(checkLayerNormBackward(call, x, scale, mean, inv_std_dev, grad_out, axis, epsilon,
                                  grad_x, grad_scale, grad_bias, blocks));
  const int64_t rows = blocks.rows, n = blocks.cols;
  if (rows == 0 || n == 0)
    return PFRT_OK;
  const size_t elem = x->dtype == PFRT_F32 ? sizeof(float) : sizeof(double);
  // grad_scale needs each block's statistics: the forward's, or recomputed
  // into a workspace by the forward kernel (its out goes to a scratch row
  // set too large to keep, so statistics only: out = grad_x's workspace).
  void *stats = nullptr;
  const void *meanData = mean ? mean->data : nullptr;
  const void *invStdData = inv_std_dev ? inv_std_dev->data : nullptr;
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    cudaStream_t s = streamOf(ctx);
    if (!meanData && grad_scale) {
      // Statistics only: the forward kernel with its normalized output
      // written to the workspace after them.
      PFRT_TRY(scratch(call, elem * size_t(2 * rows + rows * n), &stats));
      T *ws = static_cast<T *>(stats);
      layerNormKernel<<<blocksForRows(rows), kThreads, 0, s>>>(
          rows, n, epsilon, dataAs<const T>(x), dataAs<const T>(scale),
          static_cast<const T *>(nullptr), ws + 2 * rows, ws, ws + rows);
      PFRT_TRY(launched(call, "layerNormKernel (statistics)"));
      meanData = ws;
      invStdData = ws + rows;
    }
    if (grad_x) {
      layerNormGradKernel<<<blocksForRows(rows), kThreads, 0, s>>>(
          rows, n, epsilon, accumulate_x != 0, dataAs<const T>(x),
          dataAs<const T>(scale), static_cast<const T *>(meanData),
          static_cast<const T *>(invStdData), dataAs<const T>(grad_out),
          dataAs<T>(grad_x));
      PFRT_TRY(launched(call, "layerNormGradKernel"));
    }
    if (grad_scale || grad_bias) {
      layerNormParamGradKernel<<<blocksFor(n), kThreads, 0, s>>>(
          rows, n, epsilon, accumulate_params != 0, dataAs<const T>(x),
          static_cast<const T *>(meanData), static_cast<const T *>(invStdData),
          dataAs<const T>(grad_out), grad_scale ? dataAs<T>(grad_scale) : nullptr,
          grad_bias ? dataAs<T>(grad_bias) : nullptr);
      PFRT_TRY(launched(call, "layerNormParamGradKernel"));
    }
    return PFRT_OK;
  };
  return x->dtype == PFRT_F32 ? run(float()) : run(double());
}

//===------------------------ Masked-LM cross-entropy --------------------===//

/// Counts the rows whose label is counted (not ignored, in range) and
/// notes the first label out of range in the context's DeviceError.
template <class L>
__global__ void labelCheckKernel(int64_t rows, int64_t v, int64_t ignore, const L *labels,
                                 unsigned long long *count, DeviceError *error) {
  PFRT_GRID_STRIDE(r, rows) {
    const int64_t label = labels[r];
    if (label == ignore)
      continue;
    if (label < 0 || label >= v)
      noteBadElement(error, r);
    else
      atomicAdd(count, 1ull);
  }
}

/// Per-row loss into rowLoss and the gradient; 0 for ignored rows and for
/// labels out of range (reported through the DeviceError).
template <class T, class L>
__global__ void crossEntropyKernel(int64_t rows, int64_t v, int64_t ignore,
                                   double gradScale, const T *logits,
                                   const L *labels,
                                   const unsigned long long *counts,
                                   double *rowLoss, T *grad) {
  const double count = double(counts[0]);
  PFRT_BLOCK_STRIDE(row, rows) {
    const T *x = logits + row * v;
    const int64_t label = labels[row];
    const bool counted = label != ignore && label >= 0 && label < v;
    if (!counted) {
      for (int64_t j = threadIdx.x; grad && j < v; j += blockDim.x)
        grad[row * v + j] = T(0);
      if (threadIdx.x == 0)
        rowLoss[row] = 0;
      continue;
    }
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
      m = maxNan(m, double(x[j]));
    m = blockMaxNan(m);
    double s = 0;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
      s += ::exp(double(x[j]) - m);
    s = blockSum(s);
    if (threadIdx.x == 0)
      rowLoss[row] = crossEntropyRowLoss(m, s, double(x[label]));
    const double scale = gradScale / count;
    for (int64_t j = threadIdx.x; grad && j < v; j += blockDim.x)
      grad[row * v + j] =
          T(crossEntropyGradElement(double(x[j]), m, s, j == label, scale));
  }
}

/// loss = sum of the row losses / count (0 when nothing counted), summed
/// by one block in a fixed order.
template <class T>
__global__ void crossEntropyTotalKernel(int64_t rows, const double *rowLoss,
                                        const unsigned long long *counts,
                                        T *loss, int64_t *countOut) {
  double s = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    s += rowLoss[r];
  s = blockSum(s);
  if (threadIdx.x == 0) {
    const unsigned long long count = counts[0];
    *loss = T(count ? s / double(count) : 0.0);
    if (countOut)
      *countOut = int64_t(count);
  }
}

pfrt_status crossEntropyEntry(pfrt_context *ctx, const pfrt_tensor *logits,
                              const pfrt_tensor *labels, int64_t ignore_index,
                              double grad_scale, const pfrt_tensor *loss,
                              const pfrt_tensor *grad_logits,
                              const pfrt_tensor *count_out) {
  Call call(ctx, "pfrt_softmax_cross_entropy");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("logits", logits));
  PFRT_TRY(call.tensor("labels", labels));
  PFRT_TRY(call.tensor("loss", loss));
  PFRT_TRY(call.optionalTensor("grad_logits", grad_logits));
  PFRT_TRY(call.optionalTensor("count_out", count_out));
  PFRT_TRY(floatDtype(call, "logits", logits));
  PFRT_TRY(call.dtypeIn("labels", labels, {PFRT_I32, PFRT_I64}));
  const Shape shape = Shape::of(*logits);
  if (shape.rank < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "logits must have rank >= 1");
  Shape labelShape;
  for (int32_t d = 0; d + 1 < shape.rank; ++d)
    labelShape.push(shape.dims[d]);
  PFRT_TRY(call.shapeIs("labels", labels, labelShape));
  PFRT_TRY(call.dtypeIs("loss", loss, logits->dtype));
  PFRT_TRY(call.shapeIs("loss", loss, Shape()));
  if (grad_logits) {
    PFRT_TRY(call.dtypeIs("grad_logits", grad_logits, logits->dtype));
    PFRT_TRY(call.shapeIs("grad_logits", grad_logits, shape));
  }
  if (count_out) {
    PFRT_TRY(call.dtypeIs("count", count_out, PFRT_I64));
    PFRT_TRY(call.shapeIs("count", count_out, Shape()));
  }
  if (!isfinite(grad_scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "grad_scale %g is not finite", grad_scale);
  const int64_t v = shape.dims[shape.rank - 1];
  const int64_t rows = labelShape.numel();
  // Workspace: two counters, then one double per row.
  void *ws = nullptr;
  PFRT_TRY(scratch(call, 16 + sizeof(double) * size_t(rows > 0 ? rows : 1), &ws));
  auto *counts = static_cast<unsigned long long *>(ws);
  auto *rowLoss = reinterpret_cast<double *>(counts + 2);
  cudaStream_t s = streamOf(ctx);
  DeviceError *error = stateOf(ctx).deviceError;
  PFRT_TRY(check(call, cudaMemsetAsync(counts, 0, 16, s), "cudaMemsetAsync"));
  auto run = [&](auto tag, auto labelTag) -> pfrt_status {
    using T = decltype(tag);
    using L = decltype(labelTag);
    // A label out of range is reported with the CPU's message at the next
    // host wait (DeviceError.h) instead of waiting for the GPU here.
    if (rows > 0) {
      labelCheckKernel<<<blocksFor(rows), kThreads, 0, s>>>(rows, v, ignore_index,
                                                            dataAs<const L>(labels), counts, error);
      settleCheckKernel<<<1, 1, 0, s>>>(error, PFRT_INVALID_ARGUMENT,
                                        DeviceCheck::CrossEntropyLabel, dataAs<const L>(labels),
                                        ignore_index, v);
      PFRT_TRY(launched(call, "labelCheckKernel"));
    }
    if (rows > 0 && v > 0) {
      crossEntropyKernel<<<blocksForRows(rows), kThreads, 0, s>>>(
          rows, v, ignore_index, grad_scale, dataAs<const T>(logits),
          dataAs<const L>(labels), counts, rowLoss,
          grad_logits ? dataAs<T>(grad_logits) : nullptr);
      PFRT_TRY(launched(call, "crossEntropyKernel"));
    }
    crossEntropyTotalKernel<<<1, kThreads, 0, s>>>(
        rows, rowLoss, counts, dataAs<T>(loss),
        count_out ? dataAs<int64_t>(count_out) : nullptr);
    return launched(call, "crossEntropyTotalKernel");
  };
  if (logits->dtype == PFRT_F32)
    return labels->dtype == PFRT_I32 ? run(float(), int32_t()) : run(float(), int64_t());
  return labels->dtype == PFRT_I32 ? run(double(), int32_t()) : run(double(), int64_t());
}

//===------------------------- Sum / mean reductions ---------------------===//

/// The kept and reduced dimensions of x as two strided index spaces.
struct ReducePlan {
  StridedIndex kept, reduced;
};

__device__ inline int64_t stridedOffset(const StridedIndex &s, int64_t linear) {
  int64_t off = 0;
  for (int32_t d = s.rank - 1; d >= 0; --d) {
    off += (linear % s.dims[d]) * s.strides[d];
    linear /= s.dims[d];
  }
  return off;
}

/// One block per output element, summing its reduced set in double;
/// accumulate adds to what out holds.
template <class T>
__global__ void reduceSumKernel(ReducePlan p, int64_t outCount,
                                int64_t reduceCount, double alpha,
                                bool accumulate, const T *x, T *out) {
  PFRT_BLOCK_STRIDE(o, outCount) {
    const int64_t base = stridedOffset(p.kept, o);
    double s = 0;
    for (int64_t r = threadIdx.x; r < reduceCount; r += blockDim.x)
      s += double(x[base + stridedOffset(p.reduced, r)]);
    s = blockSum(s);
    if (threadIdx.x == 0)
      out[o] = accumulate ? T(double(out[o]) + s * alpha) : T(s * alpha);
  }
}

/// Queues out = (accumulate ? out : 0) + alpha * the sums of the plan.
pfrt_status queueReduce(const Call &call, const ReducePlan &plan,
                        int64_t outCount, double alpha, bool accumulate,
                        const pfrt_tensor *x, const pfrt_tensor *out) {
  const int64_t reduceCount = plan.reduced.count();
  cudaStream_t s = streamOf(call.context());
  if (x->dtype == PFRT_F32)
    reduceSumKernel<<<blocksForRows(outCount), kThreads, 0, s>>>(
        plan, outCount, reduceCount, alpha, accumulate, dataAs<const float>(x),
        dataAs<float>(out));
  else
    reduceSumKernel<<<blocksForRows(outCount), kThreads, 0, s>>>(
        plan, outCount, reduceCount, alpha, accumulate, dataAs<const double>(x),
        dataAs<double>(out));
  return launched(call, "reduceSumKernel");
}

/// One block per output element: max or min of its reduced set in T (a
/// shared-memory tree, so integers stay exact).
template <class T>
__global__ void reduceExtremeKernel(ReducePlan p, int64_t outCount,
                                    int64_t reduceCount, bool isMax,
                                    const T *x, T *out) {
  __shared__ T partial[kThreads];
  PFRT_BLOCK_STRIDE(o, outCount) {
    const int64_t base = stridedOffset(p.kept, o);
    T v = extremeIdentity<T>(isMax);
    for (int64_t r = threadIdx.x; r < reduceCount; r += blockDim.x)
      v = extremeOf(isMax, v, x[base + stridedOffset(p.reduced, r)]);
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width)
        partial[threadIdx.x] =
            extremeOf(isMax, partial[threadIdx.x], partial[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0)
      out[o] = partial[0];
    __syncthreads(); // partial is reused by the block's next row
  }
}

/// The reduce plan of x over `axes` (pfrt_reduce_*'s conventions) and the
/// output shape it implies.
pfrt_status planReduce(const Call &call, const pfrt_tensor *x,
                       const int64_t *axes, int32_t num_axes, int32_t keepdims,
                       ReducePlan &plan, Shape &expected) {
  if (num_axes < 0 || num_axes > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "num_axes %d is out of range", num_axes);
  if (num_axes > 0)
    PFRT_TRY(call.pointer("axes", axes));
  const Shape shape = Shape::of(*x);
  bool isReduced[PFRT_MAX_RANK] = {};
  for (int32_t i = 0; i < num_axes; ++i) {
    int32_t ax;
    PFRT_TRY(call.axis("axis", axes[i], shape.rank, ax));
    if (isReduced[ax])
      return call.fail(PFRT_INVALID_ARGUMENT, "axis %lld is repeated",
                       static_cast<long long>(axes[i]));
    isReduced[ax] = true;
  }
  if (num_axes == 0)
    for (int32_t d = 0; d < shape.rank; ++d)
      isReduced[d] = true;
  int64_t strides[PFRT_MAX_RANK];
  contiguousStrides(shape, strides);
  for (int32_t d = 0; d < shape.rank; ++d) {
    if (isReduced[d]) {
      plan.reduced.push(shape.dims[d], strides[d]);
      if (keepdims)
        expected.push(1);
    } else {
      plan.kept.push(shape.dims[d], strides[d]);
      expected.push(shape.dims[d]);
    }
  }
  return PFRT_OK;
}

pfrt_status reduceEntry(pfrt_context *ctx, const char *fn, bool mean,
                        const pfrt_tensor *x, const int64_t *axes,
                        int32_t num_axes, int32_t keepdims,
                        const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  ReducePlan plan;
  Shape expected;
  PFRT_TRY(planReduce(call, x, axes, num_axes, keepdims, plan, expected));
  PFRT_TRY(call.shapeIs("out", out, expected));
  const int64_t outCount = expected.numel(), reduceCount = plan.reduced.count();
  if (outCount == 0)
    return PFRT_OK;
  // The CPU's mean of an empty set is 0/0 = NaN; sum is 0.
  const double alpha = mean ? 1.0 / double(reduceCount) : 1.0;
  return queueReduce(call, plan, outCount, alpha, false, x, out);
}

pfrt_status reduceExtremeEntry(pfrt_context *ctx, const char *fn, bool isMax,
                               const pfrt_tensor *x, const int64_t *axes,
                               int32_t num_axes, int32_t keepdims,
                               const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  ReducePlan plan;
  Shape expected;
  PFRT_TRY(planReduce(call, x, axes, num_axes, keepdims, plan, expected));
  PFRT_TRY(call.shapeIs("out", out, expected));
  const int64_t outCount = expected.numel(), reduceCount = plan.reduced.count();
  if (outCount == 0)
    return PFRT_OK;
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    reduceExtremeKernel<<<blocksForRows(outCount), kThreads, 0, streamOf(ctx)>>>(
        plan, outCount, reduceCount, isMax, dataAs<const T>(x), dataAs<T>(out));
    return launched(call, "reduceExtremeKernel");
  };
  switch (x->dtype) {
  case PFRT_F32:
    return launch(float());
  case PFRT_F64:
    return launch(double());
  case PFRT_I8:
    return launch(int8_t());
  case PFRT_I32:
    return launch(int32_t());
  case PFRT_I64:
    return launch(int64_t());
  default:
    return launch(uint8_t());
  }
}

pfrt_status reduceSumEntry(pfrt_context *ctx, const pfrt_tensor *x,
                           const int64_t *axes, int32_t num_axes,
                           int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_sum", false, x, axes, num_axes,
                     keepdims, out);
}

pfrt_status reduceMeanEntry(pfrt_context *ctx, const pfrt_tensor *x,
                            const int64_t *axes, int32_t num_axes,
                            int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_mean", true, x, axes, num_axes,
                     keepdims, out);
}

pfrt_status reduceMaxEntry(pfrt_context *ctx, const pfrt_tensor *x,
                           const int64_t *axes, int32_t num_axes,
                           int32_t keepdims, const pfrt_tensor *out) {
  return reduceExtremeEntry(ctx, "pfrt_reduce_max", true, x, axes, num_axes,
                            keepdims, out);
}

pfrt_status reduceMinEntry(pfrt_context *ctx, const pfrt_tensor *x,
                           const int64_t *axes, int32_t num_axes,
                           int32_t keepdims, const pfrt_tensor *out) {
  return reduceExtremeEntry(ctx, "pfrt_reduce_min", false, x, axes, num_axes,
                            keepdims, out);
}

/// The gradient of a broadcast operand: grad summed over the dimensions
/// along which out's shape was broadcast to grad's.
pfrt_status reduceToShapeEntry(pfrt_context *ctx, const pfrt_tensor *grad,
                               int32_t accumulate, const pfrt_tensor *out) {
  Call call(ctx, "pfrt_reduce_to_shape");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("grad", grad));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "grad", grad));
  PFRT_TRY(call.dtypeIs("out", out, grad->dtype));
  const Shape g = Shape::of(*grad), o = Shape::of(*out);
  if (!broadcastsTo(o, g))
    return call.fail(PFRT_INVALID_ARGUMENT, "out %s does not broadcast to grad %s",
                     ShapeStr(o).c_str(), ShapeStr(g).c_str());
  int64_t strides[PFRT_MAX_RANK];
  contiguousStrides(g, strides);
  ReducePlan plan;
  const int32_t shift = g.rank - o.rank;
  for (int32_t d = 0; d < g.rank; ++d) {
    // Leading dimensions out lacks, and its ones facing larger ones, sum.
    const bool summed = d < shift || (o.dims[d - shift] == 1 && g.dims[d] != 1);
    if (summed)
      plan.reduced.push(g.dims[d], strides[d]);
    else
      plan.kept.push(g.dims[d], strides[d]);
  }
  const int64_t outCount = o.numel();
  if (outCount == 0)
    return PFRT_OK;
  return queueReduce(call, plan, outCount, 1.0, accumulate != 0, grad, out);
}

} // namespace

void registerRows(KernelTable &t) {
  t.pfrt_softmax = softmaxEntry;
  t.pfrt_softmax_backward = softmaxBackwardEntry;
  t.pfrt_layer_norm = layerNormEntry;
  t.pfrt_layer_norm_backward = layerNormBackwardEntry;
  t.pfrt_softmax_cross_entropy = crossEntropyEntry;
  t.pfrt_reduce_sum = reduceSumEntry;
  t.pfrt_reduce_mean = reduceMeanEntry;
  t.pfrt_reduce_to_shape = reduceToShapeEntry;
  t.pfrt_reduce_max = reduceMaxEntry;
  t.pfrt_reduce_min = reduceMinEntry;
}

} // namespace pfrt::cuda
