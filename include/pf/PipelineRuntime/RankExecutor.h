//===- RankExecutor.h - run a module's per-rank programs on MPI ranks -*- C++ -*-===//
//
// The MPI executor of pf-build-rank-programs' output: every rank of an
// `mpirun -np D` job compiles the stage functions its own `pf.rank_program`
// calls (a CompiledProgram over them: only their parameters), lowers its
// program with pf-lower-rank-programs and runs that compiled code: the
// program moves its stage values itself (pfrt_comm_* on the descriptors of
// its arena, which this executor allocates once); the executor serves its
// other calls (pfrt_rank.h): stage calls on those descriptors, and the step
// end's collectives on named gradients.
// Loss and gradients are combined over micro-batches exactly as
// `pf-run --run-stages` does in one process (StageProgram.h); a program that
// ends in pf.clip_gradients / an update clips and applies them, which makes a
// run of the program one training step (pf-train --pipeline). See
// docs/pipeline-execution.md, "Running the programs on ranks".
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_RANKEXECUTOR_H
#define PF_DRIVER_RANKEXECUTOR_H

#include "pf/Driver/Runner.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <set>

typedef struct pfrt_comm pfrt_comm;
typedef struct pfrt_tensor pfrt_tensor;
struct pfrt_rank_host;

namespace mlir {
class ExecutionEngine;
class Operation;
namespace pf {
class RankProgramOp;
} // namespace pf
} // namespace mlir

namespace mlir::pf::driver {

using Values = std::map<std::string, NpyArray>;

/// One executed op of a rank's program, on the job's aligned clock
/// (pfrt_comm_wall_time, seconds).
struct ExecutedOp {
  int64_t step = 0; ///< the step argument of RankRunner::runStep
  int64_t op = 0;   ///< index of the op in the rank's program
  /// The program it ran in: -1 the rank's program, k its window program k.
  int64_t windowStep = -1;
  double start = 0, end = 0;
};

/// One rank of a pipelined job: its program checked against the job and
/// compiled, run once per step.
class RankRunner {
public:
  struct Options {
    int threads = 0;            ///< runtime threads; 0 = the runtime's default
    int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
    bool recordTimes = false;   ///< keep an ExecutedOp per executed op
    /// The lowering's `overlap`: a recv is posted at its op and waited for
    /// right before the first op that reads the value; a send is posted at
    /// its op and completed at the end of the step (its bytes of the arena
    /// kept until then). Off: blocking send and recv at their ops.
    bool overlapTransfers = true;
    /// The stage functions' context: backend (PFRT_BACKEND_*), device
    /// ordinal, GEMM precision, and whether they run on backend memory
    /// (always so on CUDA; on the CPU the check of that path). On backend
    /// memory, the stage values a rank sends or receives (activations and
    /// their gradients) travel in backend memory, on a communicator of
    /// `transferBackend` (PFRT_COMM_*) created on that context: NCCL, or MPI
    /// staged through host buffers. The step's other exchanges (loss,
    /// gradient sums, norms) stay on `world`, from host memory.
    int32_t backend = 0;
    int32_t device = 0;
    int32_t gemmPrecision = 0;
    bool deviceBuffers = false;
    int32_t transferBackend = 0;
  };
  /// Checks that the module has one verified program per rank of `world`
  /// and compiles the stage functions this rank's program calls.
  static llvm::Expected<std::unique_ptr<RankRunner>>
  create(mlir::ModuleOp module, pfrt_context *ctx, pfrt_comm *world, const Options &options);
  ~RankRunner();

  int32_t rank() const { return rankIndex; }
  mlir::pf::RankProgramOp program() const;
  int64_t microbatches() const;
  /// The stage functions the program calls, in order of first call.
  const std::vector<std::string> &functions() const { return functionNames; }
  CompiledProgram &compiled() { return *compiledProgram; }
  /// "rank r: stages [..], functions .., parameters P (B bytes)\n".
  std::string summary() const;

