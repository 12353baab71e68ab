//===- Corpus.h - The token corpus a run trains on --------------*- C++ -*-===//
//
// The corpus of python -m pipefisher.corpus: `tokens` int64 [sequences,
// length], optionally `special` ([PAD], [UNK], [CLS], [SEP], [MASK]) and
// `vocab_size`. The rows after trainRows are held out for evaluation.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_CORPUS_H
#define PF_TRAIN_CORPUS_H

#include "pf/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::pf::train {

struct Corpus {
  std::vector<int64_t> tokens; // [rows, seqLen]
  int64_t rows = 0, seqLen = 0, vocab = 0;
  /// Rows [0, trainRows) are trained on; the rest are held out.
  int64_t trainRows = 0;
  int64_t pad = 0, cls = 2, sep = 3, mask = 4, firstWord = 5;
  /// FNV-1a of the tokens: a checkpoint names the corpus it was trained on.
  uint64_t hash = 0;
};

/// 64-bit FNV-1a of `bytes` bytes.
uint64_t fnv1a(const void *data, size_t bytes);

/// Reads and checks the corpus in `path` (every row trained on); errors
/// name the file.
::pf::Expected<Corpus> loadCorpus(const std::string &path);

} // namespace mlir::pf::train

#endif // PF_TRAIN_CORPUS_H
