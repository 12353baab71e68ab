//===- Context.cpp - Version, status strings, contexts ---------------------===//

#include "../common/Context.h"
#include "../common/Backend.h"
#include "../common/Call.h"
#include "../common/Dtype.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <new>
#include <omp.h>

using namespace pfrt;

namespace {

/// Why the last pfrt_context_create of this thread returned NULL: no
/// context exists to hold the message, and a global would mix threads.
thread_local char createError[1024] = {0};

__attribute__((format(printf, 1, 2))) pfrt_context *
createFailed(const char *format, ...) {
  int n = std::snprintf(createError, sizeof(createError),
                        "pfrt_context_create: ");
  va_list args;
  va_start(args, format);
  std::vsnprintf(createError + n, sizeof(createError) - n, format, args);
  va_end(args);
  return nullptr;
}

} // namespace

extern "C" {

int32_t pfrt_version(void) { return PFRT_ABI_VERSION; }

const char *pfrt_status_string(pfrt_status status) {
  switch (status) {
  case PFRT_OK:
    return "OK";
  case PFRT_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case PFRT_OUT_OF_MEMORY:
    return "OUT_OF_MEMORY";
  case PFRT_NUMERIC:
    return "NUMERIC";
  case PFRT_UNSUPPORTED:
    return "UNSUPPORTED";
  case PFRT_INTERNAL:
    return "INTERNAL";
  default:
    return "UNKNOWN";
  }
}

int64_t pfrt_dtype_size(int32_t dtype) { return dtypeSize(dtype); }

const char *pfrt_dtype_name(int32_t dtype) { return dtypeName(dtype); }

void pfrt_context_options_init(pfrt_context_options *options) {
  if (!options)
    return;
  options->abi_version = PFRT_ABI_VERSION;
  options->backend = PFRT_BACKEND_CPU;
  options->num_threads = 0;
  options->device = 0;
}

pfrt_context *pfrt_context_create(const pfrt_context_options *options) {
  pfrt_context_options defaults;
  pfrt_context_options_init(&defaults);
  const pfrt_context_options &opts = options ? *options : defaults;
  createError[0] = '\0';
  if (opts.abi_version != PFRT_ABI_VERSION)
    return createFailed("the options have ABI version %d; this library has "
                        "%d", opts.abi_version, PFRT_ABI_VERSION);
  if (opts.backend != PFRT_BACKEND_CPU && opts.backend != PFRT_BACKEND_CUDA)
    return createFailed("unknown backend %d", opts.backend);
  if (opts.num_threads < 0 || opts.num_threads > PFRT_MAX_THREADS)
    return createFailed("num_threads %d is outside [0, %d]", opts.num_threads,
                        PFRT_MAX_THREADS);
  if (opts.backend == PFRT_BACKEND_CUDA && opts.device < 0)
    return createFailed("CUDA device ordinal %d is negative", opts.device);
  auto *ctx = new (std::nothrow) pfrt_context();
  if (!ctx)
    return createFailed("out of memory");
  ctx->backend = opts.backend;
  ctx->device = opts.device;
  // Resolve "default" once so that every kernel of this context sees the
  // same count, whatever omp_set_num_threads calls happen later elsewhere.
  int threads = opts.num_threads > 0 ? opts.num_threads : omp_get_max_threads();
  ctx->numThreads = std::clamp(threads, 1, PFRT_MAX_THREADS);
  if (ctx->backend == PFRT_BACKEND_CUDA) {
    char why[sizeof(createError) - 32];
    if (cuda::createState(ctx, why, sizeof(why)) != PFRT_OK) {
      delete ctx;
      return createFailed("CUDA backend: %s", why);
    }
  }
  return ctx;
}

void pfrt_context_destroy(pfrt_context *ctx) {
  if (!ctx)
    return;
  cuda::destroyState(ctx);
  delete ctx;
}

const char *pfrt_backend_name(const pfrt_context *ctx) {
  if (!ctx)
    return "none";
  return ctx->backend == PFRT_BACKEND_CUDA ? "cuda" : "cpu";
}

int32_t pfrt_backend_built(int32_t backend) {
  if (backend == PFRT_BACKEND_CPU)
    return 1;
  return backend == PFRT_BACKEND_CUDA && cuda::built() ? 1 : 0;
}

int32_t pfrt_backend_device_count(int32_t backend) {
  if (backend == PFRT_BACKEND_CPU)
    return 1;
  return backend == PFRT_BACKEND_CUDA ? cuda::deviceCount() : 0;
}

int32_t pfrt_context_num_threads(const pfrt_context *ctx) {
  return ctx ? ctx->numThreads : 0;
}

pfrt_status pfrt_context_set_gemm_precision(pfrt_context *ctx, int32_t precision) {
  Call call(ctx, "pfrt_context_set_gemm_precision");
  PFRT_TRY(call.begin());
  if (precision != PFRT_GEMM_FP32 && precision != PFRT_GEMM_TF32 && precision != PFRT_GEMM_BF16)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "precision %d is none of PFRT_GEMM_FP32 (0), _TF32 (1), _BF16 (2)",
                     static_cast<int>(precision));
  ctx->gemmPrecision = precision;
  return PFRT_OK;
}

int32_t pfrt_context_gemm_precision(const pfrt_context *ctx) {
  return ctx ? ctx->gemmPrecision : PFRT_GEMM_FP32;
}

const char *pfrt_last_error(const pfrt_context *ctx) {
  if (ctx)
    return ctx->lastError;
  if (createError[0])
    return createError;
  return "pfrt: the context is NULL (pfrt_context_create failed or was not "
         "called)";
}

} // extern "C"
