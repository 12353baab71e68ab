//===- pf-train.cpp - masked-LM training on the pf runtime ------------------===//
//
//   pf-train bert.onnx --corpus corpus.npz --batch 8 --steps 200 --optimizer adamw --lr 1e-3
//
// Builds the training step from the forward model (masked-LM loss, reverse-mode
// gradients, in-place optimizer updates), JIT-compiles it once and runs it
// over the corpus with BERT's masking (15%: 80% [MASK], 10% random, 10% kept).
// Batches and masks are functions of (seed, step), so a run resumed from a
// checkpoint continues bit for bit. Ctrl-C or SIGTERM saves a checkpoint and stops.
//
// This file binds the flags to a TrainConfig; the training library
// (lib/Train, docs/train-library.md) runs it.
//
//===----------------------------------------------------------------------===//
#include "pf/Support/StopSignals.h"
#include "pf/Runtime/pfrt.h"
#include "pf/TrainCompile/Train.h"
#include "pf/Transforms/OptionBinder.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Signals.h"

#include <string>

namespace cl = llvm::cl;
namespace drv = mlir::pf::driver;
namespace train = mlir::pf::train;

PF_CHOICE_PARSER(::mlir::pf::train::LRSchedule)
PF_CHOICE_PARSER(::mlir::pf::train::DampingSchedule)
PF_CHOICE_PARSER(::mlir::pf::train::IntervalSchedule)

namespace {
/// pf-train's flags, bound to the fields of a TrainConfig (whose defaults
/// --help shows). Held by main, so no flag state outlives the run.
struct Flags {
  explicit Flags(train::TrainConfig &config);

