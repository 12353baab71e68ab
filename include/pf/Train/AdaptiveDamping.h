//===- AdaptiveDamping.h - --kfac-damping-schedule adaptive -----*- C++ -*-===//
//
// The single-process step's side of the adaptive damping schedule
// (docs/training.md, "Damping schedules"): before an adapting step, copies
// of the weights; after it, the loss on the same batch with only the K-FAC
// layers updated (the evaluation model), K-FAC's quadratic model of that
// change (DampingAdaptation.h) and λ for the next steps.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_ADAPTIVEDAMPING_H
#define PF_TRAIN_ADAPTIVEDAMPING_H

#include "pf/Support/Model.h"
#include "pf/Train/DampingAdaptation.h"
#include "pf/Train/Masking.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::pf::train {

class KfacDampingSchedule;

/// A parameter's bytes before a step.
struct WeightCopy {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};
using WeightCopies = std::map<std::string, WeightCopy>;
/// The training step's parameters by name.
using TrainedWeights = std::map<std::string, driver::ModelParameter>;

/// Copies of the weights the evaluation model reads (every K-FAC layer's
/// among them), taken before an adapting step updates them.
::pf::Expected<WeightCopies> copyEvaluationWeights(driver::Model &model,
                                                   const TrainedWeights &trained,
                                                   driver::Model &eval);

/// One adaptation after `step`, whose loss on its batch `maskedBatch` before
/// the update was `lossBefore`: the evaluation model computes the loss on
/// the same batch with the K-FAC layers updated and every other weight as
/// before the step (`before`), so that ρ compares the change that λ shapes
/// with K-FAC's quadratic model of it; then λ for the next steps (in
/// `schedule`). `outputs`: the step's (each K-FAC layer's raw gradient);
/// `print`: the detail line.
::pf::Status adaptDamping(int64_t step, double lossBefore, const Batch &maskedBatch,
                         driver::Model &model, const TrainedWeights &trained,
                         driver::Model &eval, const std::vector<KfacModelLayer> &layers,
                         const WeightCopies &before, const Batch &outputs,
                         const DampingAdaptation &rule, KfacDampingSchedule &schedule, bool print);

} // namespace mlir::pf::train

#endif // PF_TRAIN_ADAPTIVEDAMPING_H
