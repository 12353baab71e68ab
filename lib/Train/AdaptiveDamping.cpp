//===- AdaptiveDamping.cpp - --kfac-damping-schedule adaptive -------------===//
#include "pf/Train/AdaptiveDamping.h"

#include "pf/Runtime/pfrt.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/Schedules.h"

#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;
using ::pf::Status;

::pf::Expected<WeightCopies> train::copyEvaluationWeights(drv::Model &model,
                                                          const TrainedWeights &trained,
                                                          drv::Model &eval) {
  if (auto status = model.copyParametersToHost(); !status.ok())
    return status;
  WeightCopies copies;
  for (const auto &p : eval.parameters()) {
    auto it = trained.find(p.name);
    if (it == trained.end())
      return Status::error("adaptive damping: the training step has no parameter '" + p.name +
                           "'");
    const auto *data = static_cast<const char *>(it->second.data);
    copies[p.name] = {it->second.dtype, it->second.shape,
                      std::vector<char>(data, data + it->second.bytes)};
  }
  return copies;
}

Status train::adaptDamping(int64_t step, double lossBefore, const Batch &maskedBatch,
                                drv::Model &model, const TrainedWeights &trained,
                                drv::Model &eval, const std::vector<KfacModelLayer> &layers,
                                const WeightCopies &before, const Batch &outputs,
                                const DampingAdaptation &rule, KfacDampingSchedule &schedule,
                                bool print) {
  auto start = std::chrono::steady_clock::now();
  if (auto status = model.copyParametersToHost(); !status.ok())
    return status;
  auto floatTensor = [](int32_t dtype, const void *data, const std::vector<int64_t> &shape) {
    return dtype == PFRT_F32 ? FloatTensor{static_cast<const float *>(data), shape}
                             : FloatTensor{};
  };
  FloatTensorLookup current = [&](const std::string &name) {
    auto it = trained.find(name);
    return it == trained.end() ? FloatTensor{}
                               : floatTensor(it->second.dtype, it->second.data, it->second.shape);
  };
  FloatTensorLookup previous = [&](const std::string &name) {
    auto it = before.find(name);
    return it == before.end()
               ? FloatTensor{}
               : floatTensor(it->second.dtype, it->second.bytes.data(), it->second.shape);
  };
  FloatTensorLookup gradients = [&](const std::string &name) {
    auto it = outputs.find("kfac/gradient/" + name);
    return it == outputs.end()
               ? FloatTensor{}
               : floatTensor(it->second.dtype, it->second.data.data(), it->second.shape);
  };
  auto quadratic = evaluateQuadraticModel(layers, previous, current, gradients, current);
  if (!quadratic)
    return quadratic.status();
  std::set<std::string> moved;
  for (const KfacModelLayer &layer : layers)
    moved.insert({layer.weight, layer.bias});
  WeightLookup updatedKfacLayers =
      [&](const std::string &name) -> std::pair<const void *, int64_t> {
    if (moved.count(name)) {
      auto it = trained.find(name);
      if (it == trained.end())
        return {nullptr, 0};
      return {it->second.data, it->second.bytes};
    }
    auto it = before.find(name);
    if (it == before.end())
      return {nullptr, 0};
    return {it->second.bytes.data(), int64_t(it->second.bytes.size())};
  };
  if (auto status = loadEvaluationWeights(updatedKfacLayers, eval); !status.ok())
    return status;
  auto forwardStart = std::chrono::steady_clock::now();
  Batch evalOutputs;
  if (auto status = eval.run(maskedBatch, evalOutputs); !status.ok())
    return status;
  float lossAfter;
  std::memcpy(&lossAfter, evalOutputs["loss"].data.data(), sizeof(float));
  auto end = std::chrono::steady_clock::now();

  const double lambda = schedule.stepDamping;
  const double predicted = quadratic->change(lambda);
  const double actual = double(lossAfter) - lossBefore;
  // ρ needs a predicted decrease that the f32 loss can resolve; a model
  // that predicts none (the update is no descent direction for this batch's
  // gradient, e.g. from momentum) or less than a few ulps of the loss says
  // nothing about λ, which stays.
  const double resolution = 4 * std::numeric_limits<float>::epsilon() * std::abs(lossBefore);
  const bool measurable = predicted < -resolution;
  schedule.rho = measurable ? actual / predicted : std::nan("");
  if (measurable)
    schedule.damping = rule.next(lambda, schedule.rho);
  ++schedule.adaptations;
  schedule.forwardSeconds += std::chrono::duration<double>(end - forwardStart).count();
  schedule.modelSeconds += std::chrono::duration<double>(forwardStart - start).count();
  if (print) { // one write, before the loop's progress line
    std::fputs(::pf::formatText("step %lld: K-FAC damping: loss %.9E -> %.9E, model %.9E "
                                "(gradient %.9E, curvature %.9E, norm2 %.9E), rho %.4f, damping "
                                "%.9E -> %.9E\n",
                                (long long)step, lossBefore, double(lossAfter), predicted,
                                quadratic->gradient, quadratic->curvature,
                                quadratic->squaredNorm, schedule.rho, lambda, schedule.damping)
                   .c_str(),
               stdout);
    std::fflush(stdout);
  }
  return Status::success();
}
