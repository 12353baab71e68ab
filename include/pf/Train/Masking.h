//===- Masking.h - Batches and BERT's masking -------------------*- C++ -*-===//
//
// A step's batch is a function of (seed, step): rows from a per-epoch
// permutation of the training rows, masked as BERT does. So a run resumed
// from a checkpoint continues bit for bit, and every rank of a pipeline
// draws the same batch.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_MASKING_H
#define PF_TRAIN_MASKING_H

#include "pf/Support/Npz.h"
#include "pf/Train/Corpus.h"

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace mlir::pf::train {

/// A step's inputs and outputs by name.
using Batch = std::map<std::string, driver::NpyArray>;

/// An int64 array of `shape` holding `values`.
driver::NpyArray int64Array(std::vector<int64_t> shape, const std::vector<int64_t> &values);

/// A scalar of dtype `dtype` (pfrt's codes) holding `value`.
template <typename T>
driver::NpyArray scalar(int32_t dtype, T value) {
  driver::NpyArray a;
  a.dtype = dtype;
  a.data.resize(sizeof(T));
  std::memcpy(a.data.data(), &value, sizeof(T));
  return a;
}

/// The corpus rows `rows` as one batch, masked as BERT does: a share
/// `maskProbability` of the real tokens are predicted; of those 80% become
/// [MASK], 10% a random word, 10% stay. With `cap` > 0 a sequence predicts
/// at most its first `cap` of them (BERT's max_predictions_per_seq); the
/// random draws are the same either way, so uncapped sequences are unchanged.
Batch maskRows(const Corpus &c, const std::vector<int64_t> &rows, double maskProbability,
               std::mt19937_64 &rng, int64_t cap = 0);

/// --predictions P: `labels` [batch, sequence] becomes the positions of each
/// sequence's predicted tokens, `mlm_positions` [batch, P], and their labels
/// [batch, P], padded with position 0 and an ignored label.
void gatherPredictions(Batch &inputs, int64_t predictions);

/// The batches of a run: training batches by step, held-out batches by index.
class BatchMaker {
public:
  /// `predictions`: --predictions (0: labels at every position).
  BatchMaker(const Corpus &corpus, int64_t batch, uint64_t seed, double maskProbability,
             int64_t predictions)
      : corpus(corpus), batch(batch), seed(seed), maskProbability(maskProbability),
        predictions(predictions) {}

  /// The batch of `step` with labels at every position ([batch, sequence],
  /// as the evaluation model takes them).
  Batch masked(int64_t step);
  /// The training step's batch of `step` (with --predictions, the labels
  /// gathered at the predicted positions).
  Batch training(int64_t step);
  /// Held-out batch `index`: the same rows and masks at every evaluation.
  Batch heldOut(int64_t index) const;
  /// Held-out batches of --batch sequences the corpus holds.
  int64_t heldOutBatches() const { return (corpus.rows - corpus.trainRows) / batch; }

  const Corpus &corpus;
  const int64_t batch;

private:
  /// The row order of an epoch, a function of (seed, epoch); computed once
  /// per epoch.
  const std::vector<int64_t> &epochOrder(int64_t epoch);

  uint64_t seed;
  double maskProbability;
  int64_t predictions;
  int64_t cachedEpoch = -1;
  std::vector<int64_t> order;
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_MASKING_H
