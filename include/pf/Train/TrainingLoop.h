//===- TrainingLoop.h - The training loop -----------------------*- C++ -*-===//
//
// The one training loop of pf-train, for both kinds of step: resume, the
// steps with their batches, learning rate and K-FAC schedules, progress
// lines, held-out evaluation, checkpoints, and SIGINT/SIGTERM (a checkpoint,
// then exit status 130).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_TRAININGLOOP_H
#define PF_TRAIN_TRAININGLOOP_H

#include "pf/Train/Checkpoint.h"
#include "pf/Train/Corpus.h"
#include "pf/Train/Masking.h"
#include "pf/Train/Schedules.h"
#include "pf/Train/RunConfig.h"

#include <string>

namespace mlir::pf::train {

class TrainingStep;

/// What the loop and a step share during one run.
struct TrainingRun {
  TrainingRun(const RunConfig &config, Corpus corpusRead)
      : config(config), corpus(std::move(corpusRead)),
        batches(corpus, config.batch, config.seed, config.maskProbability,
                config.step.predictions),
        damping(config), intervals(config), checkpoints(config, corpus, damping) {}
  TrainingRun(const TrainingRun &) = delete;
  TrainingRun &operator=(const TrainingRun &) = delete;

  const RunConfig &config;
  const Corpus corpus;
  BatchMaker batches;
  KfacDampingSchedule damping;
  KfacIntervalSchedule intervals;
  Checkpoints checkpoints;
};

/// The job size an MPI launcher announces in the environment (Open MPI,
/// MPICH/Hydra and PMIx set one of these in every rank), 1 without one: a
/// single-process run started as several ranks would train alone on each
/// and write the same outputs.
int launcherRanks();

/// Checks the run options of `config` (the same words for every tool):
/// positive counts and rates, --batch within kMaxBatch, --num-threads
/// within PFRT_MAX_THREADS.
::pf::Status checkRunOptions(const RunConfig &config);

/// With --eval-every: holds the corpus' last --eval-sequences rows out of
/// training (corpus.trainRows), once checked that they hold a batch and
/// leave one to train on.
::pf::Status holdOutEvaluationRows(const RunConfig &config, Corpus &corpus);

/// Trains with `step` from --resume's step (or the first) to --steps;
/// returns the exit status (130: stopped by a signal).
int runTrainingLoop(TrainingRun &run, TrainingStep &step);

/// Prints "<tool>: error: <message>" (one write) and returns 1, the exit
/// status.
int printRunError(const std::string &message, const char *tool = "pf-train");

} // namespace mlir::pf::train

#endif // PF_TRAIN_TRAININGLOOP_H
