//===- StageProgram.cpp - run a module's pipeline stages in one process ----===//
#include "pf/PipelineRuntime/StageProgram.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>

using namespace mlir;
using namespace mlir::pf::driver;

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string forwardName(int64_t s) { return "stage" + std::to_string(s) + "_forward"; }
std::string backwardName(int64_t s) { return "stage" + std::to_string(s) + "_backward"; }
/// The halves of pf-split-stages{split-backward}, in place of backwardName.
std::string backwardInputName(int64_t s) { return backwardName(s) + "_input"; }
std::string backwardWeightName(int64_t s) { return backwardName(s) + "_weight"; }

using Values = std::map<std::string, NpyArray>;

template <typename T> void addInto(NpyArray &acc, const NpyArray &part) {
  T *a = reinterpret_cast<T *>(acc.data.data());
  const T *b = reinterpret_cast<const T *>(part.data.data());
  for (int64_t i = 0, n = acc.numElements(); i < n; ++i)
    a[i] = a[i] + b[i];
}

/// acc (+)= c·x; the product is rounded before the sum, as the
/// pf.mul + pf.add of pf-split-microbatches (no contraction into an FMA).
/// acc = c·x (first) or acc + c·x, the product rounded before the sum
/// (this file is compiled with -ffp-contract=off: no FMA), as
/// pf-split-microbatches' mul then add.
template <typename T> void addScaled(NpyArray &acc, const NpyArray &x, T c, bool first) {
  T *a = reinterpret_cast<T *>(acc.data.data());
  const T *v = reinterpret_cast<const T *>(x.data.data());
  const int64_t n = acc.numElements();
  if (first) {
    for (int64_t i = 0; i < n; ++i)
      a[i] = v[i] * c;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    a[i] = a[i] + v[i] * c;
}

template <typename T> void divideBy(NpyArray &acc, T d) {
  T *a = reinterpret_cast<T *>(acc.data.data());
  for (int64_t i = 0, n = acc.numElements(); i < n; ++i)
    a[i] = a[i] / d;
}

bool isFloat(const NpyArray &a) { return a.dtype == PFRT_F32 || a.dtype == PFRT_F64; }
bool isF32(const NpyArray &a) { return a.dtype == PFRT_F32; }

} // namespace

llvm::Expected<NpyArray>
mlir::pf::driver::weightedMicrobatchSum(const std::string &name,
                                        const std::vector<const NpyArray *> &pieces,
                                        const std::vector<int64_t> &counts) {
  if (pieces.empty() || pieces.size() != counts.size())
    return error("'" + name + "': " + std::to_string(pieces.size()) + " micro-batch values for " +
                 std::to_string(counts.size()) + " token counts");
  int64_t total = 0;
  for (int64_t c : counts)
    total += c;
  if (total == 0)
    total = 1;
  auto present = llvm::find_if(pieces, [](const NpyArray *piece) { return piece != nullptr; });
  if (present == pieces.end())
    return error("'" + name + "': no micro-batch's value to sum");
  NpyArray acc = **present;
  if (!isFloat(acc))
    return error("'" + name + "' is " + dtypeName(acc.dtype) + ", not a float tensor");
  bool f32 = isF32(acc);
  bool first = true;
  for (auto [m, piece] : llvm::enumerate(pieces)) {
    if (!piece)
      continue;
    if (piece->shape != acc.shape || piece->dtype != acc.dtype)
      return error("micro-batches return '" + name + "' with different shapes");
    if (f32)
      addScaled<float>(acc, *piece, float(counts[m]), first);
    else
      addScaled<double>(acc, *piece, double(counts[m]), first);
    first = false;
  }
  if (f32)
    divideBy<float>(acc, float(total));
  else
    divideBy<double>(acc, double(total));
  return acc;
}

llvm::Expected<std::vector<std::string>>
mlir::pf::driver::stageFunctionNames(ModuleOp module) {
  auto hasBody = [&](const std::string &name) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    return func && !func.isExternal();
  };
  std::vector<std::string> names;
  int64_t stages = 0;
  for (; hasBody(forwardName(stages)); ++stages) {
    int64_t s = stages;
    names.push_back(forwardName(s));
    if (hasBody(backwardName(s))) {
      names.push_back(backwardName(s));
    } else if (hasBody(backwardInputName(s)) && hasBody(backwardWeightName(s))) {
      names.push_back(backwardInputName(s));
      names.push_back(backwardWeightName(s));
    } else {
      return error("stage " + std::to_string(s) + " has " + forwardName(s) + " but no " +
                   backwardName(s) + " (nor " + backwardInputName(s) + " and " +
                   backwardWeightName(s) + ")");
    }
  }
  if (names.empty())
    return error("the module has no stage functions (stage0_forward, stage0_backward, ...): "
                 "run pf-split-stages first");
  for (const std::string &backward :
       {backwardName(stages), backwardInputName(stages), backwardWeightName(stages)})
    if (hasBody(backward))
      return error(backward + " has no " + forwardName(stages));
  return names;
}

