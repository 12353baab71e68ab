/*===- pfrt_rank.h - what a lowered pipeline rank program calls ---*- C -*-===*\
|*                                                                          *|
|* pf-lower-rank-programs turns each pf.rank_program into                   *|
|*   int32_t pf_<program>(pfrt_rank_host *host, pfrt_context *ctx,          *|
|*                        pfrt_comm *comm, pfrt_tensor *slots, void *arena, *|
|*                        pfrt_comm **groups, pfrt_context *host_ctx,      *|
|*                        pfrt_comm *world)                                *|
|* that runs the program's ops in order and returns the first non-zero     *|
|* status (0 when every op ran). Its stage values live in `arena`, memory  *|
|* of `ctx` of planStageValues' size (PFRankProgram.h), at offsets the     *|
|* program plans; `slots` holds one descriptor per value (stageValueSlots),*|
|* which the program writes before the op making the value. It moves them  *|
|* between ranks itself, with pfrt_comm_* of pfrt.h on `ctx` and `comm`   *|
|* (the communicator the host picked for that memory; `groups` those of   *|
|* its collectives over fewer ranks, programCommGroups), scales and clips  *|
|* them with pfrt kernels, and sums the clippings' f64 terms (host memory)*|
|* on `host_ctx` and `world`. The other ops call                           *|
|* functions below, provided by the host that runs the rank                *|
|* (lib/PipelineRuntime/RankExecutor.cpp for pf-train and pf-run): the    *|
|* stage functions are separately compiled entries, so a stage call or a  *|
|* collective of the step end is a service of the host, as a command of a  *|
|* HAL is. The table of argument kinds is pfrt_rank_abi.def                *|
|* (unittests/Runtime/AbiTableTest.cpp checks it against this header).     *|
|*                                                                          *|
|* Common arguments: `op` is the op's index in its program (diagnostics and *|
|* the measured timeline); `microbatch` and `layer` are -1 when the op has  *|
|* none; strings are NUL-terminated; a type is (pfrt dtype, rank, shape).   *|
|* The status is a pfrt_status; the message is the host's.                  *|
\*===----------------------------------------------------------------------===*/
#ifndef PF_RUNTIME_PFRT_RANK_H
#define PF_RUNTIME_PFRT_RANK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfrt_rank_host pfrt_rank_host;

/* The kind of a pfrt_rank_run_stage: the values of pf's StageTaskKind. The
 * call reads the stage values in the slots `inputs` (the function's
 * stage-value arguments, in order) and writes its stage-value results into
 * new buffers of the slots `outputs`. */
int32_t pfrt_rank_run_stage(pfrt_rank_host *host, int64_t op, int32_t kind,
                            const char *function, int64_t microbatch,
                            int64_t layer, int64_t input_count,
                            const int64_t *inputs, int64_t output_count,
                            const int64_t *outputs);
/* The start (`phase` 0) and end (1) of op `op`'s communication the program
 * runs itself (a blocking transfer, a posted send, the wait for a posted
 * recv): the host's measured timeline. */
int32_t pfrt_rank_mark(pfrt_rank_host *host, int64_t op, int32_t phase);
/* The parameter `name` (Chimera's K-FAC factors, of the type (dtype, rank,
 * shape)) summed in place over the `count` member ranks `ranks`, or a
 * pending inverse handed over. (The sums of values, a gradient's or the
 * loss's partial sums, are the program's own pfrt_comm_all_reduce_sum.) */
int32_t pfrt_rank_all_reduce_parameter(pfrt_rank_host *host, int64_t op,
                                       const char *name, int64_t count,
                                       const int64_t *ranks, int32_t dtype,
                                       int64_t rank, const int64_t *shape);
/* The step's f64 scalar input `name` (the learning rate `lr`). */
int32_t pfrt_rank_step_scalar(pfrt_rank_host *host, int64_t op,
                              const char *name, double *value);
/* The pending K-FAC inverses become the ones in use. */
int32_t pfrt_rank_kfac_promote_inverses(pfrt_rank_host *host, int64_t op);
/* The value in slot `slot` is the step's result `name` (the loss, or a
 * gradient grad/<param> as the update takes it): the host reads it after
 * the step. */
int32_t pfrt_rank_step_result(pfrt_rank_host *host, int64_t op,
                              const char *name, int64_t slot);

#ifdef __cplusplus
}
#endif

#endif /* PF_RUNTIME_PFRT_RANK_H */
