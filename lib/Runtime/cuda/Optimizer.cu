//===- Optimizer.cu - SGD, AdamW, scale, dot, global norm and clipping ----===//
//
// Parameter updates are one elementwise kernel each (OptimizerMath.h). Sums
// (dot, norms) are deterministic: a fixed grid writes per-block partials in
// double, and one block adds them in order, so a rerun gives the same bits.
// Clipping without a norm output (what the lowering emits) stays on the
// device: the norm, the scale and a non-finite norm's error (DeviceError.h)
// are formed there, so a training step does not wait for the GPU to clip.
//
//===----------------------------------------------------------------------===//

#include "../common/TensorChecks.h"
#include "Launch.h"
#include "OptimizerMath.h"

#include <cstdio>
#include <vector>

namespace pfrt::cuda {
namespace {

/// Blocks of the first stage of a deterministic sum.
constexpr int kSumBlocks = 256;

template <class T>
__global__ void sgdKernel(int64_t n, SgdParams s, T *p, const T *g, T *buf) {
  PFRT_GRID_STRIDE(i, n) { sgdElement(s, p[i], g[i], buf ? buf + i : nullptr); }
}

template <class T>
__global__ void adamwKernel(int64_t n, AdamParams a, T *p, const T *g, T *m,
                            T *v) {
  PFRT_GRID_STRIDE(i, n) { adamwElement(a, p[i], g[i], m[i], v[i]); }
}

template <class T>
__global__ void scaleKernel(int64_t n, double alpha, const T *x, T *out) {
  const T a = T(alpha);
  PFRT_GRID_STRIDE(i, n) { out[i] = x[i] * a; }
}

/// out = (sum + x * count) / total, each step rounded to T: the _rn
/// intrinsics are never contracted into a fused multiply-add, so the bits are
/// pfrt_mul's, then pfrt_add's, then pfrt_div's.
__device__ inline float mulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float addRn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double addRn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float divRn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double divRn(double a, double b) { return __ddiv_rn(a, b); }
template <class T>
__global__ void weightedAddKernel(int64_t n, const T *sum, const T *x, T count, T total,
                                  T *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = divRn(addRn(sum[i], mulRn(x[i], count)), total); }
}

/// partials[block] = this block's share of sum a[i] * b[i] (b == a for a
/// sum of squares).
template <class T>
__global__ void dotPartialKernel(int64_t n, const T *a, const T *b,
                                 double *partials) {
  double s = 0;
  PFRT_GRID_STRIDE(i, n) { s += double(a[i]) * double(b[i]); }
  s = blockSum(s);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

__global__ void sumPartialsKernel(int count, const double *partials,
                                  double *out) {
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    s += partials[i];
  s = blockSum(s);
  if (threadIdx.x == 0)
    *out = s;
}

/// LAMB pass 1: the moments, and per-block partial sums of p^2 and u^2
/// (partials[0..kSumBlocks) and partials[kSumBlocks..2 kSumBlocks)).
template <class T>
__global__ void lambMomentsKernel(int64_t n, AdamParams a, double weightDecay,
                                  const T *p, const T *g, T *m, T *v,
                                  double *partials) {
  double pp = 0, uu = 0;
  PFRT_GRID_STRIDE(i, n) {
    lambMoments(a, g[i], m[i], v[i]);
    const double u = lambDirection(a, weightDecay, p[i], m[i], v[i]);
    pp += double(p[i]) * double(p[i]);
    uu += u * u;
  }
  pp = blockSum(pp);
  uu = blockSum(uu);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = pp;
    partials[kSumBlocks + blockIdx.x] = uu;
  }
}

/// LAMB pass 2: p -= lr r u, the trust ratio r from the two sums on the
/// device (no host round trip).
template <class T>
__global__ void lambApplyKernel(int64_t n, AdamParams a, double weightDecay,
                                bool adapt, double maxTrustRatio,
                                const double *sums, T *p, const T *m,
                                const T *v) {
  const double rate = a.lr * lambTrustRatio(sums[0], sums[1], adapt, maxTrustRatio);
  PFRT_GRID_STRIDE(i, n) {
    p[i] = T(double(p[i]) - rate * lambDirection(a, weightDecay, p[i], m[i], v[i]));
  }
}

/// Queues sum a . b (same dtype and element count) into *result on the
/// device; `partials` has kSumBlocks doubles.
pfrt_status queueDot(const Call &call, const pfrt_tensor *a,
                     const pfrt_tensor *b, double *partials, double *result) {
  cudaStream_t s = streamOf(call.context());
  const int64_t n = Shape::of(*a).numel();
  if (a->dtype == PFRT_F32)
    dotPartialKernel<<<kSumBlocks, kThreads, 0, s>>>(
        n, dataAs<const float>(a), dataAs<const float>(b), partials);
  else
    dotPartialKernel<<<kSumBlocks, kThreads, 0, s>>>(
        n, dataAs<const double>(a), dataAs<const double>(b), partials);
  PFRT_TRY(launched(call, "dotPartialKernel"));
  sumPartialsKernel<<<1, kThreads, 0, s>>>(kSumBlocks, partials, result);
  return launched(call, "sumPartialsKernel");
}

/// One thread: the clipping coefficient from the per-tensor sums of squares
/// (added in list order, as normOf does on the host) into *coefficient: 1
/// when the norm is within max_norm or not finite (recorded as the CPU's
/// PFRT_NUMERIC in the DeviceError then: the tensors stay unscaled).
__global__ void clipCoefficientKernel(int32_t n, const double *sums, double maxNorm,
                                      double *coefficient, DeviceError *error) {
  double squares = 0;
  for (int32_t i = 0; i < n; ++i)
    squares += sums[i];
  const double total = sqrt(squares);
  if (!isfinite(total))
    recordReal(*error, PFRT_NUMERIC, DeviceCheck::ClipNorm, total);
  *coefficient = clipCoefficient(total, maxNorm);
}

/// x *= *coefficient, skipped when it is 1.
template <class T>
__global__ void scaleByDeviceKernel(int64_t n, const double *coefficient, T *x) {
  const double c = *coefficient;
  if (c == 1.0)
    return;
  const T a = T(c);
  PFRT_GRID_STRIDE(i, n) { x[i] = x[i] * a; }
}

/// Copies `count` doubles back and waits for them.
pfrt_status readDoubles(const Call &call, const double *device, double *host,
                        int count) {
  cudaStream_t s = streamOf(call.context());
  PFRT_TRY(check(call, cudaMemcpyAsync(host, device, sizeof(double) * count,
                                       cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync"));
  return check(call, cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

pfrt_status checkHyper(const Call &call, const char *name, double v) {
  if (v >= 0 && isfinite(v))
    return PFRT_OK;
  return call.fail(PFRT_INVALID_ARGUMENT, "%s %g is not a finite value in "
                   "[0, inf]", name, v);
}

pfrt_status sgdEntry(pfrt_context *ctx, const pfrt_tensor *param,
                     const pfrt_tensor *grad, const pfrt_tensor *momentum_buf,
                     double lr, double momentum, double weight_decay,
                     int32_t nesterov) {
  Call call(ctx, "pfrt_sgd_step");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("param", param));
  PFRT_TRY(floatDtype(call, "param", param));
  const Shape shape = Shape::of(*param);
  PFRT_TRY(floatLike(call, "grad", grad, param->dtype, shape));
  if (momentum != 0 || momentum_buf)
    PFRT_TRY(floatLike(call, "momentum_buf", momentum_buf, param->dtype, shape));
  PFRT_TRY(checkHyper(call, "lr", lr));
  PFRT_TRY(checkHyper(call, "momentum", momentum));
  PFRT_TRY(checkHyper(call, "weight_decay", weight_decay));
  if (nesterov && momentum == 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "nesterov needs momentum > 0");
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  const SgdParams s{lr, momentum, weight_decay, momentum != 0, nesterov != 0};
  auto run = [&](auto tag) {
    using T = decltype(tag);
    sgdKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, s, dataAs<T>(param), dataAs<const T>(grad),
        s.useMomentum ? dataAs<T>(momentum_buf) : nullptr);
  };
  param->dtype == PFRT_F32 ? run(float()) : run(double());
  return launched(call, "sgdKernel");
}

pfrt_status adamwEntry(pfrt_context *ctx, const pfrt_tensor *param,
                       const pfrt_tensor *grad, const pfrt_tensor *exp_avg,
                       const pfrt_tensor *exp_avg_sq, double lr, double beta1,
                       double beta2, double eps, double weight_decay,
                       int64_t step, int32_t bias_correction) {
  Call call(ctx, "pfrt_adamw_step");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("param", param));
  PFRT_TRY(floatDtype(call, "param", param));
  const Shape shape = Shape::of(*param);
  PFRT_TRY(floatLike(call, "grad", grad, param->dtype, shape));
  PFRT_TRY(floatLike(call, "exp_avg", exp_avg, param->dtype, shape));
  PFRT_TRY(floatLike(call, "exp_avg_sq", exp_avg_sq, param->dtype, shape));
  PFRT_TRY(checkHyper(call, "lr", lr));
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "beta1 %g and beta2 %g must lie "
                     "in [0, 1)", beta1, beta2);
  PFRT_TRY(checkHyper(call, "eps", eps));
  PFRT_TRY(checkHyper(call, "weight_decay", weight_decay));
  if (step < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "step %lld must be >= 1",
                     static_cast<long long>(step));
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  const AdamParams a = adamParams(lr, beta1, beta2, eps, weight_decay, step,
                                  bias_correction != 0);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    adamwKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, a, dataAs<T>(param), dataAs<const T>(grad), dataAs<T>(exp_avg),
        dataAs<T>(exp_avg_sq));
  };
  param->dtype == PFRT_F32 ? run(float()) : run(double());
  return launched(call, "adamwKernel");
}

