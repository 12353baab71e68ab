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
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/Device.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/ModuleFile.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Driver/MeasuredTimeline.h"
#include "pf/Driver/Npz.h"
#include "pf/Driver/RankExecutor.h"
#include "pf/Driver/Runner.h"
#include "pf/Driver/StopSignals.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Transforms/OptionBinder.h"
#include "pf/Transforms/Passes.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "KfacDampingAdaptation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;
namespace drv = mlir::pf::driver;

static cl::OptionCategory category("pf-train options");
static cl::OptionCategory stepCategory("pf-train training-step options (those of pf-run "
                                       "--training-step and pf-opt --pf-training)");
static cl::opt<std::string> modelFile(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                                      cl::cat(category));
static cl::opt<std::string> corpusFile("corpus", cl::desc("Token corpus (.npz from "
                                                          "python -m pipefisher.corpus)"),
                                       cl::Required, cl::cat(category));
static cl::opt<bool> noRetie(
    "no-retie",
    cl::desc("Keep an exporter's folded transposed copy of a parameter (the tied decoder of "
             "PyTorch's TorchScript export) as a separate parameter, trained on its own"),
    cl::cat(category));
/// The graph passes run on the imported model.
static mlir::pf::GraphOptOptions graphOptions() {
  return mlir::pf::GraphOptOptions{true, true, true, !noRetie};
}
namespace {
/// The learning rate after the warm-up.
enum class LRSchedule { Linear, Constant };
/// K-FAC's damping λ over the steps (--kfac-damping is its final value).
enum class DampingSchedule { Constant, Warmup, Step, Adaptive };
enum class IntervalSchedule { Constant, Step };
} // namespace
PF_CHOICE_PARSER(LRSchedule)
PF_CHOICE_PARSER(DampingSchedule)
PF_CHOICE_PARSER(IntervalSchedule)

// pf-train's own options (the loop around the step), with their defaults;
// bound to flags in main, whose --help shows the defaults.
static int batch = 8, steps = 100, warmup = 10, threads = 0, logEvery = 10;
/// The most sequences per step (--batch): above the largest pre-training
/// batches (LAMB's 64K for BERT); more would size the step's tensors and
/// row lists past any memory, or the importer's kMaxTensorElements.
constexpr int kMaxBatch = 1 << 16;
static int checkpointEvery = 0, evalEvery = 0, evalSequences = 256;
static double lr = 1e-3, maskProbability = 0.15;
static uint64_t seed = 0;
static std::string device = "cpu";
static drv::GemmPrecision gemmPrecision = drv::GemmPrecision::FP32;
static LRSchedule schedule = LRSchedule::Linear;
static DampingSchedule dampingSchedule = DampingSchedule::Constant;
static double dampingStart = 1e-3, dampingDecay = 0.5;
static int64_t dampingWarmup = 50, dampingEvery = 100;
/// --kfac-damping-schedule adaptive: T, the decay (ω = decay^T) and λ's range.
static drv::DampingAdaptation dampingAdaptation;
static IntervalSchedule intervalSchedule = IntervalSchedule::Constant;
static int64_t intervalGrowth = 2, intervalEvery = 500, intervalMax = 64;

static void bindLoopOptions(mlir::pf::FlagBinder &flags) {
  flags.opt("batch", batch,
            "Sequences per step (at most " + std::to_string(kMaxBatch) + ", kMaxBatch)");
  flags.opt("steps", steps, "Last step to run (1-based)");
  flags.opt("lr", lr, "Peak learning rate");
  flags.opt("warmup", warmup, "Linear warm-up steps");
  flags.opt("schedule", schedule, "Learning rate after the warm-up",
            cl::values(clEnumValN(LRSchedule::Linear, "linear", "Linear decay to 0 at --steps"),
                       clEnumValN(LRSchedule::Constant, "constant", "Constant")));
  flags.opt(
      "kfac-damping-schedule", dampingSchedule,
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
  flags.opt("kfac-damping-start", dampingStart, "λ at step 1 of the warmup damping schedule");
  flags.opt("kfac-damping-warmup", dampingWarmup, "Steps of the warmup damping schedule");
  flags.opt("kfac-damping-decay", dampingDecay, "Factor of the step damping schedule");
  flags.opt("kfac-damping-every", dampingEvery, "Steps between the step schedule's decays");
  flags.opt("kfac-damping-interval", dampingAdaptation.interval,
            "Steps T between the adaptive damping schedule's adaptations (kfac-jax's "
            "damping_adaptation_interval)");
  flags.opt("kfac-damping-adaptation-decay", dampingAdaptation.decay,
            "Adaptive damping schedule: λ changes by ω = decay^T per adaptation (kfac-jax's "
            "damping_adaptation_decay; 0.95 is Martens and Grosse's 19/20)");
  flags.opt("kfac-damping-min", dampingAdaptation.min, "Smallest λ of the adaptive schedule");
  flags.opt("kfac-damping-max", dampingAdaptation.max, "Largest λ of the adaptive schedule");
  flags.opt("kfac-interval-schedule", intervalSchedule,
            "K-FAC's factor-update and inverse-refresh intervals after the refresh warm-up "
            "(docs/training.md, \"Interval schedules\")",
            cl::values(clEnumValN(IntervalSchedule::Constant, "constant",
                                  "--kfac-factor-every and --kfac-refresh throughout"),
                       clEnumValN(IntervalSchedule::Step, "step",
                                  "both intervals times --kfac-interval-growth every "
                                  "--kfac-interval-every steps, up to --kfac-interval-max; the "
                                  "step takes kfac_curvature and kfac_refresh_due inputs")));
  flags.opt("kfac-interval-growth", intervalGrowth, "Factor of the step interval schedule");
  flags.opt("kfac-interval-every", intervalEvery,
            "Steps after the refresh warm-up between the step interval schedule's growths");
  flags.opt("kfac-interval-max", intervalMax, "Largest interval of the step interval schedule");
  flags.opt("mask-prob", maskProbability, "Share of tokens to predict");
  flags.opt("seed", seed, "Seed of batches and masks");
  flags.opt("device", device, drv::kDeviceHelp);
  flags.opt("gemm-precision", gemmPrecision, drv::kGemmPrecisionHelp, drv::gemmPrecisionValues());
  flags.opt("num-threads", threads,
            "Runtime threads (0: all cores; at most " + std::to_string(PFRT_MAX_THREADS) +
                ", PFRT_MAX_THREADS); they sleep at barriers (OMP_WAIT_POLICY=passive) "
                "unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set");
  flags.opt("log-every", logEvery, "Print a progress line every N steps");
  flags.opt("checkpoint-every", checkpointEvery, "Also write the checkpoint every N steps");
  flags.opt("eval-every", evalEvery,
            "Every N steps (and before the first and after the last), print the masked-LM "
            "loss on held-out sequences (0: off; progress lines' ms/step leaves its time out)");
  flags.opt("eval-sequences", evalSequences,
            "With --eval-every: the corpus' last N sequences are held out (never trained on) "
            "and evaluated with fixed masks, in batches of --batch");
}
static cl::opt<std::string> checkpointFile(
    "checkpoint",
    cl::desc("Write a checkpoint (.npz) here at the end and when SIGINT (Ctrl-C) or SIGTERM "
             "stops the run"),
    cl::cat(category));
static cl::opt<bool> deviceBuffers(
    "device-buffers",
    cl::desc("Hold the step's weights, inputs, outputs and intermediates in backend memory, "
             "as --device cuda does (on the CPU: a check of that path)"),
    cl::Hidden, cl::cat(category));
static cl::opt<std::string> resumeFile("resume", cl::desc("Resume from this checkpoint"),
                                       cl::cat(category));
static cl::opt<std::string> emitStepFile(
    "emit-step",
    cl::desc("Also write the training step (pf IR after the pf-training pipeline, before "
             "lowering) to this file"),
    cl::value_desc("FILE.mlir"), cl::cat(category));
static cl::opt<std::string> pipelineSpec(
    "pipeline",
    cl::desc(
        "Train pipeline-parallel, one stage per rank of an mpirun job: "
        "\"stages=D schedule=gpipe|1f1b|zb-h1|zb-h2|interleaved|chimera|zb-v|dualpipe|dualpipev "
        "microbatches=N [chunks=C] "
        "[overlap=false] [kfac=step|bubbles] [refresh=K] [max-overhead=X] [max-refresh=K] "
        "[split-precondition=false] [tied-per-microbatch=false] [deterministic=true]\" "
        "(stages 0 or D: "
        "the job's ranks; with --kfac, kfac=bubbles runs the inverses in the bubbles at the "
        "scheduler's K or refresh=K), e.g. mpirun -np 2 pf-train m.onnx --corpus c.npz --pipeline "
        "\"schedule=1f1b microbatches=4\"; see docs/pipeline-execution.md"),
    cl::value_desc("OPTIONS"), cl::cat(category));
/// --comm: how the ranks of --pipeline move their stage values.
enum class CommChoice { Auto, Mpi, Nccl };
static cl::opt<CommChoice> commChoice(
    "comm",
    cl::desc("With --pipeline: the library that moves the stage values (activations and their "
             "gradients) between ranks; the step's other exchanges (loss, gradient sums, "
             "checkpoints) always use MPI"),
    cl::values(clEnumValN(CommChoice::Auto, "auto",
                          "NCCL with --device cuda when every rank has a GPU of its own, "
                          "else MPI"),
               clEnumValN(CommChoice::Mpi, "mpi",
                          "MPI; from device memory (--device cuda, --device-buffers) staged "
                          "through host buffers"),
               clEnumValN(CommChoice::Nccl, "nccl",
                          "NCCL between GPUs: needs --device cuda and one GPU per rank")),
    cl::init(CommChoice::Auto), cl::cat(category));
static cl::opt<std::string> traceFile(
    "trace", cl::desc("With --pipeline: write the measured timeline of every rank's executed "
                      "ops as a Chrome/Perfetto trace (rank 0 writes it at the end)"),
    cl::value_desc("FILE.json"), cl::cat(category));
static cl::opt<std::string> svgFile(
    "svg", cl::desc("With --pipeline: write the measured timeline as an SVG in the style of "
                    "pf-schedule's simulated one"),
    cl::value_desc("FILE.svg"), cl::cat(category));
/// The training-step options (micro-batches, optimizer, K-FAC, ...), bound to
/// flags in main: the same options and defaults as pf-opt --pf-training.
static mlir::pf::TrainingOptions training;

namespace {
int fail(const llvm::Twine &message) {
  // One write: under mpirun every rank may print the same error, and the
  // job's output interleaves the ranks' writes.
  llvm::errs() << ("pf-train: error: " + message + "\n").str();
  return 1;
}

/// --emit-step: the training step as pf IR text.

struct Corpus {
  std::vector<int64_t> tokens; // [rows, seqLen]
  int64_t rows = 0, seqLen = 0, vocab = 0;
  /// Rows [0, trainRows) are trained on; the rest are held out.
  int64_t trainRows = 0;
  int64_t pad = 0, cls = 2, sep = 3, mask = 4, firstWord = 5;
  /// FNV-1a of the tokens: a checkpoint names the corpus it was trained on.
  uint64_t hash = 0;
};

uint64_t fnv1a(const void *data, size_t bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ static_cast<const unsigned char *>(data)[i]) * 1099511628211ULL;
  return h;
}

llvm::Expected<Corpus> loadCorpus() {
  auto arrays = drv::readNpz(corpusFile);
  if (!arrays)
    return arrays.takeError();
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), corpusFile + ": " + message);
  };
  auto tokens = arrays->find("tokens");
  if (tokens == arrays->end() || tokens->second.dtype != 7 || tokens->second.shape.size() != 2)
    return error("needs 'tokens', int64 [sequences, length]");
  Corpus corpus;
  corpus.rows = corpus.trainRows = tokens->second.shape[0];
  corpus.seqLen = tokens->second.shape[1];
  if (corpus.rows < 1 || corpus.seqLen < 1)
    return error(llvm::formatv("'tokens' is {0} x {1}: it needs at least one sequence of at "
                               "least one token",
                               corpus.rows, corpus.seqLen));
  corpus.tokens.resize(corpus.rows * corpus.seqLen);
  std::memcpy(corpus.tokens.data(), tokens->second.data.data(), tokens->second.data.size());
  corpus.hash = fnv1a(corpus.tokens.data(), corpus.tokens.size() * sizeof(int64_t));
  // One int64 value, or an error naming the array.
  auto scalarOf = [&](llvm::StringRef key) -> llvm::Expected<int64_t> {
    auto it = arrays->find(key.str());
    if (it->second.dtype != 7 || it->second.numElements() != 1)
      return error("'" + key + "' must be one int64 value, not " +
                   drv::dtypeName(it->second.dtype) + " of shape " +
                   drv::shapeText(it->second.shape));
    return *reinterpret_cast<const int64_t *>(it->second.data.data());
  };
  if (auto special = arrays->find("special"); special != arrays->end()) {
    if (special->second.dtype != 7 || special->second.numElements() != 5)
      return error("'special' must be 5 int64 ids ([PAD], [UNK], [CLS], [SEP], [MASK])");
    const int64_t *s = reinterpret_cast<const int64_t *>(special->second.data.data());
    corpus.pad = s[0], corpus.cls = s[2], corpus.sep = s[3], corpus.mask = s[4];
  }
  int64_t largest = *std::max_element(corpus.tokens.begin(), corpus.tokens.end());
  int64_t smallest = *std::min_element(corpus.tokens.begin(), corpus.tokens.end());
  if (arrays->count("vocab_size")) {
    auto vocab = scalarOf("vocab_size");
    if (!vocab)
      return vocab.takeError();
    corpus.vocab = *vocab;
  } else {
    corpus.vocab = largest + 1;
  }
  // Masking draws random words from [firstWord, vocab): at least one.
  if (corpus.vocab <= corpus.firstWord)
    return error(llvm::formatv("vocab_size {0} leaves no words after the {1} special ids",
                               corpus.vocab, corpus.firstWord));
  if (smallest < 0 || largest >= corpus.vocab)
    return error(llvm::formatv("token ids must be in [0, vocab_size {0}); the corpus holds {1}",
                               corpus.vocab, smallest < 0 ? smallest : largest));
  for (auto [name, id] : {std::pair<const char *, int64_t>{"[PAD]", corpus.pad},
                          {"[CLS]", corpus.cls}, {"[SEP]", corpus.sep},
                          {"[MASK]", corpus.mask}})
    if (id < 0 || id >= corpus.vocab)
      return error(llvm::formatv("the {0} id {1} is not in [0, vocab_size {2})", name, id,
                                 corpus.vocab));
  return corpus;
}

