//===- Train.h - Run a training run -----------------------------*- C++ -*-===//
//
// The entry of the training library: pf-train binds its flags to a
// TrainConfig and calls train().
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAINCOMPILE_TRAIN_H
#define PF_TRAINCOMPILE_TRAIN_H

#include "pf/Train/TrainingLoop.h"
#include "pf/TrainCompile/TrainConfig.h"

#include "llvm/ADT/Twine.h"

namespace mlir::pf::train {

/// Checks `config`, reads the corpus and trains: single-process, or with
/// --pipeline as this rank of an mpirun job. `argc`/`argv`: the command
/// line, which every rank of a pipeline must share. Errors are printed as
/// "pf-train: error: ..."; returns the exit status (0, 1, or 130 when
/// SIGINT or SIGTERM stopped the run after a checkpoint).
int train(TrainConfig &config, int argc, char **argv);

/// printRunError (TrainingLoop.h) of an LLVM message: "pf-train: error: ...".
inline int printError(const llvm::Twine &message) { return printRunError(message.str()); }

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_TRAIN_H
