//===- RunConfig.h - What the training loop is asked to do ------*- C++ -*-===//
//
// The part of a training run's configuration that the loop reads: batches,
// schedules, evaluation, checkpoints, the device and the pipeline's run
// options, and what the loop must know of the compiled step (StepFacts).
// On the C++ standard library only: the MLIR-free trainer fills it from
// its flags and an artifact's manifest, pf-train from its flags and the
// training-step options it compiles with (pf/TrainCompile/TrainConfig.h).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_RUNCONFIG_H
#define PF_TRAIN_RUNCONFIG_H

#include <cstdint>
#include <string>

namespace mlir::pf::train {

/// The most sequences per step (--batch): above the largest pre-training
/// batches (LAMB's 64K for BERT); more would size the step's tensors and
/// row lists past any memory, or the importer's kMaxTensorElements.
constexpr int kMaxBatch = 1 << 16;

/// The learning rate after the warm-up.
enum class LRSchedule { Linear, Constant };
/// K-FAC's damping λ over the steps (--kfac-damping is its final value).
enum class DampingSchedule { Constant, Warmup, Step, Adaptive };
enum class IntervalSchedule { Constant, Step };
/// --comm: how the ranks of --pipeline move their stage values.
enum class CommChoice { Auto, Mpi, Nccl };

/// --kfac-damping-schedule adaptive: T, the decay (ω = decay^T) and λ's
/// range (Martens and Grosse's Levenberg-Marquardt rule, kfac-jax's names).
struct DampingAdaptation {
  int64_t interval = 5; ///< T: steps between adaptations
  double decay = 0.95;  ///< ω = decay^T
  double min = 1e-8, max = 1.0;

  double omega() const;
  /// λ after an adaptation that measured `rho`; a ρ that is not finite
  /// (the loss after the update is not) counts as a bad step.
  double next(double damping, double rho) const;
};

/// What the loop must know of the compiled step: which inputs it takes and
/// what its K-FAC does over the steps. Fixed when the step is compiled
/// (from the training-step options, after the schedules asked for their
/// inputs); an artifact records it.
struct StepFacts {
  int64_t microbatches = 1;
  /// --predictions: masked positions per sequence the step predicts (0: all).
  int64_t predictions = 0;
  bool kfac = false;
  /// K-FAC with a pipeline's window arithmetic (0: off).
  int64_t kfacWindow = 0;
  int64_t kfacFactorEvery = 1;
  int64_t refreshWarmup = 0, refreshEvery = 1;
  /// --kfac-damping: λ, the final one of a damping schedule.
  double damping = 0;
  /// The step's scalar inputs that the loop feeds: kfac_damping,
  /// kfac_curvature and kfac_refresh_due.
  bool dampingInput = false, curvatureInput = false, refreshInput = false;
};

struct RunConfig {
  std::string corpusFile;

  // The loop around the step.
  int batch = 8, steps = 100, warmup = 10, threads = 0, logEvery = 10;
  int checkpointEvery = 0, evalEvery = 0, evalSequences = 256;
  double lr = 1e-3, maskProbability = 0.15;
  uint64_t seed = 0;
  std::string device = "cpu";
  bool deviceBuffers = false;
  LRSchedule schedule = LRSchedule::Linear;

  // K-FAC's damping and interval schedules (docs/training.md).
  DampingSchedule dampingSchedule = DampingSchedule::Constant;
  double dampingStart = 1e-3, dampingDecay = 0.5;
  int64_t dampingWarmup = 50, dampingEvery = 100;
  DampingAdaptation dampingAdaptation;
  IntervalSchedule intervalSchedule = IntervalSchedule::Constant;
  int64_t intervalGrowth = 2, intervalEvery = 500, intervalMax = 64;

  // Files.
  std::string checkpointFile, resumeFile;

  // What only a pipelined run uses.
  CommChoice comm = CommChoice::Auto;
  std::string traceFile, svgFile;

  /// The compiled step's facts (see StepFacts).
  StepFacts step;
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_RUNCONFIG_H