drv::NpyArray int64Array(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  drv::NpyArray a;
  a.dtype = 7;
  a.shape = std::move(shape);
  a.data.resize(values.size() * 8);
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <typename T>
drv::NpyArray scalar(int32_t dtype, T value) {
  drv::NpyArray a;
  a.dtype = dtype;
  a.data.resize(sizeof(T));
  std::memcpy(a.data.data(), &value, sizeof(T));
  return a;
}

/// The row order of an epoch, a function of (seed, epoch); computed once per
/// epoch.
const std::vector<int64_t> &epochOrder(const Corpus &c, int64_t epoch) {
  static int64_t cachedEpoch = -1;
  static std::vector<int64_t> order;
  if (epoch != cachedEpoch) {
    order.resize(c.trainRows);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 shuffle(seed * 1000003ULL + epoch);
    std::shuffle(order.begin(), order.end(), shuffle);
    cachedEpoch = epoch;
  }
  return order;
}

/// The corpus rows `rows` as one batch, masked as BERT does: 15% (by
/// --mask-prob) of the real tokens are predicted; of those 80% become [MASK],
/// 10% a random word, 10% stay. With `cap` > 0 a sequence predicts at most
/// its first `cap` of them (BERT's max_predictions_per_seq); the random
/// draws are the same either way, so uncapped sequences are unchanged.
std::map<std::string, drv::NpyArray> maskRows(const Corpus &c, llvm::ArrayRef<int64_t> rows,
                                              std::mt19937_64 &rng, int64_t cap = 0) {
  std::uniform_real_distribution<double> uniform(0, 1);
  std::uniform_int_distribution<int64_t> word(c.firstWord, c.vocab - 1);
  int64_t n = int64_t(rows.size()) * c.seqLen;
  std::vector<int64_t> ids(n), types(n, 0), attention(n), labels(n, -100);
  for (auto [b, rowIndex] : llvm::enumerate(rows)) {
    const int64_t *row = &c.tokens[rowIndex * c.seqLen];
    for (int64_t t = 0; t < c.seqLen; ++t) {
      int64_t i = int64_t(b) * c.seqLen + t, token = row[t];
      ids[i] = token;
      attention[i] = token != c.pad;
      bool special = token == c.pad || token == c.cls || token == c.sep;
      if (special || uniform(rng) >= maskProbability)
        continue;
      labels[i] = token;
      double r = uniform(rng);
      ids[i] = r < 0.8 ? c.mask : r < 0.9 ? word(rng) : token;
    }
    for (int64_t t = 0, kept = 0; cap > 0 && t < c.seqLen; ++t) {
      int64_t i = int64_t(b) * c.seqLen + t;
      if (labels[i] == -100 || ++kept <= cap)
        continue;
      ids[i] = row[t];
      labels[i] = -100;
    }
  }
  std::vector<int64_t> shape{int64_t(rows.size()), c.seqLen};
  return {{"input_ids", int64Array(shape, ids)},
          {"token_type_ids", int64Array(shape, types)},
          {"attention_mask", int64Array(shape, attention)},
          {"labels", int64Array(shape, labels)}};
}

/// --predictions P: `labels` [batch, sequence] becomes the positions of each
/// sequence's predicted tokens, `mlm_positions` [batch, P], and their labels
/// [batch, P], padded with position 0 and an ignored label.
void gatherPredictions(std::map<std::string, drv::NpyArray> &inputs, int64_t predictions) {
  const drv::NpyArray &full = inputs["labels"];
  const int64_t rows = full.shape[0], length = full.shape[1];
  const auto *labels = reinterpret_cast<const int64_t *>(full.data.data());
  std::vector<int64_t> positions(rows * predictions, 0), gathered(rows * predictions, -100);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0, p = 0; t < length && p < predictions; ++t)
      if (labels[b * length + t] != -100) {
        positions[b * predictions + p] = t;
        gathered[b * predictions + p++] = labels[b * length + t];
      }
  std::vector<int64_t> shape{rows, predictions};
  inputs["mlm_positions"] = int64Array(shape, positions);
  inputs["labels"] = int64Array(shape, gathered);
}

/// The batch of `step` with labels at every position ([batch, sequence], as
/// the evaluation model takes them): rows from a per-epoch permutation of the
/// training rows. Pure function of (seed, step) so resuming needs only the step.
std::map<std::string, drv::NpyArray> makeMaskedBatch(const Corpus &c, int64_t step) {
  int64_t perEpoch = std::max<int64_t>(1, c.trainRows / batch);
  int64_t epoch = (step - 1) / perEpoch, slot = (step - 1) % perEpoch;
  const std::vector<int64_t> &order = epochOrder(c, epoch);
  std::vector<int64_t> rows(batch);
  for (int64_t b = 0; b < batch; ++b)
    rows[b] = order[(slot * batch + b) % c.trainRows];
  std::mt19937_64 rng(seed * 7919ULL + uint64_t(step) * 104729ULL);
  return maskRows(c, rows, rng, training.loss.predictions);
}

/// The training step's batch of `step` (with --predictions, the labels
/// gathered at the predicted positions).
std::map<std::string, drv::NpyArray> makeBatch(const Corpus &c, int64_t step) {
  auto inputs = makeMaskedBatch(c, step);
  if (training.loss.predictions > 0)
    gatherPredictions(inputs, training.loss.predictions);
  return inputs;
}

/// Held-out batch `index`: the same rows and masks at every evaluation.
std::map<std::string, drv::NpyArray> makeEvalBatch(const Corpus &c, int64_t index) {
  std::vector<int64_t> rows(batch);
  for (int64_t b = 0; b < batch; ++b)
    rows[b] = c.trainRows + index * batch + b;
  std::mt19937_64 rng(0x5EEDULL * 7919ULL + uint64_t(index));
  return maskRows(c, rows, rng);
}

/// The current weights by name: the training step's, or (pipelined) the
/// arrays gathered from every rank.
using WeightLookup = std::function<std::pair<const void *, int64_t>(const std::string &)>;

/// Loads the weights `current` names into the evaluation model.
llvm::Error loadEvaluationWeights(const WeightLookup &current, drv::CompiledModel &eval) {
  for (auto &p : eval.parameters()) {
    auto [data, bytes] = current(p.name);
    if (!data || bytes != p.bytes)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "evaluation: the training step has no parameter '" +
                                         p.name + "' of the same size");
    std::memcpy(p.data, data, p.bytes);
  }
  return eval.copyParametersToBackend();
}

/// Loads the current weights into the evaluation model and returns the
/// mean loss over the held-out tokens.
llvm::Expected<double> evaluate(const Corpus &c, const WeightLookup &current,
                                drv::CompiledModel &eval) {
  if (auto err = loadEvaluationWeights(current, eval))
    return std::move(err);
  double weighted = 0;
  int64_t counted = 0;
  std::map<std::string, drv::NpyArray> outputs;
  for (int64_t index = 0; index < (c.rows - c.trainRows) / batch; ++index) {
    auto inputs = makeEvalBatch(c, index);
    if (auto err = eval.run(inputs, outputs))
      return std::move(err);
    const auto *labels = reinterpret_cast<const int64_t *>(inputs["labels"].data.data());
    int64_t count = std::count_if(labels, labels + inputs["labels"].numElements(),
                                  [](int64_t l) { return l != -100; });
    float loss;
    std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
    weighted += double(loss) * double(count);
    counted += count;
  }
  return counted ? weighted / double(counted) : 0.0;
}

/// --kfac-damping-schedule adaptive: λ now, what the last adaptation
/// measured, and what the adaptations cost.
struct AdaptiveDamping {
  double damping = 0;        ///< λ for the next step (--kfac-damping, or the checkpoint's)
  double stepDamping = 0;    ///< λ the last step ran with
  double rho = std::nan(""); ///< ρ of the last adaptation (NaN: none yet)
  int64_t adaptations = 0;
  double forwardSeconds = 0, modelSeconds = 0; ///< the loss after the update; M(Δ) and copies
};
AdaptiveDamping adaptive;

/// K-FAC's λ at `step` (1-based) under --kfac-damping-schedule.
double kfacDamping(int64_t step) {
  const double final = training.precondition.damping;
  switch (dampingSchedule) {
  case DampingSchedule::Constant:
    return final;
  case DampingSchedule::Adaptive:
    return adaptive.damping;
  case DampingSchedule::Warmup:
    if (step > dampingWarmup)
      return final;
    return dampingStart * std::pow(final / dampingStart, double(step - 1) / double(dampingWarmup));
  case DampingSchedule::Step:
    return final * std::pow(dampingDecay, double((step - 1) / dampingEvery));
  }
  return final;
}

/// The progress line's damping column: only under a damping schedule.
std::string dampingColumn(int64_t step) {
  if (dampingSchedule == DampingSchedule::Constant)
    return "";
  if (dampingSchedule == DampingSchedule::Adaptive)
    return llvm::formatv("  damping {0:E2}  rho {1}", adaptive.stepDamping,
                         std::isnan(adaptive.rho) ? std::string("-")
                                                  : llvm::formatv("{0:F3}", adaptive.rho).str())
        .str();
  return llvm::formatv("  damping {0:E2}", kfacDamping(step)).str();
}

/// Checks the damping schedule's options; with a schedule, the step takes
/// λ from its kfac_damping input.
llvm::Error prepareDampingSchedule(bool inBubbles) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (dampingSchedule == DampingSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-damping-schedule schedules K-FAC's damping: it needs --kfac");
  if (inBubbles)
    return error("--kfac-damping-schedule with K-FAC in the bubbles (--kfac-window, "
                 "kfac=bubbles) is not supported yet: a window's inverses are computed over "
                 "several steps");
  if (!(training.precondition.damping > 0))
    return error("--kfac-damping-schedule needs --kfac-damping > 0 (the final λ)");
  if (dampingSchedule == DampingSchedule::Warmup && !(dampingStart > 0 && dampingWarmup >= 1))
    return error(llvm::formatv("--kfac-damping-schedule warmup needs --kfac-damping-start > 0 "
                               "and --kfac-damping-warmup >= 1 (got {0} and {1})",
                               dampingStart, dampingWarmup));
  if (dampingSchedule == DampingSchedule::Step &&
      !(dampingDecay > 0 && dampingDecay <= 1 && dampingEvery >= 1))
    return error(llvm::formatv("--kfac-damping-schedule step needs --kfac-damping-decay in "
                               "(0, 1] and --kfac-damping-every >= 1 (got {0} and {1})",
                               dampingDecay, dampingEvery));
  if (dampingSchedule == DampingSchedule::Adaptive) {
    const drv::DampingAdaptation &rule = dampingAdaptation;
    if (!(rule.interval >= 1 && rule.decay > 0 && rule.decay < 1))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs "
                                 "--kfac-damping-interval >= 1 and "
                                 "--kfac-damping-adaptation-decay in (0, 1) (got {0} and {1})",
                                 rule.interval, rule.decay));
    const double initial = training.precondition.damping;
    if (!(rule.min > 0 && rule.min <= initial && initial <= rule.max && std::isfinite(rule.max)))
      return error(llvm::formatv("--kfac-damping-schedule adaptive needs 0 < --kfac-damping-min "
                                 "<= --kfac-damping <= --kfac-damping-max < inf (got {0}, {1} "
                                 "and {2})",
                                 rule.min, initial, rule.max));
    adaptive.damping = adaptive.stepDamping = initial;
    // The gradient term of the quadratic model: each K-FAC layer's raw gradient.
    training.precondition.rawGradients = true;
  }
  training.precondition.dampingInput = true;
  return llvm::Error::success();
}

double learningRate(int64_t step) {
  if (warmup > 0 && step <= warmup)
    return lr * double(step) / warmup;
  if (schedule == LRSchedule::Constant || steps <= warmup)
    return lr;
  return lr * std::max(0.0, double(steps - step + 1) / double(steps - warmup));
}

using Parameters = std::vector<drv::CompiledModel::Parameter>;

/// The inverses a pipeline computes in its bubbles for the next refresh
/// window (pf.kfac_pending): not training state, recomputed on resume.
bool isPendingInverse(llvm::StringRef name) {
  // <w>.kfac.A_inv_next, or in the eigenbasis .A_vectors_next, .A_values_next
  // (pf-kfac-precondition's pf.kfac_pending parameters).
  return name.contains(".kfac.") && name.ends_with("_next");
}

