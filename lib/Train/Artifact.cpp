//===- Artifact.cpp - A training artifact's manifest ----------------------===//
#include "pf/Train/Artifact.h"

#include "pf/Runtime/pfrt.h"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sys/stat.h>

using namespace mlir::pf;
using namespace mlir::pf::train;
using nlohmann::json;
using mlir::pf::driver::TensorSpec;

namespace {

json modelJson(const ArtifactModel &model) {
  json parameters = json::array();
  for (const driver::AotParameter &p : model.parameters)
    parameters.push_back({{"name", p.name},
                          {"dtype", p.dtype},
                          {"shape", p.shape},
                          {"offset", p.offset},
                          {"bytes", p.bytes}});
  // The fingerprint as text: JSON readers lose integers above 2^53.
  return {{"library", model.library},
          {"library_bytes", model.libraryBytes},
          {"library_sha256", model.librarySha256},
          {"weights", model.weights},
          {"weights_bytes", model.weightsBytes},
          {"weights_sha256", model.weightsSha256},
          {"fingerprint", std::to_string(model.fingerprint)},
          {"parameters", parameters}};
}

ArtifactModel modelOf(const json &j) {
  ArtifactModel model;
  model.library = j.at("library").get<std::string>();
  model.libraryBytes = j.at("library_bytes").get<int64_t>();
  model.librarySha256 = j.at("library_sha256").get<std::string>();
  model.weights = j.at("weights").get<std::string>();
  model.weightsBytes = j.at("weights_bytes").get<int64_t>();
  model.weightsSha256 = j.at("weights_sha256").get<std::string>();
  model.fingerprint = std::stoull(j.at("fingerprint").get<std::string>());
  for (const json &p : j.at("parameters"))
    model.parameters.push_back({p.at("name").get<std::string>(), p.at("dtype").get<int32_t>(),
                                p.at("shape").get<std::vector<int64_t>>(),
                                p.at("offset").get<int64_t>(), p.at("bytes").get<int64_t>()});
  return model;
}

// The run options as the manifest records them, one name per field.
json runJson(const RunConfig &r) {
  const StepFacts &f = r.step;
  return {{"steps", r.steps},
          {"warmup", r.warmup},
          {"lr", r.lr},
          {"schedule", r.schedule == LRSchedule::Constant ? "constant" : "linear"},
          {"seed", r.seed},
          {"mask_prob", r.maskProbability},
          {"log_every", r.logEvery},
          {"eval_every", r.evalEvery},
          {"eval_sequences", r.evalSequences},
          {"threads", r.threads},
          {"damping_schedule", int(r.dampingSchedule)},
          {"damping_start", r.dampingStart},
          {"damping_decay", r.dampingDecay},
          {"damping_warmup", r.dampingWarmup},
          {"damping_every", r.dampingEvery},
          {"interval_schedule", int(r.intervalSchedule)},
          {"interval_growth", r.intervalGrowth},
          {"interval_every", r.intervalEvery},
          {"interval_max", r.intervalMax},
          {"damping_adaptation",
           {{"interval", r.dampingAdaptation.interval},
            {"decay", r.dampingAdaptation.decay},
            {"min", r.dampingAdaptation.min},
            {"max", r.dampingAdaptation.max}}},
          {"step_facts",
           {{"microbatches", f.microbatches},
            {"predictions", f.predictions},
            {"kfac", f.kfac},
            {"kfac_window", f.kfacWindow},
            {"kfac_factor_every", f.kfacFactorEvery},
            {"refresh_warmup", f.refreshWarmup},
            {"refresh_every", f.refreshEvery},
            {"damping", f.damping},
            {"damping_input", f.dampingInput},
            {"curvature_input", f.curvatureInput},
            {"refresh_input", f.refreshInput}}}};
}

RunConfig runOf(const json &j) {
  RunConfig r;
  r.steps = j.at("steps").get<int>();
  r.warmup = j.at("warmup").get<int>();
  r.lr = j.at("lr").get<double>();
  r.schedule = j.at("schedule").get<std::string>() == "constant" ? LRSchedule::Constant
                                                                 : LRSchedule::Linear;
  r.seed = j.at("seed").get<uint64_t>();
  r.maskProbability = j.at("mask_prob").get<double>();
  r.logEvery = j.at("log_every").get<int>();
  r.evalEvery = j.at("eval_every").get<int>();
  r.evalSequences = j.at("eval_sequences").get<int>();
  r.threads = j.at("threads").get<int>();
  r.dampingSchedule = DampingSchedule(j.at("damping_schedule").get<int>());
  r.dampingStart = j.at("damping_start").get<double>();
  r.dampingDecay = j.at("damping_decay").get<double>();
  r.dampingWarmup = j.at("damping_warmup").get<int64_t>();
  r.dampingEvery = j.at("damping_every").get<int64_t>();
  r.intervalSchedule = IntervalSchedule(j.at("interval_schedule").get<int>());
  r.intervalGrowth = j.at("interval_growth").get<int64_t>();
  r.intervalEvery = j.at("interval_every").get<int64_t>();
  r.intervalMax = j.at("interval_max").get<int64_t>();
  const json &adaptation = j.at("damping_adaptation");
  r.dampingAdaptation.interval = adaptation.at("interval").get<int64_t>();
  r.dampingAdaptation.decay = adaptation.at("decay").get<double>();
  r.dampingAdaptation.min = adaptation.at("min").get<double>();
  r.dampingAdaptation.max = adaptation.at("max").get<double>();
  const json &f = j.at("step_facts");
  StepFacts &s = r.step;
  s.microbatches = f.at("microbatches").get<int64_t>();
  s.predictions = f.at("predictions").get<int64_t>();
  s.kfac = f.at("kfac").get<bool>();
  s.kfacWindow = f.at("kfac_window").get<int64_t>();
  s.kfacFactorEvery = f.at("kfac_factor_every").get<int64_t>();
  s.refreshWarmup = f.at("refresh_warmup").get<int64_t>();
  s.refreshEvery = f.at("refresh_every").get<int64_t>();
  s.damping = f.at("damping").get<double>();
  s.dampingInput = f.at("damping_input").get<bool>();
  s.curvatureInput = f.at("curvature_input").get<bool>();
  s.refreshInput = f.at("refresh_input").get<bool>();
  return r;
}

json specsJson(const std::vector<TensorSpec> &specs) {
  json all = json::array();
  for (const TensorSpec &t : specs)
    all.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape},
                   {"zero_fill", t.zeroFill}});
  return all;
}

