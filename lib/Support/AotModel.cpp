//===- AotModel.cpp - A model compiled ahead of time, loaded and run ------===//
#include "pf/Support/AotModel.h"

#include "pf/Support/AotModelCheck.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace mlir::pf::driver {

/// "[2, 16]" (pfrt and this file only: the portable pf-aot-run links no
/// .npz code).
static std::string dimensionsText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

std::string incompleteElf(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return "cannot open it: " + std::string(std::strerror(errno));
  const uint64_t size = uint64_t(in.tellg());
  std::vector<char> bytes(size_t(std::min<uint64_t>(size, 1 << 20)));
  in.seekg(0);
  in.read(bytes.data(), std::streamsize(bytes.size()));
  Elf64_Ehdr header;
  if (bytes.size() < sizeof header || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      bytes[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF shared library";
  std::memcpy(&header, bytes.data(), sizeof header);
  auto within = [&](uint64_t offset, uint64_t count, uint64_t each) {
    return offset <= size && count <= (size - offset) / std::max<uint64_t>(each, 1);
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      !within(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr)) ||
      header.e_phoff + uint64_t(header.e_phnum) * sizeof(Elf64_Phdr) > bytes.size())
    return "its program headers lie outside its " + std::to_string(size) + " bytes";
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, bytes.data() + header.e_phoff + uint64_t(i) * sizeof segment,
                sizeof segment);
    if (segment.p_type == PT_LOAD && !within(segment.p_offset, segment.p_filesz, 1))
      return "it is truncated: a segment ends at byte " +
             std::to_string(segment.p_offset + segment.p_filesz) + " of " +
             std::to_string(size);
  }
  if (header.e_shoff != 0 && !within(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr)))
    return "it is truncated: its section headers end past byte " + std::to_string(size);
  return "";
}

void bindAotTable(const pf_aot_model &m, void *const *inputs, void *const *outputs,
                  void *weights, void *arena, pfrt_tensor *table) {
  for (int64_t i = 0; i < m.num_tensors; ++i) {
    const pf_model_tensor_info &t = m.tensors[i];
    char *data = t.kind == PF_MODEL_INPUT     ? static_cast<char *>(inputs[t.where])
                 : t.kind == PF_MODEL_OUTPUT  ? static_cast<char *>(outputs[t.where])
                 : t.kind == PF_MODEL_WEIGHTS ? static_cast<char *>(weights) + t.where
                                              : static_cast<char *>(arena) + t.where;
    pfrt_tensor &d = table[i];
    std::memset(&d, 0, sizeof d);
    d.data = data;
    d.dtype = t.dtype;
    d.rank = t.rank;
    for (int k = 0; k < t.rank; ++k)
      d.shape[k] = t.shape[k];
  }
}

::pf::Expected<void *> loadAotLibrary(const std::string &path) {
  using ::pf::Status;
  if (std::string why = incompleteElf(path); !why.empty())
    return Status::error("cannot load " + path + ": " + why);
  // dlopen searches the library path for a name without a '/': the file
  // named relative to the working directory is meant.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void *library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::error("cannot load " + path + ": " + dlerror());
  return library;
}

::pf::Expected<const pf_aot_model *> describeAotEntry(void *library, const std::string &path,
                                                      const std::string &symbol) {
  using ::pf::Status;
  auto describe = reinterpret_cast<pf_aot_model_describe_fn>(dlsym(library, symbol.c_str()));
  if (!describe)
    return Status::error(path + " has no " + symbol +
                         "(): build it with examples/aot/model_library.c or pf-train "
                         "--compile-only");
  const pf_aot_model *model = describe();
  if (!model)
    return Status::error(path + ": " + symbol + "() returned no model");
  const pf_aot_model &m = *model;
  if (m.version != PF_AOT_MODEL_VERSION || m.abi_version != PFRT_ABI_VERSION ||
      pfrt_version() != PFRT_ABI_VERSION)
    return Status::error(path + " was built for model format " + std::to_string(m.version) +
                         " and runtime ABI " + std::to_string(m.abi_version) +
                         "; this runner reads " + std::to_string(PF_AOT_MODEL_VERSION) +
                         " and runs ABI " + std::to_string(pfrt_version()));
  // Nothing is sized or bound from the description before it is checked:
  // counts, descriptors, tables, byte ranges, names.
  if (std::string err = ::pf::aot::checkAotModel(model); !err.empty())
    return Status::error(path + ": inconsistent model description: " + err);
  // The plan (the description) and the code of one compilation: a library
  // linked from two pf-run --aot runs would bind one model's tensors to
  // another's kernels.
  const auto *objectFingerprint =
      static_cast<const uint64_t *>(dlsym(library, "pf_model_fingerprint"));
  if (!objectFingerprint || *objectFingerprint != m.fingerprint)
    return Status::error(
        path + ": its model.o and model_plan.h come from different pf-run --aot runs "
               "(fingerprints " +
        (objectFingerprint ? std::to_string(*objectFingerprint) : std::string("missing")) +
        " and " + std::to_string(m.fingerprint) + "): build it from one DIR");
  return model;
}