/// K-FAC in the bubbles, the rule both kinds of run follow: steps 1..warmup
/// invert every step; then windows of `steps` steps whose first gathers the
/// curvature, inverted during the window and used in the next one.
struct KfacWindowRule {
  int64_t warmup = 0, steps = 0; ///< steps 0: off (or not chosen yet)
  int64_t windowStep(int64_t t) const { return t <= warmup ? -1 : (t - warmup - 1) % steps; }
  bool gathersCurvature(int64_t t) const { return t <= warmup || windowStep(t) == 0; }
  /// Single-process: the previous window's factors are inverted at the
  /// start of a window after the first.
  bool refreshesPrevious(int64_t t) const { return t > warmup + steps && windowStep(t) == 0; }
};

/// An interval at `step` under --kfac-interval-schedule: `base` (F or K)
/// until the refresh warm-up's end, then times the growth every
/// --kfac-interval-every steps, capped at --kfac-interval-max (and never
/// below `base`).
int64_t scheduledInterval(int64_t base, int64_t step) {
  const int64_t warmup = training.precondition.refreshWarmup;
  if (intervalSchedule == IntervalSchedule::Constant || step <= warmup)
    return base;
  int64_t interval = base;
  for (int64_t g = (step - warmup - 1) / intervalEvery; g > 0 && interval < intervalMax; --g)
    interval *= intervalGrowth;
  return std::max(base, std::min(interval, intervalMax));
}

/// Whether a step is due under interval `base`: every step of the refresh
/// warm-up (early curvature changes fastest), then its first step and each
/// one at least the step's interval after the last due one. Depends on the
/// step only, so a resumed run continues it. Under a schedule the last due
/// step carries from one call to the next (the steps come in order; an
/// earlier step than the last asked starts over after the warm-up), so a
/// run costs O(steps), not O(steps^2).
struct IntervalRule {
  int64_t at = 0, last = 0; ///< the last step asked and the last due one

  bool due(int64_t base, int64_t step) {
    const int64_t warmup = training.precondition.refreshWarmup;
    if (step <= warmup)
      return true;
    if (intervalSchedule == IntervalSchedule::Constant)
      return (step - warmup - 1) % base == 0;
    if (step < at || at <= warmup)
      at = last = warmup + 1;
    for (; at < step; ++at)
      if (at + 1 - last >= scheduledInterval(base, at + 1))
        last = at + 1;
    return last == step;
  }
};

/// --kfac-factor-every F (and its schedule): the steps that update the
/// factors.
bool updatesFactors(int64_t step) {
  static IntervalRule rule;
  return rule.due(training.kfacFactorEvery, step);
}

/// --kfac-refresh K under an interval schedule: the steps that refresh the
/// inverses (without one, the step decides from refresh-every itself).
bool refreshesInverses(int64_t step) {
  static IntervalRule rule;
  return rule.due(training.precondition.refreshEvery, step);
}

/// Checks the interval schedule's options; with a schedule, the step takes
/// its factor and refresh steps from the kfac_curvature and kfac_refresh_due
/// inputs.
llvm::Error prepareIntervalSchedule() {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (intervalSchedule == IntervalSchedule::Constant)
    return llvm::Error::success();
  if (!training.kfac)
    return error("--kfac-interval-schedule schedules K-FAC's intervals: it needs --kfac");
  // K-FAC in the bubbles (--kfac-window, --pipeline "kfac=bubbles", checked
  // with the pipeline's options) decides its steps by its windows.
  if (training.kfacWindow > 0)
    return error("--kfac-interval-schedule: not with --kfac-window, whose windows decide the "
                 "steps");
  if (intervalGrowth < 1 || intervalEvery < 1 || intervalMax < 1)
    return error(llvm::formatv("--kfac-interval-growth, --kfac-interval-every and "
                               "--kfac-interval-max must be >= 1 (got {0}, {1} and {2})",
                               intervalGrowth, intervalEvery, intervalMax));
  training.precondition.refreshInput = true;
  // The pipeline builder gates the factor updates on kfac_curvature when F
  // is not 1; a schedule needs the gate whatever F is.
  training.precondition.curvatureInput = true;
  return llvm::Error::success();
}

/// The progress line's interval column: only under an interval schedule.
std::string intervalColumn(int64_t step) {
  if (intervalSchedule == IntervalSchedule::Constant)
    return "";
  return llvm::formatv("  intervals F {0} K {1}", scheduledInterval(training.kfacFactorEvery, step),
                       scheduledInterval(training.precondition.refreshEvery, step))
      .str();
}

/// What checkpoints record of K-FAC in the bubbles: the window's steps (both
/// kinds of run) and, pipelined, where each inverse runs (rank, layer,
/// window step, passes before it), so a resumed run places them the same.
int64_t checkpointKfacWindow = 0;
std::vector<int64_t> checkpointKfacPlacement;

/// A checkpoint's arrays: `param/<name>` for every parameter and optimizer
/// or K-FAC state tensor.
std::map<std::string, drv::NpyArray> stateArrays(const Parameters &parameters) {
  std::map<std::string, drv::NpyArray> arrays;
  for (const auto &p : parameters) {
    if (isPendingInverse(p.name))
      continue;
    drv::NpyArray a;
    a.dtype = p.dtype;
    a.shape = p.shape;
    a.data.assign(static_cast<const char *>(p.data), static_cast<const char *>(p.data) + p.bytes);
    arrays["param/" + p.name] = std::move(a);
  }
  return arrays;
}

/// The layout of a checkpoint's arrays (`param/*`, `meta/*`); bumped when it
/// changes, and a checkpoint of another version is refused.
constexpr int64_t kCheckpointFormatVersion = 1;

/// Checkpoint entries (`meta/<kind>/<key>` -> a name) that map pf's
/// parameters back to the ONNX file's initializers, for
/// pipefisher.export_onnx: `onnx_name/<param>` (the initializer a parameter
/// pf renamed came from) and `transposed_copy/<initializer>` (the parameter
/// whose transpose an initializer tied back by pf-retie-weights holds).
std::map<std::string, std::string> onnxNameEntries;

void recordOnnxNames(ModuleOp module) {
  for (auto param : module.getOps<mlir::pf::ParamOp>()) {
    std::string name = param.getSymName().str();
    if (auto onnxName = param->getAttrOfType<StringAttr>(mlir::pf::kOnnxNameAttrName))
      onnxNameEntries["meta/onnx_name/" + name] = onnxName.str();
    if (auto copies =
            param->getAttrOfType<ArrayAttr>(mlir::pf::kOnnxTransposedCopiesAttrName))
      for (auto copy : copies.getAsValueRange<StringAttr>())
        onnxNameEntries["meta/transposed_copy/" + copy.str()] = name;
  }
}

llvm::Error writeCheckpoint(std::map<std::string, drv::NpyArray> arrays, const Corpus &c,
                            int64_t step) {
  // Names as UTF-8 bytes (int8, which readNpz knows): NumPy reads them
  // without pickling.
  for (const auto &[key, name] : onnxNameEntries) {
    drv::NpyArray bytes;
    bytes.dtype = 3;
    bytes.shape = {int64_t(name.size())};
    bytes.data.assign(name.begin(), name.end());
    arrays[key] = std::move(bytes);
  }
  arrays["meta/format_version"] = scalar<int64_t>(7, kCheckpointFormatVersion);
  arrays["meta/step"] = scalar<int64_t>(7, step);
  arrays["meta/seed"] = scalar<int64_t>(7, int64_t(seed));
  arrays["meta/train_rows"] = scalar<int64_t>(7, c.trainRows);
  arrays["meta/corpus_hash"] = scalar<int64_t>(7, int64_t(c.hash));
  arrays["meta/kfac"] = scalar<int64_t>(7, training.kfac ? 1 : 0);
  // The adaptive schedule's λ depends on the run's history, not on the step.
  if (training.kfac && dampingSchedule == DampingSchedule::Adaptive)
    arrays["meta/kfac_damping"] = scalar<double>(PFRT_F64, adaptive.damping);
  // writeNpz writes a temporary file and renames it: a crash mid-write
  // leaves the previous checkpoint.
  if (checkpointKfacWindow > 0)
    arrays["meta/kfac_window"] = scalar<int64_t>(7, checkpointKfacWindow);
  if (!checkpointKfacPlacement.empty()) {
    drv::NpyArray placement;
    placement.dtype = 7;
    placement.shape = {int64_t(checkpointKfacPlacement.size() / 4), 4};
    placement.data.resize(checkpointKfacPlacement.size() * sizeof(int64_t));
    std::memcpy(placement.data.data(), checkpointKfacPlacement.data(), placement.data.size());
    arrays["meta/kfac_placement"] = std::move(placement);
  }
  return drv::writeNpz(checkpointFile, arrays);
}

llvm::Error saveCheckpoint(drv::CompiledModel &model, const Corpus &c, int64_t step) {
  if (auto err = model.copyParametersToHost())
    return err;
  return writeCheckpoint(stateArrays(model.parameters()), c, step);
}

/// When K-FAC state `name` is missing from a checkpoint that has its layer's
/// state of the other basis (`.A_inv` for `.A_vectors`, and back), that
/// basis' --kfac-basis value.
std::optional<std::string> otherKfacBasis(const std::map<std::string, drv::NpyArray> &arrays,
                                          llvm::StringRef name) {
  size_t at = name.rfind(".kfac.");
  if (at == llvm::StringRef::npos)
    return std::nullopt;
  std::string layer = ("param/" + name.take_front(at + 6)).str();
  bool eigenHere = name.ends_with("_vectors") || name.ends_with("_values");
  if (eigenHere && arrays.count(layer + "A_inv"))
    return "inverse";
  if (!eigenHere && arrays.count(layer + "A_vectors"))
    return "eigen";
  return std::nullopt;
}

/// Reads --resume into `parameters` (each must be in the file with its dtype
/// and shape; a pipelined rank passes only its own); returns the step.
llvm::Expected<int64_t> loadCheckpoint(const Parameters &parameters, const Corpus &c) {
  auto arrays = drv::readNpz(resumeFile);
  if (!arrays)
    return arrays.takeError();
  auto error = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), resumeFile + ": " + message);
  };
  if (!arrays->count("meta/step"))
    return error("not a pf-train checkpoint (no meta/step)");
  // meta/KEY as one int64, or an error naming it.
  auto meta = [&](llvm::StringRef key) -> llvm::Expected<int64_t> {
    auto it = arrays->find(("meta/" + key).str());
    if (it == arrays->end())
      return error("has no meta/" + key + " (written by an older pf-train? checkpoints "
                   "of format version " + llvm::Twine(kCheckpointFormatVersion) +
                   " carry it)");
    if (it->second.dtype != 7 || it->second.numElements() != 1)
      return error("meta/" + key + " must be one int64 value, not " +
                   drv::dtypeName(it->second.dtype) + " of shape " +
                   drv::shapeText(it->second.shape));
    return *reinterpret_cast<const int64_t *>(it->second.data.data());
  };
  auto version = meta("format_version");
  if (!version)
    return version.takeError();
  if (*version != kCheckpointFormatVersion)
    return error(llvm::formatv("is checkpoint format version {0}; this pf-train reads version "
                               "{1}",
                               *version, kCheckpointFormatVersion)
                     .str());
  auto step = meta("step");
  if (!step)
    return step.takeError();
  if (*step < 0)
    return error(llvm::formatv("meta/step is {0}, not a step count", *step).str());
  if (*step >= steps)
    return error(llvm::formatv("is after step {0} and --steps is {1}: nothing is left to train "
                               "(give a larger --steps)",
                               *step, steps)
                     .str());
  // Batches and masks are functions of (seed, step) over the training rows,
  // and the state's meaning depends on K-FAC: resuming with any of them
  // changed would silently train another run.
  auto savedSeed = meta("seed");
  if (!savedSeed)
    return savedSeed.takeError();
  if (uint64_t(*savedSeed) != seed)
    return error(llvm::formatv("was trained with --seed {0}, this run has --seed {1}",
                               uint64_t(*savedSeed), seed)
                     .str());
  auto rows = meta("train_rows");
  if (!rows)
    return rows.takeError();
  if (*rows != c.trainRows)
    return error(llvm::formatv("was trained on {0} corpus sequences, this run on {1} (use the "
                               "same --eval-every/--eval-sequences)",
                               *rows, c.trainRows)
                     .str());
  auto corpusHash = meta("corpus_hash");
  if (!corpusHash)
    return corpusHash.takeError();
  if (uint64_t(*corpusHash) != c.hash)
    return error("was trained on another corpus than " + corpusFile +
                 " (the token hashes differ)");
  auto kfac = meta("kfac");
  if (!kfac)
    return kfac.takeError();
  if ((*kfac != 0) != training.kfac)
    return error(llvm::formatv("was trained {0} --kfac, this run {1} it",
                               *kfac ? "with" : "without", training.kfac ? "has" : "does not have")
                     .str());
  auto window = arrays->find("meta/kfac_window");
  int64_t savedWindow = window != arrays->end() && window->second.dtype == 7 &&
                                window->second.numElements() == 1
                            ? *reinterpret_cast<const int64_t *>(window->second.data.data())
                            : 0;
  if (savedWindow != checkpointKfacWindow && checkpointKfacWindow >= 0)
    return error(llvm::formatv("was trained with K-FAC windows of {0} step(s), this run has {1} "
                               "(0: none; give the same --kfac-window or refresh=)",
                               savedWindow, checkpointKfacWindow)
                     .str());
  if (training.kfac && dampingSchedule == DampingSchedule::Adaptive) {
    auto saved = arrays->find("meta/kfac_damping");
    if (saved == arrays->end()) {
      llvm::outs() << resumeFile << " holds no adaptive damping (meta/kfac_damping): λ starts "
                   << "from --kfac-damping\n";
    } else if (saved->second.dtype != PFRT_F64 || saved->second.numElements() != 1) {
      return error(llvm::Twine("meta/kfac_damping must be one float64 value, not ") +
                   drv::dtypeName(saved->second.dtype) + " of shape " +
                   drv::shapeText(saved->second.shape));
    } else {
      double damping;
      std::memcpy(&damping, saved->second.data.data(), sizeof(double));
      if (!(damping > 0) || !std::isfinite(damping))
        return error(llvm::formatv("meta/kfac_damping is {0}, not a damping", damping).str());
      // Within this run's bounds, as every adaptation keeps it.
      adaptive.damping = adaptive.stepDamping =
          std::clamp(damping, dampingAdaptation.min, dampingAdaptation.max);
    }
  }
  for (const auto &p : parameters) {
    if (isPendingInverse(p.name))
      continue;
    auto it = arrays->find("param/" + p.name);
    if (it == arrays->end()) {
      if (auto basis = otherKfacBasis(*arrays, p.name))
        return error("has no parameter '" + p.name + "': it was trained with --kfac-basis " +
                     *basis + " (give the same --kfac-basis)");
      return error("has no parameter '" + p.name + "'");
    }
    if (it->second.dtype != p.dtype || it->second.shape != p.shape)
      return error("parameter '" + p.name + "' has another dtype or shape than the model's");
    std::memcpy(p.data, it->second.data.data(), p.bytes);
  }
  return *step;
}
/// --device and --device-buffers into a model's options.
void useDevice(drv::CompiledModel::Options &options) {
  options.backend = device == "cuda" ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  options.deviceBuffers = deviceBuffers;
  options.gemmPrecision = int32_t(gemmPrecision);
}

