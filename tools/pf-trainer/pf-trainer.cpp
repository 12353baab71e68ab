//===- pf-trainer.cpp - Train from a training artifact, without MLIR -------===//
//
//   pf-train bert.onnx --corpus c.npz --batch 8 --compile-only --artifact bert.art
//   pf-trainer bert.art --corpus c.npz --steps 200 --checkpoint run.npz
//
// Trains from what pf-train --compile-only wrote (docs/artifacts.md) with
// pf-train's training loop, on a machine without MLIR or LLVM: this binary
// links neither (a test checks). The run options default to those the
// artifact was compiled with. This file parses the flags; the training
// library (lib/Train, trainFromArtifact) runs them.
//
//===----------------------------------------------------------------------===//
#include "pf/Runtime/pfrt.h"
#include "pf/Support/StopSignals.h"
#include "pf/Train/ArtifactTraining.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace train = mlir::pf::train;

namespace {

void printHelp() {
  std::string text =
      "usage: pf-trainer DIR --corpus CORPUS.npz [options]\n"
      "       mpirun -np D pf-trainer DIR --corpus CORPUS.npz [options]   (a pipeline)\n"
      "\n"
      "Trains from the training artifact DIR (pf-train MODEL --corpus C ... --compile-only\n"
      "--artifact DIR) with pf-train's loop: progress lines, evaluation, checkpoints and\n"
      "resume, SIGINT/SIGTERM (a checkpoint, then exit status 130). Options compiled into\n"
      "the step (--batch, --optimizer, --kfac, ...) are the artifact's; the run options\n"
      "below default to the values it was compiled with. An artifact compiled with\n"
      "--pipeline \"stages=D ...\" runs as D MPI ranks, each loading its own library\n"
      "(on CUDA: GPU i for the i-th rank of a host; stage values over NCCL when every\n"
      "rank has a GPU of its own, else over MPI staged through host memory).\n"
      "\n"
      "  --corpus FILE             token corpus (.npz from python -m pipefisher.corpus),\n"
      "                            of the sequence length the artifact was compiled for\n"
      "  --device cpu|cuda         runtime backend (default cpu)\n"
      "  --gemm-precision P        fp32 (default), tf32 or bf16: the model GEMMs'\n"
      "                            multiplies on a GPU\n"
      "  --device-buffers          the CUDA path's buffers on the CPU backend (a check)\n";
  // Each run option's help after its flag, wrapped at 88 columns.
  for (const auto &[name, help] : train::trainerRunOptions()) {
    std::string line = "  --" + name + " V";
    line.resize(std::max<size_t>(line.size() + 1, 28), ' ');
    bool words = false; // on this line, after the flag
    for (size_t at = 0; at < help.size();) {
      size_t end = std::min(help.find(' ', at), help.size());
      std::string next = help.substr(at, end - at);
      if (words && line.size() + 1 + next.size() > 88) {
        text += line + "\n";
        line.assign(28, ' ');
        words = false;
      }
      line += (words ? " " : "") + next;
      words = true;
      at = end + 1;
    }
    text += line + "\n";
  }
  std::fputs(text.c_str(), stdout);
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "pf-trainer: %s (see --help)\n", message.c_str());
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  // Before any library starts a thread (see StopSignals.h).
  mlir::pf::driver::routeStopSignals();
  train::TrainerOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printHelp();
      return 0;
    }
    if (arg == "--device-buffers") { // the CUDA path's buffers on the CPU, for tests
      options.deviceBuffers = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.artifact.empty())
        return usageError("more than one artifact: '" + options.artifact + "' and '" + arg + "'");
      options.artifact = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    if (size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name.resize(equals);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return usageError(arg + " needs a value");
    }
    if (name == "corpus") {
      options.corpusFile = value;
    } else if (name == "device") {
      if (value != "cpu" && value != "cuda")
        return usageError("unknown --device '" + value + "' (cpu or cuda)");
      options.device = value;
    } else if (name == "gemm-precision") {
      if (value != "fp32" && value != "tf32" && value != "bf16")
        return usageError("unknown --gemm-precision '" + value + "' (fp32, tf32 or bf16)");
      options.gemmPrecision = value == "fp32"   ? PFRT_GEMM_FP32
                              : value == "tf32" ? PFRT_GEMM_TF32
                                                : PFRT_GEMM_BF16;
    } else if (train::trainerRunOptions().count(name)) {
      options.runOptions[name] = value;
    } else {
      return usageError("unknown option --" + name +
                        " (what is compiled into the step, as --batch or --optimizer, is the "
                        "artifact's: compile again with pf-train --compile-only)");
    }
  }
  if (options.artifact.empty())
    return usageError("no artifact DIR given");
  if (options.corpusFile.empty())
    return usageError("--corpus is required");
  return train::trainFromArtifact(options);
}