std::vector<TensorSpec> specsOf(const json &j) {
  std::vector<TensorSpec> specs;
  for (const json &t : j)
    specs.push_back({t.at("name").get<std::string>(), t.at("dtype").get<int32_t>(),
                     t.at("shape").get<std::vector<int64_t>>(), t.at("zero_fill").get<bool>()});
  return specs;
}

json programJson(const driver::RankProgramTable &p) {
  json sums = json::array();
  for (const driver::ParameterSum &sum : p.parameterSums)
    sums.push_back({{"name", sum.name}, {"ranks", sum.ranks}});
  return {{"name", p.name},
          {"symbol", p.symbol},
          {"window_step", p.windowStep},
          {"window_steps", p.windowSteps},
          {"slots", p.slots},
          {"comm_groups", p.commGroups},
          {"arena_bytes", p.arenaBytes},
          {"live_bytes", p.liveBytes},
          {"saved_microbatches", p.savedMicrobatches},
          {"summed_elsewhere", p.summedElsewhere},
          {"broadcast_here", p.broadcastHere},
          {"all_reduced", p.allReduced},
          {"parameter_sums", sums},
          {"inverse_calls", p.inverseCalls},
          {"computed_inverses", p.computedInverses}};
}

driver::RankProgramTable programOf(const json &j) {
  driver::RankProgramTable p;
  p.name = j.at("name").get<std::string>();
  p.symbol = j.at("symbol").get<std::string>();
  p.windowStep = j.at("window_step").get<int64_t>();
  p.windowSteps = j.at("window_steps").get<int64_t>();
  p.slots = j.at("slots").get<int64_t>();
  p.commGroups = j.at("comm_groups").get<std::vector<std::vector<int64_t>>>();
  p.arenaBytes = j.at("arena_bytes").get<int64_t>();
  p.liveBytes = j.at("live_bytes").get<int64_t>();
  p.savedMicrobatches = j.at("saved_microbatches").get<int64_t>();
  p.summedElsewhere = j.at("summed_elsewhere").get<std::vector<std::string>>();
  p.broadcastHere = j.at("broadcast_here").get<std::vector<std::string>>();
  p.allReduced = j.at("all_reduced").get<std::vector<std::string>>();
  for (const json &sum : j.at("parameter_sums"))
    p.parameterSums.push_back(
        {sum.at("name").get<std::string>(), sum.at("ranks").get<std::vector<int64_t>>()});
  p.inverseCalls = j.at("inverse_calls").get<std::vector<std::string>>();
  p.computedInverses = j.at("computed_inverses").get<std::vector<std::string>>();
  return p;
}