pfrt_status lambEntry(pfrt_context *ctx, const pfrt_tensor *param,
                      const pfrt_tensor *grad, const pfrt_tensor *exp_avg,
                      const pfrt_tensor *exp_avg_sq, double lr, double beta1,
                      double beta2, double eps, double weight_decay,
                      int64_t step, int32_t bias_correction, int32_t nvlamb,
                      double max_trust_ratio) {
  Call call(ctx, "pfrt_lamb_step");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("param", param));
  PFRT_TRY(floatDtype(call, "param", param));
  const Shape shape = Shape::of(*param);
  PFRT_TRY(floatLike(call, "grad", grad, param->dtype, shape));
  PFRT_TRY(floatLike(call, "exp_avg", exp_avg, param->dtype, shape));
  PFRT_TRY(floatLike(call, "exp_avg_sq", exp_avg_sq, param->dtype, shape));
  PFRT_TRY(checkHyper(call, "lr", lr));
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "beta1 %g and beta2 %g must lie "
                     "in [0, 1)", beta1, beta2);
  PFRT_TRY(checkHyper(call, "eps", eps));
  PFRT_TRY(checkHyper(call, "weight_decay", weight_decay));
  if (step < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "step %lld must be >= 1",
                     static_cast<long long>(step));
  PFRT_TRY(checkHyper(call, "max_trust_ratio", max_trust_ratio));
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  // The decay of AdamParams is unused: LAMB's weight decay is in u.
  const AdamParams a = adamParams(lr, beta1, beta2, eps, 0.0, step,
                                  bias_correction != 0);
  const bool adapt = nvlamb != 0 || weight_decay != 0;
  void *ws = nullptr;
  PFRT_TRY(scratch(call, sizeof(double) * (2 * kSumBlocks + 2), &ws));
  auto *partials = static_cast<double *>(ws);
  double *sums = partials + 2 * kSumBlocks;
  cudaStream_t s = streamOf(ctx);
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    lambMomentsKernel<<<kSumBlocks, kThreads, 0, s>>>(
        n, a, weight_decay, dataAs<const T>(param), dataAs<const T>(grad),
        dataAs<T>(exp_avg), dataAs<T>(exp_avg_sq), partials);
    PFRT_TRY(launched(call, "lambMomentsKernel"));
    sumPartialsKernel<<<1, kThreads, 0, s>>>(kSumBlocks, partials, sums);
    sumPartialsKernel<<<1, kThreads, 0, s>>>(kSumBlocks, partials + kSumBlocks,
                                             sums + 1);
    PFRT_TRY(launched(call, "sumPartialsKernel"));
    lambApplyKernel<<<blocksFor(n), kThreads, 0, s>>>(
        n, a, weight_decay, adapt, max_trust_ratio, sums, dataAs<T>(param),
        dataAs<const T>(exp_avg), dataAs<const T>(exp_avg_sq));
    return launched(call, "lambApplyKernel");
  };
  return param->dtype == PFRT_F32 ? run(float()) : run(double());
}

