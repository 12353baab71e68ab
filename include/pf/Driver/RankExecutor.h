//===- RankExecutor.h - run a module's per-rank programs on MPI ranks -*- C++ -*-===//
//
// The MPI executor of pf-build-rank-programs' output: every rank of an
// `mpirun -np D` job compiles the stage functions its own `pf.rank_program`
// calls (a CompiledProgram over them: only their parameters) and runs the
// program op by op, the transfers and all-reduces going through pfrt_comm_*.
// Loss and gradients are combined over micro-batches exactly as
// `pf-run --run-stages` does in one process (StageProgram.h); rank 0 gathers
// them and writes the outputs (docs/pipeline-execution.md, "Running the
// programs on ranks").
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_RANKEXECUTOR_H
#define PF_DRIVER_RANKEXECUTOR_H

#include "pf/Driver/Runner.h"

namespace mlir::pf::driver {

struct RankRunOptions {
  std::string inputsFile;  ///< graph inputs (.npz), N × a micro-batch's rows; read by every rank
  std::string outputsFile; ///< written by rank 0 (empty: none)
  /// Must equal the programs' `microbatches` when > 0; 0 takes theirs.
  int64_t microbatches = 0;
  int threads = 0;            ///< runtime threads of each rank; 0 = the runtime's default
  int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
};

/// pf-run --run-ranks, on every rank of the job: creates the communicator,
/// runs this rank's program and gathers `loss` and every `grad/<param>` on
/// rank 0. A failure on any rank prints `rank R: <message>` and ends the whole
/// job (pfrt_comm_abort); returns the process exit code otherwise.
int runRanksTool(mlir::ModuleOp module, const RankRunOptions &options);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_RANKEXECUTOR_H