json rankJson(const ArtifactRank &r) {
  json entries = json::array();
  for (const driver::AotStageEntry &e : r.entries)
    entries.push_back({{"function", e.function},
                       {"describe", e.describeSymbol},
                       {"inputs", specsJson(e.inputs)},
                       {"outputs", specsJson(e.outputs)}});
  json factors = json::array();
  for (const driver::ReplicaFactor &f : r.plan.replicaFactors)
    factors.push_back({{"name", f.name}, {"every", f.every}, {"host_decided", f.hostDecided}});
  const driver::RankPlan &plan = r.plan;
  return {{"rank", plan.rank},
          {"files", modelJson(r.files)},
          {"entries", entries},
          {"plan",
           {{"microbatches", plan.microbatches},
            {"stages", plan.stages},
            {"blocks", plan.blocks},
            {"functions", plan.functions},
            {"pending", plan.pending},
            {"replica_factors", factors},
            {"unreported_inverses", plan.unreportedInverses},
            {"program", programJson(plan.program)}}}};
}

ArtifactRank rankOf(const json &j, int32_t ranks) {
  ArtifactRank r;
  r.files = modelOf(j.at("files"));
  for (const json &e : j.at("entries"))
    r.entries.push_back({e.at("function").get<std::string>(), e.at("describe").get<std::string>(),
                         specsOf(e.at("inputs")), specsOf(e.at("outputs"))});
  const json &plan = j.at("plan");
  driver::RankPlan &p = r.plan;
  p.rank = j.at("rank").get<int32_t>();
  p.ranks = ranks;
  p.microbatches = plan.at("microbatches").get<int64_t>();
  p.stages = plan.at("stages").get<std::vector<int64_t>>();
  p.blocks = plan.at("blocks").get<std::vector<int64_t>>();
  p.functions = plan.at("functions").get<std::vector<std::string>>();
  p.pending = plan.at("pending").get<std::vector<std::string>>();
  for (const json &f : plan.at("replica_factors"))
    p.replicaFactors.push_back({f.at("name").get<std::string>(), f.at("every").get<int64_t>(),
                                f.at("host_decided").get<bool>()});
  p.unreportedInverses = plan.at("unreported_inverses").get<std::vector<std::string>>();
  p.program = programOf(plan.at("program"));
  return r;
}

json layersJson(const std::vector<KfacModelLayer> &layers) {
  json all = json::array();
  for (const KfacModelLayer &l : layers)
    all.push_back({{"kind", l.kind == KfacModelLayer::Kind::Linear ? "linear" : "layer_norm"},
                   {"weight", l.weight},
                   {"bias", l.bias},
                   {"factor_a", l.factorA},
                   {"factor_b", l.factorB},
                   {"weight_in_out", l.weightInOut}});
  return all;
}

std::vector<KfacModelLayer> layersOf(const json &j) {
  std::vector<KfacModelLayer> layers;
  for (const json &l : j) {
    KfacModelLayer layer;
    layer.kind = l.at("kind").get<std::string>() == "linear" ? KfacModelLayer::Kind::Linear
                                                             : KfacModelLayer::Kind::LayerNorm;
    layer.weight = l.at("weight").get<std::string>();
    layer.bias = l.at("bias").get<std::string>();
    layer.factorA = l.at("factor_a").get<std::string>();
    layer.factorB = l.at("factor_b").get<std::string>();
    layer.weightInOut = l.at("weight_in_out").get<bool>();
    layers.push_back(std::move(layer));
  }
  return layers;
}

