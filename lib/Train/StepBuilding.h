//===- StepBuilding.h - Options every compiled model of a run shares -*- C++ -*-===//
//
// Internal to lib/Train: the training step, the pipeline's stage programs
// and the evaluation model are built from the same graph passes and run on
// the same device.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_STEPBUILDING_H
#define PF_TRAIN_STEPBUILDING_H

#include "pf/Driver/Runner.h"
#include "pf/Train/TrainConfig.h"
#include "pf/Transforms/Graph/Passes.h"

namespace mlir::pf::train {

/// The graph passes run on the imported model.
inline GraphOptOptions graphOptions(const TrainConfig &config) {
  return GraphOptOptions{true, true, true, !config.noRetie};
}

/// --device, --device-buffers and --gemm-precision into a model's options.
void useDevice(const TrainConfig &config, driver::CompiledModel::Options &options);

} // namespace mlir::pf::train

#endif // PF_TRAIN_STEPBUILDING_H
