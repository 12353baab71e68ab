//===- Schedules.cpp - What changes over the steps ------------------------===//
#include "pf/Train/Schedules.h"

#include "pf/Support/Status.h"

#include <algorithm>
#include <cmath>

using namespace mlir::pf;
using namespace mlir::pf::train;

double train::learningRate(const RunConfig &config, int64_t step) {
  const int warmup = config.warmup, steps = config.steps;
  const double lr = config.lr;
  if (warmup > 0 && step <= warmup)
    return lr * double(step) / warmup;
  if (config.schedule == LRSchedule::Constant || steps <= warmup)
    return lr;
  return lr * std::max(0.0, double(steps - step + 1) / double(steps - warmup));
}

KfacDampingSchedule::KfacDampingSchedule(const RunConfig &config)
    : kind(config.dampingSchedule), finalDamping(config.step.damping),
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
    return ::pf::formatText("  damping %.2E  rho ", stepDamping) +
           (std::isnan(rho) ? std::string("-") : ::pf::formatText("%.3f", rho));
  return ::pf::formatText("  damping %.2E", at(step));
}

int64_t KfacIntervalSchedule::scheduled(int64_t base, int64_t step) const {
  const int64_t warmup = config.step.refreshWarmup;
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
  const int64_t warmup = schedule.config.step.refreshWarmup;
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
  return ::pf::formatText("  intervals F %lld K %lld",
                          (long long)scheduled(factorEvery(), step),
                          (long long)scheduled(refreshEvery(), step));
}

double DampingAdaptation::omega() const { return std::pow(decay, double(interval)); }

double DampingAdaptation::next(double damping, double rho) const {
  if (!std::isfinite(rho) || rho < 0.25)
    damping /= omega();
  else if (rho > 0.75)
    damping *= omega();
  return std::clamp(damping, min, max);
}