/// out = alpha x, queued; shapes and dtypes checked by the caller.
pfrt_status queueScale(const Call &call, const pfrt_tensor *x, double alpha,
                       const pfrt_tensor *out) {
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  cudaStream_t s = streamOf(call.context());
  if (x->dtype == PFRT_F32)
    scaleKernel<<<blocksFor(n), kThreads, 0, s>>>(n, alpha, dataAs<const float>(x),
                                                  dataAs<float>(out));
  else
    scaleKernel<<<blocksFor(n), kThreads, 0, s>>>(n, alpha, dataAs<const double>(x),
                                                  dataAs<double>(out));
  return launched(call, "scaleKernel");
}

pfrt_status weightedAddEntry(pfrt_context *ctx, const pfrt_tensor *sum,
                             const pfrt_tensor *x, int64_t count, int64_t total,
                             const pfrt_tensor *out) {
  Call call(ctx, "pfrt_weighted_add");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(floatLike(call, "sum", sum, x->dtype, Shape::of(*x)));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  cudaStream_t s = streamOf(call.context());
  if (x->dtype == PFRT_F32)
    weightedAddKernel<<<blocksFor(n), kThreads, 0, s>>>(
        n, dataAs<const float>(sum), dataAs<const float>(x), float(count), float(total),
        dataAs<float>(out));
  else
    weightedAddKernel<<<blocksFor(n), kThreads, 0, s>>>(
        n, dataAs<const double>(sum), dataAs<const double>(x), double(count), double(total),
        dataAs<double>(out));
  return launched(call, "weightedAddKernel");
}

