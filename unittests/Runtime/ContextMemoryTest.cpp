//===- ContextMemoryTest.cpp - Library info, contexts, allocation, arenas --===//

#include "RuntimeTestUtil.h"

#include <set>

using namespace pfrt_test;

extern "C" int pfrt_test_from_c(void);

namespace {

TEST(RuntimeLibrary, VersionMatchesHeader) {
  EXPECT_EQ(pfrt_version(), PFRT_ABI_VERSION);
}

TEST(RuntimeLibrary, HeaderIsPlainC) { EXPECT_EQ(pfrt_test_from_c(), 0); }

TEST(RuntimeLibrary, StatusStrings) {
  EXPECT_STREQ(pfrt_status_string(PFRT_OK), "OK");
  EXPECT_STREQ(pfrt_status_string(PFRT_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(pfrt_status_string(PFRT_OUT_OF_MEMORY), "OUT_OF_MEMORY");
  EXPECT_STREQ(pfrt_status_string(PFRT_NUMERIC), "NUMERIC");
  EXPECT_STREQ(pfrt_status_string(PFRT_UNSUPPORTED), "UNSUPPORTED");
  EXPECT_STREQ(pfrt_status_string(PFRT_INTERNAL), "INTERNAL");
  EXPECT_STREQ(pfrt_status_string(77), "UNKNOWN");
}

TEST(RuntimeLibrary, Dtypes) {
  EXPECT_EQ(pfrt_dtype_size(PFRT_F32), 4);
  EXPECT_EQ(pfrt_dtype_size(PFRT_F64), 8);
  EXPECT_EQ(pfrt_dtype_size(PFRT_F16), 2);
  EXPECT_EQ(pfrt_dtype_size(PFRT_I64), 8);
  EXPECT_EQ(pfrt_dtype_size(PFRT_I32), 4);
  EXPECT_EQ(pfrt_dtype_size(PFRT_I8), 1);
  EXPECT_EQ(pfrt_dtype_size(PFRT_BOOL), 1);
  EXPECT_EQ(pfrt_dtype_size(0), 0);
  EXPECT_STREQ(pfrt_dtype_name(PFRT_BOOL), "bool");
  EXPECT_STREQ(pfrt_dtype_name(PFRT_F16), "f16");
  EXPECT_STREQ(pfrt_dtype_name(99), "unknown");
}

TEST(RuntimeContext, DefaultsAndThreads) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  ASSERT_NE(ctx, nullptr);
  EXPECT_STREQ(pfrt_backend_name(ctx), "cpu");
  EXPECT_GE(pfrt_context_num_threads(ctx), 1);
  EXPECT_STREQ(pfrt_last_error(ctx), "");
  pfrt_context_destroy(ctx);

  pfrt_context_options opts;
  pfrt_context_options_init(&opts);
  EXPECT_EQ(opts.abi_version, PFRT_ABI_VERSION);
  EXPECT_EQ(opts.backend, PFRT_BACKEND_CPU);
  opts.num_threads = 3;
  ctx = pfrt_context_create(&opts);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(pfrt_context_num_threads(ctx), 3);
  pfrt_context_destroy(ctx);
  pfrt_context_destroy(nullptr); // no-op
}

TEST(RuntimeContext, GemmPrecision) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(pfrt_context_gemm_precision(ctx), PFRT_GEMM_FP32);
  EXPECT_EQ(pfrt_context_gemm_precision(nullptr), PFRT_GEMM_FP32);
  // The CPU backend computes f32 whatever is set: the same bits.
  std::vector<float> x(6 * 5), w(4 * 5), exact(6 * 4), fast(6 * 4);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.1f * float(i % 7) - 0.3f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.05f * float(i % 5) - 0.1f;
  pfrt_tensor tx{x.data(), PFRT_F32, 2, {6, 5}}, tw{w.data(), PFRT_F32, 2, {4, 5}};
  pfrt_tensor te{exact.data(), PFRT_F32, 2, {6, 4}}, tf{fast.data(), PFRT_F32, 2, {6, 4}};
  ASSERT_EQ(pfrt_linear(ctx, &tx, &tw, nullptr, 1, &te), PFRT_OK) << pfrt_last_error(ctx);
  for (int32_t p : {PFRT_GEMM_TF32, PFRT_GEMM_BF16}) {
    ASSERT_EQ(pfrt_context_set_gemm_precision(ctx, p), PFRT_OK);
    EXPECT_EQ(pfrt_context_gemm_precision(ctx), p);
    ASSERT_EQ(pfrt_linear(ctx, &tx, &tw, nullptr, 1, &tf), PFRT_OK) << pfrt_last_error(ctx);
    EXPECT_EQ(fast, exact);
  }
  EXPECT_EQ(pfrt_context_set_gemm_precision(ctx, 7), PFRT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("precision 7 is none of"), std::string::npos)
      << pfrt_last_error(ctx);
  EXPECT_EQ(pfrt_context_gemm_precision(ctx), PFRT_GEMM_BF16); // unchanged
  EXPECT_EQ(pfrt_context_set_gemm_precision(nullptr, PFRT_GEMM_TF32), PFRT_INVALID_ARGUMENT);
  pfrt_context_destroy(ctx);
}

TEST(RuntimeContext, InvalidOptionsGiveNull) {
  pfrt_context_options opts;
  pfrt_context_options_init(&opts);
  opts.abi_version = PFRT_ABI_VERSION + 1;
  EXPECT_EQ(pfrt_context_create(&opts), nullptr);
  pfrt_context_options_init(&opts);
  opts.num_threads = -1;
  EXPECT_EQ(pfrt_context_create(&opts), nullptr);
  pfrt_context_options_init(&opts);
  opts.backend = PFRT_BACKEND_CUDA; // not built into the CPU library
  EXPECT_EQ(pfrt_context_create(&opts), nullptr);
  opts.backend = 42;
  EXPECT_EQ(pfrt_context_create(&opts), nullptr);
}

TEST(RuntimeContext, NullContext) {
  EXPECT_STREQ(pfrt_backend_name(nullptr), "none");
  EXPECT_EQ(pfrt_context_num_threads(nullptr), 0);
  EXPECT_NE(std::string(pfrt_last_error(nullptr)), "");
  float x = 1;
  pfrt_tensor t = {&x, PFRT_F32, 0, {}};
  EXPECT_EQ(pfrt_add(nullptr, &t, &t, &t), PFRT_INVALID_ARGUMENT);
  void *p = nullptr;
  EXPECT_EQ(pfrt_alloc(nullptr, 16, &p), PFRT_INVALID_ARGUMENT);
}

using RuntimeMemory = RuntimeTest;

TEST_F(RuntimeMemory, AllocIsAlignedAndUnique) {
  std::set<void *> seen;
  for (int64_t bytes : {0, 1, 63, 64, 65, 1000, 1 << 20}) {
    void *p = nullptr;
    ok(pfrt_alloc(ctx, bytes, &p));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % PFRT_DEFAULT_ALIGNMENT, 0u);
    EXPECT_TRUE(seen.insert(p).second);
    std::memset(p, 0xab, static_cast<size_t>(bytes)); // writable
  }
  for (void *p : seen)
    ok(pfrt_free(ctx, p));
  ok(pfrt_free(ctx, nullptr));
}

