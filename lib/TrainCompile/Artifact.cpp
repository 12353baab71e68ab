//===- Artifact.cpp - pf-train --compile-only -----------------------------===//
#include "pf/TrainCompile/Artifact.h"

#include "StepBuilding.h"

#include "pf/Driver/OutputFiles.h"
#include "pf/PipelineRuntime/RankExecutor.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Support/OutputFiles.h"
#include "pf/Train/Artifact.h"
#include "pf/TrainCompile/Train.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <unistd.h>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

namespace {

llvm::Expected<std::string> sha256Of(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read " + path);
  auto hash = llvm::SHA256::hash(llvm::arrayRefFromStringRef((*buffer)->getBuffer()));
  return llvm::toHex(hash, /*LowerCase=*/true);
}

/// The size and SHA-256 of `model`'s library and weights in `directory`.
llvm::Error measureFiles(const std::string &directory, ArtifactModel &model) {
  uint64_t bytes = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(directory + "/" + model.library, bytes))
    return llvm::createStringError(ec, "cannot read the size of " + model.library);
  model.libraryBytes = int64_t(bytes);
  for (auto [file, hash] : {std::pair<const std::string &, std::string &>{model.library,
                                                                           model.librarySha256},
                            {model.weights, model.weightsSha256}}) {
    auto sha256 = sha256Of(directory + "/" + file);
    if (!sha256)
      return sha256.takeError();
    hash = *sha256;
  }
  return llvm::Error::success();
}

/// Compiles `module` into `directory`/`name`.so and .weights, with their
/// sizes and SHA-256.
llvm::Expected<ArtifactModel> writeModel(ModuleOp module, const std::string &directory,
                                         const std::string &name) {
  ArtifactModel model;
  model.library = name + ".so";
  model.weights = name + ".weights";
  auto written = drv::CompiledModel::writeAotLibrary(module, directory + "/" + model.library,
                                                     directory + "/" + model.weights);
  if (!written)
    return written.takeError();
  model.weightsBytes = written->weightsBytes;
  if (auto err = measureFiles(directory, model))
    return std::move(err);
  model.fingerprint = written->fingerprint;
  model.parameters = std::move(written->parameters);
  return model;
}

/// Rank `rank`'s library of the pipelined step `module`: the stage
/// functions its program calls and the program, lowered for `overlap`.
llvm::Expected<ArtifactRank> writeRank(ModuleOp module, int32_t rank, int32_t ranks,
                                       bool overlap, const std::string &directory) {
  auto plan = drv::describeRank(module, rank, ranks, overlap);
  if (!plan)
    return plan.takeError();
  ArtifactRank written;
  ArtifactModel &files = written.files;
  files.library = "rank" + std::to_string(rank) + ".so";
  files.weights = "rank" + std::to_string(rank) + ".weights";
  Operation *program = module.lookupSymbol(plan->program.name);
  auto library = drv::CompiledProgram::writeRankLibrary(
      module, plan->functions, {program}, overlap, directory + "/" + files.library,
      directory + "/" + files.weights);
  if (!library)
    return library.takeError();
  files.weightsBytes = library->weightsBytes;
  files.fingerprint = library->fingerprint;
  files.parameters = std::move(library->parameters);
  if (auto err = measureFiles(directory, files))
    return std::move(err);
  if (library->programs != std::vector<std::string>{plan->program.symbol})
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "rank " + std::to_string(rank) +
                                       "'s library exports another program than " +
                                       plan->program.symbol);
  for (const drv::RankLibrary::Entry &entry : library->entries)
    written.entries.push_back({entry.function, entry.describeSymbol, entry.inputs, entry.outputs});
  written.plan = std::move(*plan);
  return written;
}

} // namespace

