//===- SingleModelStep.h - A step that is one compiled function --*- C++ -*-===//
//
// The single-process step: one compiled function (a driver::Model) runs the
// whole step on the batch and updates the training state it holds, in this
// process, with the adaptive damping schedule's adaptations
// (AdaptiveDamping.h). pf-train's JIT-compiled step and pf-trainer's
// artifact step are this step over their kind of model; they add how it is
// built or loaded and the start-up line.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_SINGLEMODELSTEP_H
#define PF_TRAIN_SINGLEMODELSTEP_H

#include "pf/Train/AdaptiveDamping.h"
#include "pf/Train/Schedules.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Train/TrainingStep.h"

#include <map>
#include <set>
#include <string>

namespace mlir::pf::train {

class SingleModelStep : public TrainingStep {
public:
  explicit SingleModelStep(TrainingRun &run);

  bool reports() const override { return true; }
  Parameters stateParameters() override { return model->parameters(); }
  ::pf::Status copyStateToBackend() override { return model->copyParametersToBackend(); }
  bool stopsBefore(int64_t step) override;
  bool addKfacWindowInputs(int64_t step, Batch &inputs) override {
    return window.addSingleProcessInputs(step, inputs);
  }
  /// Runs the step; before an adapting step of the adaptive damping, copies
  /// the weights the evaluation reads.
  ::pf::Expected<StepResult> run(int64_t step, Batch &inputs) override;
  /// An adapting step's adaptation, then the step's K-FAC refresh issues
  /// (reportStepKfacIssues).
  ::pf::Status reportStep(int64_t step, const StepResult &result) override;
  ::pf::Expected<driver::Model *> evaluationModel() override { return evaluation; }
  ::pf::Status
  withCurrentWeights(const std::function<::pf::Status(const WeightLookup &)> &use) override;
  ::pf::Expected<std::optional<Batch>> checkpointState() override;

  /// --kfac-damping-schedule adaptive with the step's K-FAC `layers`, once
  /// the models are in use; an error when there are none. Needs the
  /// evaluation model.
  ::pf::Status useAdaptiveDamping(std::vector<KfacModelLayer> layers);

protected:
  /// Once the subclass built or loaded them: the step's model and the
  /// evaluation's (null when the run does not evaluate).
  void useModels(driver::Model &step, driver::Model *evaluationModel);

  TrainingRun &trainingRun;
  driver::Model *model = nullptr;
  driver::Model *evaluation = nullptr;
  /// The step's outputs of the last run.
  Batch outputs;

private:
  const KfacWindowRule window;
  TrainedWeights weights; // the step's parameters by name
  /// The adaptive damping: the K-FAC layers whose update it measures, and
  /// for an adapting step the weights before it.
  std::vector<KfacModelLayer> adaptiveLayers;
  bool adapts = false;
  WeightCopies before;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_SINGLEMODELSTEP_H
