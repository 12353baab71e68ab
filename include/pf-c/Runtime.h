/*===- pf-c/Runtime.h - compile pf IR and run it on the runtime ---*- C -*-===*\
|*                                                                            *|
|* What pf-run does: pfCompile lowers a copy of a module to the pfrt ABI and  *|
|* JIT-compiles it (MLIR's ExecutionEngine); pfExecutableRun binds caller-    *|
|* owned buffers to its inputs and outputs and runs it on the CPU backend.    *|
|*                                                                            *|
|*   PfExecutable exe = pfCompile(module, NULL, onError, &log);               *|
|*   int64_t shape[2] = {2, 3};                                               *|
|*   PfTensor x = {"x", PF_DTYPE_FLOAT32, 2, shape, xData};                   *|
|*   PfTensor y = {"y", PF_DTYPE_FLOAT32, 2, shape, yData};                   *|
|*   if (mlirLogicalResultIsFailure(pfExecutableRun(exe, &x, 1, &y, 1,        *|
|*                                                  onError, &log))) ...      *|
|*   pfExecutableDestroy(exe);                                                *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_C_RUNTIME_H
#define PF_C_RUNTIME_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types: ONNX's TensorProto.DataType numbers, the codes of pfrt.h
 *  (PFRT_F32, ...). bool takes one byte (0 or 1). */
enum {
  PF_DTYPE_FLOAT32 = 1,
  PF_DTYPE_INT8 = 3,
  PF_DTYPE_INT32 = 6,
  PF_DTYPE_INT64 = 7,
  PF_DTYPE_BOOL = 9,
  PF_DTYPE_FLOAT16 = 10,
  PF_DTYPE_FLOAT64 = 11
};

/** A named tensor: `rank` dimensions at `shape`, and a contiguous row-major
 *  buffer at `data`. The caller owns the descriptor, the shape and the
 *  buffer. */
typedef struct PfTensor {
  const char *name;
  int32_t dtype;
  int32_t rank;
  const int64_t *shape;
  void *data;
} PfTensor;

/** A compiled model. */
typedef struct PfExecutable {
  void *ptr;
} PfExecutable;

typedef struct PfCompileOptions {
  /** Runtime threads; 0: the runtime's default (all cores). */
  int32_t numThreads;
  /** The function to compile; NULL or "": the first one with a body. */
  const char *function;
  /** Where the model runs: PFRT_BACKEND_CPU (0) or PFRT_BACKEND_CUDA (1)
   *  (pf/Runtime/pfrt.h). On CUDA the parameters, intermediates, inputs and
   *  outputs live in device memory: every run copies the inputs in and the
   *  outputs out, and pfExecutableCopyParameters brings the parameters' host
   *  copies (pfExecutableGetParameter) up to date or sends them. */
  int32_t backend;
  /** PFRT_GEMM_FP32 (0), _TF32 (1) or _BF16 (2): the compute precision of
   *  the model's GEMMs on CUDA (the CPU computes f32 whatever is set). */
  int32_t gemmPrecision;
  /** Hold everything in backend memory as on CUDA even on the CPU: the
   *  device path, checked where no GPU is. */
  bool deviceBuffers;
} PfCompileOptions;

/** The defaults: the runtime's threads, the first function, the CPU, f32. */
MLIR_CAPI_EXPORTED PfCompileOptions pfCompileOptionsGetDefault(void);

/** Compiles `module`: pf IR with static shapes and weights, as
 *  pfImportONNXFile gives it or after a pipeline (e.g. pf-training) ran on
 *  it. The module itself is left as it is. A model that updates parameters
 *  (a training step) gets its own copies of them; others read the weights
 *  in place from the module's context, so destroy the executable before the
 *  context. `options` NULL means the defaults. On failure returns a null
 *  executable and hands the messages to `onError` (which may be NULL), also
 *  for a null module. Run and CopyParameters fail the same way on a null
 *  executable; Destroy ignores one. */
MLIR_CAPI_EXPORTED PfExecutable pfCompile(MlirModule module, const PfCompileOptions *options,
                                          MlirStringCallback onError, void *userData);

static inline bool pfExecutableIsNull(PfExecutable executable) { return !executable.ptr; }

MLIR_CAPI_EXPORTED void pfExecutableDestroy(PfExecutable executable);

/** The model's inputs, outputs and parameters, each a PfTensor with its
 *  name, dtype, rank and shape, valid as long as the executable; `data` is
 *  NULL for inputs and outputs and, for parameters, points at the copy the
 *  model reads (and, for a training step, updates). A `pos` outside
 *  [0, count) or a null executable gives a tensor whose name is NULL (and
 *  counts of 0). Parameters are sorted by name. */
MLIR_CAPI_EXPORTED intptr_t pfExecutableGetNumInputs(PfExecutable executable);
MLIR_CAPI_EXPORTED PfTensor pfExecutableGetInput(PfExecutable executable, intptr_t pos);
MLIR_CAPI_EXPORTED intptr_t pfExecutableGetNumOutputs(PfExecutable executable);
MLIR_CAPI_EXPORTED PfTensor pfExecutableGetOutput(PfExecutable executable, intptr_t pos);
MLIR_CAPI_EXPORTED intptr_t pfExecutableGetNumParameters(PfExecutable executable);
MLIR_CAPI_EXPORTED PfTensor pfExecutableGetParameter(PfExecutable executable, intptr_t pos);

/** Runs the model once. `inputs` must be the model's inputs, each once, by
 *  name in any order, with the model's dtypes and shapes; they are read in
 *  place. `outputs` names any of the model's outputs, each once, with
 *  buffers of their dtype and shape that the run writes; outputs not asked
 *  for are discarded. On a mismatch or a failing kernel returns failure and
 *  hands the message to `onError` (which may be NULL). */
/** With the parameters in backend memory (a CUDA executable, or
 *  deviceBuffers): `toHost` copies their current values into the host copies
 *  pfExecutableGetParameter points at (before reading them: a training
 *  step's weights after some runs); otherwise sends the host copies to the
 *  backend (after writing them: loading a checkpoint). A no-op for a CPU
 *  executable, whose runs use the host copies themselves. */
MLIR_CAPI_EXPORTED MlirLogicalResult pfExecutableCopyParameters(PfExecutable executable,
                                                                bool toHost,
                                                                MlirStringCallback onError,
                                                                void *userData);

MLIR_CAPI_EXPORTED MlirLogicalResult pfExecutableRun(PfExecutable executable,
                                                     const PfTensor *inputs, intptr_t numInputs,
                                                     const PfTensor *outputs, intptr_t numOutputs,
                                                     MlirStringCallback onError, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* PF_C_RUNTIME_H */
