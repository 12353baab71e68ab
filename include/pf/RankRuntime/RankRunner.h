//===- RankRunner.h - Run one rank's compiled pipeline program --*- C++ -*-===//
//
// One rank of an `mpirun -np D` job: its lowered pf.rank_program (compiled
// code that moves its stage values itself, pfrt_comm_* on the descriptors of
// an arena this runner allocates once) and the services that code calls
// (pfrt_rank.h): stage calls on those descriptors, and the step end's
// collectives on named parameters. The program and what the host must know
// of it (RankPlan) come from pf-train's JIT (lib/PipelineRuntime/
// RankExecutor.cpp) or from an artifact's rank library (pf-trainer): one
// runner for both. On the C++ standard library and the runtime's C API
// only. See docs/pipeline-execution.md, "Running the programs on ranks".
//
//===----------------------------------------------------------------------===//
#ifndef PF_RANKRUNTIME_RANKRUNNER_H
#define PF_RANKRUNTIME_RANKRUNNER_H

#include "pf/RankRuntime/RankPlan.h"
#include "pf/RankRuntime/StagePrograms.h"

#include <functional>
#include <map>
#include <memory>
#include <set>

typedef struct pfrt_comm pfrt_comm;
typedef struct pfrt_tensor pfrt_tensor;
struct pfrt_rank_host;

namespace mlir::pf::driver {

using Values = std::map<std::string, NpyArray>;

/// A lowered rank program (pfrt_rank.h): host, ctx, comm, slots, arena,
/// groups, host_ctx, world.
using LoweredRankProgram = int32_t (*)(pfrt_rank_host *, pfrt_context *, pfrt_comm *,
                                       pfrt_tensor *, void *, pfrt_comm **, pfrt_context *,
                                       pfrt_comm *);

/// A program's code and what the host knows of it.
struct CompiledRankProgram {
  RankProgramTable table;
  LoweredRankProgram function = nullptr;
};

class RankRunner {
public:
  struct Options {
    int64_t ignoreIndex = -100; ///< labels that do not count (pf-add-masked-lm-loss's)
    bool recordTimes = false;   ///< keep an ExecutedOp per executed op
    /// The stage values' communicator on backend memory (PFRT_COMM_*):
    /// NCCL, or MPI staged through host buffers. The step's other exchanges
    /// (loss, gradient sums, norms) stay on `world`, from host memory.
    int32_t transferBackend = 0;
  };
  /// Checks `plan` against the job and `stages`, creates the communicators
  /// the program uses (collective: every rank at the same point) and its
  /// arena.
  static ::pf::Expected<std::unique_ptr<RankRunner>>
  create(RankPlan plan, LoweredRankProgram program, std::unique_ptr<StagePrograms> stages,
         pfrt_context *ctx, pfrt_comm *world, const Options &options);
  ~RankRunner();

  int32_t rank() const { return rankIndex; }
  const RankPlan &plan() const { return rankPlan; }
  int64_t microbatches() const { return rankPlan.microbatches; }
  /// The stage functions the program calls, in order of first call.
  const std::vector<std::string> &functions() const { return rankPlan.functions; }
  StagePrograms &stages() { return *stagePrograms; }
  /// "rank r: stages [..], functions .., parameters P (B bytes)\n".
  std::string summary() const;

