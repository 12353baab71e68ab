//===- Launch.h - Launch shapes and block reductions for CUDA kernels -*- CUDA -*-===//

#ifndef PF_RUNTIME_CUDA_LAUNCH_H
#define PF_RUNTIME_CUDA_LAUNCH_H

#include "../common/Dtype.h"
#include "ElementwiseMath.h"
#include "State.h"

#include <climits>

namespace pfrt::cuda {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements: enough to fill the GPU,
/// capped so huge tensors loop instead of launching millions of blocks.
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > (1 << 16))
    blocks = 1 << 16;
  return static_cast<unsigned>(blocks > 0 ? blocks : 1);
}

/// Rows per launch of a block-per-row kernel (the grid loops beyond it).
inline unsigned blocksForRows(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 16) ? (rows > 0 ? rows : 1) : (1 << 16));
}

#define PFRT_GRID_STRIDE(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

#define PFRT_BLOCK_STRIDE(row, rows)                                           \
  for (int64_t row = blockIdx.x; row < (rows); row += gridDim.x)

/// Sum of v over the block (every thread gets it). Needs blockDim.x a
/// multiple of 32, at most 1024.
__device__ inline double blockSum(double v) {
  __shared__ double partial[32];
  __syncthreads(); // the previous call's readers are done with partial
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? partial[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2)
      v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

/// Max of v over the block, a NaN winning (every thread gets it).
__device__ inline double blockMaxNan(double v) {
  __shared__ double partial[32];
  __syncthreads();
  auto combine = [](double a, double b) {
    return a != a ? a : b != b ? b : (b > a ? b : a);
  };
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? partial[lane] : -INFINITY;
    for (int offset = 16; offset > 0; offset /= 2)
      v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

/// The floating dtypes the CUDA kernels implement so far.
inline pfrt_status floatDtype(const Call &call, const char *name,
                              const pfrt_tensor *t) {
  if (t->dtype == PFRT_F32 || t->dtype == PFRT_F64)
    return PFRT_OK;
  return call.fail(PFRT_UNSUPPORTED, "%s has dtype %s; the CUDA backend "
                   "implements this kernel for f32 and f64 only so far",
                   name, dtypeName(t->dtype));
}

/// Starts a CUDA entry point: a context with CUDA state, on its device.
inline pfrt_status beginCuda(const Call &call) {
  PFRT_TRY(call.begin());
  if (!call.context()->cuda)
    return call.fail(PFRT_INTERNAL, "the context has no CUDA state");
  return check(call, cudaSetDevice(call.context()->cuda->device), "cudaSetDevice");
}

/// Runs `f` with the unsigned type of the dtype's element size (kernels
/// that move elements without reading them).
template <class F>
pfrt_status bySize(const Call &call, int32_t dtype, F &&f) {
  switch (dtypeSize(dtype)) {
  case 1:
    return f(uint8_t());
  case 2:
    return f(uint16_t());
  case 4:
    return f(uint32_t());
  case 8:
    return f(uint64_t());
  }
  return call.fail(PFRT_INVALID_ARGUMENT, "unknown dtype %d", dtype);
}

template <class T> T *dataAs(const pfrt_tensor *t) {
  return static_cast<T *>(t->data);
}

/// out (plan.numel elements) = x broadcast along the plan (one input).
template <class T>
__global__ void broadcastCopyKernel(BroadcastPlan plan, const T *x, T *out) {
  PFRT_GRID_STRIDE(i, plan.numel) { out[i] = x[broadcastOffset(plan, 0, i)]; }
}

/// Whether every value fits the int that cuBLAS/cuSOLVER dimensions take.
inline bool fitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v > INT_MAX)
      return false;
  return true;
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_LAUNCH_H
