//===- AotStagePrograms.cpp - A rank's stage functions from its library ---===//
#include "pf/RankRuntime/AotStagePrograms.h"
#include "pf/RankRuntime/StageCalls.h"
#include "pf/Support/AotModelCheck.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace mlir::pf::driver;
using ::pf::formatText;
using ::pf::Status;

namespace {
Status error(const std::string &message) { return Status::error(message); }

int64_t specBytes(const TensorSpec &spec) {
  int64_t n = dtypeBytes(spec.dtype);
  for (int64_t d : spec.shape)
    n *= d;
  return n;
}

class AotStagePrograms final : public StagePrograms {
public:
  struct Entry {
    std::string function;
    const pf_aot_model *model = nullptr;
    std::vector<TensorSpec> inputs, outputs;
    std::vector<pfrt_tensor> table;
    /// On backend memory: a block per input and output, for host views.
    std::vector<void *> backendInputs, backendOutputs;
  };

  ~AotStagePrograms() override {
    if (!context)
      return;
    for (void *block : blocks)
      pfrt_free(context, block);
    pfrt_context_destroy(context);
  }

  bool hasEntry(const std::string &function) const override { return find(function); }
  const std::vector<TensorSpec> &inputs(const std::string &function) const override {
    static const std::vector<TensorSpec> none;
    const Entry *e = find(function);
    return e ? e->inputs : none;
  }
  const std::vector<TensorSpec> &outputs(const std::string &function) const override {
    static const std::vector<TensorSpec> none;
    const Entry *e = find(function);
    return e ? e->outputs : none;
  }
  const std::vector<ModelParameter> &parameters() const override { return params; }
  bool onBackendMemory() const override { return onBackend; }
  pfrt_context *runtimeContext() const override { return context; }
  int64_t stageValueCopies() const override { return copies; }

  Status copyParametersToHost() override { return copyParameters(/*toHost=*/true); }
  Status copyParametersToBackend() override { return copyParameters(/*toHost=*/false); }

  Status run(const std::string &function, const NamedArrays &inputs,
             NamedArrays &outputs) override {
    const Entry *e = find(function);
    if (!e)
      return error("no stage function named '" + function + "' in " + name);
    std::vector<StageView> in, out;
    for (const TensorSpec &spec : e->inputs) {
      auto it = inputs.find(spec.name);
      if (it == inputs.end())
        return error("missing input '" + spec.name + "' of '" + function + "'");
      in.push_back({spec.name, it->second.dtype, it->second.shape,
                    const_cast<char *>(it->second.data.data()), false});
    }
    for (const TensorSpec &spec : e->outputs) {
      NpyArray &array = outputs[spec.name];
      array.dtype = spec.dtype;
      array.shape = spec.shape;
      array.data.assign(size_t(specBytes(spec)), 0);
      out.push_back({spec.name, spec.dtype, spec.shape, array.data.data(), false});
    }
    return run(function, in, out);
  }

  Status run(const std::string &function, const std::vector<StageView> &inputs,
             const std::vector<StageView> &outputs) override {
    Entry *e = find(function);
    if (!e)
      return error("no stage function named '" + function + "' in " + name);
    const std::string what = " of '" + function + "'";
    std::vector<void *> inputData(e->inputs.size()), outputData(e->outputs.size());
    std::vector<const StageView *> hostOutputs(e->outputs.size(), nullptr);
    for (size_t i = 0; i < e->inputs.size(); ++i) {
      const TensorSpec &spec = e->inputs[i];
      auto view = findView(inputs, spec, "input", what);
      if (!view)
        return view.status();
      inputData[i] = (*view)->data;
      if (onBackend && !(*view)->onBackend) {
        pfrt_tensor block = pf_aot_byte_view(e->backendInputs[i], specBytes(spec));
        if (specBytes(spec) > 0 && pfrt_copy_from_host(context, (*view)->data, &block) != PFRT_OK)
          return runtimeError("copying input '" + spec.name + "'" + what + " in");
        if (isStageValue(spec.name))
          ++copies;
        inputData[i] = e->backendInputs[i];
      }
    }
    for (size_t i = 0; i < e->outputs.size(); ++i) {
      const TensorSpec &spec = e->outputs[i];
      auto view = findView(outputs, spec, "output", what);
      if (!view)
        return view.status();
      void *where = (*view)->data;
      if (onBackend && !(*view)->onBackend) {
        where = e->backendOutputs[i];
        hostOutputs[i] = *view;
      }
      // Outputs the program may leave partly unwritten start zeroed; the
      // others are written whole.
      const int64_t bytes = specBytes(spec);
      if (spec.zeroFill && bytes > 0) {
        if (onBackend) {
          pfrt_tensor block = pf_aot_byte_view(where, bytes);
          if (pfrt_fill(context, &block, 0.0) != PFRT_OK)
            return runtimeError("zeroing output '" + spec.name + "'" + what);
        } else {
          std::memset(where, 0, size_t(bytes));
        }
      }
      outputData[i] = where;
    }
    const pf_aot_model &m = *e->model;
    bindAotTable(m, inputData.data(), outputData.data(), onBackend ? backendWeights : hostWeights.get(),
                 arena, e->table.data());
    if (int64_t code = m.main(context, e->table.data()); code != 0) {
      int64_t op = (code >> 32) - 1;
      std::string opName = op >= 0 && op < m.num_ops ? m.op_names[op] : "the output copies";
      return runtimeError(formatText("kernel failed at op #%lld %s", (long long)op,
                                     opName.c_str()) +
                          what);
    }
    if (onBackend && pfrt_synchronize(context) != PFRT_OK)
      return runtimeError("the call" + what);
    for (size_t i = 0; i < e->outputs.size(); ++i) {
      if (!hostOutputs[i])
        continue;
      pfrt_tensor block = pf_aot_byte_view(outputData[i], specBytes(e->outputs[i]));
      if (specBytes(e->outputs[i]) > 0 &&
          pfrt_copy_to_host(context, &block, hostOutputs[i]->data) != PFRT_OK)
        return runtimeError("copying output '" + e->outputs[i].name + "'" + what + " out");
      if (isStageValue(e->outputs[i].name))
        ++copies;
    }
    return Status::success();
  }

