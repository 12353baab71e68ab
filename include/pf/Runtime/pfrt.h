/*===- pfrt.h - The pf runtime C ABI ---------------------------*- C -*-===*\
|*                                                                          *|
|* The one interface between code the pf compiler generates (and pf-run)    *|
|* and the runtime backends (CPU; CUDA, docs/cuda-backend.md). Plain C, so  *|
|* that the LLVM-dialect lowering can call it with `func.call` and so that  *|
|* a small C driver can link an AOT-compiled model.                         *|
|*                                                                          *|
|* Conventions (docs/runtime.md has the long form):                         *|
|*  - Every kernel takes a context first and returns a pfrt_status. On      *|
|*    failure the context keeps a message (pfrt_last_error). Nothing aborts.*|
|*  - Tensors are descriptors (pfrt_tensor) over caller-owned, contiguous,  *|
|*    row-major buffers. Kernels never allocate their outputs: the caller   *|
|*    passes an output descriptor whose shape and dtype the kernel checks.  *|
|*  - Unless a function says otherwise, outputs must not overlap inputs.    *|
|*    Elementwise kernels (binary, compare, logical, where, unary, not,     *|
|*    gelu) also accept out->data == an input's data when that input has    *|
|*    exactly out's shape and dtype (an in-place update); partial overlap   *|
|*    is never allowed.                                                     *|
|*  - Shapes are int64; axes may be negative (counted from the back).       *|
|*  - A context is not thread-safe: use one per host thread. Kernels are    *|
|*    internally parallel (OpenMP on the CPU) with the context's threads.   *|
|*                                                                          *|
\*===----------------------------------------------------------------------===*/

#ifndef PF_RUNTIME_PFRT_H
#define PF_RUNTIME_PFRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every incompatible change: a struct layout, an enum value, a
 * signature or a documented semantics. Adding a function does not bump it
 * (a missing symbol already fails at link or load time). */
#define PFRT_ABI_VERSION 1

/* Highest tensor rank any kernel accepts. */
#define PFRT_MAX_RANK 8

#if defined(_WIN32)
#define PFRT_API
#else
#define PFRT_API __attribute__((visibility("default")))
#endif

/*===-------------------------- Status codes ----------------------------===*/

/* int32_t rather than an enum type so the size is fixed for every caller
 * (the MLIR lowering sees an i32 result). */
typedef int32_t pfrt_status;
enum {
  PFRT_OK = 0,
  PFRT_INVALID_ARGUMENT = 1, /* null pointer, bad shape/rank/axis/index, ... */
  PFRT_OUT_OF_MEMORY = 2,    /* allocation or arena exhaustion */
  PFRT_NUMERIC = 3,          /* e.g. integer division by zero */
  PFRT_UNSUPPORTED = 4,      /* valid request this backend does not implement
                                (a dtype, a backend) */
  PFRT_INTERNAL = 5          /* a bug or a failing library underneath */
};

/*===------------------------------ Dtypes ------------------------------===*/

/* The values are ONNX's TensorProto.DataType numbers so importers and
 * pf-run map them 1:1; 0 is never valid, so a zero-initialised descriptor
 * is rejected instead of read as f32. f16 is storage only: data movement
 * kernels and cast accept it, compute kernels answer PFRT_UNSUPPORTED. */
enum {
  PFRT_F32 = 1,
  PFRT_I8 = 3,
  PFRT_I32 = 6,
  PFRT_I64 = 7,
  PFRT_BOOL = 9, /* one byte, 0 or 1 */
  PFRT_F16 = 10, /* IEEE binary16 */
  PFRT_F64 = 11
};

/* A tensor descriptor. The buffer is contiguous and row-major (the last
 * dimension varies fastest); shape[rank..PFRT_MAX_RANK) is ignored. rank 0
 * is a scalar (one element). data may be NULL only if the tensor has no
 * elements. The descriptor and the buffer belong to the caller. */
typedef struct pfrt_tensor {
  void *data;
  int32_t dtype; /* PFRT_F32, ... */
  int32_t rank;  /* 0..PFRT_MAX_RANK */
  int64_t shape[PFRT_MAX_RANK];
} pfrt_tensor;

/*===---------------------- Library and helpers -------------------------===*/

/* PFRT_ABI_VERSION of the library actually linked or loaded; callers
 * compare it with the header's PFRT_ABI_VERSION once at start-up. */
PFRT_API int32_t pfrt_version(void);

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN" for other values. Static. */
PFRT_API const char *pfrt_status_string(pfrt_status status);

/* Bytes per element (f32: 4, bool: 1, ...); 0 for an unknown dtype. */
PFRT_API int64_t pfrt_dtype_size(int32_t dtype);

/* "f32", "i64", "bool", ...; "unknown" otherwise. Static. */
PFRT_API const char *pfrt_dtype_name(int32_t dtype);

/*===----------------------------- Context ------------------------------===*/

typedef struct pfrt_context pfrt_context;

enum { PFRT_BACKEND_CPU = 0, PFRT_BACKEND_CUDA = 1 };

/* The most CPU worker threads a context takes (OpenMP aborts far above it). */
#define PFRT_MAX_THREADS 1024

typedef struct pfrt_context_options {
  int32_t abi_version; /* must be PFRT_ABI_VERSION */
  int32_t backend;     /* PFRT_BACKEND_CPU, ... */
  int32_t num_threads; /* CPU worker threads, at most PFRT_MAX_THREADS;
                          0 = OpenMP's default (OMP_NUM_THREADS or all
                          cores) */
  int32_t device;      /* device ordinal for GPU backends; ignored on CPU */
} pfrt_context_options;

/* Fills *options with the defaults: this header's ABI version, CPU, the
 * default thread count, device 0. */
PFRT_API void pfrt_context_options_init(pfrt_context_options *options);

/* Creates a context; options == NULL means the defaults. Returns NULL (no
 * context exists to hold a message) if the options are invalid (ABI version
 * mismatch, thread count negative or over PFRT_MAX_THREADS, unknown
 * backend), if the backend is not built into this library, if (CUDA) the
 * device cannot be used (no driver, no GPU, bad ordinal), or if memory is
 * short; pfrt_last_error(NULL) then says why (per thread). A CUDA context
 * owns one stream, a cuBLAS and a cuSOLVER handle on options->device.
 * Destroy with pfrt_context_destroy. */
PFRT_API pfrt_context *pfrt_context_create(const pfrt_context_options *options);

/* Destroys a context; NULL is a no-op. Arenas created from it must be
 * destroyed first. */
PFRT_API void pfrt_context_destroy(pfrt_context *ctx);

/* "cpu" or "cuda"; "none" for NULL. Static. */
PFRT_API const char *pfrt_backend_name(const pfrt_context *ctx);

/* 1 if `backend` (PFRT_BACKEND_*) is built into this library, else 0. A
 * built CUDA backend still needs a GPU at pfrt_context_create. */
PFRT_API int32_t pfrt_backend_built(int32_t backend);

/* The devices of `backend` this process can use: 1 for the CPU; for CUDA
 * the GPUs the driver reports (0 without a driver or GPU, or when the CUDA
 * backend is not built). Creates no context: drivers use it to give each
 * rank of a job its own GPU. */
PFRT_API int32_t pfrt_backend_device_count(int32_t backend);

/* The thread count kernels of this context use (>= 1); 0 for NULL. */
PFRT_API int32_t pfrt_context_num_threads(const pfrt_context *ctx);

/* Compute precision of the model's f32 GEMMs (pfrt_matmul, pfrt_gemm,
 * pfrt_linear and pfrt_linear_backward) where a backend has a faster one:
 * FP32 (the default), TF32 or BF16 multiplies with f32 inputs, outputs and
 * accumulation (CUDA: cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32 and
 * CUBLAS_COMPUTE_32F_FAST_16BF). K-FAC's factors, inverses and
 * preconditioning, f64 GEMMs and every other kernel stay exact f32/f64: K-FAC
 * libraries report broken factors in bf16. The CPU backend computes f32
 * whatever is set. */
enum { PFRT_GEMM_FP32 = 0, PFRT_GEMM_TF32 = 1, PFRT_GEMM_BF16 = 2 };
PFRT_API pfrt_status pfrt_context_set_gemm_precision(pfrt_context *ctx, int32_t precision);
/* PFRT_GEMM_*; PFRT_GEMM_FP32 for NULL. */
PFRT_API int32_t pfrt_context_gemm_precision(const pfrt_context *ctx);

/* The message of the most recent failing call on ctx ("" if none failed),
 * prefixed with the function name, e.g. "pfrt_add: ...". Owned by the
 * context and valid until the next call on it. For ctx == NULL: why this
 * thread's last pfrt_context_create returned NULL, or a fixed message
 * saying that the context is NULL. */
PFRT_API const char *pfrt_last_error(const pfrt_context *ctx);

/*===----------------------------- Memory -------------------------------===*/

/* Default alignment of pfrt_alloc and of arena allocations. */
#define PFRT_DEFAULT_ALIGNMENT 64
/* Alignment of an arena's base; the largest alignment arena_alloc accepts. */
#define PFRT_ARENA_BASE_ALIGNMENT 4096