llvm::Error mlir::pf::driver::runStages(CompiledProgram &program, const Values &inputs,
                                        const StageRunOptions &options, Values &outputs,
                                        StageRunStats &stats) {
  const int64_t M = options.microbatches;
  if (M < 1)
    return error("micro-batches must be >= 1");
  auto hasBackward = [&](int64_t s) {
    return program.hasEntry(backwardName(s)) ||
           (program.hasEntry(backwardInputName(s)) && program.hasEntry(backwardWeightName(s)));
  };
  int64_t D = 0;
  while (program.hasEntry(forwardName(D)) && hasBackward(D))
    ++D;
  if (D == 0)
    return error("the program has no compiled stage functions (stage0_forward, ...)");
  for (const auto &[name, array] : inputs)
    if (isStageValue(name))
      return error("input '" + name + "' is a stage value, not a graph input");
  stats = StageRunStats();
  stats.stages = D;
  stats.microbatches = M;
  for (int64_t s = 0; s < D; ++s) {
    int64_t bytes = 0, relayed = 0;
    const std::vector<TensorSpec> &args = program.inputs(forwardName(s));
    for (const TensorSpec &spec : program.outputs(forwardName(s))) {
      StringRef name(spec.name);
      if (!name.consume_front(mlir::pf::kSavedPrefix))
        continue;
      int64_t n = 1;
      for (int64_t d : spec.shape)
        n *= d;
      bytes += n * dtypeBytes(spec.dtype);
      // saved/<id> of an act/<id> argument is that argument's value.
      std::string act = (mlir::pf::kActivationPrefix + name).str();
      if (llvm::any_of(args, [&](const TensorSpec &a) { return a.name == act; }))
        relayed += n * dtypeBytes(spec.dtype);
    }
    stats.slotBytes.push_back(bytes);
    stats.slotArgumentBytes.push_back(relayed);
    stats.totalSlotBytes += M * bytes;
  }

  // Forwards: all micro-batches, stage 0..D-1 each. saved[m][s] is micro-batch
  // m's activation slot on stage s.
  std::vector<std::vector<Values>> saved(M, std::vector<Values>(D));
  std::vector<NpyArray> losses(M);
  for (int64_t m = 0; m < M; ++m) {
    Values acts;
    for (int64_t s = 0; s < D; ++s) {
      std::string function = forwardName(s);
      auto args = stageCallInputs(program.inputs(function), function, inputs, acts, m, M,
                                  options.ignoreIndex);
      if (!args)
        return error(args.error());
      Values results;
      if (auto err = program.run(function, *args, results))
        return err;
      acts.clear();
      for (auto &[name, value] : results) {
        StringRef n(name);
        if (n.starts_with(mlir::pf::kActivationPrefix))
          acts[name] = std::move(value);
        else if (n.starts_with(mlir::pf::kSavedPrefix))
          saved[m][s][name] = std::move(value);
        else if (n == "loss" && s == D - 1)
          losses[m] = std::move(value);
        else
          return error("unexpected result '" + name + "' of " + function);
      }
    }
    if (losses[m].data.empty())
      return error(forwardName(D - 1) + " returns no 'loss'");
  }

  // Backwards: micro-batch by micro-batch, stage D-1..0; a split backward
  // runs its input half, then its weight half (which reads the stage's
  // saved/* and grad_act/* too, and the input half's wsaved/*). parts[s]
  // holds the gradients stage s returns.
  std::vector<std::map<std::string, NpyArray>> gradients(M);
  for (int64_t m = 0; m < M; ++m) {
    Values gradActs;
    std::vector<Values> parts(D);
    for (int64_t s = D - 1; s >= 0; --s) {
      Values handed = std::move(saved[m][s]);
      for (auto &[name, value] : gradActs)
        handed[name] = std::move(value);
      gradActs.clear();
      auto runBackward = [&](const std::string &function, bool inputHalf) -> llvm::Error {
        auto args = stageCallInputs(program.inputs(function), function, inputs, handed, m, M,
                                    options.ignoreIndex);
        if (!args)
          return error(args.error());
        Values results;
        if (auto err = program.run(function, *args, results))
          return err;
        for (auto &[name, value] : results) {
          StringRef n(name);
          if (n.starts_with(mlir::pf::kActivationGradientPrefix) && s > 0)
            gradActs[name] = std::move(value);
          else if (n.starts_with(mlir::pf::kWeightSavedPrefix) && inputHalf)
            handed[name] = std::move(value);
          else if (n.starts_with("grad/") && isFloat(value))
            parts[s][name] = std::move(value);
          else
            return error("unexpected result '" + name + "' of " + function);
        }
        return llvm::Error::success();
      };
      if (program.hasEntry(backwardName(s))) {
        if (auto err = runBackward(backwardName(s), false))
          return err;
      } else {
        if (auto err = runBackward(backwardInputName(s), true))
          return err;
        if (auto err = runBackward(backwardWeightName(s), false))
          return err;
      }
    }
    // A parameter read by several stages: its parts in stage order.
    for (int64_t s = 0; s < D; ++s)
      for (auto &[name, value] : parts[s]) {
        auto [it, added] = gradients[m].try_emplace(name, std::move(value));
        if (added)
          continue;
        if (it->second.shape != value.shape || it->second.dtype != value.dtype)
          return error("stages return '" + name + "' with different shapes or dtypes");
        if (isF32(value))
          addInto<float>(it->second, value);
        else
          addInto<double>(it->second, value);
      }
  }

  if (M == 1) {
    outputs = std::move(gradients[0]);
    outputs["loss"] = std::move(losses[0]);
    return llvm::Error::success();
  }
  // Σ_m c_m·x_m / Σ c_m, in micro-batch order (pf-split-microbatches' WeightedSum).
  auto counts = microbatchTokenCounts(inputs, M, options.ignoreIndex);
  if (!counts)
    return error(counts.error());
  stats.tokenCounts = *counts;
  outputs.clear();
  std::vector<const NpyArray *> pieces;
  for (const NpyArray &loss : losses)
    pieces.push_back(&loss);
  auto loss = weightedMicrobatchSum("loss", pieces, *counts);
  if (!loss)
    return loss.takeError();
  outputs["loss"] = std::move(*loss);
  for (const auto &[name, first] : gradients[0]) {
    pieces.clear();
    for (int64_t m = 0; m < M; ++m) {
      auto it = gradients[m].find(name);
      if (it == gradients[m].end())
        return error("micro-batch " + std::to_string(m) + " returns no '" + name + "'");
      pieces.push_back(&it->second);
    }
    auto sum = weightedMicrobatchSum(name, pieces, *counts);
    if (!sum)
      return sum.takeError();
    outputs[name] = std::move(*sum);
  }
  return llvm::Error::success();
}