  cl::OptionCategory category{"pf-train options"};
  cl::OptionCategory stepCategory{"pf-train training-step options (those of pf-run "
                                  "--training-step and pf-opt --pf-training)"};
  mlir::pf::FlagBinder loopFlags{category}, stepFlags{stepCategory};
  cl::opt<std::string, /*ExternalStorage=*/true> modelFile, corpusFile;
  cl::opt<bool, true> noRetie;
  cl::opt<std::string, true> checkpointFile;
  cl::opt<bool, true> deviceBuffers;
  cl::opt<std::string, true> resumeFile, emitStepFile;
  cl::opt<bool, true> compileOnly;
  cl::opt<std::string, true> artifactDir, pipelineSpec;
  cl::opt<train::CommChoice, true> comm;
  cl::opt<std::string, true> traceFile, svgFile;
};

/// pf-train's own options (the loop around the step), with their defaults.
void bindLoopOptions(mlir::pf::FlagBinder &flags, train::TrainConfig &config) {
  using train::DampingSchedule;
  using train::IntervalSchedule;
  using train::LRSchedule;
  flags.opt("batch", config.batch,
            "Sequences per step (at most " + std::to_string(train::kMaxBatch) + ", kMaxBatch)");
  flags.opt("steps", config.steps, "Last step to run (1-based)");
  flags.opt("lr", config.lr, "Peak learning rate");
  flags.opt("warmup", config.warmup, "Linear warm-up steps");
  flags.opt("schedule", config.schedule, "Learning rate after the warm-up",
            cl::values(clEnumValN(LRSchedule::Linear, "linear", "Linear decay to 0 at --steps"),
                       clEnumValN(LRSchedule::Constant, "constant", "Constant")));
  flags.opt(
      "kfac-damping-schedule", config.dampingSchedule,
      "K-FAC damping λ over the steps, fed to the step as its kfac_damping input "
      "(docs/training.md, \"Damping schedules\")",
      cl::values(clEnumValN(DampingSchedule::Constant, "constant", "--kfac-damping at every step"),
                 clEnumValN(DampingSchedule::Warmup, "warmup",
                            "Geometric from --kfac-damping-start at step 1 to "
                            "--kfac-damping at step --kfac-damping-warmup + 1, then "
                            "constant"),
                 clEnumValN(DampingSchedule::Step, "step",
                            "--kfac-damping times --kfac-damping-decay every "
                            "--kfac-damping-every steps"),
                 clEnumValN(DampingSchedule::Adaptive, "adaptive",
                            "Levenberg-Marquardt: from --kfac-damping, every "
                            "--kfac-damping-interval steps ρ = (loss change the K-FAC "
                            "layers' update made on the step's batch) / (K-FAC's "
                            "quadratic model of it); λ / ω when ρ < 1/4, λ · ω when "
                            "ρ > 3/4 (ω = --kfac-damping-adaptation-decay ^ T), within "
                            "[--kfac-damping-min, --kfac-damping-max]; one more forward "
                            "pass every T steps")));
  flags.opt("kfac-damping-start", config.dampingStart,
            "λ at step 1 of the warmup damping schedule");
  flags.opt("kfac-damping-warmup", config.dampingWarmup, "Steps of the warmup damping schedule");
  flags.opt("kfac-damping-decay", config.dampingDecay, "Factor of the step damping schedule");
  flags.opt("kfac-damping-every", config.dampingEvery,
            "Steps between the step schedule's decays");
  flags.opt("kfac-damping-interval", config.dampingAdaptation.interval,
            "Steps T between the adaptive damping schedule's adaptations (kfac-jax's "
            "damping_adaptation_interval)");
  flags.opt("kfac-damping-adaptation-decay", config.dampingAdaptation.decay,
            "Adaptive damping schedule: λ changes by ω = decay^T per adaptation (kfac-jax's "
            "damping_adaptation_decay; 0.95 is Martens and Grosse's 19/20)");
  flags.opt("kfac-damping-min", config.dampingAdaptation.min,
            "Smallest λ of the adaptive schedule");
  flags.opt("kfac-damping-max", config.dampingAdaptation.max,
            "Largest λ of the adaptive schedule");
  flags.opt("kfac-interval-schedule", config.intervalSchedule,
            "K-FAC's factor-update and inverse-refresh intervals after the refresh warm-up "
            "(docs/training.md, \"Interval schedules\")",
            cl::values(clEnumValN(IntervalSchedule::Constant, "constant",
                                  "--kfac-factor-every and --kfac-refresh throughout"),
                       clEnumValN(IntervalSchedule::Step, "step",
                                  "both intervals times --kfac-interval-growth every "
                                  "--kfac-interval-every steps, up to --kfac-interval-max; the "
                                  "step takes kfac_curvature and kfac_refresh_due inputs")));
  flags.opt("kfac-interval-growth", config.intervalGrowth,
            "Factor of the step interval schedule");
  flags.opt("kfac-interval-every", config.intervalEvery,
            "Steps after the refresh warm-up between the step interval schedule's growths");
  flags.opt("kfac-interval-max", config.intervalMax,
            "Largest interval of the step interval schedule");
  flags.opt("mask-prob", config.maskProbability, "Share of tokens to predict");
  flags.opt("seed", config.seed, "Seed of batches and masks");
  flags.opt("device", config.device, drv::kDeviceHelp);
  flags.opt("gemm-precision", config.gemmPrecision, drv::kGemmPrecisionHelp,
            drv::gemmPrecisionValues());
  flags.opt("num-threads", config.threads,
            "Runtime threads (0: all cores; at most " + std::to_string(PFRT_MAX_THREADS) +
                ", PFRT_MAX_THREADS); they sleep at barriers (OMP_WAIT_POLICY=passive) "
                "unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set");
  flags.opt("log-every", config.logEvery, "Print a progress line every N steps");
  flags.opt("checkpoint-every", config.checkpointEvery,
            "Also write the checkpoint every N steps");
  flags.opt("eval-every", config.evalEvery,
            "Every N steps (and before the first and after the last), print the masked-LM "
            "loss on held-out sequences (0: off; progress lines' ms/step leaves its time out)");
  flags.opt("eval-sequences", config.evalSequences,
            "With --eval-every: the corpus' last N sequences are held out (never trained on) "
            "and evaluated with fixed masks, in batches of --batch");
}

Flags::Flags(train::TrainConfig &config)
    : modelFile(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                cl::location(config.modelFile), cl::cat(category)),
      corpusFile("corpus", cl::desc("Token corpus (.npz from python -m pipefisher.corpus)"),
                 cl::Required, cl::location(config.corpusFile), cl::cat(category)),
      noRetie("no-retie",
              cl::desc("Keep an exporter's folded transposed copy of a parameter (the tied "
                       "decoder of PyTorch's TorchScript export) as a separate parameter, "
                       "trained on its own"),
              cl::location(config.noRetie), cl::cat(category)),
      checkpointFile("checkpoint",
                     cl::desc("Write a checkpoint (.npz) here at the end and when SIGINT "
                              "(Ctrl-C) or SIGTERM stops the run"),
                     cl::location(config.checkpointFile), cl::cat(category)),
      deviceBuffers("device-buffers",
                    cl::desc("Hold the step's weights, inputs, outputs and intermediates in "
                             "backend memory, as --device cuda does (on the CPU: a check of "
                             "that path)"),
                    cl::location(config.deviceBuffers), cl::Hidden, cl::cat(category)),
      resumeFile("resume", cl::desc("Resume from this checkpoint"),
                 cl::location(config.resumeFile), cl::cat(category)),
      emitStepFile("emit-step",
                   cl::desc("Also write the training step (pf IR after the pf-training "
                            "pipeline, before lowering) to this file"),
                   cl::value_desc("FILE.mlir"), cl::location(config.emitStepFile),
                   cl::cat(category)),
      compileOnly("compile-only",
                  cl::desc("Compile the training step and its evaluation ahead of time into "
                           "--artifact DIR and stop; pf-trainer DIR --corpus C trains from it "
                           "without MLIR or LLVM (docs/artifacts.md). With --pipeline "
                           "\"stages=D ... kfac=step\": one library per rank, trained by "
                           "mpirun -np D pf-trainer DIR"),
                  cl::location(config.compileOnly), cl::cat(category)),
      artifactDir("artifact",
                  cl::desc("With --compile-only: the folder of the training artifact "
                           "(created; its files are replaced)"),
                  cl::value_desc("DIR"), cl::location(config.artifactDir), cl::cat(category)),
      pipelineSpec(
          "pipeline",
          cl::desc("Train pipeline-parallel, one stage per rank of an mpirun job: "
                   "\"stages=D "
                   "schedule=gpipe|1f1b|zb-h1|zb-h2|interleaved|chimera|zb-v|dualpipe|dualpipev "
                   "microbatches=N [chunks=C] "
                   "[overlap=false] [kfac=step|bubbles] [refresh=K] [max-overhead=X] "
                   "[max-refresh=K] "
                   "[split-precondition=false] [tied-per-microbatch=false] "
                   "[deterministic=true] [grain=half|ends|block]\" (stages 0 or D: "
                   "the job's ranks; with --kfac, kfac=bubbles runs the inverses in the bubbles "
                   "at the scheduler's K or refresh=K), e.g. mpirun -np 2 pf-train m.onnx "
                   "--corpus c.npz --pipeline \"schedule=1f1b microbatches=4\"; see "
                   "docs/pipeline-execution.md"),
          cl::value_desc("OPTIONS"), cl::location(config.pipelineSpec), cl::cat(category)),
      comm("comm",
           cl::desc("With --pipeline: the library that moves the stage values (activations and "
                    "their gradients) between ranks; the step's other exchanges (loss, gradient "
                    "sums, checkpoints) always use MPI"),
           cl::values(clEnumValN(train::CommChoice::Auto, "auto",
                                 "NCCL with --device cuda when every rank has a GPU of its "
                                 "own, else MPI"),
                      clEnumValN(train::CommChoice::Mpi, "mpi",
                                 "MPI; from device memory (--device cuda, --device-buffers) "
                                 "staged through host buffers"),
                      clEnumValN(train::CommChoice::Nccl, "nccl",
                                 "NCCL between GPUs: needs --device cuda and one GPU per rank")),
           cl::location(config.comm), cl::init(train::CommChoice::Auto), cl::cat(category)),
      traceFile("trace",
                cl::desc("With --pipeline: write the measured timeline of every rank's "
                         "executed ops as a Chrome/Perfetto trace (rank 0 writes it at the "
                         "end)"),
                cl::value_desc("FILE.json"), cl::location(config.traceFile), cl::cat(category)),
      svgFile("svg",
              cl::desc("With --pipeline: write the measured timeline as an SVG in the style of "
                       "pf-schedule's simulated one"),
              cl::value_desc("FILE.svg"), cl::location(config.svgFile), cl::cat(category)) {
  bindLoopOptions(loopFlags, config);
  config.training.bindOptions(stepFlags);
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Before any library starts a thread (see StopSignals.h); LLVM's interrupt
  // handlers remove the output files a signal leaves half written.
  drv::routeStopSignals(llvm::sys::RunInterruptHandlers);
  train::TrainConfig config;
  Flags flags(config);
  cl::HideUnrelatedOptions({&flags.category, &flags.stepCategory});
  cl::ParseCommandLineOptions(argc, argv, "pf-train: masked-LM training on the pf runtime\n");
  config.optimizerName = flags.stepFlags.valueText("optimizer");
  config.pipelined = flags.pipelineSpec.getNumOccurrences() > 0;
  return train::train(config, argc, argv);
}
