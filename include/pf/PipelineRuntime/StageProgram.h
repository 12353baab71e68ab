//===- StageProgram.h - run a module's pipeline stages in one process -*- C++ -*-===//
//
// The single-process pipeline executor over CompiledProgram: the stage
// functions of pf-split-stages (`stage<s>_forward` / `stage<s>_backward`) of
// one module, run for M micro-batches in GPipe order (every forward, then
// every backward; a split backward as its input half, then its weight half) with the named values wired between them, and the loss and
// gradients combined as pf-split-microbatches does in one function. The
// MPI executor runs the same per-stage calls, one rank per stage.
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_STAGEPROGRAM_H
#define PF_DRIVER_STAGEPROGRAM_H

#include "pf/Driver/Runner.h"
#include "pf/RankRuntime/StageCalls.h"

namespace mlir::pf::driver {

/// The stage functions of `module`, `stage0_forward, stage0_backward, ...`
/// (or `stage<s>_backward_input, stage<s>_backward_weight` in place of a
/// stage's backward); an error unless stages 0..D-1 each have a forward and a
/// backward.
llvm::Expected<std::vector<std::string>> stageFunctionNames(mlir::ModuleOp module);

struct StageRunOptions {
  int64_t microbatches = 1; ///< graph inputs hold this many micro-batches' rows
  int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
};

struct StageRunStats {
  int64_t stages = 0, microbatches = 0;
  /// Bytes of one micro-batch's `saved/*` results of each stage's forward:
  /// one activation slot; GPipe keeps `microbatches` slots per stage.
  std::vector<int64_t> slotBytes;
  /// The part of slotBytes that is a `saved/<id>` of an `act/<id>` argument
  /// (the same value: a host may keep the received buffer instead of a copy).
  std::vector<int64_t> slotArgumentBytes;
  int64_t totalSlotBytes = 0; ///< Σ over stages of microbatches × slotBytes
  std::vector<int64_t> tokenCounts; ///< counted labels of each micro-batch
};

/// Shared with the MPI executor (RankExecutor.h): the pieces of one stage
/// call and of the combination over micro-batches.

/// Σ_m c_m·x_m / Σ_m c_m in micro-batch order, each product rounded before
/// the sum (pf-split-microbatches' weighted sum); Σ c_m = 0 counts as 1.
/// `pieces[m]` is x_m (f32 or f64, all of one shape); a null piece (a
/// micro-batch another replica ran) is left out of the sum but its c_m
/// still counts in the divisor, so the members' results add up to the
/// whole; at least one piece must be there.
llvm::Expected<NpyArray> weightedMicrobatchSum(const std::string &name,
                                               const std::vector<const NpyArray *> &pieces,
                                               const std::vector<int64_t> &counts);

/// Runs the stages of `program` (compiled from stageFunctionNames) over
/// `inputs` (the graph inputs, each with microbatches × the micro-batch's
/// rows) and returns `loss` and every `grad/<param>`: a gradient returned by
/// several stages (the tied embedding) is summed in stage order 0, 1, ...;
/// with M > 1 micro-batches the loss and gradients are Σ_m c_m·x_m / Σ_m c_m
/// (c_m: labels of micro-batch m not equal to ignoreIndex; Σ = 0 counts as
/// 1), in micro-batch order.
llvm::Error runStages(CompiledProgram &program, const std::map<std::string, NpyArray> &inputs,
                      const StageRunOptions &options, std::map<std::string, NpyArray> &outputs,
                      StageRunStats &stats);

/// pf-run --run-stages: compiles the stage functions of `module`, runs them
/// on the .npz `inputsFile`, prints the slots and outputs, writes
/// `outputsFile` (when not empty). Returns the process exit code.
int runStagesTool(mlir::ModuleOp module, const std::string &inputsFile,
                  const std::string &outputsFile, int64_t microbatches, int threads);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_STAGEPROGRAM_H