/// The forward pass and masked-LM loss at batch --batch, with its own copy
/// of the weights (evaluate() loads the training step's into it).
llvm::Expected<std::unique_ptr<drv::CompiledModel>> compileEvaluation(MLIRContext &context,
                                                                      int64_t seqLen) {
  mlir::pf::ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = batch;
  importOptions.dimValues["sequence"] = seqLen;
  OwningOpRef<ModuleOp> module = mlir::pf::importONNXFile(modelFile, &context, importOptions);
  PassManager pm(&context);
  mlir::pf::buildGraphOptPipeline(pm, graphOptions());
  pm.addPass(mlir::pf::createPFAddMaskedLMLoss());
  if (!module || failed(pm.run(*module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "building the evaluation step failed");
  drv::CompiledModel::Options options;
  options.threads = threads;
  options.ownParameters = true;
  useDevice(options);
  return drv::CompiledModel::compile(*module, options);
}

//===----------------------------------------------------------------------===//
// --pipeline: one stage per rank of an mpirun job
//===----------------------------------------------------------------------===//

/// This process's place in the job, and how it fails: one line naming the
/// rank, then the whole job ends (a rank returning would leave the others
/// waiting in a transfer with it).
struct RankJob {
  pfrt_context *ctx = nullptr;
  pfrt_comm *world = nullptr;
  int32_t rank = 0, size = 1;
  /// Where this rank's stage functions run (chooseRankDevice): backend,
  /// GPU, on backend memory, and the communicator of their stage values.
  int32_t backend = PFRT_BACKEND_CPU, device = 0;
  bool onBackendMemory = false;
  int32_t transferBackend = PFRT_COMM_MPI;

  int fail(const llvm::Twine &message) const {
    llvm::outs().flush();
    llvm::errs() << ("pf-train: rank " + std::to_string(rank) + ": error: " + message.str() +
                     "\n");
    llvm::errs().flush();
    pfrt_comm_abort(ctx, world, 1);
    return 1;
  }
  llvm::Error commError(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what + ": " + pfrt_last_error(ctx));
  }
  /// Sums `values` (f64) over all ranks in place.
  llvm::Error sum(std::vector<double> &values) const {
    drv::NpyArray a;
    a.dtype = PFRT_F64;
    a.shape = {int64_t(values.size())};
    a.data.resize(values.size() * sizeof(double));
    std::memcpy(a.data.data(), values.data(), a.data.size());
    pfrt_tensor t{};
    t.data = a.data.data();
    t.dtype = PFRT_F64;
    t.rank = 1;
    t.shape[0] = int64_t(values.size());
    if (pfrt_comm_all_reduce_sum(ctx, world, &t) != PFRT_OK)
      return commError("all-reducing the step's figures");
    std::memcpy(values.data(), a.data.data(), a.data.size());
    return llvm::Error::success();
  }
};

/// FNV-1a over what must be the same on every rank: the model's and the
/// corpus' bytes, the command line and this build of pf-train (the bytes of
/// its executable: equal builds on several machines agree).
uint64_t startupHash(int argc, char **argv) {
  uint64_t h = 1469598103934665603ULL;
  auto add = [&](llvm::StringRef bytes) {
    for (unsigned char c : bytes)
      h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL; // separator
  };
  for (const std::string &file :
       {std::string(modelFile), std::string(corpusFile), std::string("/proc/self/exe")}) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    add(buffer ? (*buffer)->getBuffer() : llvm::StringRef("<unreadable>"));
  }
  for (int i = 1; i < argc; ++i)
    add(argv[i]);
  return h;
}

/// Every rank's start-up hash; an error naming the ranks that differ from
/// rank 0. The slots are exchanged as 32-bit halves in doubles (exact).
llvm::Error checkSameStart(const RankJob &job, uint64_t hash) {
  std::vector<double> slots(2 * job.size, 0.0);
  slots[2 * job.rank] = double(hash >> 32);
  slots[2 * job.rank + 1] = double(hash & 0xffffffffULL);
  if (auto err = job.sum(slots))
    return err;
  auto hashOf = [&](int r) {
    return (uint64_t(slots[2 * r]) << 32) | uint64_t(slots[2 * r + 1]);
  };
  std::vector<std::string> differing;
  for (int r = 1; r < job.size; ++r)
    if (hashOf(r) != hashOf(0))
      differing.push_back(std::to_string(r));
  if (differing.empty())
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "rank(s) " + llvm::join(differing, ", ") +
          " were started with another model, corpus, command line or pf-train build than "
          "rank 0 (start-up hashes differ): start every rank with the same command");
}

/// Bytes of this rank's state by kind: parameters, optimizer state, K-FAC
/// factors and inverses.
struct StateBytes {
  int64_t parameters = 0, optimizer = 0, kfac = 0, parameterCount = 0;
};

bool isOptimizerState(llvm::StringRef name) {
  return name.ends_with(".exp_avg") || name.ends_with(".exp_avg_sq") ||
         name.ends_with(".momentum");
}

StateBytes stateBytes(const drv::CompiledProgram &program) {
  StateBytes bytes;
  for (const auto &p : program.parameters()) {
    if (isOptimizerState(p.name)) {
      bytes.optimizer += p.bytes;
    } else if (llvm::StringRef(p.name).contains(".kfac.")) {
      bytes.kfac += p.bytes;
    } else {
      bytes.parameters += p.bytes;
      ++bytes.parameterCount;
    }
  }
  return bytes;
}

/// "rank 1: stage 1 (encoder blocks 1), 22 parameters 1.2 MB, optimizer state 2.4 MB".
std::string startupLine(const RankJob &job, drv::RankRunner &runner, ModuleOp module) {
  std::string blocks;
  for (int64_t stage : runner.program().getStages())
    if (auto forward =
            module.lookupSymbol<func::FuncOp>("stage" + std::to_string(stage) + "_forward"))
      if (auto attr = forward->getAttrOfType<DenseI64ArrayAttr>("pf.blocks"))
        for (int64_t b : attr.asArrayRef())
          blocks += (blocks.empty() ? "" : " ") + std::to_string(b);
  StateBytes bytes = stateBytes(runner.compiled());
  std::string stages;
  for (int64_t stage : runner.program().getStages())
    stages += (stages.empty() ? "" : " ") + std::to_string(stage);
  return llvm::formatv("rank {0}: stage {1} (encoder blocks {2}), {3} parameter tensors "
                       "({4} bytes), optimizer state {5} bytes, K-FAC state {6} bytes\n",
                       job.rank, stages, blocks, bytes.parameterCount, bytes.parameters,
                       bytes.optimizer, bytes.kfac)
      .str();
}

/// The checkpoint of a pipelined run: every rank's state gathered on rank 0,
/// in the single-process format (`param/<name>` for parameters and optimizer
/// state, `meta/*`), so either kind of run can resume the other's. A
/// parameter held by two ranks (the tied word embedding) must be equal on
/// both.
llvm::Expected<std::map<std::string, drv::NpyArray>> gatherState(const RankJob &job,
                                                                 drv::CompiledProgram &program) {
  if (auto err = program.copyParametersToHost())
    return std::move(err);
  std::map<std::string, drv::NpyArray> mine = stateArrays(program.parameters());
  if (job.rank != 0) {
    if (auto err = drv::sendValues(job.ctx, job.world, mine, 0))
      return std::move(err);
    return std::map<std::string, drv::NpyArray>{};
  }
  for (int32_t from = 1; from < job.size; ++from) {
    std::map<std::string, drv::NpyArray> theirs;
    if (auto err = drv::receiveValues(job.ctx, job.world, from, theirs))
      return err;
    for (auto &[name, value] : theirs) {
      auto it = mine.find(name);
      if (it == mine.end()) {
        mine.emplace(name, std::move(value));
        continue;
      }
      if (it->second.shape != value.shape || it->second.data != value.data)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "'" + name + "' differs between rank " + std::to_string(from) +
                " and a lower rank holding it: the replicas diverged");
    }
  }
  return mine;
}

llvm::Error saveCheckpointPipelined(const RankJob &job, drv::CompiledProgram &program,
                                    const Corpus &c, int64_t step) {
  auto state = gatherState(job, program);
  if (!state)
    return state.takeError();
  if (job.rank != 0)
    return llvm::Error::success();
  return writeCheckpoint(std::move(*state), c, step);
}

/// --eval-every: every rank's weights gathered on rank 0, which runs the
/// single-process evaluation (the same batches, masks and model) and prints
/// its line.
llvm::Error evaluatePipelined(const RankJob &job, drv::CompiledProgram &program,
                              const Corpus &c, drv::CompiledModel *eval, int64_t step) {
  auto state = gatherState(job, program);
  if (!state)
    return state.takeError();
  if (job.rank != 0)
    return llvm::Error::success();
  WeightLookup fromRanks = [&](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = state->find("param/" + name);
    if (it == state->end())
      return {nullptr, 0};
    return {it->second.data.data(), int64_t(it->second.data.size())};
  };
  auto loss = evaluate(c, fromRanks, *eval);
  if (!loss)
    return loss.takeError();
  llvm::outs() << llvm::formatv("eval  {0,5}  loss {1,8:F4}  ({2} held-out sequences)\n", step,
                                *loss, (c.rows - c.trainRows) / batch * batch)
                      .str(); // one write per line (mpirun interleaves by write)
  llvm::outs().flush();
  return llvm::Error::success();
}

/// Rank 0 collects every rank's executed ops (step, op, window step, start,
/// end).
llvm::Error gatherTimeline(const RankJob &job, drv::RankRunner &runner,
                           std::vector<std::vector<drv::ExecutedOp>> &byRank) {
  const auto &ops = runner.executed();
  drv::NpyArray table;
  table.dtype = PFRT_F64;
  table.shape = {int64_t(ops.size()), 5};
  table.data.resize(ops.size() * 5 * sizeof(double));
  double *t = reinterpret_cast<double *>(table.data.data());
  for (auto [i, op] : llvm::enumerate(ops)) {
    t[5 * i] = double(op.step), t[5 * i + 1] = double(op.op);
    t[5 * i + 2] = double(op.windowStep);
    t[5 * i + 3] = op.start, t[5 * i + 4] = op.end;
  }
  if (job.rank != 0)
    return drv::sendValues(job.ctx, job.world, {{"timeline", table}}, 0);
  byRank.assign(job.size, {});
  byRank[0] = ops;
  for (int32_t from = 1; from < job.size; ++from) {
    std::map<std::string, drv::NpyArray> theirs;
    if (auto err = drv::receiveValues(job.ctx, job.world, from, theirs))
      return err;
    const drv::NpyArray &rows = theirs["timeline"];
    const double *v = reinterpret_cast<const double *>(rows.data.data());
    for (int64_t i = 0; i + 1 <= (rows.shape.empty() ? 0 : rows.shape[0]); ++i)
      byRank[from].push_back({int64_t(v[5 * i]), int64_t(v[5 * i + 1]),
                              int64_t(v[5 * i + 2]), v[5 * i + 3], v[5 * i + 4]});
  }
  return llvm::Error::success();
}

int trainPipelineOnRank(const RankJob &job, Corpus &corpus, const mlir::pf::FlagBinder &stepFlags,
                        const mlir::pf::PipelineRunOptions &pipeline, int argc, char **argv);

//===----------------------------------------------------------------------===//
// --kfac-damping-schedule adaptive (docs/training.md, "Damping schedules")
//===----------------------------------------------------------------------===//

/// A parameter's bytes before a step.
struct WeightCopy {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};
using WeightCopies = std::map<std::string, WeightCopy>;
using TrainedWeights = std::map<std::string, drv::CompiledModel::Parameter>;

/// Copies of the weights the evaluation model reads (every K-FAC layer's
/// among them), taken before an adapting step updates them.
llvm::Expected<WeightCopies> copyEvaluationWeights(drv::CompiledModel &model,
                                                   const TrainedWeights &trained,
                                                   drv::CompiledModel &eval) {
  if (auto err = model.copyParametersToHost())
    return std::move(err);
  WeightCopies copies;
  for (const auto &p : eval.parameters()) {
    auto it = trained.find(p.name);
    if (it == trained.end())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "adaptive damping: the training step has no parameter '" +
                                         p.name + "'");
    const auto *data = static_cast<const char *>(it->second.data);
    copies[p.name] = {it->second.dtype, it->second.shape,
                      std::vector<char>(data, data + it->second.bytes)};
  }
  return copies;
}

