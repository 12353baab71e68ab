//===- Context.cpp - Version, status strings, contexts ---------------------===//

#include "../common/Context.h"
#include "../common/Dtype.h"

#include <algorithm>
#include <new>
#include <omp.h>

using namespace pfrt;

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
  // Only the CPU backend is built into this library so far.
  if (opts.abi_version != PFRT_ABI_VERSION || opts.backend != PFRT_BACKEND_CPU ||
      opts.num_threads < 0 || opts.num_threads > PFRT_MAX_THREADS)
    return nullptr;
  auto *ctx = new (std::nothrow) pfrt_context();
  if (!ctx)
    return nullptr;
  ctx->backend = opts.backend;
  ctx->device = opts.device;
  // Resolve "default" once so that every kernel of this context sees the
  // same count, whatever omp_set_num_threads calls happen later elsewhere.
  int threads = opts.num_threads > 0 ? opts.num_threads : omp_get_max_threads();
  ctx->numThreads = std::clamp(threads, 1, PFRT_MAX_THREADS);
  return ctx;
}

void pfrt_context_destroy(pfrt_context *ctx) { delete ctx; }

const char *pfrt_backend_name(const pfrt_context *ctx) {
  return ctx ? "cpu" : "none";
}

int32_t pfrt_context_num_threads(const pfrt_context *ctx) {
  return ctx ? ctx->numThreads : 0;
}

const char *pfrt_last_error(const pfrt_context *ctx) {
  return ctx ? ctx->lastError
             : "pfrt: the context is NULL (pfrt_context_create failed or was "
               "not called)";
}

} // extern "C"
