//===- Checkpoint.h - A run's checkpoints -----------------------*- C++ -*-===//
//
// A checkpoint (.npz) holds `param/<name>` for every parameter and
// optimizer or K-FAC state tensor and `meta/*`: the step, what the batches
// depend on (seed, training rows, corpus hash), K-FAC's window and
// placement, the adaptive damping and the ONNX names of the parameters.
// Both kinds of run write the same format, so either can resume the other's.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_CHECKPOINT_H
#define PF_TRAIN_CHECKPOINT_H

#include "pf/Support/Model.h"
#include "pf/Support/Status.h"
#include "pf/Train/Corpus.h"
#include "pf/Train/Masking.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlir::pf::train {

struct RunConfig;
class KfacDampingSchedule;

using Parameters = std::vector<driver::ModelParameter>;

/// The layout of a checkpoint's arrays (`param/*`, `meta/*`); bumped when it
/// changes, and a checkpoint of another version is refused.
constexpr int64_t kCheckpointFormatVersion = 1;

/// The inverses a pipeline computes in its bubbles for the next refresh
/// window (pf.kfac_pending): not training state, recomputed on resume.
bool isPendingInverse(const std::string &name);

/// A checkpoint's arrays of `parameters`: `param/<name>`, pending inverses
/// left out.
Batch stateArrays(const Parameters &parameters);

/// The run's checkpoints: what they record beside the state, and writing
/// and reading them.
class Checkpoints {
public:
  Checkpoints(const RunConfig &config, const Corpus &corpus, KfacDampingSchedule &damping)
      : config(config), corpus(corpus), damping(damping) {}

  /// Writes `arrays` (the state) and the run's `meta/*` after `step` to `path`.
  ::pf::Status write(Batch arrays, int64_t step, const std::string &path) const;

  /// The checkpoint's state entries (`param/<name>`, pending inverses left
  /// out) in name order, and per entry whether load() read it (1) or not
  /// (0): summed over a pipeline's ranks (each loads its share), an entry
  /// still 0 belongs to another model, optimizer or K-FAC configuration.
  struct Coverage {
    std::vector<std::string> names;
    std::vector<double> loaded;
  };

  /// Reads --resume into `parameters` (each must be in the file with its
  /// dtype and shape; a pipelined rank passes only its own) and the adaptive
  /// damping, and fills `coverage`; returns the step.
  ::pf::Expected<int64_t> load(const Parameters &parameters, Coverage &coverage);

  /// The error for the first entry of `coverage` that no process loaded.
  ::pf::Status checkCovered(const Coverage &coverage) const;

  /// The K-FAC window and placement a pipelined checkpoint (--resume) recorded.
  ::pf::Expected<std::vector<int64_t>> savedKfacPlacement(int64_t &steps) const;

  /// What checkpoints record of K-FAC in the bubbles: the window's steps
  /// (both kinds of run; -1 while loading: take the checkpoint's) and,
  /// pipelined, where each inverse runs (rank, layer, window step, passes
  /// before it), so a resumed run places them the same.
  int64_t kfacWindow = 0;
  std::vector<int64_t> kfacPlacement;
  /// The entries (`meta/<kind>/<key>` -> a name) that map pf's parameters
  /// back to the ONNX file's initializers, for pipefisher.export_onnx:
  /// `onnx_name/<param>` (the initializer a parameter pf renamed came from)
  /// and `transposed_copy/<initializer>` (the parameter whose transpose an
  /// initializer tied back by pf-retie-weights holds). The compiler finds
  /// them (onnxNameEntries in pf/TrainCompile/Train.h).
  std::map<std::string, std::string> onnxNameEntries;

private:
  const RunConfig &config;
  const Corpus &corpus;
  KfacDampingSchedule &damping;
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_CHECKPOINT_H
