//===- Context.cpp - CUDA device, stream, handles, memory and copies -------===//

#include "State.h"

#include <cstdio>
#include <new>

namespace pfrt::cuda {

bool built() { return true; }

int32_t deviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

pfrt_status check(const Call &call, cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return PFRT_OK;
  cudaGetLastError(); // clear a sticky launch error so later calls report theirs
  return call.fail(err == cudaErrorMemoryAllocation ? PFRT_OUT_OF_MEMORY
                                                    : PFRT_INTERNAL,
                   "%s: %s (%s)", what, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

pfrt_status check(const Call &call, cublasStatus_t err, const char *what) {
  if (err == CUBLAS_STATUS_SUCCESS)
    return PFRT_OK;
  return call.fail(PFRT_INTERNAL, "%s: cuBLAS %s", what,
                   lib().cublasGetStatusString(err));
}

pfrt_status check(const Call &call, cusolverStatus_t err, const char *what) {
  if (err == CUSOLVER_STATUS_SUCCESS)
    return PFRT_OK;
  return call.fail(PFRT_INTERNAL, "%s: cuSOLVER status %d", what,
                   static_cast<int>(err));
}

pfrt_status launched(const Call &call, const char *kernel) {
  return check(call, cudaGetLastError(), kernel);
}

pfrt_status scratch(const Call &call, size_t bytes, void **out) {
  State &st = stateOf(call.context());
  if (bytes > st.scratchBytes) {
    // The stream may still use the old block: wait before freeing it.
    PFRT_TRY(check(call, cudaStreamSynchronize(st.stream), "cudaStreamSynchronize"));
    cudaFree(st.scratch);
    st.scratch = nullptr;
    st.scratchBytes = 0;
    PFRT_TRY(check(call, cudaMalloc(&st.scratch, bytes), "cudaMalloc (workspace)"));
    st.scratchBytes = bytes;
  }
  *out = st.scratch;
  return PFRT_OK;
}

namespace {

/// Releases whatever part of a State was made.
void freeState(State *st) {
  if (!st)
    return;
  if (st->solver)
    lib().cusolverDnDestroy(st->solver);
  if (st->blas)
    lib().cublasDestroy(st->blas);
  cudaFree(st->deviceInfo);
  cudaFree(st->deviceError);
  cudaFree(st->scratch);
  if (st->stream)
    cudaStreamDestroy(st->stream);
  delete st;
}

/// Says why the device cannot be used, or returns true.
bool deviceUsable(int device, char *why, size_t size) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    std::snprintf(why, size, "no usable CUDA device (cudaGetDeviceCount: %s)",
                  cudaGetErrorString(err));
    return false;
  }
  if (count == 0) {
    std::snprintf(why, size, "no CUDA device found");
    return false;
  }
  if (device >= count) {
    std::snprintf(why, size, "device %d does not exist (%d CUDA device%s)",
                  device, count, count == 1 ? "" : "s");
    return false;
  }
  return true;
}

} // namespace

pfrt_status createState(pfrt_context *ctx, char *why, size_t size) {
  if (!deviceUsable(ctx->device, why, size))
    return PFRT_UNSUPPORTED;
  if (!loadLibraries(why, size))
    return PFRT_UNSUPPORTED;
  auto *st = new (std::nothrow) State();
  if (!st) {
    std::snprintf(why, size, "out of memory");
    return PFRT_OUT_OF_MEMORY;
  }
  st->device = ctx->device;
  const char *step = "cudaSetDevice";
  cudaError_t err = cudaSetDevice(st->device);
  if (err == cudaSuccess) {
    step = "cudaStreamCreate";
    err = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
  }
  if (err == cudaSuccess) {
    step = "cudaMalloc";
    err = cudaMalloc(reinterpret_cast<void **>(&st->deviceInfo), sizeof(int));
  }
  if (err == cudaSuccess)
    err = cudaMalloc(reinterpret_cast<void **>(&st->deviceError), sizeof(DeviceError));
  if (err == cudaSuccess) {
    step = "cudaMemset";
    err = cudaMemset(st->deviceError, 0, sizeof(DeviceError));
  }
  if (err != cudaSuccess) {
    std::snprintf(why, size, "%s on device %d: %s", step, st->device,
                  cudaGetErrorString(err));
    freeState(st);
    return PFRT_INTERNAL;
  }
  // fp32 GEMMs stay fp32 (CUBLAS_DEFAULT_MATH: no TF32) so results compare
  // with the CPU backend; TF32/bf16 are later opt-in context options.
  if (lib().cublasCreate(&st->blas) != CUBLAS_STATUS_SUCCESS ||
      lib().cublasSetStream(st->blas, st->stream) != CUBLAS_STATUS_SUCCESS ||
      lib().cublasSetPointerMode(st->blas, CUBLAS_POINTER_MODE_HOST) !=
          CUBLAS_STATUS_SUCCESS) {
    std::snprintf(why, size, "cuBLAS could not be initialized on device %d",
                  st->device);
    freeState(st);
    return PFRT_INTERNAL;
  }
  if (lib().cusolverDnCreate(&st->solver) != CUSOLVER_STATUS_SUCCESS ||
      lib().cusolverDnSetStream(st->solver, st->stream) != CUSOLVER_STATUS_SUCCESS) {
    std::snprintf(why, size, "cuSOLVER could not be initialized on device %d",
                  st->device);
    freeState(st);
    return PFRT_INTERNAL;
  }
  cudaDeviceProp props;
  if (cudaGetDeviceProperties(&props, st->device) == cudaSuccess)
    std::snprintf(st->description, sizeof(st->description),
                  "cuda:%d (%s, sm_%d%d)", st->device, props.name, props.major,
                  props.minor);
  ctx->cuda = st;
  return PFRT_OK;
}

void destroyState(pfrt_context *ctx) {
  if (!ctx->cuda)
    return;
  cudaSetDevice(ctx->cuda->device);
  cudaStreamSynchronize(ctx->cuda->stream);
  freeState(ctx->cuda);
  ctx->cuda = nullptr;
}

const KernelTable &kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    registerElementwise(t);
    registerRows(t);
    registerDataMovement(t);
    registerIndexing(t);
    registerLinalg(t);
    registerMatmulBackward(t);
    registerOptimizer(t);
    registerCommunication(t);
    return t;
  }();
  return table;
}