/// One adaptation after `step`, whose loss on its batch before the update
/// was `lossBefore`: the evaluation model computes the loss on the same
/// batch with the K-FAC layers updated and every other weight as before the
/// step (`before`), so that ρ compares the change that λ shapes with K-FAC's
/// quadratic model of it; then λ for the next steps. `print`: the detail line.
llvm::Error adaptDamping(int64_t step, double lossBefore, const Corpus &c,
                         drv::CompiledModel &model, const TrainedWeights &trained,
                         drv::CompiledModel &eval, llvm::ArrayRef<drv::KfacModelLayer> layers,
                         const WeightCopies &before,
                         const std::map<std::string, drv::NpyArray> &outputs, bool print) {
  auto start = std::chrono::steady_clock::now();
  if (auto err = model.copyParametersToHost())
    return err;
  auto floatTensor = [](int32_t dtype, const void *data, const std::vector<int64_t> &shape) {
    return dtype == PFRT_F32 ? drv::FloatTensor{static_cast<const float *>(data), shape}
                             : drv::FloatTensor{};
  };
  drv::FloatTensorLookup current = [&](const std::string &name) {
    auto it = trained.find(name);
    return it == trained.end() ? drv::FloatTensor{}
                               : floatTensor(it->second.dtype, it->second.data, it->second.shape);
  };
  drv::FloatTensorLookup previous = [&](const std::string &name) {
    auto it = before.find(name);
    return it == before.end()
               ? drv::FloatTensor{}
               : floatTensor(it->second.dtype, it->second.bytes.data(), it->second.shape);
  };
  drv::FloatTensorLookup gradients = [&](const std::string &name) {
    auto it = outputs.find("kfac/gradient/" + name);
    return it == outputs.end()
               ? drv::FloatTensor{}
               : floatTensor(it->second.dtype, it->second.data.data(), it->second.shape);
  };
  auto quadratic = drv::evaluateQuadraticModel(layers, previous, current, gradients, current);
  if (!quadratic)
    return quadratic.takeError();
  std::set<std::string> moved;
  for (const drv::KfacModelLayer &layer : layers)
    moved.insert({layer.weight, layer.bias});
  WeightLookup updatedKfacLayers =
      [&](const std::string &name) -> std::pair<const void *, int64_t> {
    if (moved.count(name)) {
      auto it = trained.find(name);
      if (it == trained.end())
        return {nullptr, 0};
      return {it->second.data, it->second.bytes};
    }
    auto it = before.find(name);
    if (it == before.end())
      return {nullptr, 0};
    return {it->second.bytes.data(), int64_t(it->second.bytes.size())};
  };
  if (auto err = loadEvaluationWeights(updatedKfacLayers, eval))
    return err;
  auto forwardStart = std::chrono::steady_clock::now();
  std::map<std::string, drv::NpyArray> evalOutputs;
  if (auto err = eval.run(makeMaskedBatch(c, step), evalOutputs))
    return err;
  float lossAfter;
  std::memcpy(&lossAfter, evalOutputs["loss"].data.data(), sizeof(float));
  auto end = std::chrono::steady_clock::now();

  const double lambda = adaptive.stepDamping;
  const double predicted = quadratic->change(lambda);
  const double actual = double(lossAfter) - lossBefore;
  // ρ needs a predicted decrease that the f32 loss can resolve; a model
  // that predicts none (the update is no descent direction for this batch's
  // gradient, e.g. from momentum) or less than a few ulps of the loss says
  // nothing about λ, which stays.
  const double resolution = 4 * std::numeric_limits<float>::epsilon() * std::abs(lossBefore);
  const bool measurable = predicted < -resolution;
  adaptive.rho = measurable ? actual / predicted : std::nan("");
  if (measurable)
    adaptive.damping = dampingAdaptation.next(lambda, adaptive.rho);
  ++adaptive.adaptations;
  adaptive.forwardSeconds += std::chrono::duration<double>(end - forwardStart).count();
  adaptive.modelSeconds += std::chrono::duration<double>(forwardStart - start).count();
  if (print)
    llvm::outs() << llvm::formatv("step {0}: K-FAC damping: loss {1:E9} -> {2:E9}, model "
                                  "{3:E9} (gradient {4:E9}, curvature {5:E9}, norm2 {6:E9}), "
                                  "rho {7:F4}, damping {8:E9} -> {9:E9}\n",
                                  step, lossBefore, double(lossAfter), predicted,
                                  quadratic->gradient, quadratic->curvature, quadratic->squaredNorm,
                                  adaptive.rho, lambda, adaptive.damping)
                        .str();
  return llvm::Error::success();
}

/// Single-process pf-train's line about K-FAC refreshes that needed more
/// damping or kept the previous inverse, with the ranks they happened on.
void printKfacIssues(int64_t step, llvm::ArrayRef<double> issuesOfRank) {
  int64_t total = 0;
  std::vector<std::string> ranks;
  for (auto [rank, issues] : llvm::enumerate(issuesOfRank))
    if (issues != 0) {
      total += int64_t(issues);
      ranks.push_back(llvm::formatv("rank {0}: {1}", rank, int64_t(issues)).str());
    }
  if (total == 0)
    return;
  // One write: under mpirun other ranks' lines interleave by write.
  llvm::outs().flush();
  llvm::outs() << llvm::formatv("step {0}: K-FAC: {1} inverse refresh(es) needed more damping "
                                "or kept the previous inverse ({2})\n",
                                step, total, llvm::join(ranks, ", "))
                      .str();
  llvm::outs().flush();
}

/// Whether the f32/f64 parameter `p` holds a NaN or Inf.
bool holdsNonFinite(const drv::CompiledModel::Parameter &p) {
  auto scan = [&](auto *values) {
    for (int64_t i = 0, n = p.bytes / int64_t(sizeof(*values)); i < n; ++i)
      if (!std::isfinite(values[i]))
        return true;
    return false;
  };
  if (p.dtype == PFRT_F32)
    return scan(static_cast<const float *>(p.data));
  if (p.dtype == PFRT_F64)
    return scan(static_cast<const double *>(p.data));
  return false;
}

/// After a step whose K-FAC refreshes reported issues: names each factor
/// (`<w>.kfac.A`, `.B`) that holds NaN or Inf, once. Its layer's refreshes
/// keep the last good inverse from then on, since a running average that
/// took in a NaN stays NaN; `where` prefixes the line ("rank 1: ").
void reportNonFiniteFactors(int64_t step, const Parameters &parameters,
                            std::set<std::string> &reported, const std::string &where = "") {
  for (const auto &p : parameters) {
    llvm::StringRef name(p.name);
    bool factor = name.ends_with(".kfac.A") || name.ends_with(".kfac.B");
    if (!factor || reported.count(p.name) || !holdsNonFinite(p))
      continue;
    reported.insert(p.name);
    llvm::outs() << llvm::formatv("{0}step {1}: K-FAC: factor {2} of layer '{3}' holds NaN or "
                                  "Inf; the layer keeps its last good inverse from now on "
                                  "(lower --lr, or resume from an earlier checkpoint)\n",
                                  where, step, name.back(), name.drop_back(7))
                        .str(); // one write: other ranks' lines interleave by write
  }
  llvm::outs().flush();
}

/// What a measured op of a rank program was, for the timeline.
drv::MeasuredEvent describeOp(Operation *op, ModuleOp module, int32_t rank, int64_t stage) {
  drv::MeasuredEvent event;
  event.rank = rank;
  event.stage = stage;
  if (auto run = dyn_cast<mlir::pf::RunStageOp>(op)) {
    using mlir::pf::StageTaskKind;
    switch (run.getKind()) {
    case StageTaskKind::Forward: event.kind = drv::MeasuredKind::Forward; break;
    case StageTaskKind::Backward: event.kind = drv::MeasuredKind::Backward; break;
    case StageTaskKind::BackwardInput: event.kind = drv::MeasuredKind::BackwardInput; break;
    case StageTaskKind::BackwardWeight: event.kind = drv::MeasuredKind::BackwardWeight; break;
    case StageTaskKind::Update: event.kind = drv::MeasuredKind::Update; break;
    case StageTaskKind::Precondition: event.kind = drv::MeasuredKind::Precondition; break;
    case StageTaskKind::KfacInverse: event.kind = drv::MeasuredKind::KfacInverse; break;
    case StageTaskKind::KfacFactorA: event.kind = drv::MeasuredKind::KfacFactorA; break;
    case StageTaskKind::KfacFactorB: event.kind = drv::MeasuredKind::KfacFactorB; break;
    default: event.kind = drv::MeasuredKind::Other; break;
    }
    if (run.getMicrobatch())
      event.microbatch = int64_t(*run.getMicrobatch());
    if (run.getLayer())
      event.layer = int64_t(*run.getLayer());
    if (auto func = module.lookupSymbol<func::FuncOp>(run.getStage()))
      if (auto attr = func->getAttrOfType<IntegerAttr>("pf.stage"))
        event.stage = attr.getInt();
  } else if (auto send = dyn_cast<mlir::pf::SendActOp>(op)) {
    event.kind = drv::MeasuredKind::Send;
    event.microbatch = int64_t(send.getMicrobatch());
  } else if (auto recv = dyn_cast<mlir::pf::RecvActOp>(op)) {
    event.kind = drv::MeasuredKind::Recv;
    event.microbatch = int64_t(recv.getMicrobatch());
  } else if (auto reduce = dyn_cast<mlir::pf::ReduceMicrobatchOp>(op)) {
    event.kind = drv::MeasuredKind::AllReduce;
    event.microbatch = int64_t(reduce.getMicrobatch());
  } else if (isa<mlir::pf::KfacPromoteInversesOp>(op)) {
    event.kind = drv::MeasuredKind::Other;
  } else {
    // The tied gradient's all-reduce or broadcast and the clipping's norm
    // exchange.
    event.kind = drv::MeasuredKind::AllReduce;
  }
  return event;
}

/// --trace / --svg and the report: every rank's executed ops (rank 0 has
/// every program, so it can name any rank's op), steps counted from the
/// run's first; the figures leave out that first (warm-up) step.
llvm::Expected<drv::MeasuredRun>
measuredRunOf(ModuleOp module, const std::vector<std::vector<drv::ExecutedOp>> &byRank,
              const mlir::pf::PipelineRunOptions &pipeline, int64_t first) {
  drv::MeasuredRun run;
  run.ranks = int32_t(byRank.size());
  run.stages = 0; // distinct stages (Chimera holds each on two ranks)
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>())
    for (int64_t stage : program.getStages())
      run.stages = std::max(run.stages, stage + 1);
  run.microbatches = pipeline.microbatches;
  run.schedule = ::pf::sched::scheduleKindName(pipeline.schedule);
  // (rank, window step or -1) -> the program's ops.
  std::map<std::pair<int64_t, int64_t>, std::vector<Operation *>> programs;
  std::map<int64_t, int64_t> stageOf;
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>()) {
    auto &ops = programs[{program.getRankValue(),
                          program.getWindowStep() ? int64_t(*program.getWindowStep()) : -1}];
    for (Operation &op : program.getBody().front())
      ops.push_back(&op);
    stageOf[program.getRankValue()] =
        program.getStages().empty() ? -1 : program.getStages().front();
  }
  for (auto [rank, executedOps] : llvm::enumerate(byRank)) {
    int64_t stage = stageOf.count(int64_t(rank)) ? stageOf[int64_t(rank)] : -1;
    for (const drv::ExecutedOp &executed : executedOps) {
      const std::vector<Operation *> &ops = programs[{int64_t(rank), executed.windowStep}];
      if (executed.op < 0 || executed.op >= int64_t(ops.size()))
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "rank " + std::to_string(rank) +
                                           " recorded an op its program does not have");
      drv::MeasuredEvent event = describeOp(ops[executed.op], module, int32_t(rank), stage);
      event.step = executed.step - first;
      event.start = executed.start;
      event.end = executed.end;
      run.events.push_back(event);
    }
  }
  return run;
}

llvm::Error writeMeasuredTimeline(ModuleOp module,
                                  const std::vector<std::vector<drv::ExecutedOp>> &byRank,
                                  const mlir::pf::PipelineRunOptions &pipeline, int64_t first,
                                  const KfacWindowRule &window) {
  auto measured = measuredRunOf(module, byRank, pipeline, first);
  if (!measured)
    return measured.takeError();
  drv::MeasuredRun &run = *measured;
  int64_t lastStep = 0;
  for (const drv::MeasuredEvent &event : run.events)
    lastStep = std::max(lastStep, event.step);
  // The first step compiles nothing but still warms caches and the
  // transport: leave it out of the figures when there are others. With
  // K-FAC in the bubbles the figures are the windows' (after the warm-up).
  int64_t from = lastStep > 0 ? 1 : 0;
  drv::SimulationOptions simulation;
  if (window.steps > 0 && window.warmup - first + 1 <= lastStep) {
    from = std::max<int64_t>(from, window.warmup - first + 1);
    simulation.kfac.refreshSteps = int(window.steps);
    simulation.kfac.splitPieces = 1;
    simulation.kfac.steadyState = false;
  }
  if (!traceFile.empty()) {
    if (auto err = drv::writeMeasuredTrace(run, traceFile, from))
      return err;
    llvm::outs() << "measured trace: " << traceFile << "\n";
  }
  if (!svgFile.empty()) {
    if (auto err = drv::writeMeasuredSvg(run, svgFile, from, simulation))
      return err;
    llvm::outs() << "measured timeline: " << svgFile << "\n";
  }
  auto comparison = drv::simulateFromMeasured(run, from, -1, simulation);
  if (comparison) {
    llvm::outs() << comparison->text();
    return llvm::Error::success();
  }
  // The measured figures alone (the simulation of several stages per rank
  // from measured durations is not built).
  std::string why = llvm::toString(comparison.takeError());
  auto report = drv::summarize(run, from, -1);
  if (!report)
    return report.takeError();
  llvm::outs() << report->text() << "(no simulated comparison: " << why << ")\n";
  return llvm::Error::success();
}

