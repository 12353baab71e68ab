//===- StageCalls.h - The host's inputs of a stage call ---------*- C++ -*-===//
//
// What a host gives a stage function besides the stage values: the graph
// inputs sliced to the call's micro-batch and the per-call scalars. Shared
// by the single-process stage runner (pf-run --run-stages) and the rank
// runner. On the C++ standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_RANKRUNTIME_STAGECALLS_H
#define PF_RANKRUNTIME_STAGECALLS_H

#include "pf/Support/Model.h"

namespace mlir::pf::driver {

/// Per-call scalars of a K-FAC step's stage functions (pf-split-stages with
/// pf-insert-kfac): the call's micro-batch index and the micro-batch's loss
/// count (its labels other than the ignore index), both i64, made by the host.
inline constexpr const char *kMicrobatchInput = "microbatch";
inline constexpr const char *kLossCountInput = "loss_count";
/// pf-build-rank-programs' `stage<s>_accumulate` also takes Σ c_m (1 when 0).
inline constexpr const char *kLossTotalInput = "loss_total";

/// A stage value (`act/*`, `saved/*`, `grad_act/*`, ...: StepNames.h),
/// handed between calls; any other argument name is a graph input.
bool isStageValue(const std::string &name);

/// A 0-d int64 array.
NpyArray scalarI64(int64_t value);

/// c_m for m = 0..microbatches-1: the labels of micro-batch m (rows of the
/// `labels` input) not equal to `ignoreIndex`.
::pf::Expected<std::vector<int64_t>> microbatchTokenCounts(const NamedArrays &graph,
                                                           int64_t microbatches,
                                                           int64_t ignoreIndex);

/// The inputs of `function` (its `specs`): stage values from `handed` (left
/// out unless `withStageValues`: a caller binding them itself), graph inputs
/// from `graph` sliced to rows [m·r, (m+1)·r) of dimension 0 (r: the
/// function's rows; `graph` holds `microbatches` × r), and the per-call
/// scalars `microbatch` (m) and `loss_count` (c_m, from `labels`).
::pf::Expected<NamedArrays> stageCallInputs(const std::vector<TensorSpec> &specs,
                                            const std::string &function,
                                            const NamedArrays &graph, const NamedArrays &handed,
                                            int64_t m, int64_t microbatches,
                                            int64_t ignoreIndex = -100,
                                            bool withStageValues = true);

} // namespace mlir::pf::driver

#endif // PF_RANKRUNTIME_STAGECALLS_H