pfrt_status allocate(pfrt_context *ctx, int64_t bytes, void **out,
                     const char *function) {
  Call call(ctx, function);
  PFRT_TRY(check(call, cudaSetDevice(ctx->cuda->device), "cudaSetDevice"));
  cudaError_t err = cudaMalloc(out, static_cast<size_t>(bytes));
  if (err != cudaSuccess) {
    *out = nullptr;
    cudaGetLastError();
    return call.fail(PFRT_OUT_OF_MEMORY, "cudaMalloc of %lld bytes: %s",
                     static_cast<long long>(bytes), cudaGetErrorString(err));
  }
  return PFRT_OK;
}

void release(pfrt_context *ctx, void *ptr) {
  if (!ptr || !ctx->cuda)
    return;
  // Kernels queued on the stream may still read the block.
  cudaStreamSynchronize(ctx->cuda->stream);
  cudaFree(ptr);
}

pfrt_status copyToDevice(pfrt_context *ctx, void *device, const void *host,
                         int64_t bytes) {
  Call call(ctx, "pfrt_copy_from_host");
  // Synchronous with respect to the host buffer: the caller may reuse it on
  // return (pageable memory makes cudaMemcpyAsync stage it anyway).
  PFRT_TRY(check(call,
                 cudaMemcpyAsync(device, host, static_cast<size_t>(bytes),
                                 cudaMemcpyHostToDevice, streamOf(ctx)),
                 "cudaMemcpyAsync (host to device)"));
  return check(call, cudaStreamSynchronize(streamOf(ctx)),
               "cudaStreamSynchronize");
}

namespace {

/// Queues the copy of the context's DeviceError into `host` (before the
/// wait that makes it readable).
pfrt_status queueErrorRead(const Call &call, DeviceError &host) {
  State &st = stateOf(call.context());
  return check(call,
               cudaMemcpyAsync(&host, st.deviceError, sizeof(DeviceError),
                               cudaMemcpyDeviceToHost, st.stream),
               "cudaMemcpyAsync (device error record)");
}

/// After the wait that made `host` (the context's DeviceError) readable:
/// when an error is recorded, clears it on the device and fails with it.
pfrt_status takeDeviceError(pfrt_context *ctx, const DeviceError &host) {
  if (host.status == PFRT_OK)
    return PFRT_OK;
  // Cleared in stream order: later kernels record afresh.
  Call call(ctx, "pfrt_synchronize");
  PFRT_TRY(check(call, cudaMemsetAsync(ctx->cuda->deviceError, 0, sizeof(DeviceError),
                                       streamOf(ctx)),
                 "cudaMemsetAsync (device error record)"));
  return reportDeviceError(ctx, host);
}

} // namespace

pfrt_status copyToHost(pfrt_context *ctx, void *host, const void *device,
                       int64_t bytes) {
  Call call(ctx, "pfrt_copy_to_host");
  PFRT_TRY(check(call,
                 cudaMemcpyAsync(host, device, static_cast<size_t>(bytes),
                                 cudaMemcpyDeviceToHost, streamOf(ctx)),
                 "cudaMemcpyAsync (device to host)"));
  DeviceError recorded{};
  PFRT_TRY(queueErrorRead(call, recorded));
  PFRT_TRY(check(call, cudaStreamSynchronize(streamOf(ctx)),
                 "cudaStreamSynchronize"));
  return takeDeviceError(ctx, recorded);
}

pfrt_status synchronize(pfrt_context *ctx) {
  Call call(ctx, "pfrt_synchronize");
  DeviceError recorded{};
  PFRT_TRY(queueErrorRead(call, recorded));
  PFRT_TRY(check(call, cudaStreamSynchronize(streamOf(ctx)),
                 "cudaStreamSynchronize"));
  return takeDeviceError(ctx, recorded);
}

const char *deviceDescription(const pfrt_context *ctx) {
  return ctx && ctx->cuda ? ctx->cuda->description : "cuda";
}

} // namespace pfrt::cuda