/// The SHA-256 of the file `path` (lowercase hex), or "" when it cannot be
/// read. OpenSSL's, read in 1 MiB pieces.
std::string sha256OfFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> digest(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!in || !digest || EVP_DigestInit_ex(digest.get(), EVP_sha256(), nullptr) != 1)
    return "";
  std::vector<char> piece(1 << 20);
  while (in) {
    in.read(piece.data(), std::streamsize(piece.size()));
    if (in.gcount() > 0 && EVP_DigestUpdate(digest.get(), piece.data(), size_t(in.gcount())) != 1)
      return "";
  }
  if (!in.eof())
    return "";
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(digest.get(), hash, &length) != 1)
    return "";
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += {digits[hash[i] >> 4], digits[hash[i] & 15]};
  return hex;
}

/// The size of `path`, or -1 when it is not a file.
int64_t fileBytes(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    return -1;
  return int64_t(info.st_size);
}

} // namespace

std::string train::manifestText(const TrainingArtifact &a) {
  json manifest = {{"format", "pf-training-artifact"},
                   {"format_version", a.formatVersion},
                   {"pf_version", PF_VERSION_STRING},
                   {"runtime_abi", a.runtimeAbi},
                   {"model", {{"file", a.modelFile}, {"sha256", a.modelSha256}}},
                   {"command", a.command},
                   {"ranks", a.ranks},
                   {"batch", a.batch},
                   {"sequence", a.sequence},
                   {"optimizer", a.optimizer},
                   {"run", runJson(a.run)},
                   {"onnx_names", a.onnxNames},
                   {"kfac_layers", layersJson(a.kfacLayers)},
                   {"evaluation", modelJson(a.evaluation)}};
  if (a.ranks == 1) {
    manifest["step"] = modelJson(a.step);
  } else {
    const ArtifactPipeline &p = a.pipeline;
    manifest["pipeline"] = {{"spec", p.spec},
                            {"schedule", p.schedule},
                            {"microbatches", p.microbatches},
                            {"overlap", p.overlap},
                            {"ignore_index", p.ignoreIndex}};
    json ranks = json::array();
    for (const ArtifactRank &r : a.rankPrograms)
      ranks.push_back(rankJson(r));
    manifest["rank_programs"] = ranks;
  }
  return manifest.dump(2) + "\n";
}

