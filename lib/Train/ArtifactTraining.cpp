//===- ArtifactTraining.cpp - Training from an artifact -------------------===//
#include "pf/Train/ArtifactTraining.h"

#include "pf/RankRuntime/AotStagePrograms.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Support/AotModel.h"
#include "pf/Support/OutputFiles.h"
#include "pf/Support/StopSignals.h"
#include "pf/Train/Artifact.h"
#include "pf/Train/Evaluation.h"
#include "pf/Train/RankStep.h"
#include "pf/Train/SingleModelStep.h"

#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;
using ::pf::Status;

namespace {

constexpr const char *kTool = "pf-trainer";

int fail(const std::string &message) { return printRunError(message, kTool); }

/// One run option: its help and how its text sets the configuration.
struct RunOption {
  const char *help;
  std::function<Status(RunConfig &, const std::string &)> set;
};

/// Whole-text numbers.
bool parseInt(const std::string &text, long long &out) {
  char *end = nullptr;
  errno = 0;
  out = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && !*end && errno != ERANGE && out >= INT32_MIN && out <= INT32_MAX;
}

bool parseDouble(const std::string &text, double &out) {
  char *end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && !*end;
}

template <typename Field> RunOption integer(const char *help, Field RunConfig::*field) {
  return {help, [field](RunConfig &config, const std::string &text) {
            long long value;
            if (!parseInt(text, value))
              return Status::error("'" + text + "' is not an integer");
            config.*field = Field(value);
            return Status::success();
          }};
}

const std::map<std::string, RunOption> &runOptionTable() {
  static const std::map<std::string, RunOption> table = [] {
    std::map<std::string, RunOption> t;
    auto number = [](const char *help, double RunConfig::*field) {
      return RunOption{help, [field](RunConfig &config, const std::string &text) {
                         return parseDouble(text, config.*field)
                                    ? Status::success()
                                    : Status::error("'" + text + "' is not a number");
                       }};
    };
    auto text = [](const char *help, std::string RunConfig::*field) {
      return RunOption{help, [field](RunConfig &config, const std::string &value) {
                         config.*field = value;
                         return Status::success();
                       }};
    };
    t.emplace("steps", integer("Last step to run (1-based)", &RunConfig::steps));
    t.emplace("lr", number("Peak learning rate", &RunConfig::lr));
    t.emplace("warmup", integer("Linear warm-up steps", &RunConfig::warmup));
    t.emplace("schedule",
              RunOption{"Learning rate after the warm-up: linear (to 0 at --steps) or constant",
                        [](RunConfig &config, const std::string &value) {
                          if (value != "linear" && value != "constant")
                            return Status::error("'" + value + "' is not linear or constant");
                          config.schedule =
                              value == "linear" ? LRSchedule::Linear : LRSchedule::Constant;
                          return Status::success();
                        }});
    t.emplace("seed", RunOption{"Seed of batches and masks",
                                [](RunConfig &config, const std::string &value) {
                                  char *end = nullptr;
                                  unsigned long long seed = std::strtoull(value.c_str(), &end, 10);
                                  if (value.empty() || *end || value[0] == '-')
                                    return Status::error("'" + value + "' is not a seed");
                                  config.seed = seed;
                                  return Status::success();
                                }});
    t.emplace("mask-prob", number("Share of tokens to predict", &RunConfig::maskProbability));
    t.emplace("log-every", integer("Print a progress line every N steps", &RunConfig::logEvery));
    t.emplace("eval-every",
              integer("Every N steps (and before the first and after the last), the masked-LM "
                      "loss on held-out sequences (0: off)",
                      &RunConfig::evalEvery));
    t.emplace("eval-sequences",
              integer("With --eval-every: the corpus' last N sequences are held out",
                      &RunConfig::evalSequences));
    t.emplace("num-threads",
              integer("Runtime threads (0: all cores)", &RunConfig::threads));
    t.emplace("checkpoint",
              text("Write a checkpoint (.npz) here at the end and when SIGINT or SIGTERM stops "
                   "the run (pf-train's format: either tool resumes the other's)",
                   &RunConfig::checkpointFile));
    t.emplace("checkpoint-every",
              integer("Also write the checkpoint every N steps", &RunConfig::checkpointEvery));
    t.emplace("resume", text("Resume from this checkpoint", &RunConfig::resumeFile));
    return t;
  }();
  return table;
}

/// The single-process step of an artifact: its compiled step and
/// evaluation, loaded (AotModel).
class ArtifactStep final : public SingleModelStep {
public:
  ArtifactStep(TrainingRun &run, const TrainingArtifact &artifact, const std::string &directory,
               std::unique_ptr<drv::AotModel> step, std::unique_ptr<drv::AotModel> evaluation,
               double loadSeconds)
      : SingleModelStep(run), artifact(artifact), directory(directory),
        stepModel(std::move(step)), evalModel(std::move(evaluation)), loadSeconds(loadSeconds) {
    useModels(*stepModel, evalModel.get());
  }