TEST_F(RuntimeMemory, AllocErrors) {
  void *p = reinterpret_cast<void *>(1);
  fails(pfrt_alloc(ctx, -1, &p), PFRT_INVALID_ARGUMENT, "pfrt_alloc");
  EXPECT_EQ(p, nullptr);
  fails(pfrt_alloc(ctx, 8, nullptr), PFRT_INVALID_ARGUMENT, "pfrt_alloc");
  fails(pfrt_alloc(ctx, INT64_MAX - 8, &p), PFRT_OUT_OF_MEMORY, "pfrt_alloc");
}

TEST_F(RuntimeMemory, ArenaAlignmentAndStats) {
  pfrt_arena *arena = nullptr;
  ok(pfrt_arena_create(ctx, 4096, &arena));
  void *base = nullptr;
  ok(pfrt_arena_base(arena, &base));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % PFRT_ARENA_BASE_ALIGNMENT, 0u);

  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  ok(pfrt_arena_alloc(arena, 10, 0, &a)); // default 64
  ok(pfrt_arena_alloc(arena, 3, 1, &b));
  ok(pfrt_arena_alloc(arena, 100, 256, &c));
  ok(pfrt_arena_alloc(arena, 0, 8, &d));
  EXPECT_EQ(a, base);
  EXPECT_EQ(static_cast<char *>(b), static_cast<char *>(base) + 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 256, 0u);
  EXPECT_EQ(static_cast<char *>(c), static_cast<char *>(base) + 256);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 8, 0u);

  pfrt_arena_stats stats;
  ok(pfrt_arena_get_stats(arena, &stats));
  EXPECT_EQ(stats.capacity, 4096);
  EXPECT_EQ(stats.used, 360);
  EXPECT_EQ(stats.peak, 360);

  ok(pfrt_arena_reset(arena));
  void *again = nullptr;
  ok(pfrt_arena_alloc(arena, 8, 0, &again));
  EXPECT_EQ(again, base);
  ok(pfrt_arena_get_stats(arena, &stats));
  EXPECT_EQ(stats.used, 8);
  EXPECT_EQ(stats.peak, 360);
  pfrt_arena_destroy(arena);
  pfrt_arena_destroy(nullptr); // no-op
}

