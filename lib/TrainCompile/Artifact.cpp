//===- Artifact.cpp - pf-train --compile-only -----------------------------===//
#include "pf/TrainCompile/Artifact.h"

#include "StepBuilding.h"

#include "pf/Driver/OutputFiles.h"
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
  uint64_t bytes = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(directory + "/" + model.library, bytes))
    return llvm::createStringError(ec, "cannot read the size of " + model.library);
  model.libraryBytes = int64_t(bytes);
  model.weightsBytes = written->weightsBytes;
  for (auto [file, hash] : {std::pair<const std::string &, std::string &>{model.library,
                                                                           model.librarySha256},
                            {model.weights, model.weightsSha256}}) {
    auto sha256 = sha256Of(directory + "/" + file);
    if (!sha256)
      return sha256.takeError();
    hash = *sha256;
  }
  model.fingerprint = written->fingerprint;
  model.parameters = std::move(written->parameters);
  return model;
}

} // namespace

int train::writeTrainingArtifact(const TrainConfig &config, const Corpus &corpus, int argc,
                                 char **argv) {
  const std::string &directory = config.artifactDir;
  const TrainingOptions &training = config.training;
  if (config.pipelined)
    return printError("--compile-only with --pipeline: the ranks' artifacts are not built yet "
                      "(docs/artifacts.md, step 4); compile a single-process run");
  // The destination before the long work: a folder the run may write, whose
  // files are no input of the run.
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return printError("--artifact " + directory + ": " + ec.message());
  if (::access(directory.c_str(), W_OK) != 0)
    return printError("--artifact " + directory + ": the folder is not writable");
  std::vector<drv::NamedPath> outputs;
  for (const char *file : {"step.so", "step.weights", "eval.so", "eval.weights", kArtifactManifest})
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
  OwningOpRef<ModuleOp> step = buildTrainingStep(config, corpus.seqLen, context, diagnostics);
  if (!step)
    return 1; // printed why
  TrainingArtifact artifact;
  artifact.onnxNames = onnxNameEntries(*step);
  if (training.kfac)
    artifact.kfacLayers = kfacModelLayers(*step);
  auto stepModel = writeModel(*step, directory, "step");
  if (!stepModel)
    return printError(llvm::toString(stepModel.takeError()));
  artifact.step = std::move(*stepModel);
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
  llvm::outs() << llvm::formatv("artifact {0}: the training step of {1} (batch {2} x {3}, "
                                "optimizer {4}{5}) and its evaluation, compiled in {6:F2} s; "
                                "train it with: pf-trainer {0} --corpus {7}\n",
                                directory, config.modelFile, config.batch, corpus.seqLen,
                                config.optimizerName, training.kfac ? " + K-FAC" : "", seconds,
                                config.corpusFile)
                      .str();
  return 0;
}
