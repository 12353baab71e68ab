//===- Schedules.cpp - What changes over the steps ------------------------===//
#include "pf/Train/Schedules.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir::pf;
using namespace mlir::pf::train;

double train::learningRate(const TrainConfig &config, int64_t step) {
  const int warmup = config.warmup, steps = config.steps;
  const double lr = config.lr;
  if (warmup > 0 && step <= warmup)
    return lr * double(step) / warmup;
  if (config.schedule == LRSchedule::Constant || steps <= warmup)
    return lr;
  return lr * std::max(0.0, double(steps - step + 1) / double(steps - warmup));
}

llvm::Error train::prepareDampingSchedule(TrainConfig &config, bool inBubbles) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  TrainingOptions &training = config.training;
  const DampingSchedule dampingSchedule = config.dampingSchedule;
  if (dampingSchedule == DampingSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-damping-schedule schedules K-FAC's damping: it needs --kfac");
  if (inBubbles)
    return error("--kfac-damping-schedule with K-FAC in the bubbles (--kfac-window, "
                 "kfac=bubbles) is not supported yet: a window's inverses are computed over "
                 "several steps");
  if (!(training.precondition.damping > 0))
    return error("--kfac-damping-schedule needs --kfac-damping > 0 (the final λ)");
  if (dampingSchedule == DampingSchedule::Warmup &&
      !(config.dampingStart > 0 && config.dampingWarmup >= 1))
    return error(llvm::formatv("--kfac-damping-schedule warmup needs --kfac-damping-start > 0 "
                               "and --kfac-damping-warmup >= 1 (got {0} and {1})",
                               config.dampingStart, config.dampingWarmup));
  if (dampingSchedule == DampingSchedule::Step &&
      !(config.dampingDecay > 0 && config.dampingDecay <= 1 && config.dampingEvery >= 1))
    return error(llvm::formatv("--kfac-damping-schedule step needs --kfac-damping-decay in "
                               "(0, 1] and --kfac-damping-every >= 1 (got {0} and {1})",
                               config.dampingDecay, config.dampingEvery));
  if (dampingSchedule == DampingSchedule::Adaptive) {
    const DampingAdaptation &rule = config.dampingAdaptation;
    if (!(rule.interval >= 1 && rule.decay > 0 && rule.decay < 1))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs "
                                 "--kfac-damping-interval >= 1 and "
                                 "--kfac-damping-adaptation-decay in (0, 1) (got {0} and {1})",
                                 rule.interval, rule.decay));
    const double initial = training.precondition.damping;
    if (!(rule.min > 0 && rule.min <= initial && initial <= rule.max && std::isfinite(rule.max)))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs 0 < --kfac-damping-min "
                                 "<= --kfac-damping <= --kfac-damping-max < inf (got {0}, {1} "
                                 "and {2})",
                                 rule.min, initial, rule.max));
    // The gradient term of the quadratic model: each K-FAC layer's raw gradient.
    training.precondition.rawGradients = true;
  }
  training.precondition.dampingInput = true;
  return llvm::Error::success();
}

llvm::Error train::prepareIntervalSchedule(TrainConfig &config) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  TrainingOptions &training = config.training;
  if (config.intervalSchedule == IntervalSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-interval-schedule schedules K-FAC's intervals: it needs --kfac");
  // K-FAC in the bubbles (--kfac-window, --pipeline "kfac=bubbles", checked
  // with the pipeline's options) decides its steps by its windows.
  if (training.kfacWindow > 0)
    return error("--kfac-interval-schedule: not with --kfac-window, whose windows decide the "
                 "steps");
  if (config.intervalGrowth < 1 || config.intervalEvery < 1 || config.intervalMax < 1)
    return error(llvm::formatv("--kfac-interval-growth, --kfac-interval-every and "
                               "--kfac-interval-max must be >= 1 (got {0}, {1} and {2})",
                               config.intervalGrowth, config.intervalEvery,
                               config.intervalMax));
  training.precondition.refreshInput = true;
  // The pipeline builder gates the factor updates on kfac_curvature when F
  // is not 1; a schedule needs the gate whatever F is.
  training.precondition.curvatureInput = true;
  return llvm::Error::success();
}

KfacDampingSchedule::KfacDampingSchedule(const TrainConfig &config)
    : kind(config.dampingSchedule), finalDamping(config.training.precondition.damping),
      start(config.dampingStart), decay(config.dampingDecay), warmup(config.dampingWarmup),
      every(config.dampingEvery) {
  if (kind == DampingSchedule::Adaptive)
    damping = stepDamping = finalDamping;
}

double KfacDampingSchedule::at(int64_t step) const {
  switch (kind) {
  case DampingSchedule::Constant:
    return finalDamping;
  case DampingSchedule::Adaptive:
    return damping;
  case DampingSchedule::Warmup:
    if (step > warmup)
      return finalDamping;
    return start * std::pow(finalDamping / start, double(step - 1) / double(warmup));
  case DampingSchedule::Step:
    return finalDamping * std::pow(decay, double((step - 1) / every));
  }
  return finalDamping;
}

std::string KfacDampingSchedule::column(int64_t step) const {
  if (kind == DampingSchedule::Constant)
    return "";
  if (kind == DampingSchedule::Adaptive)
    return llvm::formatv("  damping {0:E2}  rho {1}", stepDamping,
                         std::isnan(rho) ? std::string("-")
                                         : llvm::formatv("{0:F3}", rho).str())
        .str();
  return llvm::formatv("  damping {0:E2}", at(step)).str();
}

int64_t KfacIntervalSchedule::scheduled(int64_t base, int64_t step) const {
  const int64_t warmup = config.training.precondition.refreshWarmup;
  if (config.intervalSchedule == IntervalSchedule::Constant || step <= warmup)
    return base;
  int64_t interval = base;
  for (int64_t g = (step - warmup - 1) / config.intervalEvery;
       g > 0 && interval < config.intervalMax; --g)
    interval *= config.intervalGrowth;
  return std::max(base, std::min(interval, config.intervalMax));
}

bool KfacIntervalSchedule::IntervalRule::due(const KfacIntervalSchedule &schedule, int64_t base,
                                             int64_t step) {
  const int64_t warmup = schedule.config.training.precondition.refreshWarmup;
  if (step <= warmup)
    return true;
  if (schedule.config.intervalSchedule == IntervalSchedule::Constant)
    return (step - warmup - 1) % base == 0;
  if (step < at || at <= warmup)
    at = last = warmup + 1;
  for (; at < step; ++at)
    if (at + 1 - last >= schedule.scheduled(base, at + 1))
      last = at + 1;
  return last == step;
}

std::string KfacIntervalSchedule::column(int64_t step) const {
  if (config.intervalSchedule == IntervalSchedule::Constant)
    return "";
  return llvm::formatv("  intervals F {0} K {1}", scheduled(factorEvery(), step),
                       scheduled(refreshEvery(), step))
      .str();
}
