//===- TrainInputsFuzzer.cpp - pf-train's checkpoint and corpus loaders ---===//
//
// pf-train's loaders (loadCorpus, loadCheckpoint, makeBatch) live in the
// tool's own source file and read its command-line globals; this file
// includes that source (its main renamed) so the fuzzer runs exactly the
// code pf-train runs, without moving it. If the loaders move into a library,
// call them there instead.
//
//===----------------------------------------------------------------------===//
#define main pfTrainMain
#include "../tools/pf-train/pf-train.cpp"
#undef main

#include "FuzzTargets.h"

namespace pf::fuzz {

/// The model a fuzzed checkpoint is loaded into: the parameters of the seed
/// checkpoints (scripts/fuzz-seeds.py), trained on 4 corpus rows.
int fuzzCheckpoint(const uint8_t *data, size_t size) {
  resumeFile = writeScratchFile("checkpoint.npz", data, size);
  std::vector<float> weight(6), bias(3);
  Parameters parameters(2);
  parameters[0] = {"w", 1, {2, 3}, weight.data(), int64_t(weight.size() * sizeof(float))};
  parameters[1] = {"b", 1, {3}, bias.data(), int64_t(bias.size() * sizeof(float))};
  Corpus corpus;
  corpus.rows = corpus.trainRows = 4;
  auto step = loadCheckpoint(parameters, corpus);
  if (!step)
    llvm::consumeError(step.takeError());
  return 0;
}

/// Loads the corpus and, when it is small, draws the first batch from it as
/// the training loop would (batch 2, the default masking).
int fuzzCorpus(const uint8_t *data, size_t size) {
  corpusFile = writeScratchFile("corpus.npz", data, size);
  auto corpus = loadCorpus();
  if (!corpus) {
    llvm::consumeError(corpus.takeError());
    return 0;
  }
  if (corpus->rows * corpus->seqLen > (1 << 16))
    return 0; // large but well-formed: nothing more to learn, only time
  batch = 2;
  // epochOrder caches one epoch's order per process, whichever corpus made
  // it; pf-train has one corpus, the fuzzer a new one per input.
  epochOrder(*corpus, -1);
  auto inputs = makeBatch(*corpus, 1);
  (void)inputs;
  return 0;
}

} // namespace pf::fuzz
