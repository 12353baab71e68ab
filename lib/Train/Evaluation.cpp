//===- Evaluation.cpp - Held-out evaluation -------------------------------===//
#include "pf/Train/Evaluation.h"

#include <algorithm>
#include <cstring>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

::pf::Status train::loadEvaluationWeights(const WeightLookup &current, drv::Model &eval) {
  for (auto &p : eval.parameters()) {
    auto [data, bytes] = current(p.name);
    if (!data || bytes != p.bytes)
      return ::pf::Status::error("evaluation: the training step has no parameter '" + p.name +
                                 "' of the same size");
    std::memcpy(p.data, data, p.bytes);
  }
  return eval.copyParametersToBackend();
}

::pf::Expected<double> train::evaluateHeldOut(const BatchMaker &batches,
                                              const WeightLookup &current, drv::Model &eval) {
  if (auto status = loadEvaluationWeights(current, eval); !status.ok())
    return status;
  double weighted = 0;
  int64_t counted = 0;
  Batch outputs;
  for (int64_t index = 0; index < batches.heldOutBatches(); ++index) {
    Batch inputs = batches.heldOut(index);
    if (auto status = eval.run(inputs, outputs); !status.ok())
      return status;
    const auto *labels = reinterpret_cast<const int64_t *>(inputs["labels"].data.data());
    int64_t count = std::count_if(labels, labels + inputs["labels"].numElements(),
                                  [](int64_t l) { return l != -100; });
    float loss;
    std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
    weighted += double(loss) * double(count);
    counted += count;
  }
  return counted ? weighted / double(counted) : 0.0;
}
