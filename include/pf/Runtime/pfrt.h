/*===- pfrt.h - The pf runtime C ABI ---------------------------*- C -*-===*\
|*                                                                          *|
|* The one interface between code the pf compiler generates (and pf-run)    *|
|* and the runtime backends (CPU now, CUDA later). Plain C, so that the     *|
|* LLVM-dialect lowering can call it with `func.call` and so that a small C *|
|* driver can link an AOT-compiled model.                                   *|
|*                                                                          *|
|* Conventions (docs/runtime.md has the long form):                         *|
|*  - Every kernel takes a context first and returns a pfrt_status. On      *|
|*    failure the context keeps a message (pfrt_last_error). Nothing aborts.*|
|*  - Tensors are descriptors (pfrt_tensor) over caller-owned, contiguous,  *|
|*    row-major buffers. Kernels never allocate their outputs: the caller   *|
|*    passes an output descriptor whose shape and dtype the kernel checks.  *|
|*  - Unless a function says otherwise, outputs must not overlap inputs.    *|
|*    Elementwise kernels (binary, equal, where, unary, gelu) also accept   *|
|*    out->data == an input's data when that input has exactly out's shape  *|
|*    and dtype (an in-place update); partial overlap is never allowed.     *|
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

typedef struct pfrt_context_options {
  int32_t abi_version; /* must be PFRT_ABI_VERSION */
  int32_t backend;     /* PFRT_BACKEND_CPU, ... */
  int32_t num_threads; /* CPU worker threads; 0 = OpenMP's default
                          (OMP_NUM_THREADS or all cores) */
  int32_t device;      /* device ordinal for GPU backends; ignored on CPU */
} pfrt_context_options;

/* Fills *options with the defaults: this header's ABI version, CPU, the
 * default thread count, device 0. */
PFRT_API void pfrt_context_options_init(pfrt_context_options *options);

/* Creates a context; options == NULL means the defaults. Returns NULL (no
 * context exists to hold a message) if the options are invalid (ABI version
 * mismatch, negative thread count, unknown backend), if the backend is not
 * built into this library, or if memory is short. Destroy with
 * pfrt_context_destroy. */
PFRT_API pfrt_context *pfrt_context_create(const pfrt_context_options *options);

/* Destroys a context; NULL is a no-op. Arenas created from it must be
 * destroyed first. */
PFRT_API void pfrt_context_destroy(pfrt_context *ctx);

/* "cpu" (later "cuda"); "none" for NULL. Static. */
PFRT_API const char *pfrt_backend_name(const pfrt_context *ctx);

/* The thread count kernels of this context use (>= 1); 0 for NULL. */
PFRT_API int32_t pfrt_context_num_threads(const pfrt_context *ctx);

/* The message of the most recent failing call on ctx ("" if none failed),
 * prefixed with the function name, e.g. "pfrt_add: ...". Owned by the
 * context and valid until the next call on it. For ctx == NULL a fixed
 * message saying so. */
PFRT_API const char *pfrt_last_error(const pfrt_context *ctx);

/*===----------------------------- Memory -------------------------------===*/

/* Default alignment of pfrt_alloc and of arena allocations. */
#define PFRT_DEFAULT_ALIGNMENT 64
/* Alignment of an arena's base; the largest alignment arena_alloc accepts. */
#define PFRT_ARENA_BASE_ALIGNMENT 4096

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

/* out (bool) = (a == b), broadcasting; a and b of one dtype among f32, f64,
 * i8, i32, i64, bool. */
PFRT_API pfrt_status pfrt_equal(pfrt_context *ctx, const pfrt_tensor *a,
                                const pfrt_tensor *b, const pfrt_tensor *out);

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PF_RUNTIME_PFRT_H */