  /// Runs the program once on `graph`: every graph input its functions read,
  /// per-micro-batch ones with N × a micro-batch's rows, scalars (`lr`,
  /// `step`) whole. `results`: `loss` on the rank holding the last stage and
  /// the gradients this rank reports (an all-reduced one only on its lowest
  /// member), combined over the micro-batches and, when the program clips,
  /// clipped.
  llvm::Error runStep(const Values &graph, Values &results, int64_t step = 0);
  /// The last step's `kfac/issues` of this rank's precondition calls: K-FAC
  /// inverse refreshes that needed more damping or kept the previous inverse.
  int64_t lastKfacIssues() const { return kfacIssues; }
  /// K-FAC in the bubbles: from step warmup+1 on, step t runs the window
  /// program (t - warmup - 1) mod K (the module's `@rank<r>_window<k>`,
  /// added by addKfacWindowPrograms after this runner was created; their
  /// calls are the ones compiled). Errors: no or incomplete window programs.
  llvm::Error useKfacWindow(int64_t warmup, int64_t steps);
  /// The program step `step` runs: -1 this rank's program, or a window step.
  int64_t windowStepOf(int64_t step) const;
  /// Resuming inside a window at `step`: the pending inverses the windows'
  /// earlier steps computed were not checkpointed; compute them again (the
  /// factors are the same until the next window, so are the inverses) —
  /// the previous window's all when `step` starts a window, else this
  /// window's calls of its earlier steps.
  llvm::Error recomputePendingInverses(const Values &graph, int64_t step);
  /// The names of the pending K-FAC inverses (pf.kfac_pending), which
  /// checkpoints leave out.
  const std::set<std::string> &pendingParameters() const { return pending; }
  /// The per-micro-batch stage values (act/*, grad_act/*, saved/*, …) of a
  /// step: the received and computed ones, a sent one until its send
  /// completed (planStageValues, PFRankProgram.h).
  struct ActivationFigures {
    int64_t slots = 0;      ///< most micro-batches with saved activations at once
    int64_t bytes = 0;      ///< most bytes live at once
    int64_t arenaBytes = 0; ///< the arena the programs lay them out in
  };
  /// The plans of the rank's programs (the warm-up one and, once they
  /// exist, the window ones), the largest of each figure; `arenaBytes` is
  /// what the runner allocated, once, for all of them.
  ActivationFigures plannedActivations() const;
  /// The most bytes of gradients the host's step end held at once in any
  /// step so far: the step's gradients and micro-batch pieces the program
  /// reported (pf.step_result) and rows posted to another rank. (The pieces
  /// and running sums of the program live in its arena.)
  int64_t measuredGradientBytes() const { return gradientPeakBytes; }
  /// Whether the stage functions (and so the stage values' slots) are in
  /// backend memory (--device-buffers, CUDA).
  bool onBackendMemory() const;
  /// Copies of stage values between host and backend memory the stage calls
  /// made so far: 0 when every slot is bound in place (what the slots in
  /// backend memory are for).
  int64_t stageValueCopies() const;
  /// Bytes of stage values host code read during the steps (every read goes
  /// through one counted place), and of them the results the programs handed
  /// over (pf.step_result: the loss; the gradients with gradient-results).
  /// Equal when the programs do all the step's work on their values.
  int64_t hostStageValueBytes() const { return hostStageValueByteCount; }
  int64_t resultBytes() const { return resultByteCount; }
  const std::vector<ExecutedOp> &executed() const { return executedOps; }

private:
  RankRunner() = default;
  class Step;
  pfrt_context *ctx = nullptr;
  pfrt_comm *world = nullptr;
  /// On backend memory: the stage values' communicator and its context (the
  /// compiled program's); else null (they travel on `world` from `ctx`).
  pfrt_comm *transferComm = nullptr;
  pfrt_context *transferContext = nullptr;
  /// On backend memory, `body` reads or writes parameters on the host: their
  /// backend copies come to the host before and go back after.
  llvm::Error withHostParameters(llvm::function_ref<llvm::Error()> body);
  int32_t rankIndex = 0;
  mlir::Operation *programOp = nullptr;
  /// K-FAC window programs by window step, once useKfacWindow ran.
  std::vector<mlir::Operation *> windowPrograms;
  int64_t kfacWarmup = 0;
  std::set<std::string> pending;
  mlir::Operation *programForStep(int64_t step) const;
  /// A lowered program (pfrt_rank.h): host, ctx, comm, slots, arena, groups,
  /// host_ctx, world.
  using LoweredProgram = int32_t (*)(pfrt_rank_host *, pfrt_context *, pfrt_comm *,
                                     pfrt_tensor *, void *, pfrt_comm **, pfrt_context *,
                                     pfrt_comm *);
  /// The programs as compiled code (pf-lower-rank-programs, JIT-compiled):
  /// each op calls back into the step's services (pfrt_rank.h).
  std::map<mlir::Operation *, LoweredProgram> loweredPrograms;
  /// Each program's `%groups` (programCommGroups): communicators of the
  /// transfer context over the member groups of its own collectives.
  std::map<mlir::Operation *, std::vector<pfrt_comm *>> programGroups;
  /// Each program's number of stage-value slots (stageValueSlots).
  llvm::DenseMap<mlir::Operation *, int64_t> slotCounts;
  std::vector<std::unique_ptr<mlir::ExecutionEngine>> programEngines;
  llvm::Error compilePrograms(const std::vector<mlir::Operation *> &programs);
  /// Chimera with K-FAC: the factors this rank's replica updates without
  /// micro-batch 0's call. Their copies start each due step from zero, so
  /// that the all_reduce of the step end adds only this replica's curvature
  /// to the other's (which decays the previous factor). At a step whose
  /// kfac_curvature is 0 (--kfac-factor-every) neither updates; if the
  /// step's program still sums the copies, this one holds -0.0 (the
  /// identity), so the sum is the other's factor bit for bit.
  struct ReplicaFactor {
    std::string name;
    int64_t every = 1;
    bool hostDecided = false; ///< due when the graph input kfac_curvature is non-zero
  };
  std::vector<ReplicaFactor> replicaFactors;
  /// Chimera: the warm-up program's inverse functions that a lower rank also
  /// calls (that rank reports their kfac/issues).
  std::set<std::string> unreportedInverses;
  /// K-FAC in the bubbles, Chimera: the pending inverses this rank computes
  /// in a window; the window's all_reduce of one it does not compute adds
  /// -0.0 (the identity), so every member ends with the computing rank's.
  std::set<std::string> ownedPending;
  llvm::Error findReplicaFactors(mlir::ModuleOp module);
  llvm::Error startReplicaFactors(const Values &graph, mlir::Operation *program);
  llvm::Error promoteInverses();
  llvm::Error promoteHostInverses();
  llvm::Error zeroReplicaFactors(int64_t step, int64_t curvature,
                                 const std::set<std::string> &summed);
  llvm::Error allReduceHostParameter(const CompiledModel::Parameter &param, pfrt_comm *group);
  llvm::Error runInverse(const std::string &function, const Values &graph, bool reports = true);
  llvm::Expected<pfrt_comm *> groupOf(llvm::ArrayRef<int64_t> members);
  /// The group of `members` on the communicator the lowered programs run
  /// their collectives on (the transfer communicator, where there is one).
  llvm::Expected<pfrt_comm *> transferGroupOf(llvm::ArrayRef<int64_t> members);
  /// Sums parameter `name` over `members` in place (a pending inverse that
  /// this rank does not own contributes -0.0).
  llvm::Error allReduceParameter(const std::string &name, llvm::ArrayRef<int64_t> members);
  /// Resuming at a window's start: the last window step's all-reduces of
  /// pending inverses, after they were recomputed.
  llvm::Error exchangePendingInverses();
  std::vector<std::string> functionNames;
  std::unique_ptr<CompiledProgram> compiledProgram;
  Options options;
  std::map<std::vector<int32_t>, pfrt_comm *> groups, transferGroups;
  int64_t kfacIssues = 0;
  std::vector<ExecutedOp> executedOps;
  /// The stage values' arena (planStageValues of each program, the
  /// largest), in the memory the stage functions run on.
  void *arena = nullptr;
  int64_t arenaBytes = 0;
  pfrt_context *arenaContext = nullptr;
  int64_t gradientPeakBytes = 0;
  int64_t hostStageValueByteCount = 0, resultByteCount = 0;
};

/// Point-to-point hand-over of named arrays (count, then per array a header,
/// the name and the data) on the tag pfrt_comm_max_tag, above every program
/// tag: the outputs, checkpoints and timelines gathered on one rank.
llvm::Error sendValues(pfrt_context *ctx, pfrt_comm *world, const Values &values, int32_t to);
/// Adds what `from` sends to `values`; a name already there is an error.
llvm::Error receiveValues(pfrt_context *ctx, pfrt_comm *world, int32_t from, Values &values);

struct RankRunOptions {
  std::string inputsFile;  ///< graph inputs (.npz), N × a micro-batch's rows; read by every rank
  std::string outputsFile; ///< written by rank 0 (empty: none)
  /// Must equal the programs' `microbatches` when > 0; 0 takes theirs.
  int64_t microbatches = 0;
  int threads = 0;            ///< runtime threads of each rank; 0 = the runtime's default
  int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
  bool overlapTransfers = true; ///< RankRunner::Options::overlapTransfers
};

/// pf-run --run-ranks, on every rank of the job: creates the communicator,
/// runs this rank's program and gathers `loss` and every `grad/<param>` on
/// rank 0. A failure on any rank prints `rank R: <message>` and ends the whole
/// job (pfrt_comm_abort); returns the process exit code otherwise.
int runRanksTool(mlir::ModuleOp module, const RankRunOptions &options);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_RANKEXECUTOR_H