::pf::Expected<AotLibraryHandle> openAotLibrary(const std::string &path) {
  auto library = loadAotLibrary(path);
  if (!library)
    return library.status();
  auto model = describeAotEntry(*library, path, PF_AOT_MODEL_SYMBOL);
  if (!model)
    return model.status();
  return AotLibraryHandle{*library, *model};
}

AotModel::~AotModel() {
  if (!context)
    return;
  pfrt_arena_destroy(arena);
  for (void *buffer : backendInputs)
    pfrt_free(context, buffer);
  for (void *buffer : backendOutputs)
    pfrt_free(context, buffer);
  if (backendWeights != hostWeights.get())
    pfrt_free(context, backendWeights);
  pfrt_context_destroy(context);
}

::pf::Status AotModel::runtimeError(const std::string &what) const {
  return ::pf::Status::error(name + ": " + what + ": " + pfrt_last_error(context));
}

::pf::Expected<AlignedBytes> readAotWeights(const std::string &weights, int64_t bytes,
                                            const std::string &library,
                                            const std::vector<AotParameter> &parameters) {
  using ::pf::Status;
  std::ifstream in(weights, std::ios::binary | std::ios::ate);
  if (!in)
    return Status::error("cannot open " + weights + ": " + std::strerror(errno));
  const int64_t size = int64_t(in.tellg());
  if (size != bytes)
    return Status::error(weights + " has " + std::to_string(size) + " bytes, " + library +
                         " expects " + std::to_string(bytes));
  AlignedBytes data(static_cast<char *>(std::aligned_alloc(64, size_t(size + 63) / 64 * 64)),
                    std::free);
  if (!data)
    return Status::error("cannot allocate " + std::to_string(size) + " bytes for " + weights);
  in.seekg(0);
  if (size > 0 && !in.read(data.get(), size))
    return Status::error("cannot read " + weights + ": " + std::strerror(errno));
  for (const AotParameter &p : parameters)
    if (p.offset < 0 || p.bytes < 0 || p.offset > size - p.bytes)
      return Status::error(library + ": parameter '" + p.name + "' lies outside its " +
                           std::to_string(size) + " bytes of weights");
  return data;
}

::pf::Expected<pfrt_context *> createAotContext(const AotModel::Options &options) {
  pfrt_context_options contextOptions;
  pfrt_context_options_init(&contextOptions);
  contextOptions.backend = options.backend;
  contextOptions.device = options.device;
  contextOptions.num_threads = options.threads;
  pfrt_context *context = pfrt_context_create(&contextOptions);
  if (!context)
    return ::pf::Status::error(std::string("cannot create the runtime context: ") +
                               pfrt_last_error(nullptr));
  if (pfrt_context_set_gemm_precision(context, options.gemmPrecision) != PFRT_OK) {
    std::string message = std::string("the GEMM precision: ") + pfrt_last_error(context);
    pfrt_context_destroy(context);
    return ::pf::Status::error(message);
  }
  return context;
}

::pf::Expected<std::unique_ptr<AotModel>>
AotModel::load(const std::string &library, const std::string &weights,
               std::vector<AotParameter> parameters, const Options &options) {
  using ::pf::Status;
  auto opened = openAotLibrary(library);
  if (!opened)
    return opened.status();
  std::unique_ptr<AotModel> loaded(new AotModel());
  AotModel &self = *loaded;
  self.model = opened->model;
  self.name = library;
  const pf_aot_model &m = *self.model;

  auto read = readAotWeights(weights, m.weights_bytes, library, parameters);
  if (!read)
    return read.status();
  self.hostWeights = read.take();
  self.weightsBytes = m.weights_bytes;
  self.places = std::move(parameters);
  auto context = createAotContext(options);
  if (!context)
    return context.status();
  self.context = *context;
  self.onBackend = options.deviceBuffers || options.backend != PFRT_BACKEND_CPU;
  if (pfrt_arena_create(self.context, m.arena_bytes, &self.arena) != PFRT_OK ||
      pfrt_arena_base(self.arena, &self.arenaBase) != PFRT_OK)
    return self.runtimeError("the arena");
  self.backendWeights = self.hostWeights.get();
  if (self.onBackend) {
    self.backendWeights = nullptr;
    if (pfrt_alloc(self.context, m.weights_bytes, &self.backendWeights) != PFRT_OK)
      return self.runtimeError("the weights");
    if (auto status = self.copyParametersToBackend(); !status.ok())
      return status;
    for (int64_t i = 0; i < m.num_inputs + m.num_outputs; ++i) {
      const bool input = i < m.num_inputs;
      const pf_model_io &io = input ? m.inputs[i] : m.outputs[i - m.num_inputs];
      void *buffer = nullptr;
      if (pfrt_alloc(self.context, ::pf::aot::aotTensorBytes(m.tensors[io.tensor]), &buffer) !=
          PFRT_OK)
        return self.runtimeError(std::string(input ? "input '" : "output '") + io.name + "'");
      (input ? self.backendInputs : self.backendOutputs).push_back(buffer);
    }
  }
  self.table.resize(size_t(m.num_tensors));
  return loaded;
}