::pf::Expected<TrainingArtifact> train::readArtifact(const std::string &directory, int rank,
                                                     bool checkFiles) {
  using ::pf::Status;
  const std::string path = directory + "/" + kArtifactManifest;
  std::ifstream in(path);
  if (!in)
    return Status::error(directory + ": not a training artifact (cannot read " +
                         kArtifactManifest + ": " + std::strerror(errno) +
                         "); write one with pf-train MODEL --corpus C --compile-only --artifact " +
                         directory);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json manifest = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() ||
      manifest.value("format", "") != "pf-training-artifact")
    return Status::error(path + ": not a pf training artifact manifest");
  TrainingArtifact a;
  try {
    a.formatVersion = manifest.at("format_version").get<int64_t>();
    if (a.formatVersion != kArtifactFormatVersion)
      return Status::error(directory + " is a training artifact of format " +
                           std::to_string(a.formatVersion) + "; this trainer reads format " +
                           std::to_string(kArtifactFormatVersion) +
                           " (compile it again with this pf-train)");
    // The compiler and the trainer of one pf release: the lowered code, the
    // manifest's meaning and the runtime's kernels change together.
    const std::string version = manifest.value("pf_version", "");
    if (version != PF_VERSION_STRING)
      return Status::error(directory + " was compiled by " +
                           (version.empty() ? std::string("an earlier pf")
                                            : "pf " + version) +
                           "; this trainer is pf " PF_VERSION_STRING
                           " (compile it again with this pf-train)");
    a.runtimeAbi = manifest.at("runtime_abi").get<int32_t>();
    if (a.runtimeAbi != pfrt_version())
      return Status::error(directory + " was compiled for runtime ABI " +
                           std::to_string(a.runtimeAbi) + "; this trainer's runtime is ABI " +
                           std::to_string(pfrt_version()) +
                           " (compile it again with this pf-train)");
    a.ranks = manifest.at("ranks").get<int32_t>();
    if (a.ranks < 1)
      return Status::error(path + ": " + std::to_string(a.ranks) + " ranks");
    a.modelFile = manifest.at("model").at("file").get<std::string>();
    a.modelSha256 = manifest.at("model").at("sha256").get<std::string>();
    a.command = manifest.at("command").get<std::vector<std::string>>();
    a.batch = manifest.at("batch").get<int64_t>();
    a.sequence = manifest.at("sequence").get<int64_t>();
    a.optimizer = manifest.at("optimizer").get<std::string>();
    a.run = runOf(manifest.at("run"));
    a.onnxNames = manifest.at("onnx_names").get<std::map<std::string, std::string>>();
    a.kfacLayers = layersOf(manifest.at("kfac_layers"));
    a.evaluation = modelOf(manifest.at("evaluation"));
    if (a.ranks == 1) {
      a.step = modelOf(manifest.at("step"));
    } else {
      const json &p = manifest.at("pipeline");
      a.pipeline.spec = p.at("spec").get<std::string>();
      a.pipeline.schedule = p.at("schedule").get<std::string>();
      a.pipeline.microbatches = p.at("microbatches").get<int64_t>();
      a.pipeline.overlap = p.at("overlap").get<bool>();
      a.pipeline.ignoreIndex = p.at("ignore_index").get<int64_t>();
      for (const json &r : manifest.at("rank_programs"))
        a.rankPrograms.push_back(rankOf(r, a.ranks));
      if (int64_t(a.rankPrograms.size()) != a.ranks)
        return Status::error(path + ": " + std::to_string(a.rankPrograms.size()) +
                             " rank programs for " + std::to_string(a.ranks) + " ranks");
      for (int32_t r = 0; r < a.ranks; ++r)
        if (a.rankPrograms[size_t(r)].plan.rank != r)
          return Status::error(path + ": rank program " + std::to_string(r) + " is rank " +
                               std::to_string(a.rankPrograms[size_t(r)].plan.rank) + "'s");
    }
  } catch (const json::exception &e) {
    return Status::error(path + ": " + e.what());
  }
  a.run.batch = int(a.batch);
  if (!checkFiles)
    return a;
  // A missing, truncated or changed file: before anything is loaded.
  struct File {
    const std::string &name;
    int64_t bytes;
    const std::string &sha256;
  };
  std::vector<const ArtifactModel *> checked{&a.evaluation};
  if (a.ranks == 1)
    checked.push_back(&a.step);
  for (const ArtifactRank &r : a.rankPrograms)
    if (rank < 0 || r.plan.rank == rank)
      checked.push_back(&r.files);
  for (const ArtifactModel *model : checked)
    for (const File &expected :
         {File{model->library, model->libraryBytes, model->librarySha256},
          File{model->weights, model->weightsBytes, model->weightsSha256}}) {
      const std::string &file = expected.name;
      const int64_t bytes = expected.bytes;
      if (file.find('/') != std::string::npos)
        return Status::error(path + ": '" + file + "' is not a file of the artifact");
      int64_t found = fileBytes(directory + "/" + file);
      if (found < 0)
        return Status::error(directory + ": " + file + " is missing");
      if (found != bytes)
        return Status::error(directory + ": " + file + " has " + std::to_string(found) +
                             " bytes, the manifest says " + std::to_string(bytes) +
                             " (truncated or from another compilation)");
      if (sha256OfFile(directory + "/" + file) != expected.sha256)
        return Status::error(directory + ": " + file + " does not match its SHA-256 in the "
                                                       "manifest (changed after the compilation, "
                                                       "or from another one)");
    }
  return a;
}
