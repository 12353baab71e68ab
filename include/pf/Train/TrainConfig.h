//===- TrainConfig.h - What a pf-train run is asked to do -------*- C++ -*-===//
//
// The configuration of a training run: pf-train's flags bind to these
// fields, the library (pf/Train/Train.h) runs it. The defaults are the
// flags' defaults (--help shows them).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_TRAINCONFIG_H
#define PF_TRAIN_TRAINCONFIG_H

#include "pf/Driver/Device.h"
#include "pf/Train/DampingAdaptation.h"
#include "pf/Transforms/Training/Passes.h"

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

struct TrainConfig {
  std::string modelFile, corpusFile;
  /// --no-retie: keep an exporter's folded transposed copy of a parameter.
  bool noRetie = false;

  // The loop around the step.
  int batch = 8, steps = 100, warmup = 10, threads = 0, logEvery = 10;
  int checkpointEvery = 0, evalEvery = 0, evalSequences = 256;
  double lr = 1e-3, maskProbability = 0.15;
  uint64_t seed = 0;
  std::string device = "cpu";
  driver::GemmPrecision gemmPrecision = driver::GemmPrecision::FP32;
  bool deviceBuffers = false;
  LRSchedule schedule = LRSchedule::Linear;

  // K-FAC's damping and interval schedules (docs/training.md).
  DampingSchedule dampingSchedule = DampingSchedule::Constant;
  double dampingStart = 1e-3, dampingDecay = 0.5;
  int64_t dampingWarmup = 50, dampingEvery = 100;
  /// --kfac-damping-schedule adaptive: T, the decay (ω = decay^T) and λ's range.
  DampingAdaptation dampingAdaptation;
  IntervalSchedule intervalSchedule = IntervalSchedule::Constant;
  int64_t intervalGrowth = 2, intervalEvery = 500, intervalMax = 64;

  // Files.
  std::string checkpointFile, resumeFile, emitStepFile;

  // --pipeline and what only a pipelined run uses.
  /// --pipeline was given (its options may be empty: every default).
  bool pipelined = false;
  std::string pipelineSpec;
  CommChoice comm = CommChoice::Auto;
  std::string traceFile, svgFile;

  /// The training-step options (micro-batches, optimizer, K-FAC, ...): the
  /// same options and defaults as pf-opt --pf-training.
  TrainingOptions training;
  /// --optimizer as the command line spells it (for the start-up line).
  std::string optimizerName;
};

} // namespace mlir::pf::train

#endif // PF_TRAIN_TRAINCONFIG_H