pfrt_status scaleEntry(pfrt_context *ctx, const pfrt_tensor *x, double alpha,
                       const pfrt_tensor *out) {
  Call call(ctx, "pfrt_scale");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, Shape::of(*x)));
  return queueScale(call, x, alpha, out);
}

pfrt_status dotEntry(pfrt_context *ctx, const pfrt_tensor *a,
                     const pfrt_tensor *b, double *result) {
  Call call(ctx, "pfrt_dot");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.pointer("result", result));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(floatDtype(call, "a", a));
  PFRT_TRY(floatLike(call, "b", b, a->dtype, Shape::of(*a)));
  void *ws = nullptr;
  PFRT_TRY(scratch(call, sizeof(double) * (kSumBlocks + 1), &ws));
  auto *partials = static_cast<double *>(ws);
  PFRT_TRY(queueDot(call, a, b, partials, partials + kSumBlocks));
  return readDoubles(call, partials + kSumBlocks, result, 1);
}

/// The tensors of a list: f32 or f64 each.
pfrt_status tensorList(const Call &call, const pfrt_tensor *tensors, int32_t n) {
  if (n < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "n %d is negative", n);
  if (n > 0)
    PFRT_TRY(call.pointer("tensors", tensors));
  for (int32_t i = 0; i < n; ++i) {
    char name[32];
    snprintf(name, sizeof name, "tensors[%d]", i);
    PFRT_TRY(call.tensor(name, &tensors[i]));
    PFRT_TRY(floatDtype(call, name, &tensors[i]));
  }
  return PFRT_OK;
}

/// sqrt of the sum of squares over the tensors (summed on the host in
/// list order, each tensor's sum deterministic on the device).
pfrt_status normOf(const Call &call, const pfrt_tensor *tensors, int32_t n,
                   double &norm) {
  norm = 0;
  if (n == 0)
    return PFRT_OK;
  void *ws = nullptr;
  PFRT_TRY(scratch(call, sizeof(double) * (kSumBlocks + size_t(n)), &ws));
  auto *partials = static_cast<double *>(ws);
  double *sums = partials + kSumBlocks;
  for (int32_t i = 0; i < n; ++i)
    PFRT_TRY(queueDot(call, &tensors[i], &tensors[i], partials, sums + i));
  std::vector<double> host(n);
  PFRT_TRY(readDoubles(call, sums, host.data(), n));
  double squares = 0;
  for (double v : host)
    squares += v;
  norm = sqrt(squares);
  return PFRT_OK;
}

pfrt_status globalNormEntry(pfrt_context *ctx, const pfrt_tensor *tensors,
                            int32_t n, double *norm) {
  Call call(ctx, "pfrt_global_norm");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.pointer("norm", norm));
  PFRT_TRY(tensorList(call, tensors, n));
  return normOf(call, tensors, n, *norm);
}