/// FNV-1a of this machine's name (62 bits: sums over ranks stay exact).
int64_t hostNameHash() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = name; *c; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
  return int64_t(h >> 2);
}

/// --device, --device-buffers and --comm for this rank: on CUDA, the i-th
/// rank of a host takes GPU i (modulo the host's GPUs); the stage values
/// travel on NCCL when every rank of the job has a GPU of its own (--comm
/// auto) or when asked (--comm nccl: the communicator refuses shared GPUs),
/// else on MPI staged through host memory. On the CPU with --device-buffers
/// they are staged too: the check of that path.
llvm::Error chooseRankDevice(RankJob &job) {
  const bool onCuda = device == "cuda";
  job.onBackendMemory = onCuda || deviceBuffers;
  if (!job.onBackendMemory)
    return llvm::Error::success();
  job.backend = onCuda ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  job.transferBackend = PFRT_COMM_MPI_STAGED;
  if (onCuda) {
    // Every rank's host; its place among the ranks of its host.
    std::vector<double> hosts(job.size, 0.0);
    int64_t hash = hostNameHash();
    hosts[job.rank] = double(hash >> 31); // 31 bits: exact in a double
    if (auto err = job.sum(hosts))
      return err;
    int32_t localRank = 0, localSize = 0;
    for (int32_t r = 0; r < job.size; ++r)
      if (hosts[r] == hosts[job.rank]) {
        localRank += r < job.rank;
        ++localSize;
      }
    int32_t gpus = pfrt_backend_device_count(PFRT_BACKEND_CUDA);
    if (gpus < 1)
      return llvm::createStringError("--device cuda: no CUDA device on this rank's host");
    job.device = localRank % gpus;
    std::vector<double> shared{localSize > gpus ? 1.0 : 0.0};
    if (auto err = job.sum(shared))
      return err;
    bool ownGpus = shared[0] == 0;
    job.transferBackend =
        commChoice == CommChoice::Nccl || (commChoice == CommChoice::Auto && ownGpus)
            ? PFRT_COMM_NCCL
            : PFRT_COMM_MPI;
  }
  std::string how = "NCCL";
  if (job.transferBackend != PFRT_COMM_NCCL)
    how = onCuda ? "MPI, staged through host memory"
                 : "MPI, staged through host buffers (the CPU check of that path)";
  std::string where = onCuda ? "GPU " + std::to_string(job.device) : "CPU backend memory";
  llvm::outs() << llvm::formatv("rank {0}: stage functions on {1}, stage values over {2}\n",
                                job.rank, where, how)
                      .str(); // one write: mpirun interleaves by write
  llvm::outs().flush();
  return llvm::Error::success();
}

int trainPipeline(Corpus &corpus, const mlir::pf::FlagBinder &stepFlags, int argc,
                  char **argv) {
  mlir::pf::BoundPipelineOptions<mlir::pf::PipelineRunOptions> parsed;
  if (failed(parsed.parseFromString(pipelineSpec)))
    return fail(
        "--pipeline \"" + pipelineSpec +
        "\": see the messages above; it takes "
        "stages=D schedule=gpipe|1f1b|zb-h1|zb-h2|interleaved|chimera|zb-v|dualpipe|dualpipev "
        "microbatches=N chunks=C "
        "overlap=true|false kfac=step|bubbles refresh=K max-overhead=X max-refresh=K");
  mlir::pf::PipelineRunOptions pipeline = parsed.get();
  using ::pf::sched::ScheduleKind;
  if (pipeline.schedule == ScheduleKind::Interleaved && pipeline.chunks < 2)
    return fail(llvm::formatv("--pipeline: interleaved needs chunks >= 2, got {0}",
                              pipeline.chunks));
  if (pipeline.microbatches < 1 || batch % pipeline.microbatches != 0)
    return fail(llvm::formatv("--pipeline: microbatches must be >= 1 and divide --batch ({0}), "
                              "got {1}",
                              int(batch), pipeline.microbatches));
  if (training.microbatches != 1 && training.microbatches != pipeline.microbatches)
    return fail(llvm::formatv("--micro-batches {0} but --pipeline has microbatches={1} (give "
                              "only --pipeline's)",
                              training.microbatches, pipeline.microbatches));
  if (auto err = prepareDampingSchedule(pipeline.kfac == mlir::pf::KfacWork::Bubbles))
    return fail(llvm::toString(std::move(err)));
  if (training.kfacFactorEvery > 1 && pipeline.kfac == mlir::pf::KfacWork::Bubbles)
    return fail("--kfac-factor-every with --pipeline \"kfac=bubbles\": the windows decide the "
                "factor steps (refresh=K)");
  if (intervalSchedule != IntervalSchedule::Constant &&
      pipeline.kfac == mlir::pf::KfacWork::Bubbles)
    return fail("--kfac-interval-schedule with --pipeline \"kfac=bubbles\": the windows decide "
                "the factor and refresh steps (refresh=K)");
  if (pipeline.kfac == mlir::pf::KfacWork::Bubbles) {
    if (!training.kfac)
      return fail("--pipeline \"kfac=bubbles\" places K-FAC work: it needs --kfac");
    if (training.precondition.refreshWarmup < 1)
      return fail("--pipeline \"kfac=bubbles\" needs --kfac-refresh-warmup >= 1: the warm-up "
                  "steps invert every step and measure the durations the placement uses");
    if (pipeline.refresh < 0)
      return fail(llvm::formatv("--pipeline: refresh must be >= 0 (0: the scheduler's K), got "
                                "{0}",
                                pipeline.refresh));
    if (pipeline.maxRefresh < 1 || pipeline.maxRefresh > 512)
      return fail(llvm::formatv("--pipeline: max-refresh must be in [1, 512], got {0}",
                                pipeline.maxRefresh));
    if (!(pipeline.maxOverhead >= 0 && pipeline.maxOverhead <= 10))
      return fail(llvm::formatv("--pipeline: max-overhead must be in [0, 10], got {0}",
                                pipeline.maxOverhead));
  } else if (pipeline.refresh != 0) {
    return fail("--pipeline: refresh= applies to kfac=bubbles");
  }
  if (pipeline.stages < 0)
    return fail("--pipeline: stages must be >= 0");

  RankJob job;
  job.ctx = pfrt_context_create(nullptr);
  if (!job.ctx)
    return fail("cannot create a runtime context");
  if (pfrt_comm_create(job.ctx, nullptr, &job.world) != PFRT_OK)
    return fail(llvm::Twine("--pipeline: ") + pfrt_last_error(job.ctx));
  job.rank = pfrt_comm_rank(job.world);
  job.size = pfrt_comm_size(job.world);
  if (auto err = chooseRankDevice(job))
    return job.fail(llvm::toString(std::move(err)));
  int code = trainPipelineOnRank(job, corpus, stepFlags, pipeline, argc, argv);
  if (code != 0 && code != 130)
    return code; // aborted the job already
  pfrt_comm_destroy(job.world);
  if (pfrt_comm_finalize(job.ctx) != PFRT_OK) {
    llvm::errs() << ("pf-train: rank " + std::to_string(job.rank) + ": " +
                     pfrt_last_error(job.ctx) + "\n");
    code = 1;
  }
  pfrt_context_destroy(job.ctx);
  return code;
}

