//===- RankExecutor.h - JIT-compile and run a module's rank programs -*- C++ -*-===//
//
// The compiler's side of a pipelined rank (pf-train --pipeline, pf-run
// --run-ranks): every rank of an `mpirun -np D` job compiles the stage
// functions its own `pf.rank_program` calls (a CompiledProgram over them:
// only their parameters), lowers its program with pf-lower-rank-programs and
// JIT-compiles it, reads what the host must know of the program from its IR
// (describeRank) and runs it with the LLVM-free RankRunner
// (pf/RankRuntime/RankRunner.h), the same runner pf-trainer runs an
// artifact's rank library with. See docs/pipeline-execution.md, "Running
// the programs on ranks".
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_RANKEXECUTOR_H
#define PF_DRIVER_RANKEXECUTOR_H

#include "pf/Driver/Runner.h"
#include "pf/RankRuntime/RankRunner.h"

#include <memory>

namespace mlir {
class ExecutionEngine;
class Operation;
namespace pf {
class RankProgramOp;
} // namespace pf
} // namespace mlir

namespace mlir::pf::driver {

/// What the host must know of `program` (a pf.rank_program of `module`)
/// besides its code; `overlapTransfers` is the lowering's `overlap`.
RankProgramTable describeRankProgram(mlir::pf::RankProgramOp program, bool overlapTransfers);
/// Rank `rank`'s program of `module` (one verified program per rank of a
/// job of `ranks`) and what the runner needs besides.
llvm::Expected<RankPlan> describeRank(mlir::ModuleOp module, int32_t rank, int32_t ranks,
                                      bool overlapTransfers);
/// The rank's window programs (`@rank<r>_window<k>`, k < `steps`, added by
/// addKfacWindowPrograms); an error unless every window step has one that
/// calls only `functions`.
llvm::Expected<std::vector<mlir::pf::RankProgramOp>>
windowPrograms(mlir::ModuleOp module, int32_t rank, int64_t steps,
               const std::vector<std::string> &functions);

/// A CompiledProgram as the runner's StagePrograms.
std::unique_ptr<StagePrograms> jitStagePrograms(std::unique_ptr<CompiledProgram> program);

/// One rank of a pipelined job, JIT-compiled from `module`.
class JitRank {
public:
  struct Options {
    int threads = 0;            ///< runtime threads; 0 = the runtime's default
    int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
    bool recordTimes = false;   ///< keep an ExecutedOp per executed op
    /// The lowering's `overlap`: a recv is posted at its op and waited for
    /// right before the first op that reads the value; a send is posted at
    /// its op and completed at the end of the step. Off: blocking send and
    /// recv at their ops.
    bool overlapTransfers = true;
    /// The stage functions' context: backend (PFRT_BACKEND_*), device
    /// ordinal, GEMM precision, and whether they run on backend memory
    /// (always so on CUDA; on the CPU the check of that path), with the
    /// stage values on a communicator of `transferBackend` (PFRT_COMM_*).
    int32_t backend = 0;
    int32_t device = 0;
    int32_t gemmPrecision = 0;
    bool deviceBuffers = false;
    int32_t transferBackend = 0;
  };
  /// Checks that the module has one verified program per rank of `world`,
  /// compiles this rank's stage functions and program.
  static llvm::Expected<std::unique_ptr<JitRank>>
  create(mlir::ModuleOp module, pfrt_context *ctx, pfrt_comm *world, const Options &options);
  ~JitRank();

  RankRunner &runner() { return *rankRunner; }
  /// This rank's pf.rank_program.
  mlir::pf::RankProgramOp program() const;
  /// K-FAC in the bubbles: compiles the module's window programs of this
  /// rank (addKfacWindowPrograms added them) and runs them from step
  /// warmup+1 on (RankRunner::useKfacWindow).
  llvm::Error useKfacWindow(int64_t warmup, int64_t steps);

private:
  JitRank() = default;
  llvm::Expected<std::vector<CompiledRankProgram>>
  compilePrograms(const std::vector<mlir::pf::RankProgramOp> &programs);
  mlir::Operation *programOp = nullptr;
  Options options;
  std::vector<std::unique_ptr<mlir::ExecutionEngine>> engines;
  std::unique_ptr<RankRunner> rankRunner;
};

struct RankRunOptions {
  std::string inputsFile;  ///< graph inputs (.npz), N × a micro-batch's rows; read by every rank
  std::string outputsFile; ///< written by rank 0 (empty: none)
  /// Must equal the programs' `microbatches` when > 0; 0 takes theirs.
  int64_t microbatches = 0;
  int threads = 0;            ///< runtime threads of each rank; 0 = the runtime's default
  int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
  bool overlapTransfers = true; ///< JitRank::Options::overlapTransfers
};

/// pf-run --run-ranks, on every rank of the job: creates the communicator,
/// runs this rank's program and gathers `loss` and every `grad/<param>` on
/// rank 0. A failure on any rank prints `rank R: <message>` and ends the whole
/// job (pfrt_comm_abort); returns the process exit code otherwise.
int runRanksTool(mlir::ModuleOp module, const RankRunOptions &options);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_RANKEXECUTOR_H