/* Memory belongs to the context's backend: host memory on the CPU, device
 * memory on CUDA (kernels of a CUDA context take device pointers in their
 * descriptors; scalar results such as pfrt_dot's are host pointers). */

/* Allocates bytes (>= 0) of backend memory aligned to 64 bytes. Zero
 * bytes still returns a unique non-NULL pointer. Free with pfrt_free. */
PFRT_API pfrt_status pfrt_alloc(pfrt_context *ctx, int64_t bytes, void **out);

/* Frees memory from pfrt_alloc of the same context; NULL is a no-op. */
PFRT_API pfrt_status pfrt_free(pfrt_context *ctx, void *ptr);

/* A bump allocator over one block, for the compiler's buffer plan: it sizes
 * one arena for a program and places every intermediate at a planned offset
 * from pfrt_arena_base (or allocates in order with pfrt_arena_alloc), then
 * resets the arena between steps. The arena functions report errors on the
 * arena's context; a NULL arena gives PFRT_INVALID_ARGUMENT and no message. */
typedef struct pfrt_arena pfrt_arena;

typedef struct pfrt_arena_stats {
  int64_t capacity; /* bytes in the block */
  int64_t used;     /* bytes handed out since the last reset, with padding */
  int64_t peak;     /* highest `used` since creation */
} pfrt_arena_stats;

/* Creates an arena of `bytes` (>= 0) bytes whose base is aligned to
 * PFRT_ARENA_BASE_ALIGNMENT. The arena refers to ctx, which must outlive
 * it; its errors are reported on ctx. */
PFRT_API pfrt_status pfrt_arena_create(pfrt_context *ctx, int64_t bytes,
                                       pfrt_arena **out);

/* Hands out `bytes` (>= 0) bytes aligned to `alignment` (a power of two
 * <= PFRT_ARENA_BASE_ALIGNMENT; 0 means PFRT_DEFAULT_ALIGNMENT).
 * PFRT_OUT_OF_MEMORY if the rest of the arena is too small; the arena is
 * then unchanged. */
PFRT_API pfrt_status pfrt_arena_alloc(pfrt_arena *arena, int64_t bytes,
                                      int64_t alignment, void **out);

/* Makes the whole block available again; earlier pointers become invalid
 * (the memory stays mapped, so planned offsets can be reused). */
PFRT_API pfrt_status pfrt_arena_reset(pfrt_arena *arena);

/* The start of the block, for planned offsets. */
PFRT_API pfrt_status pfrt_arena_base(pfrt_arena *arena, void **out);

PFRT_API pfrt_status pfrt_arena_get_stats(const pfrt_arena *arena,
                                          pfrt_arena_stats *out);

/* Frees the block; NULL is a no-op. */
PFRT_API void pfrt_arena_destroy(pfrt_arena *arena);

/* Host <-> backend copies of a whole tensor, for drivers at step
 * boundaries (inputs, parameters, results): dst/src describe backend memory
 * (pfrt_alloc, an arena), host points to its bytes in host memory. On the
 * CPU a memcpy; on CUDA a copy on the context's stream, and
 * pfrt_copy_to_host waits for it (host holds the data on return). */
PFRT_API pfrt_status pfrt_copy_from_host(pfrt_context *ctx, const void *host,
                                         const pfrt_tensor *dst);
PFRT_API pfrt_status pfrt_copy_to_host(pfrt_context *ctx,
                                       const pfrt_tensor *src, void *host);

/* *value = the one element of x (f32, f64, i8, i32, i64 or bool; any shape
 * with one element) as a double: how a compiled program reads a run-time
 * scalar (learning rate, step, a due flag) from memory of the context's
 * backend. On CUDA it waits for the stream. */
PFRT_API pfrt_status pfrt_read_scalar(pfrt_context *ctx, const pfrt_tensor *x, double *value);

/* Waits until every kernel queued on ctx has finished (CUDA: the stream);
 * a no-op on the CPU, whose kernels return when done. Errors of
 * asynchronous kernels surface here (and in pfrt_copy_to_host), among them
 * the checks the CUDA backend does on the device instead of waiting in the
 * call: an index out of range in pfrt_gather / pfrt_gather_backward, a
 * label out of range in pfrt_softmax_cross_entropy, an integer pfrt_div by
 * zero and a non-finite norm in pfrt_clip_by_global_norm without a norm
 * output. They fail here with the CPU backend's status and
 * message (naming that kernel); the call itself returned PFRT_OK and its
 * outputs are unspecified. */
PFRT_API pfrt_status pfrt_synchronize(pfrt_context *ctx);

/*===--------------------- Elementwise (broadcasting) --------------------===*/

/* out = a (op) b with NumPy broadcasting: shapes are aligned at the back
 * and each pair of dimensions must be equal or contain a 1. out must have
 * the broadcast shape and a's dtype; a and b must have the same dtype.
 * dtypes: f32, f64, i32, i64 (add, sub, mul, div); f32, f64 (pow).
 * Integer division truncates toward zero; a zero divisor gives
 * PFRT_NUMERIC and leaves out unspecified. */
