/*===- pf_aot.h - The tensor plan of an ahead-of-time model -------*- C -*-===*\
|*                                                                            *|
|* `pf-run MODEL --aot DIR` writes DIR/model.o (pf_main), DIR/model.weights   *|
|* and DIR/model_plan.h, whose tables use the types below. A driver either    *|
|* links model.o and includes model_plan.h (examples/aot/driver.c), or builds *|
|* the model as a shared library with examples/aot/model_library.c, which     *|
|* exports pf_aot_model_describe(), and runs it with pf-aot-run on any        *|
|* backend (docs/runtime.md, "Ahead-of-time models").                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_RUNTIME_PF_AOT_H
#define PF_RUNTIME_PF_AOT_H

#include "pf/Runtime/pfrt.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a descriptor's data lives. */
enum { PF_MODEL_INPUT = 0, PF_MODEL_OUTPUT = 1, PF_MODEL_WEIGHTS = 2, PF_MODEL_ARENA = 3 };

/* One descriptor of the table: its kind (above), then the input/output
   number or the byte offset into the weights file or the arena. */
typedef struct {
  int32_t kind;
  int64_t where;
  int32_t dtype;
  int32_t rank;
  int64_t shape[PFRT_MAX_RANK];
} pf_model_tensor_info;

/* A named input or output and its descriptor. */
typedef struct {
  const char *name;
  int64_t tensor;
} pf_model_io;

/* The compiled step: 0, or (op index + 1) << 32 | pfrt status of the first
   failing kernel. */
typedef int64_t (*pf_model_main_fn)(pfrt_context *ctx, pfrt_tensor *table);

#define PF_AOT_MODEL_VERSION 3

/* Everything a driver needs to run a model built as a shared library. */
typedef struct pf_aot_model {
  int32_t version;     /* PF_AOT_MODEL_VERSION */
  int32_t abi_version; /* the PFRT_ABI_VERSION the model was compiled for */
  int64_t num_tensors, num_inputs, num_outputs;
  int64_t arena_bytes;   /* intermediates (the buffer plan) */
  int64_t weights_bytes; /* model.weights */
  const pf_model_tensor_info *tensors;
  const pf_model_io *inputs, *outputs;
  pf_model_main_fn main;
  int64_t num_ops;             /* ops of the step */
  const char *const *op_names; /* num_ops names (op and ONNX node) */
  int32_t profile_hooks;       /* 1: compiled with pf-run --aot-profile */
  /* PF_MODEL_FINGERPRINT of model_plan.h: the --aot run that wrote the plan,
     which the object's `pf_model_fingerprint` must equal (the plan and the
     code of one run). */
  uint64_t fingerprint;
} pf_aot_model;

/* A whole buffer of `bytes` at `data` as one i8 descriptor: how drivers
   hand weights, inputs and outputs to pfrt_copy_from_host,
   pfrt_copy_to_host and pfrt_fill. */
static inline pfrt_tensor pf_aot_byte_view(void *data, int64_t bytes) {
  pfrt_tensor t = {0};
  t.data = data;
  t.dtype = PFRT_I8;
  t.rank = 1;
  t.shape[0] = bytes;
  return t;
}

/* Called around every kernel of a model compiled with profiling hooks; the
   process that runs it defines them (pf-aot-run does). */
void pf_profile_begin(int64_t op);
void pf_profile_end(int64_t op);

/* The symbol such a library exports:
   const pf_aot_model *pf_aot_model_describe(void). */
#define PF_AOT_MODEL_SYMBOL "pf_aot_model_describe"
typedef const pf_aot_model *(*pf_aot_model_describe_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PF_RUNTIME_PF_AOT_H */
