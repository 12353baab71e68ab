//===- Schedules.h - What changes over the steps ----------------*- C++ -*-===//
//
// The learning rate, K-FAC's damping λ and K-FAC's factor and refresh
// intervals as functions of the step (docs/training.md, "Damping
// schedules", "Interval schedules"), and K-FAC windows in the bubbles. All
// depend on the step only (the adaptive damping also on the run's history,
// which checkpoints carry), so a resumed run continues them.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_SCHEDULES_H
#define PF_TRAIN_SCHEDULES_H

#include "pf/Train/Masking.h"
#include "pf/Train/RunConfig.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace mlir::pf::train {

/// The learning rate at `step` (1-based): linear warm-up, then --schedule.
double learningRate(const RunConfig &config, int64_t step);

/// K-FAC's λ over the steps under --kfac-damping-schedule, with the state
/// of the adaptive schedule (λ now, what the last adaptation measured, what
/// the adaptations cost).
class KfacDampingSchedule {
public:
  explicit KfacDampingSchedule(const RunConfig &config);

  /// λ at `step` (1-based).
  double at(int64_t step) const;
  /// The progress line's damping column: only under a damping schedule.
  std::string column(int64_t step) const;
  bool adaptive() const { return kind == DampingSchedule::Adaptive; }

  /// adaptive: λ for the next step (--kfac-damping, or the checkpoint's)
  double damping = 0;
  double stepDamping = 0;    ///< adaptive: λ the last step ran with
  double rho = std::nan(""); ///< ρ of the last adaptation (NaN: none yet)
  int64_t adaptations = 0;
  double forwardSeconds = 0, modelSeconds = 0; ///< the loss after the update; M(Δ) and copies

private:
  DampingSchedule kind;
  double finalDamping, start, decay;
  int64_t warmup, every;
};

/// K-FAC's factor-update and inverse-refresh steps under
/// --kfac-factor-every, --kfac-refresh and --kfac-interval-schedule.
class KfacIntervalSchedule {
public:
  explicit KfacIntervalSchedule(const RunConfig &config) : config(config) {}

  /// The steps that update the factors.
  bool updatesFactors(int64_t step) { return factorRule.due(*this, factorEvery(), step); }
  /// The steps that refresh the inverses under an interval schedule
  /// (without one, the step decides from refresh-every itself).
  bool refreshesInverses(int64_t step) { return refreshRule.due(*this, refreshEvery(), step); }
  /// The progress line's interval column: only under an interval schedule.
  std::string column(int64_t step) const;

private:
  /// Whether a step is due under interval `base`: every step of the refresh
  /// warm-up (early curvature changes fastest), then its first step and
  /// each one at least the step's interval after the last due one. Depends
  /// on the step only, so a resumed run continues it. Under a schedule the
  /// last due step carries from one call to the next (the steps come in
  /// order; an earlier step than the last asked starts over after the
  /// warm-up), so a run costs O(steps), not O(steps^2).
  struct IntervalRule {
    int64_t at = 0, last = 0; ///< the last step asked and the last due one
    bool due(const KfacIntervalSchedule &schedule, int64_t base, int64_t step);
  };

  /// An interval at `step`: `base` (F or K) until the refresh warm-up's
  /// end, then times the growth every --kfac-interval-every steps, capped at
  /// --kfac-interval-max (and never below `base`).
  int64_t scheduled(int64_t base, int64_t step) const;
  int64_t factorEvery() const { return config.step.kfacFactorEvery; }
  int64_t refreshEvery() const { return config.step.refreshEvery; }

  const RunConfig &config;
  IntervalRule factorRule, refreshRule;
};

/// K-FAC in the bubbles, the rule both kinds of run follow: steps 1..warmup
/// invert every step; then windows of `steps` steps whose first gathers the
/// curvature, inverted during the window and used in the next one.
struct KfacWindowRule {
  int64_t warmup = 0, steps = 0; ///< steps 0: off (or not chosen yet)
  int64_t windowStep(int64_t t) const { return t <= warmup ? -1 : (t - warmup - 1) % steps; }
  bool gathersCurvature(int64_t t) const { return t <= warmup || windowStep(t) == 0; }
  /// Single-process: the previous window's factors are inverted at the
  /// start of a window after the first.
  bool refreshesPrevious(int64_t t) const { return t > warmup + steps && windowStep(t) == 0; }
  /// The single-process step's window inputs at `t` (kfac_curvature and
  /// kfac_refresh); false when no window decides them.
  bool addSingleProcessInputs(int64_t t, Batch &inputs) const {
    if (steps <= 0)
      return false;
    inputs["kfac_curvature"] = scalar<int64_t>(7, gathersCurvature(t));
    inputs["kfac_refresh"] = scalar<int64_t>(7, refreshesPrevious(t));
    return true;
  }
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_SCHEDULES_H