  std::string name;
  pfrt_context *context = nullptr;
  bool onBackend = false;
  AlignedBytes hostWeights{nullptr, std::free};
  AlignedBytes hostArena{nullptr, std::free};
  int64_t weightsBytes = 0;
  void *backendWeights = nullptr, *arena = nullptr;
  std::vector<void *> blocks; ///< every backend allocation
  std::vector<Entry> entries;
  std::vector<ModelParameter> params;
  int64_t copies = 0;

  Status runtimeError(const std::string &what) const {
    return error(name + ": " + what + ": " + pfrt_last_error(context));
  }

  ::pf::Expected<void *> allocate(int64_t bytes, const std::string &what) {
    void *block = nullptr;
    if (pfrt_alloc(context, std::max<int64_t>(bytes, 1), &block) != PFRT_OK)
      return runtimeError("allocating " + what);
    blocks.push_back(block);
    return block;
  }

private:
  Entry *find(const std::string &function) {
    for (Entry &e : entries)
      if (e.function == function)
        return &e;
    return nullptr;
  }
  const Entry *find(const std::string &function) const {
    return const_cast<AotStagePrograms *>(this)->find(function);
  }

  /// The view of `spec` among `views`, checked against it.
  ::pf::Expected<const StageView *> findView(const std::vector<StageView> &views,
                                             const TensorSpec &spec, const char *kind,
                                             const std::string &what) const {
    const StageView *found = nullptr;
    for (const StageView &v : views)
      if (v.name == spec.name)
        found = &v;
    if (!found)
      return error(std::string("missing ") + kind + " '" + spec.name + "'" + what);
    if (found->dtype != spec.dtype || found->shape != spec.shape)
      return error(std::string(kind) + " '" + spec.name + "'" + what + " is " +
                   dtypeName(found->dtype) + " " + shapeText(found->shape) +
                   " but the function takes " + dtypeName(spec.dtype) + " " +
                   shapeText(spec.shape));
    if (found->onBackend && !onBackend)
      return error(std::string(kind) + " '" + spec.name + "'" + what +
                   " is in backend memory but the entries run on host memory");
    if (!found->data && specBytes(spec) > 0)
      return error(std::string(kind) + " '" + spec.name + "'" + what + " has no data");
    return found;
  }

  Status copyParameters(bool toHost) {
    if (!onBackend)
      return Status::success();
    for (const ModelParameter &p : params) {
      void *block = static_cast<char *>(backendWeights) +
                    (static_cast<char *>(p.data) - hostWeights.get());
      pfrt_tensor view = pf_aot_byte_view(block, p.bytes);
      if (p.bytes > 0 &&
          (toHost ? pfrt_copy_to_host(context, &view, p.data)
                  : pfrt_copy_from_host(context, p.data, &view)) != PFRT_OK)
        return runtimeError("copying parameter '" + p.name + "'" +
                            (toHost ? " to the host" : " to the backend"));
    }
    return Status::success();
  }
};

/// `spec` as entry `m`'s descriptor `io` describes it.
bool sameSpec(const pf_aot_model &m, const pf_model_io &io, const TensorSpec &spec) {
  const pf_model_tensor_info &t = m.tensors[io.tensor];
  return spec.name == io.name && spec.dtype == t.dtype &&
         spec.shape == std::vector<int64_t>(t.shape, t.shape + t.rank);
}
} // namespace

