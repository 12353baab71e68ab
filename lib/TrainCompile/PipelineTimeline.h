//===- PipelineTimeline.h - A pipelined run's measured timeline -*- C++ -*-===//
//
// Internal to lib/Train: every rank's executed ops gathered on rank 0 and
// named by the rank programs, for --trace/--svg, the measured-against-
// simulated report, and the placement of K-FAC windows after the warm-up.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_PIPELINETIMELINE_H
#define PF_TRAIN_PIPELINETIMELINE_H

#include "pf/PipelineRuntime/MeasuredTimeline.h"
#include "pf/Train/RankStep.h"

#include "pf/PipelineRuntime/RankExecutor.h"
#include "pf/Train/Schedules.h"
#include "pf/TrainCompile/TrainConfig.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace mlir::pf::train {

/// Rank 0 collects every rank's executed ops (step, op, window step, start,
/// end) in `byRank`.
llvm::Error gatherTimeline(const RankJob &job, driver::RankRunner &runner,
                           std::vector<std::vector<driver::ExecutedOp>> &byRank);

/// Every rank's executed ops (rank 0 has every program, so it can name any
/// rank's op), steps counted from the run's first.
llvm::Expected<driver::MeasuredRun>
measuredRunOf(ModuleOp module, const std::vector<std::vector<driver::ExecutedOp>> &byRank,
              const PipelineRunOptions &pipeline, int64_t first);

/// --trace / --svg and the report; the figures leave out the first (warm-up)
/// step and, with K-FAC in the bubbles, the K-FAC warm-up.
llvm::Error writeMeasuredTimeline(const TrainConfig &config, ModuleOp module,
                                  const std::vector<std::vector<driver::ExecutedOp>> &byRank,
                                  const PipelineRunOptions &pipeline, int64_t first,
                                  const KfacWindowRule &window);

} // namespace mlir::pf::train

#endif // PF_TRAIN_PIPELINETIMELINE_H
