//===- TrainingStep.h - One process's part of a training step ---*- C++ -*-===//
//
// The training loop (TrainingLoop.h) drives a TrainingStep: the compiled
// step and the training state it updates, as one process holds them. Two
// kinds serve it: the single-process step (one compiled function,
// SingleModelStep.h: JIT-compiled by pf-train or loaded from an artifact by
// pf-trainer) and the pipelined step (this rank's program of an mpirun
// job). The loop owns what is the same for all (batches, schedules, progress
// lines, evaluation, checkpoints, signals); a step owns how a step runs,
// where the state lives and what only its kind of run reports.
//
// Errors a step returns carry their whole message; the loop hands them to
// fail().
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_TRAININGSTEP_H
#define PF_TRAIN_TRAININGSTEP_H

#include "pf/Train/Checkpoint.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/Masking.h"

#include "pf/Support/Model.h"
#include "pf/Support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mlir::pf::train {

/// What every process of the run learns from a step.
struct StepResult {
  double loss = 0; ///< the loss on the step's batch
  /// Whether the run stops after this step (a pipeline: a rank received
  /// SIGINT or SIGTERM) and whether by SIGTERM.
  bool stop = false, stopBySigterm = false;
};

class TrainingStep {
public:
  virtual ~TrainingStep();

  /// Whether this process prints the run's lines and writes its files
  /// (rank 0 of a pipeline).
  virtual bool reports() const = 0;
  /// Ends the run with `message` from this process; returns the exit status
  /// (a pipelined rank ends the whole job).
  virtual int fail(const std::string &message) = 0;

  /// This process's training state (parameters, optimizer and K-FAC state),
  /// which --resume loads on the host, and its copy to the step's memory.
  virtual Parameters stateParameters() = 0;
  virtual ::pf::Status copyStateToBackend() = 0;
  /// Adds `values` over the processes of the run (a pipeline's ranks, each
  /// holding its share of the state); one process has nothing to add.
  virtual ::pf::Status sumOverProcesses(std::vector<double> &values) {
    return ::pf::Status::success();
  }
  /// Before the first step `first` (after --resume, if `resumed`).
  virtual ::pf::Status beforeFirstStep(int64_t first, bool resumed) {
    return ::pf::Status::success();
  }
  /// The line that starts the run ("training ...").
  virtual void printStart() = 0;

  /// Whether a stop requested by a signal ends the run before `step`
  /// (single-process; a pipeline decides together after a step).
  virtual bool stopsBefore(int64_t step) { return false; }
  /// The step's K-FAC inputs that K-FAC windows decide (kfac_curvature, and
  /// for the single-process step kfac_refresh); false if none decide them.
  virtual bool addKfacWindowInputs(int64_t step, Batch &inputs) = 0;
  /// Runs step `step` on `inputs`.
  virtual ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) = 0;
  /// After a step with a finite loss, before its progress line: the step's
  /// K-FAC reports (refresh issues; the adaptive damping).
  virtual ::pf::Status reportStep(int64_t step, const StepResult &result) = 0;
  /// After the step's progress line and evaluation (a pipeline places its
  /// K-FAC windows after the warm-up); `stopping`: a signal ends the run
  /// after this step.
  virtual ::pf::Status endStep(int64_t step, bool stopping) {
    return ::pf::Status::success();
  }

  /// The evaluation model, built on first use; null on processes that do
  /// not evaluate.
  virtual ::pf::Expected<driver::Model *> evaluationModel() = 0;
  /// Calls `use` with the current weights on the process that reports
  /// (gathered from every rank of a pipeline).
  virtual ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) = 0;
  /// The state a checkpoint holds (`param/<name>`), on the process that
  /// reports; std::nullopt on the others.
  virtual ::pf::Expected<std::optional<Batch>> checkpointState() = 0;

  /// After the last step `last` and the final checkpoint (the pipeline's
  /// figures); `stopped`: by a signal, `bySigterm`: SIGTERM.
  virtual ::pf::Status finish(int64_t last, bool stopped, bool bySigterm) {
    return ::pf::Status::success();
  }
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_TRAININGSTEP_H