  int fail(const std::string &message) override { return ::fail(message); }
  void printStart() override {
    std::printf("training %s (%s): %zu parameters tensors, batch %lld x %lld, optimizer %s%s, "
                "step loaded in %.2f s\n",
                directory.c_str(), artifact.modelFile.c_str(), model->parameters().size(),
                (long long)artifact.batch, (long long)artifact.sequence,
                artifact.optimizer.c_str(), artifact.run.step.kfac ? " + K-FAC" : "",
                loadSeconds);
    std::fflush(stdout);
  }

private:
  const TrainingArtifact &artifact;
  const std::string directory;
  std::unique_ptr<drv::AotModel> stepModel, evalModel;
  const double loadSeconds;
};

/// Loads one compiled function of the artifact and checks that it is the
/// one the manifest describes.
::pf::Expected<std::unique_ptr<drv::AotModel>>
loadModel(const std::string &directory, const ArtifactModel &described,
          const drv::AotModel::Options &options) {
  auto loaded = drv::AotModel::load(directory + "/" + described.library,
                                    directory + "/" + described.weights, described.parameters,
                                    options);
  if (!loaded)
    return loaded.status();
  if ((*loaded)->description().fingerprint != described.fingerprint)
    return Status::error(directory + "/" + described.library +
                         " is not the library its manifest describes (fingerprints " +
                         std::to_string((*loaded)->description().fingerprint) + " and " +
                         std::to_string(described.fingerprint) +
                         "): the artifact mixes two compilations; compile it again");
  return loaded;
}

/// One rank of a pipelined artifact: its library's stage functions and
/// program, run by the rank runner; rank 0 evaluates with the artifact's
/// evaluation model.
class ArtifactRankStep final : public RankStep {
public:
  ArtifactRankStep(TrainingRun &run, const RankJob &job,
                   const TrainingArtifact &artifact, const std::string &directory,
                   const drv::AotModel::Options &modelOptions, double loadSeconds)
      : RankStep(run, job), artifact(artifact), directory(directory),
        modelOptions(modelOptions), loadSeconds(loadSeconds) {}