std::vector<ModelParameter> AotModel::parameters() const {
  std::vector<ModelParameter> result;
  for (const AotParameter &p : places)
    result.push_back({p.name, p.dtype, p.shape,
                      hostWeights.get() + p.offset, p.bytes});
  return result;
}

::pf::Status AotModel::copyParametersToHost() {
  if (!onBackend)
    return ::pf::Status::success();
  pfrt_tensor view = pf_aot_byte_view(backendWeights, weightsBytes);
  if (weightsBytes > 0 && pfrt_copy_to_host(context, &view, hostWeights.get()) != PFRT_OK)
    return runtimeError("copying the weights to the host");
  return ::pf::Status::success();
}

::pf::Status AotModel::copyParametersToBackend() {
  if (!onBackend)
    return ::pf::Status::success();
  pfrt_tensor view = pf_aot_byte_view(backendWeights, weightsBytes);
  if (weightsBytes > 0 && pfrt_copy_from_host(context, hostWeights.get(), &view) != PFRT_OK)
    return runtimeError("copying the weights to the backend");
  return ::pf::Status::success();
}

::pf::Status AotModel::run(const NamedArrays &inputs, NamedArrays &outputs) {
  using ::pf::Status;
  const pf_aot_model &m = *model;
  std::vector<void *> inputData(size_t(m.num_inputs)), outputData(size_t(m.num_outputs));
  for (int64_t i = 0; i < m.num_inputs; ++i) {
    const pf_model_tensor_info &t = m.tensors[m.inputs[i].tensor];
    auto it = inputs.find(m.inputs[i].name);
    if (it == inputs.end())
      return Status::error(name + ": missing input '" + m.inputs[i].name + "'");
    const NpyArray &array = it->second;
    const std::vector<int64_t> shape(t.shape, t.shape + t.rank);
    if (array.dtype != t.dtype || array.shape != shape)
      return Status::error(name + ": input '" + m.inputs[i].name + "' is " +
                           pfrt_dtype_name(array.dtype) + " " + dimensionsText(array.shape) +
                           ", expected " + pfrt_dtype_name(t.dtype) + " " +
                           dimensionsText(shape));
    // The runtime only reads inputs: bound in place on the host.
    inputData[i] = const_cast<char *>(array.data.data());
    if (onBackend) {
      pfrt_tensor view = pf_aot_byte_view(backendInputs[i], int64_t(array.data.size()));
      if (!array.data.empty() &&
          pfrt_copy_from_host(context, array.data.data(), &view) != PFRT_OK)
        return runtimeError(std::string("copying input '") + m.inputs[i].name + "'");
      inputData[i] = backendInputs[i];
    }
  }
  for (int64_t i = 0; i < m.num_outputs; ++i) {
    const pf_model_tensor_info &t = m.tensors[m.outputs[i].tensor];
    NpyArray &array = outputs[m.outputs[i].name];
    array.dtype = t.dtype;
    array.shape.assign(t.shape, t.shape + t.rank);
    array.data.assign(size_t(::pf::aot::aotTensorBytes(t)), 0);
    outputData[i] = array.data.data();
    if (onBackend) {
      outputData[i] = backendOutputs[i];
      pfrt_tensor view = pf_aot_byte_view(backendOutputs[i], int64_t(array.data.size()));
      if (!array.data.empty() && pfrt_fill(context, &view, 0) != PFRT_OK)
        return runtimeError(std::string("zeroing output '") + m.outputs[i].name + "'");
    }
  }
  bindAotTable(m, inputData.data(), outputData.data(), backendWeights, arenaBase, table.data());
  if (int64_t code = m.main(context, table.data()); code != 0) {
    int64_t op = (code >> 32) - 1;
    std::string opName = op >= 0 && op < m.num_ops ? m.op_names[op] : "the output copies";
    return runtimeError("op #" + std::to_string(op) + " " + opName + " failed");
  }
  if (pfrt_synchronize(context) != PFRT_OK)
    return runtimeError("the step");
  if (onBackend)
    for (int64_t i = 0; i < m.num_outputs; ++i) {
      NpyArray &array = outputs[m.outputs[i].name];
      pfrt_tensor view = pf_aot_byte_view(backendOutputs[i], int64_t(array.data.size()));
      if (!array.data.empty() && pfrt_copy_to_host(context, &view, array.data.data()) != PFRT_OK)
        return runtimeError(std::string("copying output '") + m.outputs[i].name + "'");
    }
  return Status::success();
}

} // namespace mlir::pf::driver