PFRT_API pfrt_status pfrt_add(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_sub(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_mul(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_div(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_pow(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
/* out = min(a, b) / max(a, b) elementwise, broadcasting, dtypes as add and i8;
 * a NaN in either operand gives NaN (as numpy.minimum/maximum). */
PFRT_API pfrt_status pfrt_min(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_max(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, const pfrt_tensor *out);

/* out (bool) = (a == b), broadcasting; a and b of one dtype among f32, f64,
 * i8, i32, i64, bool. */
PFRT_API pfrt_status pfrt_equal(pfrt_context *ctx, const pfrt_tensor *a,
                                const pfrt_tensor *b, const pfrt_tensor *out);

enum {
  PFRT_COMPARE_EQUAL = 0,
  PFRT_COMPARE_GREATER = 1,
  PFRT_COMPARE_GREATER_EQUAL = 2,
  PFRT_COMPARE_LESS = 3,
  PFRT_COMPARE_LESS_EQUAL = 4
};

/* out (bool) = (a kind b), broadcasting; kind is a PFRT_COMPARE_*. a and b
 * of one dtype among f32, f64, i8, i32, i64 (and bool for EQUAL; integers
 * compare as signed). A NaN compares false. pfrt_equal is kind EQUAL. */
PFRT_API pfrt_status pfrt_compare(pfrt_context *ctx, const pfrt_tensor *a,
                                  const pfrt_tensor *b, int32_t kind,
                                  const pfrt_tensor *out);

enum { PFRT_LOGICAL_AND = 0, PFRT_LOGICAL_OR = 1, PFRT_LOGICAL_XOR = 2 };

/* out = a kind b on bool tensors (any non-zero byte is true; out holds 0
 * or 1), broadcasting; kind is a PFRT_LOGICAL_*. */
PFRT_API pfrt_status pfrt_logical(pfrt_context *ctx, const pfrt_tensor *a,
                                  const pfrt_tensor *b, int32_t kind,
                                  const pfrt_tensor *out);

/* out = !x on a bool tensor of out's shape. */
PFRT_API pfrt_status pfrt_not(pfrt_context *ctx, const pfrt_tensor *x,
                              const pfrt_tensor *out);

/* out = cond ? x : y, broadcasting all three; cond is bool; x, y and out
 * share any one dtype (f16 included: this only moves bits). */
PFRT_API pfrt_status pfrt_where(pfrt_context *ctx, const pfrt_tensor *cond,
                                const pfrt_tensor *x, const pfrt_tensor *y,
                                const pfrt_tensor *out);

/*===----------------------------- Unary --------------------------------===*/

/* out = f(x); x and out have the same shape and dtype (f32 or f64; neg also
 * i8, i32, i64). For f32, exp, erf and tanh use vectorizable approximations
 * with a relative error below 1e-6 (docs/runtime.md); exp flushes results
 * below 3e-38 to 0. sqrt of a negative number is NaN, not an error. */
PFRT_API pfrt_status pfrt_sqrt(pfrt_context *ctx, const pfrt_tensor *x,
                               const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_erf(pfrt_context *ctx, const pfrt_tensor *x,
                              const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_tanh(pfrt_context *ctx, const pfrt_tensor *x,
                               const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_exp(pfrt_context *ctx, const pfrt_tensor *x,
                              const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_neg(pfrt_context *ctx, const pfrt_tensor *x,
                              const pfrt_tensor *out);
/* abs, sign (-1, 0 or 1; NaN stays NaN) and 1/x, f32 and f64. */
PFRT_API pfrt_status pfrt_abs(pfrt_context *ctx, const pfrt_tensor *x,
                              const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_sign(pfrt_context *ctx, const pfrt_tensor *x,
                               const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_reciprocal(pfrt_context *ctx, const pfrt_tensor *x,
                                     const pfrt_tensor *out);

/* out (bool) = isnan(x) / isinf(x) (f32, f64); pfrt_is_inf reports -inf
 * only when detect_negative != 0 and +inf only when detect_positive != 0. */
PFRT_API pfrt_status pfrt_is_nan(pfrt_context *ctx, const pfrt_tensor *x,
                                 const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_is_inf(pfrt_context *ctx, const pfrt_tensor *x,
                                 int32_t detect_negative,
                                 int32_t detect_positive,
                                 const pfrt_tensor *out);

enum {
  PFRT_GELU_EXACT = 0, /* 0.5 x (1 + erf(x / sqrt 2)) */
  PFRT_GELU_TANH = 1   /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
};

/* out = gelu(x) (f32, f64); approximation is PFRT_GELU_EXACT or _TANH. */
PFRT_API pfrt_status pfrt_gelu(pfrt_context *ctx, const pfrt_tensor *x,
                               int32_t approximation, const pfrt_tensor *out);

/*===--------------------------- Linear algebra -------------------------===*/

/* NumPy matmul (f32, f64): a [..., M, K] times b [..., K, N] gives
 * out [..., M, N]; the batch dimensions broadcast. A rank-1 a is [K]
 * (treated as [1, K], the M dimension dropped from out); a rank-1 b is [K]
 * (treated as [K, 1], the N dimension dropped). */
PFRT_API pfrt_status pfrt_matmul(pfrt_context *ctx, const pfrt_tensor *a,
                                 const pfrt_tensor *b, const pfrt_tensor *out);

/* ONNX Gemm (f32, f64): out [M, N] = alpha * op(a) * op(b) + beta * c,
 * op(a) = a^T if trans_a (a is then [K, M]), likewise b. c may be NULL;
 * otherwise it is broadcast (unidirectionally) to [M, N]. out may alias c
 * when c has shape [M, N]. */
PFRT_API pfrt_status pfrt_gemm(pfrt_context *ctx, const pfrt_tensor *a,
                               const pfrt_tensor *b, const pfrt_tensor *c,
                               double alpha, double beta, int32_t trans_a,
                               int32_t trans_b, const pfrt_tensor *out);

/* A fully connected layer (f32, f64): out [..., out_f] = x [..., in_f] . W
 * + bias, over the last dimension of x, computed as one GEMM over all rows
 * of x. w is [in_f, out_f], or [out_f, in_f] if w_transposed (PyTorch's
 * nn.Linear layout). bias is [out_f] or NULL. */
PFRT_API pfrt_status pfrt_linear(pfrt_context *ctx, const pfrt_tensor *x,
                                 const pfrt_tensor *w, const pfrt_tensor *bias,
                                 int32_t w_transposed, const pfrt_tensor *out);

/* out = gelu(x . W + bias) (f32, f64): pfrt_linear's arguments and
 * pfrt_gelu's approximation (PFRT_GELU_EXACT or _TANH); the bias and the GELU
 * in one pass over the product's rows. */
PFRT_API pfrt_status pfrt_linear_gelu(pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *w,
                                      const pfrt_tensor *bias, int32_t w_transposed,
                                      int32_t approximation, const pfrt_tensor *out);

/* A batched matmul read through permutations (f32, f64), attention's head
 * split and merge without copies: with A = transpose(a, a_perm) and B =
 * transpose(b, b_perm) (NULL: the identity; each of rank a->rank), C = A . B
 * over the leading (batch) dimensions, which must be equal, and out =
 * transpose(C, out_perm): out.shape[i] = C.shape[out_perm[i]]. a, b and out
 * have the same rank (>= 2). Each matrix of A and B needs one dimension of
 * unit stride in its tensor and out's matrices unit-stride columns
 * (PFRT_UNSUPPORTED otherwise): BERT's [B,S,H,D] read as [B,H,S,D] (perm
 * 0,2,1,3) or as [B,H,D,S] (0,2,3,1) qualify. */
PFRT_API pfrt_status pfrt_matmul_permuted(pfrt_context *ctx, const pfrt_tensor *a,
                                          const int64_t *a_perm, const pfrt_tensor *b,
                                          const int64_t *b_perm, const int64_t *out_perm,
                                          const pfrt_tensor *out);

/*===--------------------- Normalization and reductions -----------------===*/

/* ONNX LayerNormalization (f32, f64): normalizes x over the dimensions
 * [axis, rank) (mean and biased variance over each of those blocks):
 * out = (x - mean) / sqrt(var + epsilon) * scale + bias. scale and bias
 * (bias may be NULL) have shape x.shape[axis:]. mean and inv_std_dev may be
 * NULL; otherwise they receive the per-block mean and 1/sqrt(var + eps), in
 * x's dtype, with shape x.shape[:axis] followed by ones (ONNX) or just
 * x.shape[:axis]. Statistics accumulate in double. */
PFRT_API pfrt_status pfrt_layer_norm(pfrt_context *ctx, const pfrt_tensor *x,
                                     const pfrt_tensor *scale,
                                     const pfrt_tensor *bias, int64_t axis,
                                     double epsilon, const pfrt_tensor *out,
                                     const pfrt_tensor *mean,
                                     const pfrt_tensor *inv_std_dev);

/* Softmax along one axis (ONNX opset >= 13 semantics; f32, f64),
 * numerically stable (the maximum is subtracted first). A slice that is all
 * -inf gives NaN, as in ONNX Runtime. out has x's shape. */
PFRT_API pfrt_status pfrt_softmax(pfrt_context *ctx, const pfrt_tensor *x,
                                  int64_t axis, const pfrt_tensor *out);

/* Attention's softmax in one pass over the scores (f32, f64): out =
 * softmax(scale * x + mask) along the last axis of x. mask (NULL: none) has
 * x's dtype and broadcasts to x's shape (NumPy, right-aligned): BERT's
 * additive [batch, 1, 1, seq] mask against [batch, heads, seq, seq] scores.
 * The row is built as the unfused mul (or div by 1/scale) and add would
 * build it and then normalized as pfrt_softmax does. scale must be finite.
 * out has x's shape and must not overlap x or mask. */
PFRT_API pfrt_status pfrt_softmax_scaled_masked(pfrt_context *ctx, const pfrt_tensor *x,
                                                const pfrt_tensor *mask, double scale,
                                                const pfrt_tensor *out);

/* LayerNorm of a residual sum in one pass (f32, f64): out = layer_norm(x +
 * residual) with pfrt_layer_norm's arguments and arithmetic (the sum is
 * rounded to x's dtype first, as the unfused add does); residual has x's
 * shape. No statistics outputs. out may be x or residual. */
PFRT_API pfrt_status pfrt_add_layer_norm(pfrt_context *ctx, const pfrt_tensor *x,
                                         const pfrt_tensor *residual, const pfrt_tensor *scale,
                                         const pfrt_tensor *bias, int64_t axis, double epsilon,
                                         const pfrt_tensor *out);

/* Sum / mean over the given axes (f32, f64, i32, i64; the mean of integers
 * truncates). num_axes == 0 reduces over all axes (axes may then be NULL);
 * repeated axes are an error. keepdims != 0 keeps reduced axes as 1s in
 * out's shape. Floating sums accumulate in double. */
PFRT_API pfrt_status pfrt_reduce_sum(pfrt_context *ctx, const pfrt_tensor *x,
                                     const int64_t *axes, int32_t num_axes,
                                     int32_t keepdims, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_reduce_mean(pfrt_context *ctx, const pfrt_tensor *x,
                                      const int64_t *axes, int32_t num_axes,
                                      int32_t keepdims,
                                      const pfrt_tensor *out);

/* Max / min over the given axes, arguments as pfrt_reduce_sum (f32, f64,
 * i8, i32, i64, bool). A NaN in a reduced set gives NaN; the max of an empty
 * set is -inf (the lowest integer, false), the min +inf (the highest). */
PFRT_API pfrt_status pfrt_reduce_max(pfrt_context *ctx, const pfrt_tensor *x,
                                     const int64_t *axes, int32_t num_axes,
                                     int32_t keepdims, const pfrt_tensor *out);
PFRT_API pfrt_status pfrt_reduce_min(pfrt_context *ctx, const pfrt_tensor *x,
                                     const int64_t *axes, int32_t num_axes,
                                     int32_t keepdims, const pfrt_tensor *out);

/* Cumulative sum of x along axis into out (same shape and dtype: f32, f64,
 * i32, i64); exclusive != 0 leaves each element out of its own sum, reverse
 * != 0 sums from the end. Floating sums accumulate in double. */
PFRT_API pfrt_status pfrt_cumsum(pfrt_context *ctx, const pfrt_tensor *x,
                                 int64_t axis, int32_t exclusive,
                                 int32_t reverse, const pfrt_tensor *out);

/*===--------------------------- Data movement --------------------------===*/
/* All of these work for every dtype (they move bytes). */

/* out.shape[i] = x.shape[perm[i]]; perm has num_perm == x.rank entries, a
 * permutation of 0..rank-1 (negative entries allowed). perm == NULL with
 * num_perm == 0 reverses the axes (ONNX default). */
PFRT_API pfrt_status pfrt_transpose(pfrt_context *ctx, const pfrt_tensor *x,
                                    const int64_t *perm, int32_t num_perm,
                                    const pfrt_tensor *out);

/* ONNX Gather: out = data indexed along axis by indices (i32 or i64, any
 * rank); out.shape = data.shape[:axis] + indices.shape +
 * data.shape[axis+1:]. Negative indices count from the back; an index out
 * of [-n, n) is PFRT_INVALID_ARGUMENT, checked before anything is written. */
PFRT_API pfrt_status pfrt_gather(pfrt_context *ctx, const pfrt_tensor *data,
                                 const pfrt_tensor *indices, int64_t axis,
                                 const pfrt_tensor *out);

/* ONNX GatherND: with b = batch_dims and m = indices.shape[-1] (i32 or
 * i64, 1 <= m <= data.rank - b), out.shape = indices.shape[:-1] +
 * data.shape[b+m:]; the first b dimensions of data and indices agree. Each
 * index tuple selects a slice of its batch's data; negative entries count
 * from the back, and one out of range is PFRT_INVALID_ARGUMENT, checked
 * before anything is written. */
PFRT_API pfrt_status pfrt_gather_nd(pfrt_context *ctx, const pfrt_tensor *data,
                                    const pfrt_tensor *indices,
                                    int64_t batch_dims,
                                    const pfrt_tensor *out);

enum {
  PFRT_SCATTER_NONE = 0, /* out[idx] = update */
  PFRT_SCATTER_ADD = 1,  /* out[idx] += update */
  PFRT_SCATTER_MUL = 2,  /* out[idx] *= update */
  PFRT_SCATTER_MAX = 3,  /* out[idx] = max(out[idx], update) */
  PFRT_SCATTER_MIN = 4   /* out[idx] = min(out[idx], update) */
};

/* ONNX ScatterND: out = data (out may be data itself), then, in index order,
 * each slice out[indices[t]] is combined with updates[t] by reduction (a
 * PFRT_SCATTER_*). m = indices.shape[-1] <= data.rank; updates.shape =
 * indices.shape[:-1] + data.shape[m:]. NONE moves bytes (any dtype); the
 * others take f32, f64, i32, i64. Indices as pfrt_gather_nd. */
PFRT_API pfrt_status pfrt_scatter_nd(pfrt_context *ctx, const pfrt_tensor *data,
                                     const pfrt_tensor *indices,
                                     const pfrt_tensor *updates,
                                     int32_t reduction,
                                     const pfrt_tensor *out);

/* ONNX Trilu on the last two dimensions (rank >= 2): keeps element (i, j)
 * where j - i >= k (upper != 0) or j - i <= k (upper == 0), zeroes the rest;
 * any dtype. */
PFRT_API pfrt_status pfrt_trilu(pfrt_context *ctx, const pfrt_tensor *x,
                                int64_t k, int32_t upper,
                                const pfrt_tensor *out);

/* ONNX Slice with ONNX's normalization done here, so callers pass the
 * attribute/input values as they are: for each of the n entries, axes[i]
 * (NULL: i) selects a dimension of size d; negative starts/ends get d added;
 * then, for step > 0, start and end are clamped to [0, d], and for step < 0
 * start to [0, d-1] and end to [-1, d-1] (the spec's and ONNX Runtime's
 * rules), so INT64_MAX / INT64_MIN mean "to the end". steps NULL means all
 * 1; a 0 step or a repeated axis is PFRT_INVALID_ARGUMENT. Dimensions not
 * named are taken whole. out must have the resulting shape. */
PFRT_API pfrt_status pfrt_slice(pfrt_context *ctx, const pfrt_tensor *x,
                                const int64_t *starts, const int64_t *ends,
                                const int64_t *axes, const int64_t *steps,
                                int32_t n, const pfrt_tensor *out);

/* Concatenates inputs[0..n) (an array of n descriptors, n >= 1) along axis;
 * all have out's dtype, rank and shape except along axis. */
PFRT_API pfrt_status pfrt_concat(pfrt_context *ctx, const pfrt_tensor *inputs,
                                 int32_t n, int64_t axis,
                                 const pfrt_tensor *out);

/* Broadcast copy: x is broadcast (NumPy rules) to out's shape, which must
 * be the broadcast of x's shape and itself (ONNX Expand with the target
 * shape already resolved by the caller). */
PFRT_API pfrt_status pfrt_expand(pfrt_context *ctx, const pfrt_tensor *x,
                                 const pfrt_tensor *out);

/* Converts x to out's dtype (same shape). Float to integer truncates toward
 * zero and saturates (NaN becomes 0); anything to bool is (x != 0);
 * f16 rounds to nearest even. */
PFRT_API pfrt_status pfrt_cast(pfrt_context *ctx, const pfrt_tensor *x,
                               const pfrt_tensor *out);

/* Copies the bytes of x into out: same dtype and element count, any shapes
 * (so it is also Reshape/Flatten/Squeeze materialized). out may equal x. */
PFRT_API pfrt_status pfrt_copy(pfrt_context *ctx, const pfrt_tensor *x,
                               const pfrt_tensor *out);
/* The same as pfrt_copy; a separate name so generated code reads as the
 * graph does. */
PFRT_API pfrt_status pfrt_reshape(pfrt_context *ctx, const pfrt_tensor *x,
                                  const pfrt_tensor *out);

/* Sets every element of out to value converted as by pfrt_cast (exact for
 * integers up to 2^53; for larger i64 constants expand a scalar tensor). */
PFRT_API pfrt_status pfrt_fill(pfrt_context *ctx, const pfrt_tensor *out,
                               double value);

/*===----------------------------------------------------------------------===*\
|*                   Training: backward, loss, optimizers, K-FAC             *|
|*                                                                          *|
|* Added to ABI 1 without a bump (new functions only). Conventions on top   *|
|* of the ones above (docs/runtime.md, "Training kernels"):                 *|
|*  - Gradient outputs take an accumulate flag: 0 overwrites the output,    *|
|*    non-zero adds the result to what the output holds (a value used twice,*|
|*    parameter gradients summed over micro-batches). Kernels with several  *|
|*    outputs take one flag per output group.                               *|
|*  - Optional gradient outputs may be NULL: that gradient is not computed. *|
|*  - Optimizer and K-FAC-state kernels update their tensors in place.      *|
|*  - Sums that feed a scalar (norms, traces, the loss) accumulate in       *|
|*    double over a fixed partition, so results do not depend on the thread *|
|*    count; no kernel uses atomics.                                        *|
|*  - A few kernels need workspace (they say so); they allocate it from the *|
|*    heap and answer PFRT_OUT_OF_MEMORY when that fails.                   *|
\*===----------------------------------------------------------------------===*/

/*===------------------------------ Backward ----------------------------===*/

/* out = sum of grad over the dimensions along which out's shape was
 * broadcast to grad's shape (the gradient of a broadcasting operand): out's
 * shape must broadcast (unidirectionally, NumPy rules) to grad's shape.
 * f32, f64; sums accumulate in double. accumulate != 0 adds to out. */
PFRT_API pfrt_status pfrt_reduce_to_shape(pfrt_context *ctx,
                                          const pfrt_tensor *grad,
                                          int32_t accumulate,
                                          const pfrt_tensor *out);

enum {
  PFRT_BINARY_ADD = 0,
  PFRT_BINARY_SUB = 1,
  PFRT_BINARY_MUL = 2,
  PFRT_BINARY_DIV = 3,
  PFRT_BINARY_POW = 4
};

/* Gradients of y = a (op) b (NumPy broadcasting) given grad_out = dL/dy of
 * y's (the broadcast) shape, reduced to each operand's shape:
 *   add: da = dy, db = dy;            sub: da = dy, db = -dy;
 *   mul: da = dy b, db = dy a;        div: da = dy / b, db = -dy a / b^2;
 *   pow: da = dy b a^(b-1), db = dy a^b ln(a), and db = 0 where a == 0 and
 *        b >= 0 (PyTorch's convention; a < 0 gives NaN there).
 * f32, f64. a and b are always required (their shapes define the
 * broadcast; add and sub do not read their data). grad_a / grad_b may be
 * NULL; otherwise they have a's / b's shape. An operand that was broadcast
 * needs a workspace of y's size for mul, div and pow. accumulate_a /
 * accumulate_b add into grad_a / grad_b. */
PFRT_API pfrt_status pfrt_binary_backward(
    pfrt_context *ctx, int32_t kind, const pfrt_tensor *a,
    const pfrt_tensor *b, const pfrt_tensor *grad_out, int32_t accumulate_a,
    int32_t accumulate_b, const pfrt_tensor *grad_a,
    const pfrt_tensor *grad_b);

enum {
  PFRT_UNARY_SQRT = 0, /* takes y = sqrt(x): dx = dy / (2 y) */
  PFRT_UNARY_ERF = 1,  /* takes x:           dx = dy 2/sqrt(pi) exp(-x^2) */
  PFRT_UNARY_TANH = 2, /* takes y = tanh(x): dx = dy (1 - y^2) */
  PFRT_UNARY_EXP = 3,  /* takes y = exp(x):  dx = dy y */
  PFRT_UNARY_NEG = 4   /* dx = -dy (the first tensor is shape-checked only) */
};

/* grad_in = grad_out * f'(x) for the unary op `kind`, from the forward's
 * input or output as listed above (whichever makes f' cheapest). f32, f64;
 * all three tensors have one shape and dtype. grad_in may be grad_out (in
 * place). accumulate != 0 adds into grad_in. */
PFRT_API pfrt_status pfrt_unary_backward(pfrt_context *ctx, int32_t kind,
                                         const pfrt_tensor *x_or_y,
                                         const pfrt_tensor *grad_out,
                                         int32_t accumulate,
                                         const pfrt_tensor *grad_in);

/* grad_in = grad_out * gelu'(x) (f32, f64) for PFRT_GELU_EXACT or
 * PFRT_GELU_TANH; x is the forward's input. grad_in may be grad_out. */
PFRT_API pfrt_status pfrt_gelu_backward(pfrt_context *ctx,
                                        const pfrt_tensor *x,
                                        const pfrt_tensor *grad_out,
                                        int32_t approximation,
                                        int32_t accumulate,
                                        const pfrt_tensor *grad_in);

/* Softmax backward along `axis` (f32, f64): grad_in = y * (grad_out -
 * sum_axis(grad_out * y)), with y the forward's output. All three tensors
 * have one shape; grad_in may be grad_out. */
PFRT_API pfrt_status pfrt_softmax_backward(pfrt_context *ctx,
                                           const pfrt_tensor *y,
                                           const pfrt_tensor *grad_out,
                                           int64_t axis, int32_t accumulate,
                                           const pfrt_tensor *grad_in);

/* Backward of pfrt_layer_norm (f32, f64) over the blocks x.shape[axis:]:
 *   xhat = (x - mean) inv_std, g = grad_out * scale,
 *   grad_x = inv_std (g - mean_block(g) - xhat mean_block(g xhat)),
 *   grad_scale = sum over blocks of grad_out xhat, grad_bias = sum grad_out.
 * mean and inv_std_dev are the forward's optional outputs (either shape
 * pfrt_layer_norm accepts); both NULL recomputes them from x and epsilon
 * (in double; a workspace of 2 doubles per block); one NULL and not the
 * other is an error. grad_x (x's shape), grad_scale and grad_bias
 * (scale's shape) may each be NULL. accumulate_x applies to grad_x,
 * accumulate_params to grad_scale and grad_bias. */
PFRT_API pfrt_status pfrt_layer_norm_backward(
    pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *scale,
    const pfrt_tensor *mean, const pfrt_tensor *inv_std_dev,
    const pfrt_tensor *grad_out, int64_t axis, double epsilon,
    int32_t accumulate_x, int32_t accumulate_params,
    const pfrt_tensor *grad_x, const pfrt_tensor *grad_scale,
    const pfrt_tensor *grad_bias);

/* Backward of pfrt_linear (f32, f64) over all rows of x [..., in] and
 * grad_out [..., out] (same leading dimensions), one GEMM each:
 *   w [in, out]:                 grad_x = dy . w^T,  grad_w = x^T . dy;
 *   w [out, in] (w_transposed):  grad_x = dy . w,    grad_w = dy^T . x;
 *   grad_bias [out] = the sum of dy over rows.
 * grad_x, grad_w, grad_bias may each be NULL. accumulate_x applies to
 * grad_x; accumulate_params to grad_w and grad_bias (BLAS beta = 1: the
 * micro-batch gradient accumulation of a pipeline stage). */
PFRT_API pfrt_status pfrt_linear_backward(
    pfrt_context *ctx, const pfrt_tensor *x, const pfrt_tensor *w,
    const pfrt_tensor *grad_out, int32_t w_transposed, int32_t accumulate_x,
    int32_t accumulate_params, const pfrt_tensor *grad_x,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_bias);

/* Backward of pfrt_matmul (f32, f64; same shape rules, rank-1 operands
 * included): grad_a = dy . b^T and grad_b = a^T . dy per batch, summed
 * over the batch dimensions along which the operand was broadcast (GEMMs
 * with beta = 1, in a fixed order). grad_a / grad_b (a's / b's shape) may
 * be NULL; accumulate_a / accumulate_b add into them. */
PFRT_API pfrt_status pfrt_matmul_backward(
    pfrt_context *ctx, const pfrt_tensor *a, const pfrt_tensor *b,
    const pfrt_tensor *grad_out, int32_t accumulate_a, int32_t accumulate_b,
    const pfrt_tensor *grad_a, const pfrt_tensor *grad_b);

/* Backward of pfrt_gather (f32, f64): scatter-adds grad_out (shape
 * data.shape[:axis] + indices.shape + data.shape[axis+1:]) into grad_data
 * (data's shape) at the gathered positions; repeated indices sum. Indices
 * (i32, i64) are validated (negative ones wrap) before anything is written.
 * Deterministic: threads own disjoint ranges of grad_data's rows and add
 * the contributions to a row in index order. accumulate == 0 zeroes
 * grad_data first. */
PFRT_API pfrt_status pfrt_gather_backward(pfrt_context *ctx,
                                          const pfrt_tensor *indices,
                                          const pfrt_tensor *grad_out,
                                          int64_t axis, int32_t accumulate,
                                          const pfrt_tensor *grad_data);

/*===-------------------------------- Loss ------------------------------===*/

/* Fused softmax cross-entropy with ignored labels (masked-LM loss), f32 or
 * f64 logits [..., V]; labels (i32 or i64) have logits.shape[:-1]. Rows
 * whose label equals ignore_index (-100 in PyTorch and Hugging Face) do
 * not count; other labels must lie in [0, V) (else INVALID_ARGUMENT,
 * checked before anything is written). With count = the number of counted
 * rows and lse the (max-shifted) log-sum-exp of a row:
 *   loss = sum over counted rows (lse - logit[label]) / count,
 *   grad_logits = grad_scale * (softmax(row) - onehot(label)) / count on
 *   counted rows and 0 on ignored rows.
 * count == 0 gives loss 0 and all-zero gradients (not NaN). loss is a
 * rank-0 tensor of the logits' dtype; grad_logits (logits' shape) and
 * count_out (rank-0 i64) may be NULL. grad_scale multiplies the gradient
 * only (e.g. 1/micro-batches). The per-row sums are in double (workspace:
 * one double per row). */
PFRT_API pfrt_status pfrt_softmax_cross_entropy(
    pfrt_context *ctx, const pfrt_tensor *logits, const pfrt_tensor *labels,
    int64_t ignore_index, double grad_scale, const pfrt_tensor *loss,
    const pfrt_tensor *grad_logits, const pfrt_tensor *count_out);

/*===----------------------------- Optimizers ---------------------------===*/
/* In-place steps on one parameter tensor and its state (f32 or f64, all of
 * one dtype and shape). State tensors start zeroed. step is the 1-based
 * number of this update (for bias correction). grad is not modified. */

/* SGD with momentum, PyTorch's formulation with dampening 0 (weight decay
 * is coupled, added to the gradient):
 *   g = grad + weight_decay p;  buf = momentum buf + g;
 *   p -= lr (nesterov ? g + momentum buf : buf).
 * With momentum == 0, momentum_buf may be NULL and p -= lr g. */
PFRT_API pfrt_status pfrt_sgd_step(pfrt_context *ctx, const pfrt_tensor *param,
                                   const pfrt_tensor *grad,
                                   const pfrt_tensor *momentum_buf, double lr,
                                   double momentum, double weight_decay,
                                   int32_t nesterov);

/* AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW):
 *   p *= 1 - lr weight_decay;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr (m / c1) / (sqrt(v / c2) + eps),
 * c1 = 1 - b1^step, c2 = 1 - b2^step when bias_correction, else 1. */
PFRT_API pfrt_status pfrt_adamw_step(pfrt_context *ctx,
                                     const pfrt_tensor *param,
                                     const pfrt_tensor *grad,
                                     const pfrt_tensor *exp_avg,
                                     const pfrt_tensor *exp_avg_sq, double lr,
                                     double beta1, double beta2, double eps,
                                     double weight_decay, int64_t step,
                                     int32_t bias_correction);

/* LAMB as NVIDIA's NVLAMB / apex FusedLAMB (stage 2 per tensor; global
 * gradient clipping is a separate pfrt_clip_by_global_norm):
 *   m, v as in AdamW;  u = (m / c1) / (sqrt(v / c2) + eps) + weight_decay p;
 *   r = ||p|| / ||u|| if both norms > 0, else 1; then, if max_trust_ratio
 *   > 0, r = min(r, max_trust_ratio) (0 means no upper clamp);
 *   p -= lr r u.
 * The trust ratio applies to every tensor when nvlamb != 0 (NVLAMB) and
 * only to tensors with weight_decay != 0 otherwise (apex's default; r = 1
 * for the others). Norms are in double. */
PFRT_API pfrt_status pfrt_lamb_step(pfrt_context *ctx, const pfrt_tensor *param,
                                    const pfrt_tensor *grad,
                                    const pfrt_tensor *exp_avg,
                                    const pfrt_tensor *exp_avg_sq, double lr,
                                    double beta1, double beta2, double eps,
                                    double weight_decay, int64_t step,
                                    int32_t bias_correction, int32_t nvlamb,
                                    double max_trust_ratio);

/* *norm = sqrt(sum over tensors[0..n) of the sum of squares), in double;
 * f32 and f64 tensors may be mixed; n == 0 gives 0. */
PFRT_API pfrt_status pfrt_global_norm(pfrt_context *ctx,
                                      const pfrt_tensor *tensors, int32_t n,
                                      double *norm);

/* Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_):
 * computes the norm as pfrt_global_norm (stored in *norm if norm is not
 * NULL) and, if norm > max_norm, scales every tensor in place by
 * max_norm / (norm + 1e-6). A non-finite norm is PFRT_NUMERIC and leaves
 * the tensors unchanged. */
PFRT_API pfrt_status pfrt_clip_by_global_norm(pfrt_context *ctx,
                                              const pfrt_tensor *tensors,
                                              int32_t n, double max_norm,
                                              double *norm);

/* pfrt_clip_by_global_norm's scaling with the norm given (a norm formed
 * over several ranks' gradients, as a pipeline's rank program forms it):
 * if norm > max_norm, scales every tensor in place by
 * max_norm / (norm + 1e-6). A non-finite norm is PFRT_NUMERIC and leaves
 * the tensors unchanged. */
PFRT_API pfrt_status pfrt_clip_to_norm(pfrt_context *ctx,
                                       const pfrt_tensor *tensors, int32_t n,
                                       double max_norm, double norm);

/* out = (sum + x * count) / total elementwise, count and total converted to
 * the dtype and each of the multiply, add and divide rounded to it (as
 * pfrt_mul, pfrt_add and pfrt_div one after the other give, never a fused
 * multiply-add), in one pass: a running count-weighted sum of gradient
 * pieces (total 1 divides by nothing). f32, f64; sum, x and out of one
 * shape and dtype; out may be sum or x. */
PFRT_API pfrt_status pfrt_weighted_add(pfrt_context *ctx, const pfrt_tensor *sum,
                                       const pfrt_tensor *x, int64_t count,
                                       int64_t total, const pfrt_tensor *out);

/* out = alpha * x (f32, f64; same shape and dtype); out may be x. */
PFRT_API pfrt_status pfrt_scale(pfrt_context *ctx, const pfrt_tensor *x,
                                double alpha, const pfrt_tensor *out);

/* *result = sum of a * b over all elements (same shape; f32 or f64), in
 * double: for K-FAC's KL-clipping (sum of update . gradient). */
PFRT_API pfrt_status pfrt_dot(pfrt_context *ctx, const pfrt_tensor *a,
                              const pfrt_tensor *b, double *result);

/*===------------------------------- K-FAC ------------------------------===*/

enum {
  PFRT_KFAC_OVERWRITE = 0,      /* F = new */
  PFRT_KFAC_ACCUMULATE = 1,     /* F += new (sum over micro-batches) */
  PFRT_KFAC_RUNNING_AVERAGE = 2 /* F = decay F + (1 - decay) new */
};

/* A Kronecker factor new = scale * X^T X / n by SYRK (both triangles
 * written), X = x [..., d] flattened to n rows (f32, f64). With
 * bias_column != 0, X gets a column of ones appended (factor A of a layer
 * with bias: (d+1) x (d+1)). factor A: x = layer input, scale 1; factor
 * B: x = gradient of the layer output, scale as the caller's loss
 * normalization requires (e.g. n^2 when the gradients are of a mean loss;
 * docs/runtime.md). factor is [d', d'] with d' = d (+1). mode combines new
 * with factor (PFRT_KFAC_*); decay in [0, 1] is used by RUNNING_AVERAGE.
 * n == 0 leaves new = 0. */
PFRT_API pfrt_status pfrt_kfac_factor(pfrt_context *ctx, const pfrt_tensor *x,
                                      int32_t bias_column, double scale,
                                      int32_t mode, double decay,
                                      const pfrt_tensor *factor);

/* pi = sqrt((tr(a) / dim a) / (tr(b) / dim b)) for square factors a and b
 * (f32 or f64), the factored Tikhonov damping balance: A + sqrt(lambda) pi
 * I and B + sqrt(lambda) / pi I. If either trace is <= 0 pi is 1; a
 * non-finite trace is PFRT_NUMERIC. */
PFRT_API pfrt_status pfrt_kfac_pi(pfrt_context *ctx, const pfrt_tensor *a,
                                  const pfrt_tensor *b, double *pi);

/* inverse = (factor + damping I)^-1 for a symmetric [d, d] factor (f32,
 * f64) by Cholesky (LAPACK potrf, then potri; both triangles written).
 * damping >= 0. If the factor holds NaN/Inf or factor + damping I is not
 * positive definite, the result is PFRT_NUMERIC with a message saying which,
 * and inverse is left unchanged (so a caller can keep its previous inverse
 * or retry with more damping). inverse may be factor (in place). Workspace:
 * one d x d matrix. */
PFRT_API pfrt_status pfrt_kfac_inverse(pfrt_context *ctx,
                                       const pfrt_tensor *factor,
                                       double damping,
                                       const pfrt_tensor *inverse);

/* *result = 1 if every element of t is finite, else 0. Any dtype (integers
 * and bool are always finite; f16 is checked). */
PFRT_API pfrt_status pfrt_all_finite(pfrt_context *ctx, const pfrt_tensor *t,
                                     int32_t *result);

/* K-FAC preconditioning of a linear layer's gradient with the inverses of
 * its factors (f32, f64): a_inv [i', i'], b_inv [o, o]:
 *   w [out, in] (w_transposed != 0): out_w = b_inv . grad_w . a_inv;
 *   w [in, out]:                     out_w = a_inv . grad_w . b_inv
 * (the same update, transposed). With i' = in + 1 (A with a bias column),
 * [grad_w | grad_b] is preconditioned jointly and split back into out_w
 * and out_b; grad_b/out_b ([out]) are then required. With i' = in, out_b
 * = b_inv . grad_b when grad_b is given (out_b is required with grad_b).
 * Two GEMMs (plus one for a separate bias); a workspace of one gradient
 * (with its bias column). out_w may be grad_w and out_b grad_b. */
PFRT_API pfrt_status pfrt_kfac_precondition(
    pfrt_context *ctx, const pfrt_tensor *a_inv, const pfrt_tensor *b_inv,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_b,
    int32_t w_transposed, const pfrt_tensor *out_w, const pfrt_tensor *out_b);

/* The Fisher of a LayerNorm's scale and shift (gamma, beta [h]) in 2x2
 * blocks, one per feature j: new_j = scale * E_t[g g^T] over the n tokens t
 * of x [..., h] (f32, f64), with the per-token gradients g = (dy_tj *
 * xhat_tj, dy_tj), xhat = (x - mean) / sqrt(var + epsilon) over each row
 * (biased variance, as the forward), dy [..., h] the gradient of the
 * LayerNorm's output. factor is [h, 3] (gamma-gamma, gamma-beta, beta-beta)
 * or [h, 2] (the blocks' diagonal: gamma-gamma, beta-beta) of x's dtype;
 * scale, mode and decay as pfrt_kfac_factor's. epsilon >= 0. n == 0
 * leaves new = 0. Workspace: none. */
PFRT_API pfrt_status pfrt_kfac_layer_norm_factor(pfrt_context *ctx, const pfrt_tensor *x,
                                                 const pfrt_tensor *dy, double epsilon,
                                                 double scale, int32_t mode, double decay,
                                                 const pfrt_tensor *factor);

/* LayerNorm K-FAC preconditioning: per feature j, (F_j + damping I) u_j =
 * (grad_scale_j, grad_bias_j) with F_j the 2x2 block of factor [h, 3], or
 * only its diagonal with factor [h, 2]; out_scale, out_bias [h] get u_j
 * (f32, f64; all of factor's dtype; the outputs may be the gradients).
 * damping >= 0; a block that is not positive definite (possible only at
 * damping 0) keeps its gradient. */
PFRT_API pfrt_status pfrt_kfac_precondition_layer_norm(
    pfrt_context *ctx, const pfrt_tensor *factor, double damping, const pfrt_tensor *grad_scale,
    const pfrt_tensor *grad_bias, const pfrt_tensor *out_scale, const pfrt_tensor *out_bias);

/* Factor A of an embedding (rows of a [vocab, h] table looked up by integer
 * ids): its inputs are one-hot, so A = E[a a^T] is diagonal and new_v =
 * scale * count_v / n, with count_v the number of the n entries of ids (i32
 * or i64, any shape) that pick row v (an id in [-vocab, 0) counts from the
 * end, as pfrt_gather's). factor is [vocab] (f32, f64); mode and decay as
 * pfrt_kfac_factor's. An id outside [-vocab, vocab) is
 * PFRT_INVALID_ARGUMENT and leaves factor unchanged. n == 0 leaves new = 0.
 * Workspace: vocab doubles. */
PFRT_API pfrt_status pfrt_kfac_embedding_factor(pfrt_context *ctx, const pfrt_tensor *ids,
                                                double scale, int32_t mode, double decay,
                                                const pfrt_tensor *factor);

/* The K-FAC refresh of an embedding with pi-damping: a [vocab] is the
 * diagonal of its factor A (f32, f64), b [h, h] its factor B; pi =
 * sqrt((sum(a) / vocab) / (tr b / h)) (1 when either is <= 0), a_inv[v] =
 * 1 / (a[v] + sqrt(damping) pi) and b_inv = (b + sqrt(damping) / pi I)^-1.
 * Failures, retries and *outcome as pfrt_kfac_damped_inverses': a holding
 * NaN/Inf keeps a_inv, and an entry with a[v] + d <= 0 (possible only
 * without damping) raises d tenfold up to `retries` times. Workspace: B's
 * inverse's. */
PFRT_API pfrt_status pfrt_kfac_embedding_inverses(pfrt_context *ctx, const pfrt_tensor *a,
                                                  const pfrt_tensor *b, double damping,
                                                  int32_t retries, const pfrt_tensor *a_inv,
                                                  const pfrt_tensor *b_inv, int32_t *outcome);

/* K-FAC preconditioning of an embedding's weight gradient with its inverses
 * a_inv [vocab] (the diagonal of A^-1) and b_inv [h, h] (f32, f64):
 *   grad_w [vocab, h] (w_transposed == 0, the table's own layout):
 *       out_w = diag(a_inv) . grad_w . b_inv;
 *   grad_w [h, vocab] (w_transposed != 0): out_w = b_inv . grad_w . diag(a_inv)
 * (the same update, transposed): one GEMM and a scaling of rows (columns).
 * out_w may be grad_w. Workspace: one gradient. */
PFRT_API pfrt_status pfrt_kfac_precondition_embedding(pfrt_context *ctx, const pfrt_tensor *a_inv,
                                                      const pfrt_tensor *b_inv,
                                                      const pfrt_tensor *grad_w,
                                                      int32_t w_transposed,
                                                      const pfrt_tensor *out_w);

/* Outcomes of pfrt_kfac_damped_inverses. */
enum {
  PFRT_KFAC_INVERTED = 0,      /* both inverses refreshed with the damping */
  PFRT_KFAC_MORE_DAMPING = 1,  /* refreshed, but only after raising it */
  PFRT_KFAC_KEPT_PREVIOUS = 2  /* a factor stayed singular or non-finite:
                                  that inverse was left as it was */
};

/* The K-FAC refresh of one layer with pi-damping: pi = pfrt_kfac_pi(a, b),
 * a_inv = (a + sqrt(damping) pi I)^-1 and b_inv = (b + sqrt(damping) / pi
 * I)^-1. A factor that fails (not positive definite) is retried with the
 * damping raised tenfold, up to `retries` times; if it still fails (or holds
 * NaN/Inf) its inverse keeps its previous value. *outcome (may be NULL) gets
 * the worst PFRT_KFAC_* of the two and the context's message says what
 * happened. Returns PFRT_OK in all three cases (the step can go on); errors
 * are bad arguments only. */
PFRT_API pfrt_status pfrt_kfac_damped_inverses(pfrt_context *ctx,
                                               const pfrt_tensor *a,
                                               const pfrt_tensor *b,
                                               double damping, int32_t retries,
                                               const pfrt_tensor *a_inv,
                                               const pfrt_tensor *b_inv,
                                               int32_t *outcome);

/* Eigendecomposition of a symmetric [d, d] factor (f32, f64): factor =
 * vectors . diag(values) . vectors^T (LAPACK syevd on the upper triangle),
 * vectors [d, d] with eigenvector k in column k, values [d] ascending;
 * eigenvalues below 0 (round-off of a positive semi-definite factor) are
 * set to 0. If the factor holds NaN/Inf or the solver does not converge,
 * the result is PFRT_NUMERIC and vectors and values are left unchanged.
 * Workspace: one d x d matrix and LAPACK's. */
PFRT_API pfrt_status pfrt_kfac_eigen(pfrt_context *ctx,
                                     const pfrt_tensor *factor,
                                     const pfrt_tensor *vectors,
                                     const pfrt_tensor *values);

/* The K-FAC refresh of one layer in the factors' eigenbasis: pfrt_kfac_eigen
 * of a into (a_vectors, a_values) and of b into (b_vectors, b_values). No
 * damping here: pfrt_kfac_precondition_eigen adds it to the Kronecker
 * product's eigenvalues. A factor that fails keeps its previous
 * decomposition; *outcome (may be NULL) is PFRT_KFAC_INVERTED or
 * PFRT_KFAC_KEPT_PREVIOUS and the context's message says what happened.
 * Returns PFRT_OK in both cases; errors are bad arguments only. */
PFRT_API pfrt_status pfrt_kfac_eigen_refresh(
    pfrt_context *ctx, const pfrt_tensor *a, const pfrt_tensor *b,
    const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
    const pfrt_tensor *b_vectors, const pfrt_tensor *b_values,
    int32_t *outcome);

/* K-FAC preconditioning in the factors' eigenbasis (f32, f64), with the
 * damping added to the eigenvalues of the Kronecker product (B (x) A +
 * damping I)^-1 rather than to each factor: for w [out, in] (w_transposed
 * != 0), with A = Qa diag(la) Qa^T and B = Qb diag(lb) Qb^T,
 *   V = Qb^T . grad_w . Qa,  V[i, j] /= lb[i] la[j] + damping,
 *   out_w = Qb . V . Qa^T;
 * for w [in, out] the same update, transposed. a_vectors [i', i'],
 * a_values [i'], b_vectors [out, out], b_values [out]; the bias as in
 * pfrt_kfac_precondition (jointly as an extra input with i' = in + 1, else
 * out_b = Qb ((Qb^T grad_b) / (lb + damping))). damping > 0 (the product's
 * eigenvalues may be 0). Four GEMMs; a workspace of three gradients. out_w
 * may be grad_w and out_b grad_b. */
PFRT_API pfrt_status pfrt_kfac_precondition_eigen(
    pfrt_context *ctx, const pfrt_tensor *a_vectors,
    const pfrt_tensor *a_values, const pfrt_tensor *b_vectors,
    const pfrt_tensor *b_values, double damping, const pfrt_tensor *grad_w,
    const pfrt_tensor *grad_b, int32_t w_transposed, const pfrt_tensor *out_w,
    const pfrt_tensor *out_b);

/*===--------------------------- Communication --------------------------===*/
/* Point-to-point and collective communication between the ranks of a
 * pipeline (docs/runtime.md, "Communication"). A pfrt_comm is a group of
 * ranks with a backend underneath, behind the same calls: MPI (Open MPI),
 * or NCCL on a CUDA context (one GPU per rank, bootstrapped over MPI).
 *  - Tensors are memory of the call's context: host memory on the CPU,
 *    device memory on CUDA. MPI reads host memory, so on a CUDA context an
 *    MPI communicator stages every tensor through a host buffer (device to
 *    host before a send, host to device after a receive or all-reduce, on
 *    the context's stream); NCCL moves device memory directly.
 *  - Every call takes the context (for the message) and the communicator,
 *    returns a pfrt_status and never aborts (except pfrt_comm_abort).
 *  - Creating no communicator initializes nothing: MPI_Init runs in the
 *    first pfrt_comm_create (a process started without mpirun becomes a
 *    one-rank job, Open MPI's singleton mode); pfrt_comm_finalize ends it.
 *    A rank of a multi-rank job that exits without pfrt_comm_finalize (an
 *    error, a crash) makes mpirun end every rank with a failure, instead of
 *    leaving them waiting for it.
 *  - Calls marked "collective" must be made by every rank of the group, in
 *    the same order. Peers and ranks are ranks of the communicator passed.
 *  - Tensors travel as descriptors: the receiver's descriptor says the
 *    dtype and shape it expects; a message of another dtype or shape is
 *    PFRT_INVALID_ARGUMENT with a message naming the peer, the tag and
 *    both descriptions (the message is consumed, so later ones still match).
 *  - A failure of the library underneath is PFRT_INTERNAL with its message.
 *  - A communicator may be used by one host thread at a time. */

typedef struct pfrt_comm pfrt_comm;

/* PFRT_COMM_MPI: MPI, staged through host buffers on a CUDA context.
 * PFRT_COMM_NCCL: NCCL; needs a CUDA context whose device no other rank of
 *   the job on the same host uses (NCCL refuses two ranks on one GPU), a
 *   build with NCCL (libnccl.so.2 is loaded at the first NCCL communicator)
 *   and MPI to start (rank 0's ncclUniqueId is broadcast over MPI). Point to
 *   point transfers between two ranks match in the order they were posted
 *   (NCCL has no tags): a receive posted out of the sender's order is
 *   PFRT_INVALID_ARGUMENT naming both tags, never a silent mix-up.
 * PFRT_COMM_MPI_STAGED: MPI with every tensor staged through a host buffer
 *   (pfrt_copy_to_host / pfrt_copy_from_host on the call's context), on any
 *   context: what PFRT_COMM_MPI does on CUDA; on the CPU the check of that
 *   path (pf-train --device-buffers). */
enum { PFRT_COMM_MPI = 0, PFRT_COMM_NCCL = 1, PFRT_COMM_MPI_STAGED = 2 };

typedef struct pfrt_comm_options {
  int32_t abi_version; /* must be PFRT_ABI_VERSION */
  int32_t backend;     /* PFRT_COMM_*; one not built into this library is
                          PFRT_UNSUPPORTED with the reason */
} pfrt_comm_options;

/* Fills *options with the defaults: this header's ABI version, MPI. */
PFRT_API void pfrt_comm_options_init(pfrt_comm_options *options);

/* Collective over every rank of the job (MPI_COMM_WORLD, duplicated so its
 * messages never mix with other communicators'). options == NULL means the
 * defaults. Also aligns the wall clock (pfrt_comm_align_clock). A backend
 * not built into this library is PFRT_UNSUPPORTED. Destroy with
 * pfrt_comm_destroy. */
PFRT_API pfrt_status pfrt_comm_create(pfrt_context *ctx,
                                      const pfrt_comm_options *options,
                                      pfrt_comm **out);

/* A sub-communicator of the `count` distinct parent ranks in ranks[] (e.g.
 * the two replicas of a Chimera stage, or the first and last stage for tied
 * weights); the new rank i is parent rank ranks[i]. Collective over those
 * ranks only (the others do not call it); they must pass the same list.
 * The calling rank must be in the list. Inherits the parent's aligned clock. */
PFRT_API pfrt_status pfrt_comm_create_group(pfrt_context *ctx,
                                            pfrt_comm *parent,
                                            const int32_t *ranks,
                                            int32_t count, pfrt_comm **out);

/* Frees a communicator; NULL is a no-op. Every request should have been
 * waited for: a pending receive is cancelled, a pending send released
 * (its buffer must stay valid until the peer has received it). */
PFRT_API void pfrt_comm_destroy(pfrt_comm *comm);

/* This process's rank in comm (0..size-1); -1 for NULL. */
PFRT_API int32_t pfrt_comm_rank(const pfrt_comm *comm);
/* The number of ranks in comm; 0 for NULL. */
PFRT_API int32_t pfrt_comm_size(const pfrt_comm *comm);
/* The largest valid tag (at least 32767); tags are 0..max. -1 for NULL. */
PFRT_API int32_t pfrt_comm_max_tag(const pfrt_comm *comm);

/* Sends tensor t (any dtype) to rank `peer` with `tag` and returns when the
 * buffer may be reused. The peer must not be this rank. */
PFRT_API pfrt_status pfrt_comm_send(pfrt_context *ctx, pfrt_comm *comm,
                                    const pfrt_tensor *t, int32_t peer,
                                    int32_t tag);

/* Receives the message of `peer` with `tag` into t, whose dtype and shape
 * must be those sent (messages between two ranks with one tag arrive in
 * the order sent). */
PFRT_API pfrt_status pfrt_comm_recv(pfrt_context *ctx, pfrt_comm *comm,
                                    const pfrt_tensor *t, int32_t peer,
                                    int32_t tag);

/* Non-blocking send / receive: start the transfer and store a request
 * handle (> 0) in *request; the buffer must stay valid (and, for a send,
 * unchanged) until pfrt_comm_wait returns. The descriptor itself may go. */
PFRT_API pfrt_status pfrt_comm_isend(pfrt_context *ctx, pfrt_comm *comm,
                                     const pfrt_tensor *t, int32_t peer,
                                     int32_t tag, int64_t *request);
PFRT_API pfrt_status pfrt_comm_irecv(pfrt_context *ctx, pfrt_comm *comm,
                                     const pfrt_tensor *t, int32_t peer,
                                     int32_t tag, int64_t *request);

/* Waits for one request of comm and releases it; its status is that of the
 * transfer (e.g. a receive that got another dtype or shape). A handle that
 * is not pending (unknown, or already waited for) is PFRT_INVALID_ARGUMENT. */
PFRT_API pfrt_status pfrt_comm_wait(pfrt_context *ctx, pfrt_comm *comm,
                                    int64_t request);

/* Waits for requests[0..count) (all of them, even after a failure) and
 * returns the status of the first failing one. */
PFRT_API pfrt_status pfrt_comm_wait_all(pfrt_context *ctx, pfrt_comm *comm,
                                        const int64_t *requests,
                                        int32_t count);

/* Collective: inout = the sum of every rank's inout, in place (f32, f64,
 * i32, i64). Every rank receives the same result; with two ranks it is
 * exactly a + b, with more the library chooses the association. Ranks
 * passing different dtypes or element counts all get
 * PFRT_INVALID_ARGUMENT (no hang). */
PFRT_API pfrt_status pfrt_comm_all_reduce_sum(pfrt_context *ctx,
                                              pfrt_comm *comm,
                                              const pfrt_tensor *inout);

/* Row-sparse transfer of a tensor mostly zero (an embedding's gradient of
 * one micro-batch: non-zero only in the rows of its tokens), rows along the
 * first dimension (a tensor of rank 0 or 1 is one row), f32 or f64:
 * pfrt_comm_isend_rows posts to `peer` the indices and contents of x's rows
 * that are not all zero bits (the call copies them: x may change once it
 * returns); *request completes by pfrt_comm_wait / pfrt_comm_wait_all.
 * pfrt_comm_recv_add_rows receives them and writes out = x + y, y the
 * sender's tensor (its other rows +0.0): every element of out is one
 * addition, exactly the dense sum. out may be x; x's shape and dtype must
 * be the sender's. Messages use `tag` like pfrt_comm_isend (two per
 * transfer, in order). */
PFRT_API pfrt_status pfrt_comm_isend_rows(pfrt_context *ctx, pfrt_comm *comm,
                                          const pfrt_tensor *x, int32_t peer,
                                          int32_t tag, int64_t *request);
PFRT_API pfrt_status pfrt_comm_recv_add_rows(pfrt_context *ctx,
                                             pfrt_comm *comm,
                                             const pfrt_tensor *x,
                                             const pfrt_tensor *out,
                                             int32_t peer, int32_t tag);

/* Collective: t = root's t on every rank of comm, bit for bit, in place
 * (any dtype; root is a rank of comm). Ranks passing different dtypes or
 * element counts all get PFRT_INVALID_ARGUMENT (no hang). Tensors are
 * memory of ctx, as for pfrt_comm_send (NCCL broadcasts device memory). */
PFRT_API pfrt_status pfrt_comm_broadcast(pfrt_context *ctx, pfrt_comm *comm,
                                         const pfrt_tensor *t, int32_t root);

/* Collective: returns when every rank of comm has entered it. */
PFRT_API pfrt_status pfrt_comm_barrier(pfrt_context *ctx, pfrt_comm *comm);

/* *seconds = this rank's wall clock aligned to rank 0's of comm, for
 * measured timelines: seconds, monotonic between alignments; one instant
 * reads the same on every rank within the alignment error (half the
 * shortest round trip of a message). Sub-communicators share their
 * parent's alignment, so every communicator of a job has one timeline. */
PFRT_API pfrt_status pfrt_comm_wall_time(pfrt_context *ctx, pfrt_comm *comm,
                                         double *seconds);

/* Collective: this rank's place among the communicator's ranks on its host
 * (by host name; ranks below it on the same host) and how many ranks share
 * the host: which of a host's GPUs a rank takes. */
PFRT_API pfrt_status pfrt_comm_local_rank(pfrt_context *ctx, pfrt_comm *comm,
                                          int32_t *local_rank, int32_t *local_size);

/* Collective: re-measures the clock offset of every rank against rank 0's
 * aligned clock (8 ping-pongs each; the one with the shortest round trip
 * wins), then a barrier; against drift in long runs. pfrt_comm_create did
 * it once; a group keeps its parent's timeline. */
PFRT_API pfrt_status pfrt_comm_align_clock(pfrt_context *ctx, pfrt_comm *comm);

/* Ends every rank of the job (MPI_Abort) with exit code `code`: for a rank
 * that cannot go on, since returning from main waits for every rank in
 * MPI_Finalize. Returns only if an argument is invalid. */
PFRT_API pfrt_status pfrt_comm_abort(pfrt_context *ctx, pfrt_comm *comm,
                                     int32_t code);

/* Collective over every rank of the job, at the end of a run that went
 * well: MPI_Finalize if pfrt_comm_create started MPI (nothing if no
 * communicator was created or the host initialized MPI itself). No
 * communicator may be used afterwards; destroying them is still allowed.
 * A one-rank job is also finalized at exit without it. */
PFRT_API pfrt_status pfrt_comm_finalize(pfrt_context *ctx);

/*===------------------------ End of communication ----------------------===*/

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PF_RUNTIME_PFRT_H */
