//===- Artifact.h - pf-train --compile-only -----------------------*- C++ -*-===//
//
// Compile once, train anywhere (docs/artifacts.md): pf-train --compile-only
// --artifact DIR builds the training step and the evaluation model as
// pf-train would, compiles them ahead of time into DIR (shared libraries,
// weights, manifest.json, pf/Train/Artifact.h) and stops; pf-trainer trains
// from DIR without MLIR or LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAINCOMPILE_ARTIFACT_H
#define PF_TRAINCOMPILE_ARTIFACT_H

#include "pf/Train/Corpus.h"
#include "pf/TrainCompile/TrainConfig.h"

namespace mlir::pf {
struct PipelineRunOptions;
} // namespace mlir::pf

namespace mlir::pf::train {

/// Writes the artifact of the run `config` on `corpus` (checked already)
/// into config.artifactDir; `argc`/`argv`: the command line, recorded.
/// Returns the exit status (errors printed).
/// pf-train --compile-only: the training artifact of `config` (pipelined
/// when `pipeline`, as preparePipeline parsed it).
int writeTrainingArtifact(const TrainConfig &config, const PipelineRunOptions *pipeline,
                          const Corpus &corpus, int argc,
                          char **argv);

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_ARTIFACT_H
