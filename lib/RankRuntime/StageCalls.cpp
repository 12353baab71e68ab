//===- StageCalls.cpp - The host's inputs of a stage call -----------------===//
#include "pf/RankRuntime/StageCalls.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Support/StepNames.h"

#include <cstring>

using namespace mlir::pf::driver;
using ::pf::formatText;

namespace {
::pf::Status error(const std::string &message) { return ::pf::Status::error(message); }

/// Rows [m·rows, (m+1)·rows) of a graph input for a function that takes
/// `spec` (one micro-batch); scalars are shared by every micro-batch.
::pf::Expected<NpyArray> microbatchSlice(const NpyArray &whole, const TensorSpec &spec,
                                         int64_t m, int64_t microbatches,
                                         const std::string &function) {
  if (spec.shape.empty() || microbatches == 1)
    return whole;
  std::vector<int64_t> expected = spec.shape;
  expected[0] *= microbatches;
  if (whole.shape != expected)
    return error(formatText("input '%s' has shape %s but %s of %lld micro-batches needs %s",
                            spec.name.c_str(), shapeText(whole.shape).c_str(), function.c_str(),
                            (long long)microbatches, shapeText(expected).c_str()));
  NpyArray slice;
  slice.dtype = whole.dtype;
  slice.shape = spec.shape;
  size_t bytes = size_t(slice.numElements() * dtypeBytes(whole.dtype));
  slice.data.assign(whole.data.begin() + m * bytes, whole.data.begin() + (m + 1) * bytes);
  return slice;
}

::pf::Expected<int64_t> countTokens(const NpyArray &labels, int64_t ignoreIndex) {
  if (labels.dtype != PFRT_I64)
    return error(std::string("'labels' must be int64 to count the micro-batch's tokens, got ") +
                 dtypeName(labels.dtype));
  const int64_t *v = reinterpret_cast<const int64_t *>(labels.data.data());
  int64_t count = 0;
  for (int64_t i = 0, n = labels.numElements(); i < n; ++i)
    count += v[i] != ignoreIndex;
  return count;
}
} // namespace

bool mlir::pf::driver::isStageValue(const std::string &name) {
  return mlir::pf::isStageValueText(name);
}

NpyArray mlir::pf::driver::scalarI64(int64_t value) {
  NpyArray a;
  a.dtype = PFRT_I64;
  a.data.resize(sizeof(int64_t));
  std::memcpy(a.data.data(), &value, sizeof(int64_t));
  return a;
}

::pf::Expected<std::vector<int64_t>>
mlir::pf::driver::microbatchTokenCounts(const NamedArrays &graph, int64_t microbatches,
                                        int64_t ignoreIndex) {
  auto labels = graph.find("labels");
  if (labels == graph.end())
    return error("--micro-batches needs the 'labels' input to weight the micro-batches");
  const NpyArray &all = labels->second;
  if (all.shape.empty() || all.shape[0] % microbatches != 0)
    return error(formatText("'labels' has shape %s: not %lld micro-batches",
                            shapeText(all.shape).c_str(), (long long)microbatches));
  TensorSpec spec{"labels", all.dtype, all.shape};
  spec.shape[0] /= microbatches;
  std::vector<int64_t> counts;
  for (int64_t m = 0; m < microbatches; ++m) {
    auto slice = microbatchSlice(all, spec, m, microbatches, "the token count");
    if (!slice)
      return slice.status();
    auto count = countTokens(*slice, ignoreIndex);
    if (!count)
      return count.status();
    counts.push_back(*count);
  }
  return counts;
}

::pf::Expected<NamedArrays>
mlir::pf::driver::stageCallInputs(const std::vector<TensorSpec> &specs,
                                  const std::string &function, const NamedArrays &graph,
                                  const NamedArrays &handed, int64_t m, int64_t microbatches,
                                  int64_t ignoreIndex, bool withStageValues) {
  NamedArrays inputs;
  for (const TensorSpec &spec : specs) {
    if (spec.name == kMicrobatchInput) {
      inputs[spec.name] = scalarI64(m);
      continue;
    }
    if (spec.name == kLossCountInput) {
      auto counts = microbatchTokenCounts(graph, microbatches, ignoreIndex);
      if (!counts)
        return counts.status();
      inputs[spec.name] = scalarI64((*counts)[size_t(m)]);
      continue;
    }
    if (isStageValue(spec.name)) {
      if (!withStageValues)
        continue;
      auto it = handed.find(spec.name);
      if (it == handed.end())
        return error("'" + spec.name + "' of " + function +
                     " is not a result of the stage that runs before it");
      inputs[spec.name] = it->second;
      continue;
    }
    auto it = graph.find(spec.name);
    if (it == graph.end())
      return error("missing input '" + spec.name + "' (read by " + function + ")");
    auto slice = microbatchSlice(it->second, spec, m, microbatches, function);
    if (!slice)
      return slice.status();
    inputs[spec.name] = std::move(*slice);
  }
  return inputs;
}
