/*===- pfrt_rank.h - what a lowered pipeline rank program calls ---*- C -*-===*\
|*                                                                          *|
|* pf-lower-rank-programs turns each pf.rank_program into                   *|
|*   int32_t pf_<program>(pfrt_rank_host *host)                             *|
|* that calls these functions in the program's order and returns the first *|
|* non-zero status (0 when every op ran). They are provided by the host     *|
|* that runs the rank (lib/Driver/RankExecutor.cpp for pf-train and pf-run, *|
|* on pfrt kernels and pfrt_comm_*): the stage functions are separately     *|
|* compiled entries whose buffers the host owns, so a stage call, a         *|
|* transfer of a stage value's slot or a collective is a service of the    *|
|* host, as a command of a HAL is. The table of argument kinds is           *|
|* pfrt_rank_abi.def (unittests/Runtime/AbiTableTest.cpp checks it against  *|
|* this header).                                                            *|
|*                                                                          *|
|* Common arguments: `op` is the op's index in its program (diagnostics and *|
|* the measured timeline); `microbatch` and `layer` are -1 when the op has  *|
|* none; strings are NUL-terminated, lists of `count` strings are stored    *|
|* back to back (each NUL-terminated); a type is (pfrt dtype, rank, shape). *|
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
 * call reads the stage values in `inputs` (the function's stage-value
 * arguments, in order) and writes its stage-value results into `outputs`.
 * Stage values live in slots of the host, numbered by the lowering. */
int32_t pfrt_rank_run_stage(pfrt_rank_host *host, int64_t op, int32_t kind,
                            const char *function, int64_t microbatch,
                            int64_t layer, int64_t input_count,
                            const int64_t *inputs, int64_t output_count,
                            const int64_t *outputs);
/* The stage value in `slot` (act/*, grad_act/*) of `microbatch` to a peer
 * rank with a tag, or a peer's into `slot`; non-blocking where the host
 * overlaps transfers. */
int32_t pfrt_rank_send(pfrt_rank_host *host, int64_t op, int64_t slot,
                       int64_t microbatch, int64_t to, int64_t tag,
                       int32_t dtype, int64_t rank, const int64_t *shape);
int32_t pfrt_rank_recv(pfrt_rank_host *host, int64_t op, int64_t slot,
                       int64_t microbatch, int64_t from, int64_t tag,
                       int32_t dtype, int64_t rank, const int64_t *shape);
/* After op `op`, the last use of the value in `slot`: its memory may go (a
 * posted send keeps what it reads until it completes). */
int32_t pfrt_rank_release(pfrt_rank_host *host, int64_t op, int64_t slot);
/* The sum of a named value (a gradient, or a parameter: Chimera's K-FAC
 * factors) over `count` member ranks; `order` is pf's ReductionOrder (0:
 * every micro-batch's pieces, weighted in micro-batch order as one process
 * does; 1: each member's weighted partial sum, added by the library's
 * all-reduce). */
int32_t pfrt_rank_all_reduce(pfrt_rank_host *host, int64_t op,
                             const char *value, int32_t order, int64_t count,
                             const int64_t *ranks, int32_t dtype, int64_t rank,
                             const int64_t *shape);
/* The value of rank `root` (a step-end result: a preconditioned gradient)
 * replaces the named value on the other `count` - 1 member ranks. */
int32_t pfrt_rank_broadcast(pfrt_rank_host *host, int64_t op,
                            const char *value, int64_t root, int64_t count,
                            const int64_t *ranks, int32_t dtype, int64_t rank,
                            const int64_t *shape);
/* Micro-batch `microbatch`'s piece of a named gradient summed on rank `root`
 * (the two `count` = 2 members' pieces added); the other member's is handed
 * over and freed. */
int32_t pfrt_rank_reduce(pfrt_rank_host *host, int64_t op, const char *value,
                         int64_t microbatch, int64_t root, int64_t count,
                         const int64_t *ranks, int32_t dtype, int64_t rank,
                         const int64_t *shape);
/* Global-norm clipping over all ranks, the norm summed in `order`. */
int32_t pfrt_rank_clip_gradients(pfrt_rank_host *host, int64_t op,
                                 double max_norm, int64_t count,
                                 const char *order);
/* K-FAC's KL-clip over all ranks, the inner products summed in `order`. */
int32_t pfrt_rank_kfac_kl_clip(pfrt_rank_host *host, int64_t op, double kappa,
                               int64_t count, const char *order);
/* The pending K-FAC inverses become the ones in use. */
int32_t pfrt_rank_kfac_promote_inverses(pfrt_rank_host *host, int64_t op);

#ifdef __cplusplus
}
#endif

#endif /* PF_RUNTIME_PFRT_RANK_H */
