//===- PipelinedStep.h - The training step as one rank of a pipeline -*- C++ -*-===//
#ifndef PF_TRAINCOMPILE_PIPELINEDSTEP_H
#define PF_TRAINCOMPILE_PIPELINEDSTEP_H

namespace mlir::pf {
struct PipelineRunOptions;
} // namespace mlir::pf

namespace mlir::pf::train {

struct TrainConfig;
struct TrainingRun;

/// --pipeline, on every rank of an mpirun job (`pipeline` as
/// preparePipeline parsed and checked it): joins the job, builds this
/// rank's program (one stage per rank) and runs the training loop with it.
/// A failure on one rank prints `pf-train: rank R: error: ...` and ends the
/// whole job. Returns the exit status (130: stopped by a signal on a rank).
int trainPipelined(TrainConfig &config, PipelineRunOptions pipeline, TrainingRun &run, int argc,
                   char **argv);

} // namespace mlir::pf::train

#endif // PF_TRAINCOMPILE_PIPELINEDSTEP_H
