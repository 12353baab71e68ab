//===- Memory.cpp - Aligned allocation and the arena -----------------------===//

#include "../common/Call.h"
#include "../common/Context.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace pfrt;

namespace {

/// Rounds bytes up to a multiple of `alignment` (a power of two); false on
/// overflow.
bool roundUp(int64_t bytes, int64_t alignment, int64_t &out) {
  if (bytes > INT64_MAX - (alignment - 1))
    return false;
  out = (bytes + alignment - 1) & ~(alignment - 1);
  return true;
}

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// aligned_alloc needs a size that is a multiple of the alignment; zero
/// bytes still get one block so every successful call returns a unique
/// pointer.
void *alignedBlock(int64_t bytes, int64_t alignment) {
  int64_t size;
  if (!roundUp(bytes > 0 ? bytes : 1, alignment, size))
    return nullptr;
  return std::aligned_alloc(static_cast<size_t>(alignment),
                            static_cast<size_t>(size));
}


bool onCuda(const pfrt_context *ctx) {
  return ctx && ctx->backend == PFRT_BACKEND_CUDA;
}

/// cudaMalloc guarantees 256-byte alignment.
constexpr int64_t kCudaMallocAlignment = 256;

/// A block of `bytes` aligned to `alignment` in the context's memory: host
/// memory, or device memory. *allocation is what to free (on the device the
/// block is over-allocated and its start rounded up when the alignment
/// asked for exceeds cudaMalloc's).
pfrt_status backendBlock(const Call &call, pfrt_context *ctx, int64_t bytes,
                         int64_t alignment, void **out, void **allocation,
                         const char *function) {
  *out = *allocation = nullptr;
  if (!onCuda(ctx)) {
    *out = *allocation = alignedBlock(bytes, alignment);
    return *out ? PFRT_OK
                : call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                            static_cast<long long>(bytes));
  }
  const int64_t extra = alignment > kCudaMallocAlignment ? alignment : 0;
  if (bytes > INT64_MAX - extra - 1)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                     static_cast<long long>(bytes));
  PFRT_TRY(cuda::allocate(ctx, (bytes > 0 ? bytes : 1) + extra, allocation,
                          function));
  auto address = reinterpret_cast<uintptr_t>(*allocation);
  address = (address + alignment - 1) & ~static_cast<uintptr_t>(alignment - 1);
  *out = reinterpret_cast<void *>(address);
  return PFRT_OK;
}

void releaseBlock(pfrt_context *ctx, void *p) {
  if (onCuda(ctx))
    cuda::release(ctx, p);
  else
    std::free(p);
}

/// The byte size of a well-formed descriptor.
int64_t tensorBytes(const pfrt_tensor &t) {
  return Shape::of(t).numel() * pfrt_dtype_size(t.dtype);
}

} // namespace

extern "C" {

pfrt_status pfrt_alloc(pfrt_context *ctx, int64_t bytes, void **out) {
  Call call(ctx, "pfrt_alloc");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("out", out));
  *out = nullptr;
  if (bytes < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "negative size %lld",
                     static_cast<long long>(bytes));
  // PFRT_DEFAULT_ALIGNMENT divides cudaMalloc's, so out is the allocation
  // itself and pfrt_free gets back what to free.
  void *allocation;
  return backendBlock(call, ctx, bytes, PFRT_DEFAULT_ALIGNMENT, out,
                      &allocation, "pfrt_alloc");
}

pfrt_status pfrt_free(pfrt_context *ctx, void *ptr) {
  Call call(ctx, "pfrt_free");
  PFRT_TRY(call.begin());
  releaseBlock(ctx, ptr);
  return PFRT_OK;
}

pfrt_status pfrt_arena_create(pfrt_context *ctx, int64_t bytes,
                              pfrt_arena **out) {
  Call call(ctx, "pfrt_arena_create");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("out", out));
  *out = nullptr;
  if (bytes < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "negative size %lld",
                     static_cast<long long>(bytes));
  auto *arena = new (std::nothrow) pfrt_arena();
  if (!arena)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate an arena");
  void *block = nullptr;
  if (pfrt_status s = backendBlock(call, ctx, bytes, PFRT_ARENA_BASE_ALIGNMENT,
                                   &block, &arena->allocation,
                                   "pfrt_arena_create")) {
    delete arena;
    return s;
  }
  arena->ctx = ctx;
  arena->base = static_cast<char *>(block);
  arena->capacity = bytes;
  *out = arena;
  return PFRT_OK;
}

