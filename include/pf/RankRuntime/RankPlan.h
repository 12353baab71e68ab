//===- RankPlan.h - What the host needs of a rank's compiled program -*- C++ -*-===//
//
// A rank of a pipelined job runs its lowered pf.rank_program (pfrt_rank.h)
// and serves its calls. What the host must know of the program besides its
// code (its slots, the member groups of its collectives, which of its calls
// report K-FAC issues, Chimera's replica factors, ...) is fixed when the
// program is built: pf-train reads it from the IR (describeRank,
// lib/PipelineRuntime/RankExecutor.cpp), pf-trainer from an artifact's
// manifest, where pf-train --compile-only wrote it. On the C++ standard
// library only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_RANKRUNTIME_RANKPLAN_H
#define PF_RANKRUNTIME_RANKPLAN_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::pf::driver {

/// The `kind` of pfrt_rank_run_stage: the values of pf's StageTaskKind
/// (PFProgramEnums.td; RankExecutor.cpp asserts they agree).
enum class StageCallKind : int32_t {
  Forward = 0,
  Backward = 1,
  BackwardInput = 2,
  BackwardWeight = 3,
  KfacFactorA = 4,
  KfacFactorB = 5,
  KfacInverse = 6,
  Precondition = 7,
  Accumulate = 8,
  Update = 9,
};

/// A parameter summed in place over member ranks (pf.all_reduce by name).
struct ParameterSum {
  std::string name;
  std::vector<int64_t> ranks;
};

/// One pf.rank_program as the host runs it.
struct RankProgramTable {
  std::string name;   ///< the op's symbol: rank<r> or rank<r>_window<k>
  std::string symbol; ///< its lowered function: pf_<name>
  int64_t windowStep = -1, windowSteps = 0; ///< K-FAC window step k of K (-1: none)
  int64_t slots = 0;                        ///< stageValueSlots
  /// programCommGroups: the member groups of its collectives over fewer
  /// ranks, in the order the program takes them from `groups`.
  std::vector<std::vector<int64_t>> commGroups;
  /// planStageValues: the arena its values need, the most bytes live and
  /// the most micro-batches' saved activations at once.
  int64_t arenaBytes = 0, liveBytes = 0, savedMicrobatches = 0;
  /// Gradients this rank sums with lower members (the lowest reports them)
  /// and the preconditioned gradients it broadcasts to the other replica:
  /// which precondition calls report their K-FAC issues here.
  std::vector<std::string> summedElsewhere, broadcastHere;
  /// Every value the program all-reduces, and of them the parameters.
  std::vector<std::string> allReduced;
  std::vector<ParameterSum> parameterSums;
  /// Its kfac_inverse calls in order, and the pending inverses they compute.
  std::vector<std::string> inverseCalls, computedInverses;
};

/// Chimera with K-FAC: a factor this rank's replica updates without
/// micro-batch 0's call (RankRunner::startReplicaFactors).
struct ReplicaFactor {
  std::string name;
  int64_t every = 1;
  bool hostDecided = false; ///< due when the graph input kfac_curvature is non-zero
};

/// One rank of the job: its program and what the runner needs besides.
struct RankPlan {
  int32_t rank = 0, ranks = 1;
  int64_t microbatches = 1;
  std::vector<int64_t> stages;
  std::vector<int64_t> blocks; ///< the encoder blocks of its stages
  std::vector<std::string> functions; ///< the stage functions it calls, in order of first call
  std::vector<std::string> pending;   ///< pending K-FAC inverses (pf.kfac_pending) it holds
  std::vector<ReplicaFactor> replicaFactors;
  /// The warm-up program's inverse functions a lower rank also calls (that
  /// rank reports their kfac/issues).
  std::vector<std::string> unreportedInverses;
  RankProgramTable program;
};

/// One executed op of a rank's program, on the job's aligned clock
/// (pfrt_comm_wall_time, seconds).
struct ExecutedOp {
  int64_t step = 0; ///< the step argument of RankRunner::runStep
  int64_t op = 0;   ///< index of the op in the rank's program
  /// The program it ran in: -1 the rank's program, k its window program k.
  int64_t windowStep = -1;
  double start = 0, end = 0;
};

} // namespace mlir::pf::driver

#endif // PF_RANKRUNTIME_RANKPLAN_H
