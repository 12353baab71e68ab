//===- Corpus.cpp - The token corpus a run trains on ----------------------===//
#include "pf/Train/Corpus.h"

#include "pf/Support/Npz.h"

#include <algorithm>
#include <cstring>
#include <utility>

using namespace mlir::pf;
namespace drv = mlir::pf::driver;

uint64_t train::fnv1a(const void *data, size_t bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ static_cast<const unsigned char *>(data)[i]) * 1099511628211ULL;
  return h;
}

::pf::Expected<train::Corpus> train::loadCorpus(const std::string &corpusFile) {
  auto arrays = drv::readNpz(corpusFile);
  if (!arrays)
    return arrays.status();
  auto error = [&](const std::string &message) {
    return ::pf::Status::error(corpusFile + ": " + message);
  };
  auto tokens = arrays->find("tokens");
  if (tokens == arrays->end() || tokens->second.dtype != 7 || tokens->second.shape.size() != 2)
    return error("needs 'tokens', int64 [sequences, length]");
  Corpus corpus;
  corpus.rows = corpus.trainRows = tokens->second.shape[0];
  corpus.seqLen = tokens->second.shape[1];
  if (corpus.rows < 1 || corpus.seqLen < 1)
    return error(::pf::formatText("'tokens' is %lld x %lld: it needs at least one sequence of "
                                  "at least one token",
                                  (long long)corpus.rows, (long long)corpus.seqLen));
  corpus.tokens.resize(corpus.rows * corpus.seqLen);
  std::memcpy(corpus.tokens.data(), tokens->second.data.data(), tokens->second.data.size());
  corpus.hash = fnv1a(corpus.tokens.data(), corpus.tokens.size() * sizeof(int64_t));
  // One int64 value, or an error naming the array.
  auto scalarOf = [&](const std::string &key) -> ::pf::Expected<int64_t> {
    auto it = arrays->find(key);
    if (it->second.dtype != 7 || it->second.numElements() != 1)
      return error("'" + key + "' must be one int64 value, not " +
                   drv::dtypeName(it->second.dtype) + " of shape " +
                   drv::shapeText(it->second.shape));
    return *reinterpret_cast<const int64_t *>(it->second.data.data());
  };
  if (auto special = arrays->find("special"); special != arrays->end()) {
    if (special->second.dtype != 7 || special->second.numElements() != 5)
      return error("'special' must be 5 int64 ids ([PAD], [UNK], [CLS], [SEP], [MASK])");
    const int64_t *s = reinterpret_cast<const int64_t *>(special->second.data.data());
    corpus.pad = s[0], corpus.cls = s[2], corpus.sep = s[3], corpus.mask = s[4];
  }
  int64_t largest = *std::max_element(corpus.tokens.begin(), corpus.tokens.end());
  int64_t smallest = *std::min_element(corpus.tokens.begin(), corpus.tokens.end());
  if (arrays->count("vocab_size")) {
    auto vocab = scalarOf("vocab_size");
    if (!vocab)
      return vocab.status();
    corpus.vocab = *vocab;
  } else {
    corpus.vocab = largest + 1;
  }
  // Masking draws random words from [firstWord, vocab): at least one.
  if (corpus.vocab <= corpus.firstWord)
    return error(::pf::formatText("vocab_size %lld leaves no words after the %lld special ids",
                                  (long long)corpus.vocab, (long long)corpus.firstWord));
  if (smallest < 0 || largest >= corpus.vocab)
    return error(::pf::formatText("token ids must be in [0, vocab_size %lld); the corpus holds "
                                  "%lld",
                                  (long long)corpus.vocab,
                                  (long long)(smallest < 0 ? smallest : largest)));
  for (auto [name, id] : {std::pair<const char *, int64_t>{"[PAD]", corpus.pad},
                          {"[CLS]", corpus.cls}, {"[SEP]", corpus.sep},
                          {"[MASK]", corpus.mask}})
    if (id < 0 || id >= corpus.vocab)
      return error(::pf::formatText("the %s id %lld is not in [0, vocab_size %lld)", name,
                                    (long long)id, (long long)corpus.vocab));
  return corpus;
}
