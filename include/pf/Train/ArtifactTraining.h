//===- ArtifactTraining.h - Training from an artifact -------------*- C++ -*-===//
//
// pf-trainer's run (docs/artifacts.md): the training loop over a training
// artifact's compiled step, loaded without MLIR or LLVM. The run options
// default to those the artifact was compiled with; what is compiled into
// the step (the batch, the optimizer, K-FAC) is the artifact's.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_ARTIFACTTRAINING_H
#define PF_TRAIN_ARTIFACTTRAINING_H

#include "pf/Train/RunConfig.h"

#include <map>
#include <string>

namespace mlir::pf::train {

/// What pf-trainer is asked to do.
struct TrainerOptions {
  std::string artifact, corpusFile;
  /// Run options given on the command line, by flag name without "--"
  /// (steps, lr, ...: trainerRunOptions()), over the artifact's.
  std::map<std::string, std::string> runOptions;
  std::string device = "cpu";
  int32_t gemmPrecision = 0; ///< PFRT_GEMM_*
  bool deviceBuffers = false;
};

/// The run options pf-trainer takes, with their help, in --help order.
const std::map<std::string, std::string> &trainerRunOptions();

/// Trains from options.artifact; returns the exit status (0, 1, or 130
/// when SIGINT or SIGTERM stopped the run after a checkpoint). Errors are
/// printed as "pf-trainer: error: ...".
int trainFromArtifact(const TrainerOptions &options);

} // namespace mlir::pf::train

#endif // PF_TRAIN_ARTIFACTTRAINING_H