int mlir::pf::driver::runStagesTool(ModuleOp module, const std::string &inputsFile,
                                    const std::string &outputsFile, int64_t microbatches,
                                    int threads) {
  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "pf-run: error: " << message << "\n";
    return 1;
  };
  if (inputsFile.empty())
    return fail("--run-stages needs --inputs FILE.npz");
  auto functions = stageFunctionNames(module);
  if (!functions)
    return fail("--run-stages: " + llvm::toString(functions.takeError()));
  auto inputs = readNpz(inputsFile);
  if (!inputs)
    return fail(inputs.error());
  CompiledProgram::Options options;
  options.threads = threads;
  options.functions = *functions;
  auto program = CompiledProgram::compile(module, options);
  if (!program)
    return fail(llvm::toString(program.takeError()));
  StageRunOptions runOptions;
  runOptions.microbatches = microbatches;
  Values outputs;
  StageRunStats stats;
  if (auto err = runStages(**program, *inputs, runOptions, outputs, stats))
    return fail(llvm::toString(std::move(err)));

  llvm::outs() << llvm::formatv("stages {0}, micro-batches {1} (GPipe order), parameters "
                                "{2}, arena {3} bytes\n",
                                stats.stages, stats.microbatches,
                                (*program)->parameters().size(), (*program)->arenaBytes());
  for (auto [s, bytes] : llvm::enumerate(stats.slotBytes))
    llvm::outs() << llvm::formatv("stage {0}: activation slot {1} bytes ({2} of them copies of "
                                  "act/* arguments), {3} slots\n",
                                  s, bytes, stats.slotArgumentBytes[s], stats.microbatches);
  llvm::outs() << "activation slots: " << stats.totalSlotBytes << " bytes\n";
  for (const auto &[name, array] : outputs)
    llvm::outs() << outputSummary(name, array);
  if (!outputsFile.empty())
    if (::pf::Status written = writeNpz(outputsFile, outputs); !written.ok())
      return fail(written.message());
  return 0;
}
