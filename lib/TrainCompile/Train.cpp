//===- Train.cpp - Run a training run -------------------------------------===//
#include "pf/TrainCompile/Train.h"

#include "StepBuilding.h"

#include "pf/Driver/OutputFiles.h"
#include "pf/Runtime/pfrt.h"
#include "pf/TrainCompile/Artifact.h"
#include "pf/TrainCompile/PipelinedStep.h"
#include "pf/TrainCompile/SingleProcessStep.h"
#include "pf/Train/TrainingLoop.h"
#include "pf/Train/TrainingStep.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::pf;
using namespace mlir::pf::train;

int train::train(TrainConfig &config, int argc, char **argv) {
  TrainingOptions &training = config.training;
  if (auto err = driver::checkDevice(config.device, "pf-train", /*runsOnCuda=*/true))
    return printError(llvm::toString(std::move(err)));
  const bool pipelined = config.pipelined || !config.pipelineSpec.empty();
  if (config.compileOnly == config.artifactDir.empty())
    return printError("--compile-only and --artifact DIR go together: the artifact is what a "
                      "compile-only run writes (docs/artifacts.md)");
  // Started as one of several MPI ranks without --pipeline, every rank
  // would train the whole model alone and write the same checkpoint.
  if (int ranks = launcherRanks(); !pipelined && ranks > 1)
    return printError(llvm::formatv("started as one of {0} MPI ranks without --pipeline: each "
                                    "rank would train alone and write the same outputs; give "
                                    "--pipeline (\"\" for its defaults) or start one process",
                                    ranks));
  if (config.comm != CommChoice::Auto && !pipelined)
    return printError("--comm chooses how the ranks of --pipeline exchange their stage values: "
                      "it needs --pipeline");
  if (config.comm == CommChoice::Nccl && config.device != "cuda")
    return printError("--comm nccl moves CUDA device memory between GPUs: it needs --device "
                      "cuda (on the CPU, give --comm mpi or leave --comm out)");
  const int batch = config.batch;
  const int64_t microbatches = training.microbatches;
  if (training.clipNorm < 0)
    return printError("--clip-norm must be non-negative");
  if (auto status = checkRunOptions(config); !status.ok())
    return printError(status.message());
  if (microbatches < 1 || batch % microbatches != 0)
    return printError(llvm::formatv("--micro-batches must be >= 1 and divide --batch ({0}), got "
                                    "{1}",
                                    batch, microbatches));
  // Before any long work: no output over an input or another output, every
  // destination writable. --resume may name the --checkpoint: continuing a
  // run into its own checkpoint is what resuming is for (the write replaces
  // it whole or not at all).
  if (auto err = driver::checkOutputs({{"--checkpoint", config.checkpointFile},
                                       {"--trace", config.traceFile},
                                       {"--svg", config.svgFile},
                                       {"--emit-step", config.emitStepFile}},
                                      {{"model", config.modelFile},
                                       {"--corpus", config.corpusFile}}))
    return printError(llvm::toString(std::move(err)));
  auto corpus = loadCorpus(config.corpusFile);
  if (!corpus)
    return printError(corpus.error());
  if (!pipelined && (!config.traceFile.empty() || !config.svgFile.empty()))
    return printError("--trace and --svg record a pipelined run: they need --pipeline");
  if (training.kfacWindow < 0 ||
      (training.kfacWindow > 0 && (!training.kfac || training.precondition.refreshWarmup < 1)))
    return printError(llvm::formatv("--kfac-window {0}: needs --kfac, a window of >= 1 step and "
                                    "--kfac-refresh-warmup >= 1 (the warm-up steps invert every "
                                    "step; got {1})",
                                    training.kfacWindow, training.precondition.refreshWarmup));
  if (training.kfacFactorEvery < 1 ||
      (training.kfacFactorEvery > 1 && (!training.kfac || training.kfacWindow > 0)))
    return printError(llvm::formatv("--kfac-factor-every {0}: needs >= 1 and, above 1, --kfac "
                                    "without --kfac-window (whose windows decide the factor "
                                    "steps)",
                                    training.kfacFactorEvery));
  if (auto status = holdOutEvaluationRows(config, *corpus); !status.ok())
    return printError(status.message());
  if (!pipelined)
    if (auto err = prepareDampingSchedule(config, training.kfacWindow > 0))
      return printError(llvm::toString(std::move(err)));
  if (auto err = prepareIntervalSchedule(config))
    return printError(llvm::toString(std::move(err)));
  // The step's facts, once: a pipelined run's damping schedule depends on
  // its --pipeline (preparePipeline), and the run reads them from here on.
  std::optional<PipelineRunOptions> pipeline;
  if (pipelined) {
    pipeline = preparePipeline(config);
    if (!pipeline)
      return 1; // printed why
  } else {
    config.fixStepFacts();
  }
  if (pipelined) {
    if (training.kfac && config.dampingSchedule == DampingSchedule::Adaptive)
      return printError("--kfac-damping-schedule adaptive is single-process K-FAC for now: its "
                        "quadratic model needs every K-FAC layer's update, gradient and factors "
                        "in one process (give a fixed schedule with --pipeline)");
    if (training.kfacWindow > 0)
      return printError("--kfac-window is single-process K-FAC with a pipeline's arithmetic; a "
                        "pipelined run takes --pipeline \"... kfac=bubbles refresh=K\"");
    // The head's and the LayerNorms' factors are no encoder block's linear,
    // the unit the stages and the K-FAC placements split by.
    if (training.kfac && training.insertKFAC.layers != KfacLayers::Encoder)
      return printError("--kfac-layers encoder-and-head is single-process K-FAC for now: a "
                        "pipelined run (--pipeline) preconditions the encoder blocks only (give "
                        "--kfac-layers encoder)");
    if (training.kfac && training.insertKFAC.layerNorm != KfacLayerNorm::None)
      return printError(
          llvm::Twine("--kfac-layer-norm ") +
          (training.insertKFAC.layerNorm == KfacLayerNorm::Diagonal ? "diagonal" : "blocks") +
          " is single-process K-FAC for now: a pipelined run (--pipeline) "
          "preconditions the encoder blocks' linears only (give --kfac-layer-norm none)");
    if (training.kfac && training.insertKFAC.embeddings != KfacEmbeddings::None)
      return printError(llvm::Twine("--kfac-embeddings ") +
                        (training.insertKFAC.embeddings == KfacEmbeddings::Word
                             ? "word"
                             : "word-and-position") +
                        " is single-process K-FAC for now: a pipelined run (--pipeline) "
                        "preconditions the encoder blocks' linears only (give --kfac-embeddings "
                        "none)");
  }
  if (config.compileOnly)
    return writeTrainingArtifact(config, pipeline ? &*pipeline : nullptr, *corpus, argc, argv);
  TrainingRun run(config, std::move(*corpus));
  if (pipelined)
    return trainPipelined(config, *pipeline, run, argc, argv);
  std::unique_ptr<TrainingStep> step = createSingleProcessStep(config, run);
  if (!step)
    return 1; // printed already
  return runTrainingLoop(run, *step);
}
