//===- Memory.cpp - Aligned allocation and the arena -----------------------===//

#include "../common/Call.h"
#include "../common/Context.h"

#include <cstdint>
#include <cstdlib>
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
  void *p = alignedBlock(bytes, PFRT_DEFAULT_ALIGNMENT);
  if (!p)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                     static_cast<long long>(bytes));
  *out = p;
  return PFRT_OK;
}

pfrt_status pfrt_free(pfrt_context *ctx, void *ptr) {
  Call call(ctx, "pfrt_free");
  PFRT_TRY(call.begin());
  std::free(ptr);
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
  void *block = arena ? alignedBlock(bytes, PFRT_ARENA_BASE_ALIGNMENT) : nullptr;
  if (!block) {
    delete arena;
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate an arena of %lld "
                     "bytes", static_cast<long long>(bytes));
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
  std::free(arena->base);
  delete arena;
}

} // extern "C"
