//===- Artifact.h - A training artifact's manifest --------------*- C++ -*-===//
//
// A training artifact (docs/artifacts.md) is a directory that pf-train
// --compile-only writes and the MLIR-free pf-trainer runs: the compiled step
// and evaluation as shared libraries of pf_aot.h's format with their
// weights, and manifest.json, which says what they are and how the run that
// compiled them was configured. This file holds the manifest's one
// definition: what it records, how it is written and how it is read back and
// checked. On the C++ standard library only (the trainer reads it).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_ARTIFACT_H
#define PF_TRAIN_ARTIFACT_H

#include "pf/RankRuntime/AotStagePrograms.h"
#include "pf/RankRuntime/RankPlan.h"
#include "pf/Support/AotModel.h"
#include "pf/Support/Status.h"
#include "pf/Train/DampingAdaptation.h"
#include "pf/Train/RunConfig.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlir::pf::train {

/// The manifest's format; a trainer reads only its own.
constexpr int64_t kArtifactFormatVersion = 1;
constexpr const char *kArtifactManifest = "manifest.json";

/// One compiled function of the artifact: its library, its weights (with the
/// parameters' places in them) and the fingerprint its object carries.
struct ArtifactModel {
  std::string library, weights; ///< file names inside the artifact
  int64_t libraryBytes = 0, weightsBytes = 0;
  /// The files' SHA-256, lowercase hex.
  std::string librarySha256, weightsSha256;
  uint64_t fingerprint = 0;
  std::vector<driver::AotParameter> parameters;
};

/// One rank of a pipelined artifact: its library (the stage functions it
/// calls, each an entry, and its lowered program) with the weights every
/// entry binds, and what the rank runner must know of its program.
struct ArtifactRank {
  ArtifactModel files;
  std::vector<driver::AotStageEntry> entries;
  driver::RankPlan plan;
};

/// How a pipelined artifact's programs were built (--pipeline).
struct ArtifactPipeline {
  std::string spec;     ///< --pipeline as given
  std::string schedule; ///< its schedule's name
  int64_t microbatches = 1;
  bool overlap = true;
  int64_t ignoreIndex = -100; ///< the loss' ignored label (the micro-batch weights)
};

struct TrainingArtifact {
  int64_t formatVersion = kArtifactFormatVersion;
  int32_t runtimeAbi = 0; ///< PFRT_ABI_VERSION of the compiler's runtime
  /// The model file, its SHA-256, and the command line that compiled it.
  std::string modelFile, modelSha256;
  std::vector<std::string> command;
  /// Compiled into the step: the batch, the corpus' sequence length and the
  /// optimizer (as the command line spelled it).
  int64_t batch = 0, sequence = 0;
  std::string optimizer;
  /// The run as configured at compile time: the trainer's defaults for its
  /// run options, and the compiled step's facts.
  RunConfig run;
  /// Checkpoints::onnxNameEntries of the step.
  std::map<std::string, std::string> onnxNames;
  /// The step's K-FAC layers (the adaptive damping's quadratic model).
  std::vector<KfacModelLayer> kfacLayers;
  /// The single-process step (ranks = 1), or one library per rank.
  int32_t ranks = 1;
  ArtifactModel step;
  ArtifactPipeline pipeline;
  std::vector<ArtifactRank> rankPrograms;
  ArtifactModel evaluation;
};

/// manifest.json's text.
std::string manifestText(const TrainingArtifact &artifact);

/// Reads `directory`/manifest.json and checks the artifact against this
/// trainer and the files beside it: the format version, the runtime ABI,
/// and each library's and weights' size and SHA-256 (of a pipelined
/// artifact: the evaluation's and rank `rank`'s, every rank's when -1;
/// none without `checkFiles`). Errors name the directory and the mismatch.
::pf::Expected<TrainingArtifact> readArtifact(const std::string &directory, int rank = -1,
                                              bool checkFiles = true);

} // namespace mlir::pf::train

#endif // PF_TRAIN_ARTIFACT_H