/// K-FAC in the bubbles: the window programs of `steps` steps and their
/// placement (mlir::pf::KfacPlacementTable: the plan broadcast and
/// meta/kfac_placement) added to the module and given to the runner.
llvm::Error useKfacWindow(ModuleOp module, drv::RankRunner &runner, const KfacWindowRule &window,
                          const std::vector<int64_t> &placement) {
  std::string error;
  auto table = mlir::pf::decodeKfacPlacementTable(placement, error);
  if (failed(table))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC placement: " + error);
  if (failed(mlir::pf::addKfacWindowPrograms(module, window.steps, table->inverses,
                                             table->factors)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the K-FAC window programs do not verify (see above)");
  if (auto err = runner.useKfacWindow(window.warmup, window.steps))
    return err;
  checkpointKfacWindow = window.steps;
  checkpointKfacPlacement = placement;
  return llvm::Error::success();
}

/// After the warm-up steps: rank 0 places the inverses with the scheduler
/// from every rank's measured warm-up (the steps after the first, when
/// there are several) and sends the window and placement to every rank.
llvm::Expected<std::vector<int64_t>>
planKfacWindowOnRanks(const RankJob &job, ModuleOp module, drv::RankRunner &runner,
                      const mlir::pf::PipelineRunOptions &pipeline, int64_t first,
                      KfacWindowRule &window) {
  std::vector<std::vector<drv::ExecutedOp>> byRank;
  if (auto err = gatherTimeline(job, runner, byRank))
    return std::move(err);
  std::vector<int64_t> plan; // K, then the placement
  if (job.rank == 0) {
    auto run = measuredRunOf(module, byRank, pipeline, first);
    if (!run)
      return run.takeError();
    int64_t last = window.warmup - first;
    int64_t from = last >= 1 ? 1 : 0;
    auto placed = drv::planKfacWindow(*run, from, last, pipeline.refresh, pipeline.maxOverhead,
                                      pipeline.maxRefresh);
    if (!placed)
      return placed.takeError();
    plan.push_back(placed->steps);
    std::map<int64_t, std::vector<int64_t>> perStep;
    for (const drv::KfacWindowPlacement &p : placed->inverses) {
      plan.insert(plan.end(), {int64_t(p.rank), p.layer, p.windowStep, p.afterPasses});
      perStep[p.windowStep].push_back(p.layer);
    }
    for (const drv::KfacFactorPlacement &f : placed->factors)
      plan.insert(plan.end(), {int64_t(f.rank), f.layer, mlir::pf::kfacFactorRowCode(f.microbatch, f.isB),
                               f.afterPasses});
    std::string where;
    for (auto &[k, layers] : perStep)
      where += llvm::formatv("{0}step {1}: {2}", where.empty() ? "" : "; ", k, layers.size());
    llvm::outs() << llvm::formatv(
        "K-FAC in the bubbles: windows of {0} step(s) from step {1} ({2}; measured warm-up "
        "steps {3}..{4}, simulated T_pipe {5:F1} ms, step {6:F1} ms); inverse calls per window "
        "step: {7}; factor calls placed in step 0: {8}\n",
        placed->steps, window.warmup + 1,
        pipeline.refresh > 0 ? "refresh=" + std::to_string(pipeline.refresh)
                             : std::string("the scheduler's K"),
        first + from, window.warmup, placed->pipelineMs, placed->stepMs, where,
        placed->factors.size())
                        .str(); // one write per line (mpirun interleaves by write)
    llvm::outs().flush();
    drv::NpyArray table;
    table.dtype = 7;
    table.shape = {int64_t(plan.size())};
    table.data.resize(plan.size() * sizeof(int64_t));
    std::memcpy(table.data.data(), plan.data(), table.data.size());
    for (int32_t to = 1; to < job.size; ++to)
      if (auto err = drv::sendValues(job.ctx, job.world, {{"kfac/plan", table}}, to))
        return std::move(err);
  } else {
    std::map<std::string, drv::NpyArray> received;
    if (auto err = drv::receiveValues(job.ctx, job.world, 0, received))
      return std::move(err);
    const drv::NpyArray &table = received["kfac/plan"];
    plan.resize(size_t(table.numElements()));
    std::memcpy(plan.data(), table.data.data(), plan.size() * sizeof(int64_t));
  }
  if (plan.empty() || plan.front() < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no K-FAC window was placed");
  window.steps = plan.front();
  return std::vector<int64_t>(plan.begin() + 1, plan.end());
}

/// The K-FAC window and placement a pipelined checkpoint recorded.
llvm::Expected<std::vector<int64_t>> savedKfacPlacement(int64_t &steps) {
  auto arrays = drv::readNpz(resumeFile);
  if (!arrays)
    return arrays.takeError();
  auto window = arrays->find("meta/kfac_window");
  auto placement = arrays->find("meta/kfac_placement");
  if (window == arrays->end() || placement == arrays->end() || window->second.dtype != 7 ||
      placement->second.dtype != 7 || placement->second.shape.size() != 2 ||
      placement->second.shape[1] != 4)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   resumeFile + ": resuming after the K-FAC warm-up needs the "
                                   "meta/kfac_window and meta/kfac_placement of a kfac=bubbles "
                                   "run");
  steps = *reinterpret_cast<const int64_t *>(window->second.data.data());
  std::vector<int64_t> values(size_t(placement->second.numElements()));
  std::memcpy(values.data(), placement->second.data.data(), values.size() * sizeof(int64_t));
  return values;
}

int trainPipelineOnRank(const RankJob &job, Corpus &corpus, const mlir::pf::FlagBinder &stepFlags,
                        const mlir::pf::PipelineRunOptions &requested, int argc, char **argv) {
  mlir::pf::PipelineRunOptions pipeline = requested;
  if (pipeline.stages == 0)
    pipeline.stages = job.size;
  if (pipeline.stages != job.size)
    return job.fail(llvm::formatv("--pipeline has stages={0} but the job has {1} rank(s): start "
                                  "it with mpirun -np {0}",
                                  pipeline.stages, job.size));
  if (auto err = checkSameStart(job, startupHash(argc, argv)))
    return job.fail(llvm::toString(std::move(err)));

  auto start = std::chrono::steady_clock::now();
  DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, func::FuncDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, LLVM::LLVMDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    return drv::printDiagnostic(diag, modelFile);
  });
  mlir::pf::ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = batch / pipeline.microbatches;
  importOptions.dimValues["sequence"] = corpus.seqLen;
  OwningOpRef<ModuleOp> module = mlir::pf::importONNXFile(modelFile, &context, importOptions);
  if (!module)
    return job.fail("importing " + modelFile + " failed");
  PassManager pm(&context);
  mlir::pf::buildGraphOptPipeline(pm, graphOptions());
  mlir::pf::buildPipelinedTrainingPipeline(pm, training, pipeline);
  if (failed(pm.run(*module)))
    return job.fail("building the pipelined training step failed");
  recordOnnxNames(*module);
  if (!emitStepFile.empty() && job.rank == 0)
    if (auto err = drv::writeModuleFile(*module, emitStepFile, "--emit-step"))
      return job.fail(llvm::toString(std::move(err)));

  drv::RankRunner::Options runnerOptions;
  runnerOptions.threads = threads;
  runnerOptions.ignoreIndex = training.loss.ignoreIndex;
  const bool bubbles = pipeline.kfac == mlir::pf::KfacWork::Bubbles;
  // K-FAC in the bubbles measures the warm-up steps to place the inverses.
  runnerOptions.recordTimes = !traceFile.empty() || !svgFile.empty() || bubbles;
  runnerOptions.overlapTransfers = pipeline.overlap;
  runnerOptions.backend = job.backend;
  runnerOptions.device = job.device;
  runnerOptions.deviceBuffers = job.onBackendMemory;
  runnerOptions.gemmPrecision = int32_t(gemmPrecision);
  runnerOptions.transferBackend = job.transferBackend;
  auto created = drv::RankRunner::create(*module, job.ctx, job.world, runnerOptions);
  if (!created)
    return job.fail(llvm::toString(created.takeError()));
  drv::RankRunner &runner = **created;
  double buildSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // One write per line: mpirun interleaves the ranks' output by write.
  llvm::outs() << startupLine(job, runner, *module);
  drv::RankRunner::ActivationFigures planned = runner.plannedActivations();
  llvm::outs() << llvm::formatv("rank {0}: activations: up to {1} micro-batches' saved "
                                "activations in flight, at most {2} bytes held (the step's "
                                "received, computed and in-flight values)\n",
                                job.rank, planned.slots, planned.bytes)
                      .str();
  llvm::outs().flush();

  int64_t first = 1;
  KfacWindowRule window{bubbles ? training.precondition.refreshWarmup : 0, 0};
  // The checkpoint's window is checked below (refresh=0 takes it).
  checkpointKfacWindow = bubbles ? -1 : 0;
  if (!resumeFile.empty()) {
    auto resumed = loadCheckpoint(runner.compiled().parameters(), corpus);
    if (!resumed)
      return job.fail(llvm::toString(resumed.takeError()));
    if (auto err = runner.compiled().copyParametersToBackend())
      return job.fail(llvm::toString(std::move(err)));
    first = *resumed + 1;
    if (job.rank == 0) {
      // One write per line: mpirun interleaves the ranks' output by write.
      llvm::outs() << ("resumed from " + resumeFile + " after step " + std::to_string(*resumed) +
                       "\n");
      llvm::outs().flush();
    }
    if (bubbles && first > window.warmup) {
      auto placement = savedKfacPlacement(window.steps);
      if (!placement)
        return job.fail(llvm::toString(placement.takeError()));
      if (pipeline.refresh > 0 && pipeline.refresh != window.steps)
        return job.fail(llvm::formatv("{0}: its K-FAC windows have {1} step(s), this run "
                                      "refresh={2}",
                                      resumeFile, window.steps, pipeline.refresh));
      if (auto err = useKfacWindow(*module, runner, window, *placement))
        return job.fail(llvm::toString(std::move(err)));
      // The window's pending inverses of the steps before the checkpoint.
      std::map<std::string, drv::NpyArray> stepInput{{"step", scalar<int64_t>(7, first)}};
      if (auto err = runner.recomputePendingInverses(stepInput, first))
        return job.fail(llvm::toString(std::move(err)));
    }
  }
  if (checkpointKfacWindow < 0)
    checkpointKfacWindow = 0; // until the window is placed
  if (job.rank == 0) {
    llvm::outs() << llvm::formatv("training {0}: pipeline of {1} ranks, {2} schedule, {3} "
                                  "micro-batches, batch {4} x {5}, optimizer {6}{7}, step "
                                  "built in {8:F2} s\n",
                                  modelFile, job.size,
                                  ::pf::sched::scheduleKindName(pipeline.schedule),
                                  pipeline.microbatches, int(batch), corpus.seqLen,
                                  stepFlags.valueText("optimizer"),
                                  training.kfac ? " + K-FAC" : "", buildSeconds)
                        .str(); // one write per line (mpirun interleaves by write)
    llvm::outs().flush();
  }
  drv::catchStopSignals();

  // --eval-every: rank 0 evaluates with its own single-process model.
  std::unique_ptr<drv::CompiledModel> evalModel;
  if (evalEvery > 0 && job.rank == 0) {
    auto built = compileEvaluation(context, corpus.seqLen);
    if (!built)
      return job.fail(llvm::toString(built.takeError()));
    evalModel = std::move(*built);
  }
  auto evaluateAt = [&](int64_t step) -> llvm::Error {
    if (evalEvery <= 0)
      return llvm::Error::success();
    return evaluatePipelined(job, runner.compiled(), corpus, evalModel.get(), step);
  };
  if (auto err = evaluateAt(first - 1))
    return job.fail(llvm::toString(std::move(err)));

  auto windowStart = std::chrono::steady_clock::now();
  int64_t windowTokens = 0, windowSteps = 0, last = first - 1;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
  bool stopped = false, stoppedBySigterm = false;
  for (int64_t step = first; step <= steps && !stopped; ++step) {
    auto inputs = makeBatch(corpus, step);
    inputs["lr"] = scalar<double>(11, learningRate(step));
    if (training.precondition.dampingInput)
      inputs["kfac_damping"] = scalar<double>(11, kfacDamping(step));
    inputs["step"] = scalar<int64_t>(7, step);
    if (bubbles)
      inputs["kfac_curvature"] = scalar<int64_t>(7, window.gathersCurvature(step));
    else if (training.kfacFactorEvery > 1 || training.precondition.curvatureInput)
      inputs["kfac_curvature"] = scalar<int64_t>(7, updatesFactors(step));
    if (training.precondition.refreshInput)
      inputs["kfac_refresh_due"] = scalar<int64_t>(7, refreshesInverses(step));
    std::map<std::string, drv::NpyArray> outputs;
    if (auto err = runner.runStep(inputs, outputs, step))
      return job.fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
    // The loss (from the last stage), whether any rank was asked to stop and
    // whether by SIGTERM: every rank learns them, so all stop after the same
    // step and rank 0 names the signal another rank received.
    // Then one slot per rank: its K-FAC refreshes that needed more damping
    // or kept the previous inverse (kfac/issues), so rank 0 can name it.
    std::vector<double> figures{0.0, drv::stopRequested() ? 1.0 : 0.0,
                                 drv::stopSignal() == SIGTERM ? 1.0 : 0.0};
    figures.resize(3 + job.size, 0.0);
    figures[3 + job.rank] = double(runner.lastKfacIssues());
    // Exactly one rank reports the loss (the last stage's; Chimera: the
    // lowest holding it).
    if (auto reported = outputs.find("loss"); reported != outputs.end()) {
      float loss;
      std::memcpy(&loss, reported->second.data.data(), sizeof(float));
      figures[0] = double(loss);
    }
    if (auto err = job.sum(figures))
      return job.fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
    if (runner.lastKfacIssues() != 0) {
      if (auto err = runner.compiled().copyParametersToHost())
        return job.fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
      reportNonFiniteFactors(step, runner.compiled().parameters(), nonFiniteFactors,
                             llvm::formatv("rank {0}: ", job.rank).str());
    }
    double loss = figures[0];
    stopped = figures[1] > 0;
    stoppedBySigterm = figures[2] > 0;
    last = step;
    windowTokens += int64_t(batch) * corpus.seqLen;
    ++windowSteps;
    if (!std::isfinite(loss)) {
      if (job.rank == 0)
        fail(llvm::formatv("step {0}: the loss is {1}; lower --lr", step, loss));
      return 1;
    }
    if (job.rank == 0)
      printKfacIssues(step, llvm::ArrayRef<double>(figures).drop_front(3));
    if (job.rank == 0 && (step % logEvery == 0 || step == steps || step == first)) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      llvm::outs() << llvm::formatv("step {0,5}  loss {1,8:F4}  lr {2:E2}  tokens/s {3,8:F0}  "
                                    "ms/step {4,7:F1}{5}\n",
                                    step, float(loss), learningRate(step), windowTokens / seconds,
                                    1e3 * seconds / windowSteps,
                                    dampingColumn(step) + intervalColumn(step))
                          .str(); // one write: other ranks' lines interleave by write
      llvm::outs().flush();
      windowStart = std::chrono::steady_clock::now();
      windowTokens = windowSteps = 0;
    }
    if (evalEvery > 0 && (step % evalEvery == 0 || step == steps)) {
      auto evalStart = std::chrono::steady_clock::now();
      if (auto err = evaluateAt(step))
        return job.fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
      windowStart += std::chrono::steady_clock::now() - evalStart; // ms/step: training only
    }
    if (bubbles && step == window.warmup && !stopped) {
      auto placement = planKfacWindowOnRanks(job, *module, runner, pipeline, first, window);
      if (!placement)
        return job.fail(llvm::toString(placement.takeError()));
      if (auto err = useKfacWindow(*module, runner, window, *placement))
        return job.fail(llvm::toString(std::move(err)));
      // --emit-step again, now with the window programs.
      if (!emitStepFile.empty() && job.rank == 0)
        if (auto err = drv::writeModuleFile(*module, emitStepFile, "--emit-step"))
          return job.fail(llvm::toString(std::move(err)));
    }
    if (!checkpointFile.empty() && checkpointEvery > 0 && step % checkpointEvery == 0)
      if (auto err = saveCheckpointPipelined(job, runner.compiled(), corpus, step))
        return job.fail(llvm::toString(std::move(err)));
  }
  if (stopped && checkpointFile.empty())
    checkpointFile = "pf-train.checkpoint.npz";
  if (!checkpointFile.empty()) {
    if (auto err = saveCheckpointPipelined(job, runner.compiled(), corpus, last))
      return job.fail(llvm::toString(std::move(err)));
    if (job.rank == 0)
      llvm::outs() << "checkpoint after step " << last << ": " << checkpointFile << "\n";
  }
  if (runnerOptions.recordTimes) {
    std::vector<std::vector<drv::ExecutedOp>> byRank;
    if (auto err = gatherTimeline(job, runner, byRank))
      return job.fail(llvm::toString(std::move(err)));
    if (job.rank == 0)
      if (auto err = writeMeasuredTimeline(*module, byRank, pipeline, first, window))
        return job.fail(llvm::toString(std::move(err)));
  }
  drv::RankRunner::ActivationFigures held = runner.measuredActivations();
  planned = runner.plannedActivations(); // with the window programs, if any
  // One write (see the start-up lines).
  llvm::outs().flush();
  llvm::outs() << llvm::formatv("rank {0}: activations held at most: {1} micro-batches' saved "
                                "activations, {2} bytes (planned {3} and {4} bytes)\n",
                                job.rank, held.slots, held.bytes, planned.slots, planned.bytes)
                      .str()
               << llvm::formatv("rank {0}: gradients held at most: {1} bytes (micro-batch "
                                "pieces, running sums and pieces in flight, before the step's "
                                "combination)\n",
                                job.rank, runner.measuredGradientBytes())
                      .str();
  llvm::outs().flush();
  if (job.rank == 0 && stopped)
    llvm::outs() << "stopped by " << (stoppedBySigterm ? "SIGTERM" : "SIGINT")
                 << " on a rank after step " << last << "\n";
  llvm::outs().flush();
  return stopped ? 130 : 0;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Before any library starts a thread (see StopSignals.h).
  drv::routeStopSignals();
  mlir::pf::FlagBinder loopFlags(category);
  bindLoopOptions(loopFlags);
  mlir::pf::FlagBinder stepFlags(stepCategory);
  training.bindOptions(stepFlags);
  cl::HideUnrelatedOptions({&category, &stepCategory});
  cl::ParseCommandLineOptions(argc, argv, "pf-train: masked-LM training on the pf runtime\n");
  if (auto err = drv::checkDevice(device, "pf-train", /*runsOnCuda=*/true))
    return fail(llvm::toString(std::move(err)));
  if (commChoice != CommChoice::Auto && pipelineSpec.empty())
    return fail("--comm chooses how the ranks of --pipeline exchange their stage values: it "
                "needs --pipeline");
  if (commChoice == CommChoice::Nccl && device != "cuda")
    return fail("--comm nccl moves CUDA device memory between GPUs: it needs --device cuda (on "
                "the CPU, give --comm mpi or leave --comm out)");
  const int64_t microbatches = training.microbatches;
  if (batch < 1 || steps < 1 || lr <= 0 || warmup < 0 || logEvery < 1 || checkpointEvery < 0 ||
      training.clipNorm < 0 ||
      maskProbability <= 0 || maskProbability > 1)
    return fail("--batch, --steps, --lr, --log-every and --mask-prob must be positive "
                "(--mask-prob at most 1); --warmup, --checkpoint-every and --clip-norm must be "
                "non-negative");
  if (batch > kMaxBatch)
    return fail(llvm::formatv("--batch {0} exceeds the limit of {1} sequences (kMaxBatch)",
                              batch, kMaxBatch));
  if (microbatches < 1 || batch % microbatches != 0)
    return fail(llvm::formatv("--micro-batches must be >= 1 and divide --batch ({0}), got {1}",
                              int(batch), microbatches));
  if (evalEvery < 0 || evalSequences < 1)
    return fail("--eval-every must be >= 0 and --eval-sequences >= 1");
  if (threads < 0 || threads > PFRT_MAX_THREADS)
    return fail(llvm::formatv("--num-threads {0} must be in [0, {1}] (PFRT_MAX_THREADS)",
                              threads, PFRT_MAX_THREADS));
  auto corpus = loadCorpus();
  if (!corpus)
    return fail(llvm::toString(corpus.takeError()));
  if (pipelineSpec.empty() && (!traceFile.empty() || !svgFile.empty()))
    return fail("--trace and --svg record a pipelined run: they need --pipeline");
  if (training.kfacWindow < 0 || (training.kfacWindow > 0 &&
                                   (!training.kfac || training.precondition.refreshWarmup < 1)))
    return fail(llvm::formatv("--kfac-window {0}: needs --kfac, a window of >= 1 step and "
                              "--kfac-refresh-warmup >= 1 (the warm-up steps invert every step; "
                              "got {1})",
                              training.kfacWindow, training.precondition.refreshWarmup));
  if (training.kfacFactorEvery < 1 ||
      (training.kfacFactorEvery > 1 && (!training.kfac || training.kfacWindow > 0)))
    return fail(llvm::formatv("--kfac-factor-every {0}: needs >= 1 and, above 1, --kfac "
                              "without --kfac-window (whose windows decide the factor steps)",
                              training.kfacFactorEvery));
  if (evalEvery > 0) {
    if (evalSequences < batch || evalSequences + batch > corpus->rows)
      return fail(llvm::formatv("--eval-sequences {0} must hold at least one batch ({1}) and "
                                "leave at least one batch of the corpus' {2} sequences to "
                                "train on",
                                int(evalSequences), int(batch), corpus->rows));
    corpus->trainRows = corpus->rows - evalSequences;
  }
  if (pipelineSpec.empty())
    if (auto err = prepareDampingSchedule(training.kfacWindow > 0))
      return fail(llvm::toString(std::move(err)));
  if (auto err = prepareIntervalSchedule())
    return fail(llvm::toString(std::move(err)));
  if (!pipelineSpec.empty()) {
    if (training.kfac && dampingSchedule == DampingSchedule::Adaptive)
      return fail("--kfac-damping-schedule adaptive is single-process K-FAC for now: its "
                  "quadratic model needs every K-FAC layer's update, gradient and factors in "
                  "one process (give a fixed schedule with --pipeline)");
    if (training.kfacWindow > 0)
      return fail("--kfac-window is single-process K-FAC with a pipeline's arithmetic; a "
                  "pipelined run takes --pipeline \"... kfac=bubbles refresh=K\"");
    // The head's and the LayerNorms' factors are no encoder block's linear,
    // the unit the stages and the K-FAC placements split by.
    if (training.kfac && training.insertKFAC.layers != mlir::pf::KfacLayers::Encoder)
      return fail("--kfac-layers encoder-and-head is single-process K-FAC for now: a "
                  "pipelined run (--pipeline) preconditions the encoder blocks only (give "
                  "--kfac-layers encoder)");
    if (training.kfac && training.insertKFAC.layerNorm != mlir::pf::KfacLayerNorm::None)
      return fail(llvm::Twine("--kfac-layer-norm ") +
                  (training.insertKFAC.layerNorm == mlir::pf::KfacLayerNorm::Diagonal ? "diagonal"
                                                                                      : "blocks") +
                  " is single-process K-FAC for now: a pipelined run (--pipeline) "
                  "preconditions the encoder blocks' linears only (give --kfac-layer-norm none)");
    if (training.kfac && training.insertKFAC.embeddings != mlir::pf::KfacEmbeddings::None)
      return fail(llvm::Twine("--kfac-embeddings ") +
                  (training.insertKFAC.embeddings == mlir::pf::KfacEmbeddings::Word
                       ? "word"
                       : "word-and-position") +
                  " is single-process K-FAC for now: a pipelined run (--pipeline) "
                  "preconditions the encoder blocks' linears only (give --kfac-embeddings "
                  "none)");
    return trainPipeline(*corpus, stepFlags, argc, argv);
  }
  KfacWindowRule window{training.precondition.refreshWarmup, training.kfacWindow};
  checkpointKfacWindow = training.kfacWindow;

  DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, func::FuncDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, LLVM::LLVMDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    return drv::printDiagnostic(diag, modelFile);
  });
  mlir::pf::ONNXImportOptions importOptions;
  importOptions.dimValues["batch"] = batch / microbatches;
  importOptions.dimValues["sequence"] = corpus->seqLen;
  OwningOpRef<ModuleOp> module = mlir::pf::importONNXFile(modelFile, &context, importOptions);
  if (!module)
    return 1;

  auto start = std::chrono::steady_clock::now();
  PassManager pm(&context);
  mlir::pf::buildGraphOptPipeline(pm, graphOptions());
  mlir::pf::buildTrainingPipeline(pm, training);
  if (failed(pm.run(*module)))
    return fail("building the training step failed");
  recordOnnxNames(*module);
  // The K-FAC layers whose update the adaptive damping schedule measures
  // (read before compiling, which lowers the parameters away).
  const bool adaptiveDamping = training.kfac && dampingSchedule == DampingSchedule::Adaptive;
  std::vector<drv::KfacModelLayer> modelLayers;
  if (adaptiveDamping) {
    modelLayers = drv::kfacModelLayers(*module);
    if (modelLayers.empty())
      return fail("--kfac-damping-schedule adaptive: the training step has no K-FAC layer");
  }
  if (!emitStepFile.empty())
    if (auto err = drv::writeModuleFile(*module, emitStepFile, "--emit-step"))
      return fail(llvm::toString(std::move(err)));

  drv::CompiledModel::Options options;
  options.threads = threads;
  options.ownParameters = true;
  useDevice(options);
  auto compiled = drv::CompiledModel::compile(*module, options);
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  drv::CompiledModel &model = **compiled;
  std::unique_ptr<drv::CompiledModel> evalModel;
  if (evalEvery > 0 || adaptiveDamping) {
    auto built = compileEvaluation(context, corpus->seqLen);
    if (!built)
      return fail(llvm::toString(built.takeError()));
    evalModel = std::move(*built);
  }
  double buildSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TrainedWeights trainedWeights;
  for (const auto &p : model.parameters())
    trainedWeights[p.name] = p;
  WeightLookup fromModel = [&](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = trainedWeights.find(name);
    if (it == trainedWeights.end())
      return {nullptr, 0};
    return {it->second.data, it->second.bytes};
  };
  auto evaluateAt = [&](int64_t step) -> bool {
    if (auto err = model.copyParametersToHost()) {
      fail(llvm::toString(std::move(err)));
      return false;
    }
    auto loss = evaluate(*corpus, fromModel, *evalModel);
    if (!loss) {
      fail(llvm::toString(loss.takeError()));
      return false;
    }
    llvm::outs() << llvm::formatv("eval  {0,5}  loss {1,8:F4}  ({2} held-out sequences)\n",
                                  step, *loss,
                                  (corpus->rows - corpus->trainRows) / batch * batch);
    llvm::outs().flush();
    return true;
  };

  int64_t first = 1;
  if (!resumeFile.empty()) {
    auto resumed = loadCheckpoint(model.parameters(), *corpus);
    if (!resumed)
      return fail(llvm::toString(resumed.takeError()));
    if (auto err = model.copyParametersToBackend())
      return fail(llvm::toString(std::move(err)));
    first = *resumed + 1;
    llvm::outs() << "resumed from " << resumeFile << " after step " << *resumed << "\n";
  }
  llvm::outs() << llvm::formatv("training {0}: {1} parameters tensors, batch {2} x {3}, "
                                "optimizer {4}{5}, step built in {6:F2} s\n",
                                modelFile, model.parameters().size(), int(batch),
                                corpus->seqLen, stepFlags.valueText("optimizer"),
                                training.kfac ? " + K-FAC" : "",
                                buildSeconds);
  drv::catchStopSignals();

  std::map<std::string, drv::NpyArray> outputs;
  auto windowStart = std::chrono::steady_clock::now();
  int64_t windowTokens = 0, windowSteps = 0, last = first - 1;
  std::set<std::string> nonFiniteFactors; // named once (reportNonFiniteFactors)
  if (evalEvery > 0 && !evaluateAt(first - 1))
    return 1;
  for (int64_t step = first; step <= steps && !drv::stopRequested(); ++step) {
    auto inputs = makeBatch(*corpus, step);
    inputs["lr"] = scalar<double>(11, learningRate(step));
    if (training.precondition.dampingInput)
      inputs["kfac_damping"] = scalar<double>(11, kfacDamping(step));
    adaptive.stepDamping = kfacDamping(step);
    // Adaptive damping: the weights before an adapting step's update.
    const bool adapts = adaptiveDamping && step % dampingAdaptation.interval == 0;
    WeightCopies before;
    if (adapts) {
      auto start = std::chrono::steady_clock::now();
      auto copies = copyEvaluationWeights(model, trainedWeights, *evalModel);
      if (!copies)
        return fail(llvm::formatv("step {0}: {1}", step, llvm::toString(copies.takeError())));
      before = std::move(*copies);
      adaptive.modelSeconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    inputs["step"] = scalar<int64_t>(7, step);
    if (window.steps > 0) {
      inputs["kfac_curvature"] = scalar<int64_t>(7, window.gathersCurvature(step));
      inputs["kfac_refresh"] = scalar<int64_t>(7, window.refreshesPrevious(step));
    } else if (training.kfacFactorEvery > 1 || training.precondition.curvatureInput) {
      inputs["kfac_curvature"] = scalar<int64_t>(7, updatesFactors(step));
    }
    if (training.precondition.refreshInput) {
      inputs["kfac_refresh_due"] = scalar<int64_t>(7, refreshesInverses(step));
    }
    if (auto err = model.run(inputs, outputs))
      return fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
    float loss;
    std::memcpy(&loss, outputs["loss"].data.data(), sizeof(float));
    last = step;
    windowTokens += int64_t(batch) * corpus->seqLen;
    ++windowSteps;
    if (!std::isfinite(loss))
      return fail(llvm::formatv("step {0}: the loss is {1}; lower --lr", step, loss));
    if (adapts)
      if (auto err = adaptDamping(step, loss, *corpus, model, trainedWeights, *evalModel,
                                  modelLayers, before, outputs, step % logEvery == 0))
        return fail(llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(err))));
    if (auto issues = outputs.find("kfac/issues"); issues != outputs.end()) {
      int32_t count;
      std::memcpy(&count, issues->second.data.data(), sizeof(count));
      if (count != 0) {
        llvm::outs() << llvm::formatv("step {0}: K-FAC: {1} inverse refresh(es) needed more "
                                      "damping or kept the previous inverse\n",
                                      step, count);
        if (auto err = model.copyParametersToHost())
          return fail(llvm::toString(std::move(err)));
        reportNonFiniteFactors(step, model.parameters(), nonFiniteFactors);
      }
    }
    if (step % logEvery == 0 || step == steps || step == first) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      llvm::outs() << llvm::formatv("step {0,5}  loss {1,8:F4}  lr {2:E2}  tokens/s {3,8:F0}  "
                                    "ms/step {4,7:F1}{5}\n",
                                    step, loss, learningRate(step), windowTokens / seconds,
                                    1e3 * seconds / windowSteps,
                                    dampingColumn(step) + intervalColumn(step))
                          .str(); // one write: other ranks' lines interleave by write
      llvm::outs().flush();
      windowStart = std::chrono::steady_clock::now();
      windowTokens = windowSteps = 0;
    }
    if (evalEvery > 0 && (step % evalEvery == 0 || step == steps)) {
      auto evalStart = std::chrono::steady_clock::now();
      if (!evaluateAt(step))
        return 1;
      windowStart += std::chrono::steady_clock::now() - evalStart; // ms/step: training only
    }
    if (!checkpointFile.empty() && checkpointEvery > 0 && step % checkpointEvery == 0)
      if (auto err = saveCheckpoint(model, *corpus, step))
        return fail(llvm::toString(std::move(err)));
  }
  if (adaptive.adaptations > 0)
    llvm::outs() << llvm::formatv(
        "K-FAC adaptive damping: {0} adaptation(s), {1:F1} ms each "
        "({2:F1} ms the forward pass on the step's batch, {3:F1} ms "
        "weight copies and the quadratic model); damping now {4:E3}\n",
        adaptive.adaptations,
        1e3 * (adaptive.forwardSeconds + adaptive.modelSeconds) / double(adaptive.adaptations),
        1e3 * adaptive.forwardSeconds / double(adaptive.adaptations),
        1e3 * adaptive.modelSeconds / double(adaptive.adaptations), adaptive.damping);
  const bool interrupted = last < steps && drv::stopRequested();
  if (interrupted && checkpointFile.empty())
    checkpointFile = "pf-train.checkpoint.npz";
  if (!checkpointFile.empty()) {
    if (auto err = saveCheckpoint(model, *corpus, last))
      return fail(llvm::toString(std::move(err)));
    llvm::outs() << "checkpoint after step " << last << ": " << checkpointFile << "\n";
  }
  return interrupted ? 130 : 0;
}
