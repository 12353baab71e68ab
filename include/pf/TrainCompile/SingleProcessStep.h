//===- SingleProcessStep.h - The training step in one process ---*- C++ -*-===//
#ifndef PF_TRAINCOMPILE_SINGLEPROCESSSTEP_H
#define PF_TRAINCOMPILE_SINGLEPROCESSSTEP_H

#include "pf/Train/TrainingStep.h"

#include <memory>

namespace mlir::pf::train {

struct TrainConfig;
struct TrainingRun;

/// Imports the model, builds the training step (pf-training pipeline) and
/// JIT-compiles it, with the evaluation model when --eval-every or the
/// adaptive damping needs it. On failure prints the error and returns null
/// (exit status 1).
std::unique_ptr<TrainingStep> createSingleProcessStep(TrainConfig &config, TrainingRun &run);

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_SINGLEPROCESSSTEP_H
