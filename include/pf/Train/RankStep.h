//===- RankStep.h - The training step as one rank of a pipeline -*- C++ -*-===//
//
// Each rank of an mpirun job runs its compiled rank program (RankRunner) for
// the step; the loss, the stop requests and the K-FAC reports are summed
// over the ranks so that every rank stops after the same step, and
// checkpoints and evaluations gather every rank's state on rank 0. One
// copy for both tools: pf-train's pipelined step (JIT-compiled programs,
// K-FAC windows placed at run time) derives from it, and pf-trainer runs an
// artifact's rank libraries with it. On the C++ standard library, the rank
// runtime and the runtime's C API only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_RANKSTEP_H
#define PF_TRAIN_RANKSTEP_H

#include "pf/RankRuntime/RankRunner.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Train/TrainingStep.h"

#include <set>

namespace mlir::pf::train {

/// This process's place in the job, and how it fails: one line naming the
/// rank, then the whole job ends (a rank returning would leave the others
/// waiting in a transfer with it).
struct RankJob {
  const char *tool = "pf-train"; ///< names the failing tool
  pfrt_context *ctx = nullptr;
  pfrt_comm *world = nullptr;
  int32_t rank = 0, size = 1;
  /// Where this rank's stage functions run (chooseRankDevice): backend,
  /// GPU, on backend memory, and the communicator of their stage values.
  int32_t backend = PFRT_BACKEND_CPU, device = 0;
  bool onBackendMemory = false;
  int32_t transferBackend = PFRT_COMM_MPI;

  /// Creates the runtime context and the world communicator (mpirun's).
  ::pf::Status start();
  int fail(const std::string &message) const;
  /// Sums `values` (f64) over all ranks in place.
  ::pf::Status sum(std::vector<double> &values) const;
  /// Destroys the communicator and ends MPI; the exit code (1 when that
  /// failed, else `code`).
  int end(int code);
};

/// --device, --device-buffers and --comm for this rank: on CUDA, the i-th
/// rank of a host takes GPU i (modulo the host's GPUs); the stage values
/// travel on NCCL when every rank of the job has a GPU of its own (--comm
/// auto) or when asked (--comm nccl), else on MPI staged through host
/// memory. On the CPU with --device-buffers they are staged too: the check
/// of that path. Prints the rank's line.
::pf::Status chooseRankDevice(const RunConfig &config, RankJob &job);

/// Every rank's 64-bit `hash` of what must be the same on every rank; an
/// error naming the ranks that differ from rank 0 (`problem` says what
/// differs, `fix` what to do).
::pf::Status checkSameOnEveryRank(const RankJob &job, uint64_t hash, const std::string &problem,
                                  const std::string &fix);
/// FNV-1a of byte strings, each followed by a separator.
struct Digest {
  uint64_t h = 1469598103934665603ULL;
  void add(const std::string &bytes);
  /// A file's bytes ("<unreadable>" when it cannot be read).
  void addFile(const std::string &file);
};
/// Every rank reads --resume on its own (on several hosts, each its own
/// copy): the ranks must resume one state, or their step numbers part and
/// their transfers never meet (a hang).
::pf::Status checkSameResume(const RankJob &job, const std::string &resumeFile);

class RankStep : public TrainingStep {
public:
  RankStep(TrainingRun &run, const RankJob &job) : trainingRun(run), job(job) {}

  /// The runner this rank runs; prints its start-up lines.
  void adoptRunner(driver::RankRunner &rankRunner);

  bool reports() const override { return job.rank == 0; }
  int fail(const std::string &message) override { return job.fail(message); }
  Parameters stateParameters() override { return runner->stages().parameters(); }
  ::pf::Status sumOverProcesses(std::vector<double> &values) override { return job.sum(values); }
  ::pf::Status copyStateToBackend() override { return runner->stages().copyParametersToBackend(); }
  bool addKfacWindowInputs(int64_t, Batch &) override { return false; }
  ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) override;
  ::pf::Status reportStep(int64_t step, const StepResult &) override;
  ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) override;
  ::pf::Expected<std::optional<Batch>> checkpointState() override;
  /// The rank's figures of the run (activations, gradients, host reads).
  ::pf::Status finish(int64_t last, bool stopped, bool bySigterm) override;

protected:
  TrainingRun &trainingRun;
  const RankJob &job;
  driver::RankRunner *runner = nullptr;

private:
  /// The step's sums over the ranks: the loss, a stop request, by SIGTERM,
  /// then each rank's K-FAC refresh issues.
  std::vector<double> figures;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
};

/// Every rank's state gathered on rank 0, in the single-process format
/// (`param/<name>`), so either kind of run can resume the other's
/// checkpoints; empty on the other ranks. A parameter held by two ranks
/// (the tied word embedding) must be equal on both.
::pf::Expected<Batch> gatherState(const RankJob &job, driver::StagePrograms &program);

} // namespace mlir::pf::train

#endif // PF_TRAIN_RANKSTEP_H
