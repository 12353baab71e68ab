//===- Checkpoint.cpp - A run's checkpoints -------------------------------===//
#include "pf/Train/Checkpoint.h"

#include "pf/Runtime/pfrt.h"
#include "pf/Train/Schedules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

static bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool train::isPendingInverse(const std::string &name) {
  // <w>.kfac.A_inv_next, or in the eigenbasis .A_vectors_next, .A_values_next
  // (pf-kfac-precondition's pf.kfac_pending parameters).
  return name.find(".kfac.") != std::string::npos && endsWith(name, "_next");
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

::pf::Status Checkpoints::write(Batch arrays, int64_t step, const std::string &path) const {
  // Names as UTF-8 bytes (int8, which readNpz knows): NumPy reads them
  // without pickling.
  for (const auto &[key, name] : onnxNameEntries) {
    drv::NpyArray bytes;
    bytes.dtype = 3;
    bytes.shape = {int64_t(name.size())};
    bytes.data.assign(name.begin(), name.end());
    arrays[key] = std::move(bytes);
  }
  const StepFacts &training = config.step;
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
static std::optional<std::string> otherKfacBasis(const Batch &arrays, const std::string &name) {
  size_t at = name.rfind(".kfac.");
  if (at == std::string::npos)
    return std::nullopt;
  std::string layer = "param/" + name.substr(0, at + 6);
  bool eigenHere = endsWith(name, "_vectors") || endsWith(name, "_values");
  if (eigenHere && arrays.count(layer + "A_inv"))
    return "inverse";
  if (!eigenHere && arrays.count(layer + "A_vectors"))
    return "eigen";
  return std::nullopt;
}

::pf::Expected<int64_t> Checkpoints::load(const Parameters &parameters, Coverage &coverage) {
  const std::string &resumeFile = config.resumeFile;
  const StepFacts &training = config.step;
  auto arrays = drv::readNpz(resumeFile);
  if (!arrays)
    return arrays.status();
  auto error = [&](const std::string &message) {
    return ::pf::Status::error(resumeFile + ": " + message);
  };
  if (!arrays->count("meta/step"))
    return error("not a pf-train checkpoint (no meta/step)");
  // meta/KEY as one int64, or an error naming it.
  auto meta = [&](const std::string &key) -> ::pf::Expected<int64_t> {
    auto it = arrays->find("meta/" + key);
    if (it == arrays->end())
      return error("has no meta/" + key + " (written by an older pf-train? checkpoints "
                   "of format version " + std::to_string(kCheckpointFormatVersion) +
                   " carry it)");
    if (it->second.dtype != 7 || it->second.numElements() != 1)
      return error("meta/" + key + " must be one int64 value, not " +
                   drv::dtypeName(it->second.dtype) + " of shape " +
                   drv::shapeText(it->second.shape));
    return *reinterpret_cast<const int64_t *>(it->second.data.data());
  };
  auto version = meta("format_version");
  if (!version)
    return version.status();
  if (*version != kCheckpointFormatVersion)
    return error(::pf::formatText("is checkpoint format version %lld; this pf-train reads "
                                  "version %lld",
                                  (long long)*version, (long long)kCheckpointFormatVersion));
  auto step = meta("step");
  if (!step)
    return step.status();
  if (*step < 0)
    return error(::pf::formatText("meta/step is %lld, not a step count", (long long)*step));
  if (*step >= config.steps)
    return error(::pf::formatText("is after step %lld and --steps is %d: nothing is left to "
                                  "train (give a larger --steps)",
                                  (long long)*step, config.steps));
  // Batches and masks are functions of (seed, step) over the training rows,
  // and the state's meaning depends on K-FAC: resuming with any of them
  // changed would silently train another run.
  auto savedSeed = meta("seed");
  if (!savedSeed)
    return savedSeed.status();
  if (uint64_t(*savedSeed) != config.seed)
    return error(::pf::formatText("was trained with --seed %llu, this run has --seed %llu",
                                  (unsigned long long)*savedSeed,
                                  (unsigned long long)config.seed));
  auto rows = meta("train_rows");
  if (!rows)
    return rows.status();
  if (*rows != corpus.trainRows)
    return error(::pf::formatText("was trained on %lld corpus sequences, this run on %lld (use "
                                  "the same --eval-every/--eval-sequences)",
                                  (long long)*rows, (long long)corpus.trainRows));
  auto corpusHash = meta("corpus_hash");
  if (!corpusHash)
    return corpusHash.status();
  if (uint64_t(*corpusHash) != corpus.hash)
    return error("was trained on another corpus than " + config.corpusFile +
                 " (the token hashes differ)");
  auto kfac = meta("kfac");
  if (!kfac)
    return kfac.status();
  if ((*kfac != 0) != training.kfac)
    return error(::pf::formatText("was trained %s --kfac, this run %s it",
                                  *kfac ? "with" : "without",
                                  training.kfac ? "has" : "does not have"));
  auto window = arrays->find("meta/kfac_window");
  int64_t savedWindow = window != arrays->end() && window->second.dtype == 7 &&
                                window->second.numElements() == 1
                            ? *reinterpret_cast<const int64_t *>(window->second.data.data())
                            : 0;
  if (savedWindow != kfacWindow && kfacWindow >= 0)
    return error(::pf::formatText("was trained with K-FAC windows of %lld step(s), this run has "
                                  "%lld (0: none; give the same --kfac-window or refresh=)",
                                  (long long)savedWindow, (long long)kfacWindow));
  if (training.kfac && damping.adaptive()) {
    auto saved = arrays->find("meta/kfac_damping");
    if (saved == arrays->end()) {
      std::printf("%s holds no adaptive damping (meta/kfac_damping): λ starts from "
                  "--kfac-damping\n",
                  resumeFile.c_str());
    } else if (saved->second.dtype != PFRT_F64 || saved->second.numElements() != 1) {
      return error(std::string("meta/kfac_damping must be one float64 value, not ") +
                   drv::dtypeName(saved->second.dtype) + " of shape " +
                   drv::shapeText(saved->second.shape));
    } else {
      double savedDamping;
      std::memcpy(&savedDamping, saved->second.data.data(), sizeof(double));
      if (!(savedDamping > 0) || !std::isfinite(savedDamping))
        return error(::pf::formatText("meta/kfac_damping is %.2f, not a damping", savedDamping));
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
  std::set<std::string> names;
  for (const auto &p : parameters)
    names.insert(p.name);
  coverage = Coverage{};
  const std::string prefix = "param/";
  for (const auto &[key, value] : *arrays) { // std::map: name order
    if (key.compare(0, prefix.size(), prefix) != 0)
      continue;
    std::string name = key.substr(prefix.size());
    if (isPendingInverse(name))
      continue;
    coverage.loaded.push_back(names.count(name) ? 1.0 : 0.0);
    coverage.names.push_back(std::move(name));
  }
  return *step;
}

::pf::Status Checkpoints::checkCovered(const Coverage &coverage) const {
  for (size_t i = 0; i < coverage.names.size(); ++i)
    if (coverage.loaded[i] == 0)
      return ::pf::Status::error(
          config.resumeFile + ": holds '" + coverage.names[i] +
          "', which this run does not have: it was written by another model, optimizer or "
          "K-FAC configuration");
  return ::pf::Status::success();
}

::pf::Expected<std::vector<int64_t>> Checkpoints::savedKfacPlacement(int64_t &steps) const {
  const std::string &resumeFile = config.resumeFile;
  auto arrays = drv::readNpz(resumeFile);
  if (!arrays)
    return arrays.status();
  auto window = arrays->find("meta/kfac_window");
  auto placement = arrays->find("meta/kfac_placement");
  if (window == arrays->end() || placement == arrays->end() || window->second.dtype != 7 ||
      placement->second.dtype != 7 || placement->second.shape.size() != 2 ||
      placement->second.shape[1] != 4)
    return ::pf::Status::error(resumeFile + ": resuming after the K-FAC warm-up needs the "
                                            "meta/kfac_window and meta/kfac_placement of a "
                                            "kfac=bubbles run");
  steps = *reinterpret_cast<const int64_t *>(window->second.data.data());
  std::vector<int64_t> values(size_t(placement->second.numElements()));
  std::memcpy(values.data(), placement->second.data.data(), values.size() * sizeof(int64_t));
  return values;
}