  void printStart() override {
    if (job.rank != 0)
      return;
    std::printf("training %s (%s): pipeline of %d ranks, %s schedule, %lld micro-batches, batch "
                "%lld x %lld, optimizer %s%s, programs loaded in %.2f s\n",
                directory.c_str(), artifact.modelFile.c_str(), artifact.ranks,
                artifact.pipeline.schedule.c_str(), (long long)artifact.pipeline.microbatches,
                (long long)artifact.batch, (long long)artifact.sequence,
                artifact.optimizer.c_str(), artifact.run.step.kfac ? " + K-FAC" : "",
                loadSeconds);
    std::fflush(stdout);
  }
  ::pf::Expected<drv::Model *> evaluationModel() override {
    // Rank 0 evaluates with the single-process evaluation model.
    if (job.rank != 0)
      return static_cast<drv::Model *>(nullptr);
    if (!evalModel) {
      auto loaded = loadModel(directory, artifact.evaluation, modelOptions);
      if (!loaded)
        return loaded.status();
      evalModel = loaded.take();
    }
    return static_cast<drv::Model *>(evalModel.get());
  }

private:
  const TrainingArtifact &artifact;
  const std::string directory;
  const drv::AotModel::Options modelOptions;
  const double loadSeconds;
  std::unique_ptr<drv::AotModel> evalModel;
};

/// The run as compiled, then the command line's run options, checked.
::pf::Expected<RunConfig> runConfigOf(const TrainerOptions &options,
                                      const TrainingArtifact &artifact) {
  RunConfig config = artifact.run;
  config.corpusFile = options.corpusFile;
  for (const auto &[name, value] : options.runOptions) {
    auto option = runOptionTable().find(name);
    if (option == runOptionTable().end())
      return Status::error("--" + name + " is no run option of pf-trainer");
    if (auto status = option->second.set(config, value); !status.ok())
      return Status::error("--" + name + ": " + status.message());
  }
  config.device = options.device;
  config.deviceBuffers = options.deviceBuffers;
  if (auto status = checkRunOptions(config); !status.ok())
    return status;
  return config;
}

/// The corpus, checked against the artifact, with the evaluation's rows
/// held out; before it, no output over an input (`artifactFiles`).
::pf::Expected<Corpus> corpusFor(RunConfig &config, const TrainerOptions &options,
                                 const TrainingArtifact &artifact,
                                 const std::vector<const ArtifactModel *> &artifactFiles) {
  std::vector<::pf::NamedPath> inputs = {{"--corpus", config.corpusFile}};
  for (const ArtifactModel *model : artifactFiles)
    for (const std::string &file : {model->library, model->weights})
      inputs.push_back({"the artifact", options.artifact + "/" + file});
  if (std::string err = ::pf::checkOutputFiles({{"--checkpoint", config.checkpointFile}}, inputs);
      !err.empty())
    return Status::error(err);
  auto corpus = loadCorpus(config.corpusFile);
  if (!corpus)
    return corpus.status();
  if (corpus->seqLen != artifact.sequence)
    return Status::error(config.corpusFile + ": its sequences have " +
                         std::to_string(corpus->seqLen) + " tokens; " + options.artifact +
                         " was compiled for " + std::to_string(artifact.sequence) +
                         " (compile it again with this --corpus)");
  if (auto status = holdOutEvaluationRows(config, *corpus); !status.ok())
    return status;
  return corpus;
}

/// Under mpirun: this rank's program of a pipelined artifact.
int trainOnRanks(const TrainerOptions &options) {
  RankJob job;
  job.tool = kTool;
  if (Status s = job.start(); !s.ok())
    return fail(s.message());
  // Only this rank's files are hashed; every rank must hold the same
  // manifest, or their programs would not meet (a hang).
  auto artifact = readArtifact(options.artifact, job.rank);
  if (!artifact)
    return job.fail(artifact.error());
  Digest manifest;
  manifest.addFile(options.artifact + "/" + kArtifactManifest);
  if (Status s = checkSameOnEveryRank(job, manifest.h,
                                      "were started with another artifact than rank 0 (the "
                                      "digests of " + options.artifact + "/" +
                                          kArtifactManifest + " differ)",
                                      "give every rank the same artifact");
      !s.ok())
    return job.fail(s.message());
  if (artifact->ranks != job.size)
    return job.fail(options.artifact + " is compiled for " + std::to_string(artifact->ranks) +
                    " ranks but the job has " + std::to_string(job.size) +
                    ": start it with mpirun -np " + std::to_string(artifact->ranks));
  const ArtifactRank &mine = artifact->rankPrograms[size_t(job.rank)];
  auto configured = runConfigOf(options, *artifact);
  if (!configured)
    return job.fail(configured.error());
  RunConfig config = configured.take();
  auto corpus = corpusFor(config, options, *artifact, {&mine.files, &artifact->evaluation});
  if (!corpus)
    return job.fail(corpus.error());
  if (Status s = chooseRankDevice(config, job); !s.ok())
    return job.fail(s.message());
  if (!config.resumeFile.empty())
    if (Status s = checkSameResume(job, config.resumeFile); !s.ok())
      return job.fail(s.message());

  auto start = std::chrono::steady_clock::now();
  drv::AotModel::Options modelOptions;
  modelOptions.backend = job.backend;
  modelOptions.device = job.device;
  modelOptions.threads = config.threads;
  modelOptions.gemmPrecision = options.gemmPrecision;
  modelOptions.deviceBuffers = job.onBackendMemory;
  const std::string library = options.artifact + "/" + mine.files.library;
  auto stages = drv::loadAotStagePrograms(library, options.artifact + "/" + mine.files.weights,
                                          mine.entries, mine.files.parameters,
                                          mine.files.fingerprint, modelOptions);
  if (!stages)
    return job.fail(stages.error());
  auto program = drv::loadRankProgram(library, mine.plan.program.symbol);
  if (!program)
    return job.fail(program.error());
  drv::RankRunner::Options runnerOptions;
  runnerOptions.ignoreIndex = artifact->pipeline.ignoreIndex;
  runnerOptions.transferBackend = job.transferBackend;
  auto runner = drv::RankRunner::create(mine.plan, *program, stages.take(), job.ctx, job.world,
                                        runnerOptions);
  if (!runner)
    return job.fail(runner.error());
  double loadSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int code = 1;
  {
    TrainingRun run(config, corpus.take());
    run.checkpoints.onnxNameEntries = artifact->onnxNames;
    ArtifactRankStep step(run, job, *artifact, options.artifact, modelOptions, loadSeconds);
    step.adoptRunner(**runner);
    code = runTrainingLoop(run, step);
  }
  if (code != 0 && code != 130)
    return code; // aborted the job already
  return job.end(code);
}

} // namespace

