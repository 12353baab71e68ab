//===- TrainInputsFuzzer.cpp - pf-train's checkpoint and corpus loaders ---===//
//
// The training library's loaders (loadCorpus, Checkpoints::load,
// BatchMaker), as pf-train calls them, with pf-train's default options.
//
// The input is not the .npz itself but its entries, which this file packs
// into a valid archive: each entry is a name line and the .npy bytes, and
// entries are separated by a line "----". (readNpz checks each entry's
// CRC-32, so mutated archive bytes almost never reach the loaders; the npz
// target fuzzes the archive level.)
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Train/Checkpoint.h"
#include "pf/Train/Corpus.h"
#include "pf/Train/Masking.h"
#include "pf/Train/Schedules.h"
#include "pf/Train/RunConfig.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <zip.h>

using namespace mlir::pf::train;

namespace pf::fuzz {
namespace {
/// Packs the entries of `data` (see the file comment) into an .npz (stored)
/// named `fileName` in the scratch directory; returns its path.
std::string packEntries(const std::string &fileName, const uint8_t *data, size_t size) {
  std::string path = writeScratchFile(fileName, nullptr, 0);
  llvm::SmallVector<llvm::StringRef> entries;
  llvm::StringRef(reinterpret_cast<const char *>(data), size).split(entries, "\n----\n");
  int code = 0;
  zip_t *archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!archive)
    return path;
  for (llvm::StringRef entry : entries) {
    auto [name, bytes] = entry.split('\n');
    // libzip copies nothing before zip_close: ZIP_SOURCE_BUFFER over `data`,
    // which outlives it.
    zip_source_t *source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    if (!source)
      break;
    std::string entryName = name.str() + ".npy";
    zip_int64_t index = zip_file_add(archive, entryName.c_str(), source, ZIP_FL_OVERWRITE);
    if (index < 0) {
      zip_source_free(source);
      continue;
    }
    zip_set_file_compression(archive, index, ZIP_CM_STORE, 0);
  }
  if (zip_close(archive) != 0)
    zip_discard(archive);
  return path;
}
} // namespace

/// The model a fuzzed checkpoint is loaded into: the parameters of the seed
/// checkpoints (scripts/fuzz-seeds.py), trained on 4 corpus rows.
int fuzzCheckpoint(const uint8_t *data, size_t size) {
  RunConfig config;
  config.resumeFile = packEntries("checkpoint.npz", data, size);
  std::vector<float> weight(6), bias(3);
  Parameters parameters(2);
  parameters[0] = {"w", 1, {2, 3}, weight.data(), int64_t(weight.size() * sizeof(float))};
  parameters[1] = {"b", 1, {3}, bias.data(), int64_t(bias.size() * sizeof(float))};
  Corpus corpus;
  corpus.rows = corpus.trainRows = 4;
  KfacDampingSchedule damping(config);
  Checkpoints checkpoints(config, corpus, damping);
  Checkpoints::Coverage coverage;
  auto step = checkpoints.load(parameters, coverage);
  if (!step) {
    const std::string &message = step.error();
    if (verbose())
      llvm::errs() << message << "\n";
  } else if (verbose()) {
    llvm::errs() << "resumed after step " << *step << "\n";
  }
  return 0;
}

/// Loads the corpus and, when it is small, draws the first batch from it as
/// the training loop would (batch 2, the default masking).
int fuzzCorpus(const uint8_t *data, size_t size) {
  auto corpus = loadCorpus(packEntries("corpus.npz", data, size));
  if (!corpus) {
    const std::string &message = corpus.error();
    if (verbose())
      llvm::errs() << message << "\n";
    return 0;
  }
  if (verbose())
    llvm::errs() << "corpus: " << corpus->rows << " x " << corpus->seqLen << ", vocab "
                 << corpus->vocab << "\n";
  int64_t elements;
  if (__builtin_mul_overflow(corpus->rows, corpus->seqLen, &elements) || elements > (1 << 16))
    return 0; // large but well-formed: nothing more to learn, only time
  RunConfig config;
  BatchMaker batches(*corpus, /*batch=*/2, config.seed, config.maskProbability,
                     config.step.predictions);
  auto inputs = batches.training(1);
  (void)inputs;
  return 0;
}

} // namespace pf::fuzz