pfrt_status pfrt_arena_alloc(pfrt_arena *arena, int64_t bytes,
                             int64_t alignment, void **out) {
  if (!arena)
    return PFRT_INVALID_ARGUMENT;
  Call call(arena->ctx, "pfrt_arena_alloc");
  PFRT_TRY(call.pointer("out", out));
  *out = nullptr;
  if (alignment == 0)
    alignment = PFRT_DEFAULT_ALIGNMENT;
  if (!isPowerOfTwo(alignment) || alignment > PFRT_ARENA_BASE_ALIGNMENT)
    return call.fail(PFRT_INVALID_ARGUMENT, "alignment %lld is not a power of "
                     "two up to %d", static_cast<long long>(alignment),
                     PFRT_ARENA_BASE_ALIGNMENT);
  if (bytes < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "negative size %lld",
                     static_cast<long long>(bytes));
  // The base is aligned to the largest accepted alignment, so aligning the
  // offset aligns the pointer.
  int64_t offset;
  if (!roundUp(arena->used, alignment, offset) ||
      offset > arena->capacity || bytes > arena->capacity - offset)
    return call.fail(PFRT_OUT_OF_MEMORY, "arena exhausted: %lld bytes "
                     "(alignment %lld) requested, %lld of %lld bytes used",
                     static_cast<long long>(bytes),
                     static_cast<long long>(alignment),
                     static_cast<long long>(arena->used),
                     static_cast<long long>(arena->capacity));
  arena->used = offset + bytes;
  if (arena->used > arena->peak)
    arena->peak = arena->used;
  *out = arena->base + offset;
  return PFRT_OK;
}

pfrt_status pfrt_arena_reset(pfrt_arena *arena) {
  if (!arena)
    return PFRT_INVALID_ARGUMENT;
  arena->used = 0;
  return PFRT_OK;
}

pfrt_status pfrt_arena_base(pfrt_arena *arena, void **out) {
  if (!arena)
    return PFRT_INVALID_ARGUMENT;
  Call call(arena->ctx, "pfrt_arena_base");
  PFRT_TRY(call.pointer("out", out));
  *out = arena->base;
  return PFRT_OK;
}

pfrt_status pfrt_arena_get_stats(const pfrt_arena *arena,
                                 pfrt_arena_stats *out) {
  if (!arena)
    return PFRT_INVALID_ARGUMENT;
  Call call(arena->ctx, "pfrt_arena_get_stats");
  PFRT_TRY(call.pointer("out", out));
  out->capacity = arena->capacity;
  out->used = arena->used;
  out->peak = arena->peak;
  return PFRT_OK;
}

void pfrt_arena_destroy(pfrt_arena *arena) {
  if (!arena)
    return;
  releaseBlock(arena->ctx, arena->allocation);
  delete arena;
}

pfrt_status pfrt_copy_from_host(pfrt_context *ctx, const void *host,
                                const pfrt_tensor *dst) {
  Call call(ctx, "pfrt_copy_from_host");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("dst", dst));
  const int64_t bytes = tensorBytes(*dst);
  if (bytes == 0)
    return PFRT_OK;
  PFRT_TRY(call.pointer("host", host));
  if (onCuda(ctx))
    return cuda::copyToDevice(ctx, dst->data, host, bytes);
  std::memcpy(dst->data, host, static_cast<size_t>(bytes));
  return PFRT_OK;
}

pfrt_status pfrt_copy_to_host(pfrt_context *ctx, const pfrt_tensor *src,
                              void *host) {
  Call call(ctx, "pfrt_copy_to_host");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("src", src));
  const int64_t bytes = tensorBytes(*src);
  if (bytes == 0)
    return PFRT_OK;
  PFRT_TRY(call.pointer("host", host));
  if (onCuda(ctx))
    return cuda::copyToHost(ctx, host, src->data, bytes);
  std::memcpy(host, src->data, static_cast<size_t>(bytes));
  return PFRT_OK;
}

pfrt_status pfrt_synchronize(pfrt_context *ctx) {
  Call call(ctx, "pfrt_synchronize");
  PFRT_TRY(call.begin());
  return onCuda(ctx) ? cuda::synchronize(ctx) : PFRT_OK;
}

} // extern "C"