const std::map<std::string, std::string> &train::trainerRunOptions() {
  static const std::map<std::string, std::string> help = [] {
    std::map<std::string, std::string> h;
    for (const auto &[name, option] : runOptionTable())
      h[name] = option.help;
    return h;
  }();
  return help;
}

int train::trainFromArtifact(const TrainerOptions &options) {
  if (int ranks = launcherRanks(); ranks > 1) {
    // What the artifact is for, before MPI starts: its files are checked
    // by each rank, its own.
    auto manifest = readArtifact(options.artifact, -1, /*checkFiles=*/false);
    if (!manifest)
      return fail(manifest.error());
    if (manifest->ranks == 1)
      return fail("started as one of " + std::to_string(ranks) + " MPI ranks: " +
                  options.artifact +
                  " is a single-process artifact, which would train alone on each rank and "
                  "write the same outputs; start one process");
    return trainOnRanks(options);
  }
  auto artifact = readArtifact(options.artifact);
  if (!artifact)
    return fail(artifact.error());
  if (artifact->ranks > 1)
    return fail(options.artifact + " is compiled for a pipeline of " +
                std::to_string(artifact->ranks) + " ranks: start it with mpirun -np " +
                std::to_string(artifact->ranks) + " pf-trainer " + options.artifact + " ...");
  auto configured = runConfigOf(options, *artifact);
  if (!configured)
    return fail(configured.error());
  RunConfig config = configured.take();
  auto corpus = corpusFor(config, options, *artifact, {&artifact->step, &artifact->evaluation});
  if (!corpus)
    return fail(corpus.error());

  auto start = std::chrono::steady_clock::now();
  drv::AotModel::Options modelOptions;
  modelOptions.backend = options.device == "cuda" ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  modelOptions.threads = config.threads;
  modelOptions.gemmPrecision = options.gemmPrecision;
  modelOptions.deviceBuffers = options.deviceBuffers;
  auto step = loadModel(options.artifact, artifact->step, modelOptions);
  if (!step)
    return fail(step.error());
  // The adaptive damping's forward pass is the evaluation model's too.
  const bool adaptive = config.step.kfac && config.dampingSchedule == DampingSchedule::Adaptive;
  std::unique_ptr<drv::AotModel> evaluation;
  if (config.evalEvery > 0 || adaptive) {
    auto loaded = loadModel(options.artifact, artifact->evaluation, modelOptions);
    if (!loaded)
      return fail(loaded.error());
    evaluation = loaded.take();
  }
  double loadSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  TrainingRun run(config, corpus.take());
  run.checkpoints.onnxNameEntries = artifact->onnxNames;
  ArtifactStep trainingStep(run, *artifact, options.artifact, step.take(), std::move(evaluation),
                            loadSeconds);
  if (adaptive)
    if (auto status = trainingStep.useAdaptiveDamping(artifact->kfacLayers); !status.ok())
      return fail(status.message());
  return runTrainingLoop(run, trainingStep);
}