/// Clipping on the device (no norm for the host): nothing waits for the GPU.
pfrt_status clipOnDevice(const Call &call, const pfrt_tensor *tensors, int32_t n, double max_norm) {
  if (n == 0)
    return PFRT_OK;
  void *ws = nullptr;
  PFRT_TRY(scratch(call, sizeof(double) * (kSumBlocks + size_t(n) + 1), &ws));
  auto *partials = static_cast<double *>(ws);
  double *sums = partials + kSumBlocks, *coefficient = sums + n;
  for (int32_t i = 0; i < n; ++i)
    PFRT_TRY(queueDot(call, &tensors[i], &tensors[i], partials, sums + i));
  cudaStream_t s = streamOf(call.context());
  clipCoefficientKernel<<<1, 1, 0, s>>>(n, sums, max_norm, coefficient,
                                        stateOf(call.context()).deviceError);
  PFRT_TRY(launched(call, "clipCoefficientKernel"));
  for (int32_t i = 0; i < n; ++i) {
    const int64_t count = Shape::of(tensors[i]).numel();
    if (count == 0)
      continue;
    if (tensors[i].dtype == PFRT_F32)
      scaleByDeviceKernel<<<blocksFor(count), kThreads, 0, s>>>(count, coefficient,
                                                                dataAs<float>(&tensors[i]));
    else
      scaleByDeviceKernel<<<blocksFor(count), kThreads, 0, s>>>(count, coefficient,
                                                                dataAs<double>(&tensors[i]));
    PFRT_TRY(launched(call, "scaleByDeviceKernel"));
  }
  return PFRT_OK;
}

/// The clipping of a global norm `total` known on the host.
pfrt_status clipTo(const Call &call, const pfrt_tensor *tensors, int32_t n, double total,
                   double max_norm) {
  if (!isfinite(total))
    return call.fail(PFRT_NUMERIC, "the global gradient norm is %g; the "
                     "gradients were left unscaled", total);
  const double coefficient = clipCoefficient(total, max_norm);
  if (coefficient == 1.0)
    return PFRT_OK;
  for (int32_t i = 0; i < n; ++i)
    PFRT_TRY(queueScale(call, &tensors[i], coefficient, &tensors[i]));
  return PFRT_OK;
}

pfrt_status checkMaxNorm(const Call &call, double max_norm) {
  if (!(max_norm > 0) || !isfinite(max_norm))
    return call.fail(PFRT_INVALID_ARGUMENT, "max_norm %g must be positive "
                     "and finite", max_norm);
  return PFRT_OK;
}

pfrt_status clipEntry(pfrt_context *ctx, const pfrt_tensor *tensors, int32_t n,
                      double max_norm, double *norm) {
  Call call(ctx, "pfrt_clip_by_global_norm");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(tensorList(call, tensors, n));
  PFRT_TRY(checkMaxNorm(call, max_norm));
  if (!norm)
    return clipOnDevice(call, tensors, n, max_norm);
  // The caller wants the norm on the host: wait for it, then decide there.
  double total;
  PFRT_TRY(normOf(call, tensors, n, total));
  *norm = total;
  return clipTo(call, tensors, n, total, max_norm);
}

pfrt_status clipToNormEntry(pfrt_context *ctx, const pfrt_tensor *tensors, int32_t n,
                            double max_norm, double norm) {
  Call call(ctx, "pfrt_clip_to_norm");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(tensorList(call, tensors, n));
  PFRT_TRY(checkMaxNorm(call, max_norm));
  return clipTo(call, tensors, n, norm, max_norm);
}

} // namespace

void registerOptimizer(KernelTable &t) {
  t.pfrt_sgd_step = sgdEntry;
  t.pfrt_adamw_step = adamwEntry;
  t.pfrt_lamb_step = lambEntry;
  t.pfrt_scale = scaleEntry;
  t.pfrt_weighted_add = weightedAddEntry;
  t.pfrt_dot = dotEntry;
  t.pfrt_global_norm = globalNormEntry;
  t.pfrt_clip_by_global_norm = clipEntry;
  t.pfrt_clip_to_norm = clipToNormEntry;
}

} // namespace pfrt::cuda
