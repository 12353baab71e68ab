//===- RankJob.h - This process's place in a pipelined job -----*- C++ -*-===//
//
// Internal to lib/Train: the communicator of an mpirun job's ranks, where
// this rank's stage functions run, and how a rank fails.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_RANKJOB_H
#define PF_TRAIN_RANKJOB_H

#include "pf/Runtime/pfrt.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mlir::pf::train {

/// This process's place in the job, and how it fails: one line naming the
/// rank, then the whole job ends (a rank returning would leave the others
/// waiting in a transfer with it).
struct RankJob {
  pfrt_context *ctx = nullptr;
  pfrt_comm *world = nullptr;
  int32_t rank = 0, size = 1;
  /// Where this rank's stage functions run (chooseRankDevice): backend,
  /// GPU, on backend memory, and the communicator of their stage values.
  int32_t backend = PFRT_BACKEND_CPU, device = 0;
  bool onBackendMemory = false;
  int32_t transferBackend = PFRT_COMM_MPI;

  int fail(const llvm::Twine &message) const;
  llvm::Error commError(const llvm::Twine &what) const;
  /// Sums `values` (f64) over all ranks in place.
  llvm::Error sum(std::vector<double> &values) const;
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_RANKJOB_H