TEST_F(RuntimeMemory, ArenaExhaustion) {
  pfrt_arena *arena = nullptr;
  ok(pfrt_arena_create(ctx, 1000, &arena));
  void *p = nullptr;
  ok(pfrt_arena_alloc(arena, 900, 0, &p));
  void *q = reinterpret_cast<void *>(1);
  fails(pfrt_arena_alloc(arena, 200, 0, &q), PFRT_OUT_OF_MEMORY,
        "pfrt_arena_alloc");
  EXPECT_EQ(q, nullptr);
  EXPECT_NE(std::string(pfrt_last_error(ctx)).find("exhausted"),
            std::string::npos);
  // The failure left the arena as it was: the rest still fits.
  ok(pfrt_arena_alloc(arena, 100 - 4, 4, &q));
  // Padding counts: 4 bytes left, but an aligned offset is past the end.
  fails(pfrt_arena_alloc(arena, 1, 64, &q), PFRT_OUT_OF_MEMORY,
        "pfrt_arena_alloc");
  ok(pfrt_arena_alloc(arena, 4, 1, &q));
  fails(pfrt_arena_alloc(arena, 1, 1, &q), PFRT_OUT_OF_MEMORY,
        "pfrt_arena_alloc");
  pfrt_arena_destroy(arena);
}

TEST_F(RuntimeMemory, ArenaErrors) {
  pfrt_arena *arena = nullptr;
  fails(pfrt_arena_create(ctx, -5, &arena), PFRT_INVALID_ARGUMENT,
        "pfrt_arena_create");
  fails(pfrt_arena_create(ctx, 5, nullptr), PFRT_INVALID_ARGUMENT,
        "pfrt_arena_create");
  ok(pfrt_arena_create(ctx, 0, &arena));
  void *p = nullptr;
  ok(pfrt_arena_alloc(arena, 0, 0, &p)); // an empty arena still hands out 0
  fails(pfrt_arena_alloc(arena, 1, 0, &p), PFRT_OUT_OF_MEMORY,
        "pfrt_arena_alloc");
  fails(pfrt_arena_alloc(arena, 0, 3, &p), PFRT_INVALID_ARGUMENT,
        "pfrt_arena_alloc");
  fails(pfrt_arena_alloc(arena, 0, 8192, &p), PFRT_INVALID_ARGUMENT,
        "pfrt_arena_alloc");
  fails(pfrt_arena_alloc(arena, -1, 0, &p), PFRT_INVALID_ARGUMENT,
        "pfrt_arena_alloc");
  pfrt_arena_destroy(arena);
  EXPECT_EQ(pfrt_arena_alloc(nullptr, 1, 0, &p), PFRT_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_arena_reset(nullptr), PFRT_INVALID_ARGUMENT);
  EXPECT_EQ(pfrt_arena_base(nullptr, &p), PFRT_INVALID_ARGUMENT);
  pfrt_arena_stats stats;
  EXPECT_EQ(pfrt_arena_get_stats(nullptr, &stats), PFRT_INVALID_ARGUMENT);
}

} // namespace
