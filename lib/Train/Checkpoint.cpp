//===- Checkpoint.cpp - A run's checkpoints -------------------------------===//
#include "pf/Train/Checkpoint.h"

#include "pf/Dialect/PF/IR/PFAttrNames.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Train/Schedules.h"
#include "pf/Train/TrainConfig.h"

#include "llvm/ADT/StringSet.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

bool train::isPendingInverse(llvm::StringRef name) {
  // <w>.kfac.A_inv_next, or in the eigenbasis .A_vectors_next, .A_values_next
  // (pf-kfac-precondition's pf.kfac_pending parameters).
  return name.contains(".kfac.") && name.ends_with("_next");
}

Batch train::stateArrays(const Parameters &parameters) {
  Batch arrays;
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

void Checkpoints::recordOnnxNames(ModuleOp module) {
  for (auto param : module.getOps<ParamOp>()) {
    std::string name = param.getSymName().str();
    if (auto onnxName = param->getAttrOfType<StringAttr>(kOnnxNameAttrName))
      onnxNameEntries["meta/onnx_name/" + name] = onnxName.str();
    if (auto copies = param->getAttrOfType<ArrayAttr>(kOnnxTransposedCopiesAttrName))
      for (auto copy : copies.getAsValueRange<StringAttr>())
        onnxNameEntries["meta/transposed_copy/" + copy.str()] = name;
  }
}

llvm::Error Checkpoints::write(Batch arrays, int64_t step, const std::string &path) const {
  // Names as UTF-8 bytes (int8, which readNpz knows): NumPy reads them
  // without pickling.
  for (const auto &[key, name] : onnxNameEntries) {
    drv::NpyArray bytes;
    bytes.dtype = 3;
    bytes.shape = {int64_t(name.size())};
    bytes.data.assign(name.begin(), name.end());
    arrays[key] = std::move(bytes);
  }
  const TrainingOptions &training = config.training;
  arrays["meta/format_version"] = scalar<int64_t>(7, kCheckpointFormatVersion);
  arrays["meta/step"] = scalar<int64_t>(7, step);
  arrays["meta/seed"] = scalar<int64_t>(7, int64_t(config.seed));
  arrays["meta/train_rows"] = scalar<int64_t>(7, corpus.trainRows);
  arrays["meta/corpus_hash"] = scalar<int64_t>(7, int64_t(corpus.hash));
  arrays["meta/kfac"] = scalar<int64_t>(7, training.kfac ? 1 : 0);
  // The adaptive schedule's λ depends on the run's history, not on the step.
  if (training.kfac && damping.adaptive())
    arrays["meta/kfac_damping"] = scalar<double>(PFRT_F64, damping.damping);
  if (kfacWindow > 0)
    arrays["meta/kfac_window"] = scalar<int64_t>(7, kfacWindow);
  if (!kfacPlacement.empty()) {
    drv::NpyArray placement;
    placement.dtype = 7;
    placement.shape = {int64_t(kfacPlacement.size() / 4), 4};
    placement.data.resize(kfacPlacement.size() * sizeof(int64_t));
    std::memcpy(placement.data.data(), kfacPlacement.data(), placement.data.size());
    arrays["meta/kfac_placement"] = std::move(placement);
  }
  // writeNpz writes a temporary file and renames it: a crash mid-write
  // leaves the previous checkpoint.
  return drv::writeNpz(path, arrays);
}

/// When K-FAC state `name` is missing from a checkpoint that has its layer's
/// state of the other basis (`.A_inv` for `.A_vectors`, and back), that
/// basis' --kfac-basis value.
static std::optional<std::string> otherKfacBasis(const Batch &arrays, llvm::StringRef name) {
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

llvm::Expected<int64_t> Checkpoints::load(const Parameters &parameters, Coverage &coverage) {
  const std::string &resumeFile = config.resumeFile;
  const TrainingOptions &training = config.training;
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
  if (*step >= config.steps)
    return error(llvm::formatv("is after step {0} and --steps is {1}: nothing is left to train "
                               "(give a larger --steps)",
                               *step, config.steps)
                     .str());
  // Batches and masks are functions of (seed, step) over the training rows,
  // and the state's meaning depends on K-FAC: resuming with any of them
  // changed would silently train another run.
  auto savedSeed = meta("seed");
  if (!savedSeed)
    return savedSeed.takeError();
  if (uint64_t(*savedSeed) != config.seed)
    return error(llvm::formatv("was trained with --seed {0}, this run has --seed {1}",
                               uint64_t(*savedSeed), config.seed)
                     .str());
  auto rows = meta("train_rows");
  if (!rows)
    return rows.takeError();
  if (*rows != corpus.trainRows)
    return error(llvm::formatv("was trained on {0} corpus sequences, this run on {1} (use the "
                               "same --eval-every/--eval-sequences)",
                               *rows, corpus.trainRows)
                     .str());
  auto corpusHash = meta("corpus_hash");
  if (!corpusHash)
    return corpusHash.takeError();
  if (uint64_t(*corpusHash) != corpus.hash)
    return error("was trained on another corpus than " + config.corpusFile +
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
  if (savedWindow != kfacWindow && kfacWindow >= 0)
    return error(llvm::formatv("was trained with K-FAC windows of {0} step(s), this run has {1} "
                               "(0: none; give the same --kfac-window or refresh=)",
                               savedWindow, kfacWindow)
                     .str());
  if (training.kfac && damping.adaptive()) {
    auto saved = arrays->find("meta/kfac_damping");
    if (saved == arrays->end()) {
      llvm::outs() << resumeFile << " holds no adaptive damping (meta/kfac_damping): λ starts "
                   << "from --kfac-damping\n";
    } else if (saved->second.dtype != PFRT_F64 || saved->second.numElements() != 1) {
      return error(llvm::Twine("meta/kfac_damping must be one float64 value, not ") +
                   drv::dtypeName(saved->second.dtype) + " of shape " +
                   drv::shapeText(saved->second.shape));
    } else {
      double savedDamping;
      std::memcpy(&savedDamping, saved->second.data.data(), sizeof(double));
      if (!(savedDamping > 0) || !std::isfinite(savedDamping))
        return error(
            llvm::formatv("meta/kfac_damping is {0}, not a damping", savedDamping).str());
      // Within this run's bounds, as every adaptation keeps it.
      damping.damping = damping.stepDamping = std::clamp(
          savedDamping, config.dampingAdaptation.min, config.dampingAdaptation.max);
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
  // Which state entries this process read: one a run does not have at all
  // means the checkpoint belongs to another model (another parameter) or
  // another optimizer (another state, e.g. AdamW's moments resumed into
  // SGD), whose training this run would not continue (checkCovered, after
  // the ranks of a pipeline added theirs).
  llvm::StringSet<> names;
  for (const auto &p : parameters)
    names.insert(p.name);
  coverage = Coverage{};
  for (const auto &[key, value] : *arrays) { // std::map: name order
    llvm::StringRef name(key);
    if (!name.consume_front("param/") || isPendingInverse(name))
      continue;
    coverage.names.push_back(name.str());
    coverage.loaded.push_back(names.contains(name) ? 1.0 : 0.0);
  }
  return *step;
}

llvm::Error Checkpoints::checkCovered(const Coverage &coverage) const {
  for (size_t i = 0; i < coverage.names.size(); ++i)
    if (coverage.loaded[i] == 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          config.resumeFile + ": holds '" + coverage.names[i] +
              "', which this run does not have: it was written by another model, optimizer "
              "or K-FAC configuration");
  return llvm::Error::success();
}

llvm::Expected<std::vector<int64_t>> Checkpoints::savedKfacPlacement(int64_t &steps) const {
  const std::string &resumeFile = config.resumeFile;
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