int train::writeTrainingArtifact(const TrainConfig &config,
                                 const PipelineRunOptions *pipeline, const Corpus &corpus,
                                 int argc, char **argv) {
  const std::string &directory = config.artifactDir;
  const TrainingOptions &training = config.training;
  if (pipeline) {
    if (pipeline->stages < 2)
      return printError("--compile-only with --pipeline: give stages=D (D >= 2), the ranks the "
                        "artifact is compiled for");
    if (pipeline->kfac == KfacWork::Bubbles)
      return printError("--compile-only with --pipeline \"kfac=bubbles\": the K-FAC windows are "
                        "placed at run time from the measured warm-up, and an artifact does not "
                        "carry their programs yet (docs/artifacts.md); compile kfac=step");
  }
  // The destination before the long work: a folder the run may write, whose
  // files are no input of the run.
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return printError("--artifact " + directory + ": " + ec.message());
  if (::access(directory.c_str(), W_OK) != 0)
    return printError("--artifact " + directory + ": the folder is not writable");
  std::vector<std::string> files = {"eval.so", "eval.weights", kArtifactManifest};
  if (!pipeline)
    files.insert(files.end(), {"step.so", "step.weights"});
  for (int64_t r = 0; pipeline && r < pipeline->stages; ++r)
    files.insert(files.end(), {"rank" + std::to_string(r) + ".so",
                               "rank" + std::to_string(r) + ".weights"});
  std::vector<drv::NamedPath> outputs;
  for (const std::string &file : files)
    outputs.push_back({"--artifact", directory + "/" + file});
  if (auto err = drv::checkOutputs(outputs, {{"model", config.modelFile},
                                             {"--corpus", config.corpusFile}}))
    return printError(llvm::toString(std::move(err)));
  // A manifest never describes another compilation's files: the old one goes
  // first, the new one is written last.
  llvm::sys::fs::remove(directory + "/" + kArtifactManifest);

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<ScopedDiagnosticHandler> diagnostics;
  TrainingArtifact artifact;
  if (pipeline) {
    OwningOpRef<ModuleOp> step =
        buildPipelinedStepModule(config, *pipeline, corpus.seqLen, context, diagnostics);
    if (!step)
      return printError("building the pipelined training step of " + config.modelFile +
                        " failed (see the messages above)");
    artifact.onnxNames = onnxNameEntries(*step);
    artifact.ranks = int32_t(pipeline->stages);
    artifact.pipeline.spec = config.pipelineSpec;
    artifact.pipeline.schedule = ::pf::sched::scheduleKindName(pipeline->schedule);
    artifact.pipeline.microbatches = pipeline->microbatches;
    artifact.pipeline.overlap = pipeline->overlap;
    artifact.pipeline.ignoreIndex = training.loss.ignoreIndex;
    for (int32_t r = 0; r < artifact.ranks; ++r) {
      auto rank = writeRank(*step, r, artifact.ranks, pipeline->overlap, directory);
      if (!rank)
        return printError(llvm::toString(rank.takeError()));
      artifact.rankPrograms.push_back(std::move(*rank));
    }
  } else {
    OwningOpRef<ModuleOp> step =
        buildTrainingStep(config, corpus.seqLen, context, diagnostics);
    if (!step)
      return 1; // printed why
    artifact.onnxNames = onnxNameEntries(*step);
    if (training.kfac)
      artifact.kfacLayers = kfacModelLayers(*step);
    auto stepModel = writeModel(*step, directory, "step");
    if (!stepModel)
      return printError(llvm::toString(stepModel.takeError()));
    artifact.step = std::move(*stepModel);
  }
  auto evaluation = buildEvaluation(*context, config, corpus.seqLen);
  if (!evaluation)
    return printError(llvm::toString(evaluation.takeError()));
  auto evalModel = writeModel(**evaluation, directory, "eval");
  if (!evalModel)
    return printError(llvm::toString(evalModel.takeError()));
  artifact.evaluation = std::move(*evalModel);

  artifact.runtimeAbi = PFRT_ABI_VERSION;
  artifact.modelFile = config.modelFile;
  auto hash = sha256Of(config.modelFile);
  if (!hash)
    return printError(llvm::toString(hash.takeError()));
  artifact.modelSha256 = *hash;
  artifact.command.assign(argv, argv + argc);
  artifact.batch = config.batch;
  artifact.sequence = corpus.seqLen;
  artifact.optimizer = config.optimizerName;
  artifact.run = config; // the run options and the step's facts
  const std::string text = manifestText(artifact);
  if (std::string err = ::pf::writeFileAtomically(directory + "/" + kArtifactManifest,
                                                  text.data(), text.size());
      !err.empty())
    return printError("--artifact: cannot write " + err);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string how = pipeline ? llvm::formatv("mpirun -np {0} pf-trainer", artifact.ranks).str()
                             : std::string("pf-trainer");
  std::string what =
      pipeline ? llvm::formatv("the {0} rank programs of {1}'s {2} pipeline", artifact.ranks,
                               config.modelFile, artifact.pipeline.schedule)
                     .str()
               : "the training step of " + config.modelFile;
  llvm::outs() << llvm::formatv("artifact {0}: {1} (batch {2} x {3}, optimizer {4}{5}) and its "
                                "evaluation, compiled in {6:F2} s; train it with: {7} {0} "
                                "--corpus {8}\n",
                                directory, what, config.batch, corpus.seqLen,
                                config.optimizerName, training.kfac ? " + K-FAC" : "", seconds,
                                how, config.corpusFile)
                      .str();
  return 0;
}
