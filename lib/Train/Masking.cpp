//===- Masking.cpp - Batches and BERT's masking ---------------------------===//
#include "pf/Train/Masking.h"

#include <algorithm>
#include <numeric>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

drv::NpyArray train::int64Array(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  drv::NpyArray a;
  a.dtype = 7;
  a.shape = std::move(shape);
  a.data.resize(values.size() * 8);
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

Batch train::maskRows(const Corpus &c, const std::vector<int64_t> &rows, double maskProbability,
                      std::mt19937_64 &rng, int64_t cap) {
  std::uniform_real_distribution<double> uniform(0, 1);
  std::uniform_int_distribution<int64_t> word(c.firstWord, c.vocab - 1);
  int64_t n = int64_t(rows.size()) * c.seqLen;
  std::vector<int64_t> ids(n), types(n, 0), attention(n), labels(n, -100);
  for (size_t b = 0; b < rows.size(); ++b) {
    const int64_t *row = &c.tokens[rows[b] * c.seqLen];
    for (int64_t t = 0; t < c.seqLen; ++t) {
      int64_t i = int64_t(b) * c.seqLen + t, token = row[t];
      ids[i] = token;
      attention[i] = token != c.pad;
      bool special = token == c.pad || token == c.cls || token == c.sep;
      if (special || uniform(rng) >= maskProbability)
        continue;
      labels[i] = token;
      double r = uniform(rng);
      ids[i] = r < 0.8 ? c.mask : r < 0.9 ? word(rng) : token;
    }
    for (int64_t t = 0, kept = 0; cap > 0 && t < c.seqLen; ++t) {
      int64_t i = int64_t(b) * c.seqLen + t;
      if (labels[i] == -100 || ++kept <= cap)
        continue;
      ids[i] = row[t];
      labels[i] = -100;
    }
  }
  std::vector<int64_t> shape{int64_t(rows.size()), c.seqLen};
  return {{"input_ids", int64Array(shape, ids)},
          {"token_type_ids", int64Array(shape, types)},
          {"attention_mask", int64Array(shape, attention)},
          {"labels", int64Array(shape, labels)}};
}

void train::gatherPredictions(Batch &inputs, int64_t predictions) {
  const drv::NpyArray &full = inputs["labels"];
  const int64_t rows = full.shape[0], length = full.shape[1];
  const auto *labels = reinterpret_cast<const int64_t *>(full.data.data());
  std::vector<int64_t> positions(rows * predictions, 0), gathered(rows * predictions, -100);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0, p = 0; t < length && p < predictions; ++t)
      if (labels[b * length + t] != -100) {
        positions[b * predictions + p] = t;
        gathered[b * predictions + p++] = labels[b * length + t];
      }
  std::vector<int64_t> shape{rows, predictions};
  inputs["mlm_positions"] = int64Array(shape, positions);
  inputs["labels"] = int64Array(shape, gathered);
}

const std::vector<int64_t> &BatchMaker::epochOrder(int64_t epoch) {
  if (epoch != cachedEpoch) {
    order.resize(corpus.trainRows);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(seed * 1000003ULL + epoch);
    std::shuffle(order.begin(), order.end(), shuffle);
    cachedEpoch = epoch;
  }
  return order;
}

Batch BatchMaker::masked(int64_t step) {
  int64_t perEpoch = std::max<int64_t>(1, corpus.trainRows / batch);
  int64_t epoch = (step - 1) / perEpoch, slot = (step - 1) % perEpoch;
  const std::vector<int64_t> &rowOrder = epochOrder(epoch);
  std::vector<int64_t> rows(batch);
  for (int64_t b = 0; b < batch; ++b)
    rows[b] = rowOrder[(slot * batch + b) % corpus.trainRows];
  std::mt19937_64 rng(seed * 7919ULL + uint64_t(step) * 104729ULL);
  return maskRows(corpus, rows, maskProbability, rng, predictions);
}

Batch BatchMaker::training(int64_t step) {
  Batch inputs = masked(step);
  if (predictions > 0)
    gatherPredictions(inputs, predictions);
  return inputs;
}

Batch BatchMaker::heldOut(int64_t index) const {
  std::vector<int64_t> rows(batch);
  for (int64_t b = 0; b < batch; ++b)
    rows[b] = corpus.trainRows + index * batch + b;
  std::mt19937_64 rng(0x5EEDULL * 7919ULL + uint64_t(index));
  return maskRows(corpus, rows, maskProbability, rng);
}