::pf::Expected<std::unique_ptr<StagePrograms>>
mlir::pf::driver::loadAotStagePrograms(const std::string &library, const std::string &weights,
                                       const std::vector<AotStageEntry> &entries,
                                       const std::vector<AotParameter> &parameters,
                                       uint64_t fingerprint, const AotModel::Options &options) {
  auto handle = loadAotLibrary(library);
  if (!handle)
    return handle.status();
  auto programs = std::make_unique<AotStagePrograms>();
  AotStagePrograms &self = *programs;
  self.name = library;
  const auto *objectFingerprint =
      static_cast<const uint64_t *>(dlsym(*handle, "pf_model_fingerprint"));
  if (!objectFingerprint || *objectFingerprint != fingerprint)
    return error(library + " is of another compilation than its manifest (fingerprints " +
                 (objectFingerprint ? std::to_string(*objectFingerprint) : "missing") + " and " +
                 std::to_string(fingerprint) + ")");
  int64_t arenaBytes = 0, weightsBytes = -1;
  for (const AotStageEntry &entry : entries) {
    auto model = describeAotEntry(*handle, library, entry.describeSymbol);
    if (!model)
      return model.status();
    const pf_aot_model &m = **model;
    bool same = m.num_inputs == int64_t(entry.inputs.size()) &&
                m.num_outputs == int64_t(entry.outputs.size());
    for (int64_t i = 0; same && i < m.num_inputs; ++i)
      same = sameSpec(m, m.inputs[i], entry.inputs[size_t(i)]);
    for (int64_t i = 0; same && i < m.num_outputs; ++i)
      same = sameSpec(m, m.outputs[i], entry.outputs[size_t(i)]);
    if (!same)
      return error(library + ": '" + entry.function +
                   "' takes or returns other values than the manifest says");
    if (weightsBytes >= 0 && m.weights_bytes != weightsBytes)
      return error(library + ": its entries bind weights of different sizes");
    weightsBytes = m.weights_bytes;
    arenaBytes = std::max(arenaBytes, m.arena_bytes);
    AotStagePrograms::Entry e;
    e.function = entry.function;
    e.model = &m;
    e.inputs = entry.inputs;
    e.outputs = entry.outputs;
    e.table.resize(size_t(m.num_tensors));
    self.entries.push_back(std::move(e));
  }
  if (self.entries.empty())
    return error(library + ": the manifest names no stage function");

  auto read = readAotWeights(weights, weightsBytes, library, parameters);
  if (!read)
    return read.status();
  self.hostWeights = read.take();
  self.weightsBytes = weightsBytes;
  const int64_t size = weightsBytes;
  for (const AotParameter &p : parameters)
    self.params.push_back({p.name, p.dtype, p.shape, self.hostWeights.get() + p.offset, p.bytes});
  std::sort(self.params.begin(), self.params.end(),
            [](const ModelParameter &a, const ModelParameter &b) { return a.name < b.name; });
  auto context = createAotContext(options);
  if (!context)
    return context.status();
  self.context = *context;
  self.onBackend = options.deviceBuffers || options.backend != PFRT_BACKEND_CPU;
  if (!self.onBackend) {
    self.hostArena.reset(
        static_cast<char *>(std::aligned_alloc(64, size_t(std::max<int64_t>(arenaBytes, 1) + 63) /
                                                       64 * 64)));
    if (!self.hostArena)
      return error("cannot allocate the " + std::to_string(arenaBytes) + "-byte arena");
    self.arena = self.hostArena.get();
    return std::unique_ptr<StagePrograms>(std::move(programs));
  }
  auto arena = self.allocate(arenaBytes, "the arena");
  if (!arena)
    return arena.status();
  self.arena = *arena;
  auto backendWeights = self.allocate(size, "the weights");
  if (!backendWeights)
    return backendWeights.status();
  self.backendWeights = *backendWeights;
  pfrt_tensor view = pf_aot_byte_view(self.backendWeights, size);
  if (size > 0 && pfrt_copy_from_host(self.context, self.hostWeights.get(), &view) != PFRT_OK)
    return self.runtimeError("copying the weights in");
  for (AotStagePrograms::Entry &e : self.entries) {
    for (const TensorSpec &spec : e.inputs) {
      auto block = self.allocate(specBytes(spec), "input '" + spec.name + "'");
      if (!block)
        return block.status();
      e.backendInputs.push_back(*block);
    }
    for (const TensorSpec &spec : e.outputs) {
      auto block = self.allocate(specBytes(spec), "output '" + spec.name + "'");
      if (!block)
        return block.status();
      e.backendOutputs.push_back(*block);
    }
  }
  return std::unique_ptr<StagePrograms>(std::move(programs));
}

::pf::Expected<LoweredRankProgram> mlir::pf::driver::loadRankProgram(const std::string &library,
                                                                    const std::string &symbol) {
  auto handle = loadAotLibrary(library);
  if (!handle)
    return handle.status();
  void *function = dlsym(*handle, symbol.c_str());
  if (!function)
    return error(library + " has no rank program " + symbol +
                 "(): not the library its manifest describes");
  return reinterpret_cast<LoweredRankProgram>(function);
}
