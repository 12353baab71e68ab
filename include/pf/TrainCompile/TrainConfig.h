//===- TrainConfig.h - What a pf-train run is asked to do -------*- C++ -*-===//
//
// The configuration of a training run that compiles its step: the loop's
// part (RunConfig, on the standard library only) and what builds the step.
// pf-train's flags bind to these fields, the library (pf/TrainCompile/
// Train.h) runs it. The defaults are the flags' defaults (--help shows them).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAINCOMPILE_TRAINCONFIG_H
#define PF_TRAINCOMPILE_TRAINCONFIG_H

#include "pf/Driver/Device.h"
#include "pf/Train/RunConfig.h"
#include "pf/Transforms/Training/Passes.h"

#include "llvm/Support/Error.h"

#include <string>

namespace mlir::pf::train {

struct TrainConfig : RunConfig {
  std::string modelFile;
  /// --no-retie: keep an exporter's folded transposed copy of a parameter.
  bool noRetie = false;
  driver::GemmPrecision gemmPrecision = driver::GemmPrecision::FP32;
  /// --emit-step: the training step's IR, before lowering.
  std::string emitStepFile;
  /// --compile-only --artifact DIR: write the training artifact, do not train.
  bool compileOnly = false;
  std::string artifactDir;

  /// --pipeline was given (its options may be empty: every default).
  bool pipelined = false;
  std::string pipelineSpec;

  /// The training-step options (micro-batches, optimizer, K-FAC, ...): the
  /// same options and defaults as pf-opt --pf-training.
  TrainingOptions training;
  /// --optimizer as the command line spells it (for the start-up line).
  std::string optimizerName;

  /// Records in `step` what the loop must know of the step `training`
  /// builds; called once the schedules have asked for their inputs.
  void fixStepFacts();
};

/// Checks the damping schedule's options; with a schedule, the step takes
/// λ from its kfac_damping input (and, adaptive, reports each K-FAC layer's
/// raw gradient), which this sets in `config.training`.
llvm::Error prepareDampingSchedule(TrainConfig &config, bool inBubbles);

/// Checks the interval schedule's options; with a schedule, the step takes
/// kfac_curvature and kfac_refresh_due inputs, which this sets in
/// `config.training`.
llvm::Error prepareIntervalSchedule(TrainConfig &config);

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_TRAINCONFIG_H