  /// Runs the program once on `graph`: every graph input its functions read,
  /// per-micro-batch ones with N × a micro-batch's rows, scalars (`lr`,
  /// `step`) whole. `results`: `loss` on the rank holding the last stage and
  /// the gradients the program hands over (pf.step_result).
  ::pf::Status runStep(const Values &graph, Values &results, int64_t step = 0);
  /// The last step's `kfac/issues` of this rank's precondition calls.
  int64_t lastKfacIssues() const { return kfacIssues; }
  /// K-FAC in the bubbles: from step warmup+1 on, step t runs window
  /// program (t - warmup - 1) mod K, `windows[k]` (K = windows.size()).
  ::pf::Status useKfacWindow(int64_t warmup, std::vector<CompiledRankProgram> windows);
  /// The program step `step` runs: -1 this rank's program, or a window step.
  int64_t windowStepOf(int64_t step) const;
  /// Resuming inside a window at `step`: the pending inverses the windows'
  /// earlier steps computed were not checkpointed; compute them again (the
  /// factors are the same until the next window, so are the inverses) —
  /// the previous window's all when `step` starts a window, else this
  /// window's calls of its earlier steps.
  ::pf::Status recomputePendingInverses(const Values &graph, int64_t step);
  /// The names of the pending K-FAC inverses, which checkpoints leave out.
  const std::set<std::string> &pendingParameters() const { return pending; }
  struct ActivationFigures {
    int64_t slots = 0;      ///< most micro-batches with saved activations at once
    int64_t bytes = 0;      ///< most bytes live at once
    int64_t arenaBytes = 0; ///< the arena the programs lay them out in
  };
  /// The plans of the rank's programs (the warm-up one and, once they
  /// exist, the window ones), the largest of each figure; `arenaBytes` is
  /// what the runner allocated, once, for all of them.
  ActivationFigures plannedActivations() const;
  /// The most bytes of gradients the host held at once in any step so far
  /// (the results the program handed over).
  int64_t measuredGradientBytes() const { return gradientPeakBytes; }
  bool onBackendMemory() const { return stagePrograms->onBackendMemory(); }
  int64_t stageValueCopies() const { return stagePrograms->stageValueCopies(); }
  /// Bytes of stage values host code read during the steps (every read goes
  /// through one counted place), and of them the results the programs handed
  /// over (pf.step_result). Equal when the programs do all the step's work.
  int64_t hostStageValueBytes() const { return hostStageValueByteCount; }
  int64_t resultBytes() const { return resultByteCount; }
  const std::vector<ExecutedOp> &executed() const { return executedOps; }

private:
  RankRunner() = default;
  class Step;
  friend class Step;
  pfrt_context *ctx = nullptr;
  pfrt_comm *world = nullptr;
  /// On backend memory: the stage values' communicator and its context (the
  /// stage programs'); else null (they travel on `world` from `ctx`).
  pfrt_comm *transferComm = nullptr;
  pfrt_context *transferContext = nullptr;
  /// On backend memory, `body` reads or writes parameters on the host: their
  /// backend copies come to the host before and go back after.
  ::pf::Status withHostParameters(const std::function<::pf::Status()> &body);
  int32_t rankIndex = 0;
  RankPlan rankPlan;
  std::unique_ptr<StagePrograms> stagePrograms;
  Options options;
  /// The warm-up program, then the window programs by window step.
  std::vector<CompiledRankProgram> programs;
  size_t windowCount() const { return programs.size() - 1; }
  int64_t kfacWarmup = 0;
  std::set<std::string> pending, unreportedInverses;
  /// K-FAC in the bubbles, Chimera: the pending inverses this rank computes
  /// in a window; the window's all_reduce of one it does not compute adds
  /// -0.0 (the identity), so every member ends with the computing rank's.
  std::set<std::string> ownedPending;
  /// Each program's `%groups`: communicators of the transfer context over
  /// the member groups of its own collectives (by program index).
  std::vector<std::vector<pfrt_comm *>> programGroups;
  ::pf::Status adoptPrograms(std::vector<CompiledRankProgram> added);
  const CompiledRankProgram &programForStep(int64_t step) const;
  ::pf::Status startReplicaFactors(const Values &graph, const RankProgramTable &program);
  ::pf::Status promoteInverses();
  ::pf::Status zeroReplicaFactors(int64_t step, int64_t curvature,
                                  const std::set<std::string> &summed);
  ::pf::Status allReduceHostParameter(const ModelParameter &param, pfrt_comm *group);
  ::pf::Status runInverse(const std::string &function, const Values &graph, bool reports = true);
  ::pf::Expected<pfrt_comm *> groupOf(const std::vector<int64_t> &members);
  /// The group of `members` on the communicator the lowered programs run
  /// their collectives on (the transfer communicator, where there is one).
  ::pf::Expected<pfrt_comm *> transferGroupOf(const std::vector<int64_t> &members);
  /// Sums parameter `name` over `members` in place (a pending inverse that
  /// this rank does not own contributes -0.0).
  ::pf::Status allReduceParameter(const std::string &name, const std::vector<int64_t> &members);
  /// Resuming at a window's start: the last window step's all-reduces of
  /// pending inverses, after they were recomputed.
  ::pf::Status exchangePendingInverses();
  std::map<std::vector<int32_t>, pfrt_comm *> groups, transferGroups;
  int64_t kfacIssues = 0;
  std::vector<ExecutedOp> executedOps;
  /// The stage values' arena (the largest program's plan), in the memory
  /// the stage functions run on.
  void *arena = nullptr;
  int64_t arenaBytes = 0;
  pfrt_context *arenaContext = nullptr;
  int64_t gradientPeakBytes = 0;
  int64_t hostStageValueByteCount = 0, resultByteCount = 0;
};

/// Point-to-point hand-over of named arrays (count, then per array a header,
/// the name and the data) on the tag pfrt_comm_max_tag, above every program
/// tag: the outputs, checkpoints and timelines gathered on one rank.
::pf::Status sendValues(pfrt_context *ctx, pfrt_comm *world, const Values &values, int32_t to);
/// Adds what `from` sends to `values`; a name already there is an error.
::pf::Status receiveValues(pfrt_context *ctx, pfrt_comm *world, int32_t from, Values &values);

} // namespace mlir::pf::driver

#endif // PF_RANKRUNTIME_RANKRUNNER_H
