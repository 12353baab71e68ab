//===- Runner.cpp - compile a pf module and run it on the runtime ----------===//
#include "pf/Driver/Runner.h"

#include "pf/Driver/OutputFiles.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFAttrs.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Runtime/pf_aot.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/FormatVariadic.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <memory>

using namespace mlir::pf::driver;
using namespace mlir;

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Bytes of a constant in the runtime's layout (bool: one byte each).
std::vector<char> materialize(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  Type element = type.getElementType();
  int64_t n = type.getNumElements();
  int64_t width = mlir::pf::storageBytesPerElement(element);
  std::vector<char> bytes(n * width);
  // An empty constant (Shape with start past end): nothing to copy, and
  // memcpy must not see the empty vector's null data.
  if (bytes.empty())
    return bytes;
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (dense && !dense.isSplat() && !element.isInteger(1)) {
    ArrayRef<char> raw = dense.getRawData();
    std::memcpy(bytes.data(), raw.data(), std::min<size_t>(raw.size(), bytes.size()));
    return bytes;
  }
  int64_t i = 0;
  for (Attribute v : attr.getValues<Attribute>()) {
    char *dst = bytes.data() + i++ * width;
    if (auto f = dyn_cast<FloatAttr>(v)) {
      llvm::APInt bits = f.getValue().bitcastToAPInt();
      std::memcpy(dst, bits.getRawData(), width);
    } else if (auto integer = dyn_cast<IntegerAttr>(v)) {
      llvm::APInt value = integer.getValue();
      if (element.isInteger(1))
        *dst = value.isZero() ? 0 : 1;
      else
        std::memcpy(dst, value.getRawData(), width);
    }
  }
  return bytes;
}

TensorSpec specOf(mlir::pf::PlanIOAttr io, mlir::pf::RuntimePlanAttr plan) {
  TensorSpec spec;
  spec.name = io.getName().str();
  auto t = cast<mlir::pf::PlannedTensorAttr>(plan.getTensors()[io.getTensor()]);
  spec.dtype = t.getDtype();
  ArrayRef<int64_t> shape = t.getShape().asArrayRef();
  spec.shape.assign(shape.begin(), shape.end());
  spec.zeroFill = io.getZeroFill();
  return spec;
}
} // namespace

namespace mlir::pf::driver::detail {
/// One lowered entry function: its tensor table and where each descriptor's
/// data comes from (read from its #pf.runtime_plan).
struct LoweredEntry {
  struct BufferRef {
    mlir::pf::BufferKind kind = mlir::pf::BufferKind::Arena;
    std::string name; // parameters
    int64_t index = 0, offset = 0, bytes = 0;
    const void *hostData = nullptr; // params and constants
  };
  std::vector<BufferRef> buffers;
  std::vector<pfrt_tensor> table;
  std::vector<int64_t> tensorBuffer;
  std::vector<int64_t> inputTensor, outputTensor;
  std::vector<TensorSpec> inputSpecs, outputSpecs;
  std::vector<std::string> opNames;
  int64_t arenaBytes = 0, peakLiveBytes = 0, parameterBytes = 0;
  int64_t (*function)(void *, void *) = nullptr;
};
} // namespace mlir::pf::driver::detail

using mlir::pf::driver::detail::LoweredEntry;

namespace {
/// Reads `plan` into `entry`. Parameters point at their resource blobs (read
/// in place) or at materialized copies kept in `constants`, as do constants.
llvm::Error readPlan(mlir::pf::RuntimePlanAttr plan, SymbolTable &symbols,
                     std::vector<std::vector<char>> &constants, LoweredEntry &entry) {
  for (mlir::pf::PlanIOAttr io : plan.getInputList()) {
    entry.inputSpecs.push_back(specOf(io, plan));
    entry.inputTensor.push_back(io.getTensor());
  }
  for (mlir::pf::PlanIOAttr io : plan.getOutputList()) {
    entry.outputSpecs.push_back(specOf(io, plan));
    entry.outputTensor.push_back(io.getTensor());
  }
  for (StringAttr name : plan.getOpNameList())
    entry.opNames.push_back(name.str());
  entry.arenaBytes = plan.getArenaBytes();
  entry.peakLiveBytes = plan.getPeakLiveBytes();
  for (mlir::pf::PlannedBufferAttr buffer : plan.getBufferList()) {
    LoweredEntry::BufferRef ref;
    ref.kind = buffer.getKind();
    ref.bytes = buffer.getBytes();
    ref.index = buffer.getIndex().value_or(0);
    ref.offset = buffer.getOffset().value_or(0);
    if (ref.kind == mlir::pf::BufferKind::Param) {
      StringAttr name = buffer.getName();
      ref.name = name.str();
      auto param = symbols.lookup<mlir::pf::ParamOp>(name);
      if (!param || !param.getValue())
        return error("parameter '" + name.getValue() +
                     "' has no data (was the model imported with --no-weights?)");
      ElementsAttr value = *param.getValue();
      if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
        AsmResourceBlob *blob = resource.getRawHandle().getBlob();
        if (!blob)
          return error("parameter '" + name.getValue() + "' has no data");
        ref.hostData = blob->getData().data();
      } else {
        constants.push_back(materialize(value));
        ref.hostData = constants.back().data();
      }
      entry.parameterBytes += ref.bytes;
    } else if (ref.kind == mlir::pf::BufferKind::Constant) {
      constants.push_back(materialize(buffer.getValue()));
      ref.hostData = constants.back().data();
    }
    entry.buffers.push_back(ref);
  }
  entry.table.resize(plan.getTensors().size());
  for (auto [i, tensor] : llvm::enumerate(plan.getTensorList())) {
    pfrt_tensor &t = entry.table[i];
    std::memset(&t, 0, sizeof(t));
    t.dtype = tensor.getDtype();
    ArrayRef<int64_t> shape = tensor.getShape().asArrayRef();
    t.rank = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      t.shape[d] = shape[d];
    entry.tensorBuffer.push_back(tensor.getBuffer());
  }
  return llvm::Error::success();
}

/// pf.* module attributes and parameters go before the LLVM lowering: only
/// LLVM-dialect code may stay for translation.
void stripPFAttributes(ModuleOp module) {
  for (auto param : llvm::make_early_inc_range(module.getOps<mlir::pf::ParamOp>()))
    param.erase();
  SmallVector<StringAttr> moduleAttrs;
  for (NamedAttribute attr : module->getAttrs())
    if (attr.getName().getValue().starts_with("pf."))
      moduleAttrs.push_back(attr.getName());
  for (StringAttr name : moduleAttrs)
    module->removeAttr(name);
}

llvm::Expected<pfrt_context *> createContext(int threads, int32_t backend = PFRT_BACKEND_CPU,
                                             int32_t device = 0) {
  pfrt_context_options contextOptions;
  pfrt_context_options_init(&contextOptions);
  contextOptions.backend = backend;
  contextOptions.num_threads = threads;
  contextOptions.device = device;
  pfrt_context *context = pfrt_context_create(&contextOptions);
  if (!context)
    return error(std::string("cannot create the runtime context: ") + pfrt_last_error(nullptr));
  return context;
}

llvm::Expected<void *> allocateArena(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  void *arena = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!arena)
    return error(llvm::formatv("cannot allocate the {0}-byte arena", bytes));
  return arena;
}

std::vector<int64_t> shapeOf(const TensorView &view) {
  return std::vector<int64_t>(view.shape.begin(), view.shape.end());
}

/// The view named `name` in `views`; nullptr when there is none.
const TensorView *findView(ArrayRef<TensorView> views, StringRef name) {
  auto it = llvm::find_if(views, [&](const TensorView &v) { return v.name == name; });
  return it == views.end() ? nullptr : &*it;
}

/// Checks `view` against `spec` (dtype, shape, data); `kind` is "input" or
/// "output".
llvm::Error checkView(const TensorView &view, const TensorSpec &spec, StringRef kind,
                      StringRef what) {
  if (view.dtype != spec.dtype)
    return error(llvm::formatv("{4} '{0}'{3} has dtype {1} but the model expects {2}", spec.name,
                               dtypeName(view.dtype), dtypeName(spec.dtype), what, kind));
  if (view.shape != ArrayRef<int64_t>(spec.shape))
    return error(kind + " '" + spec.name + "'" + what + " has shape " +
                 shapeText(shapeOf(view)) + " but the model expects " + shapeText(spec.shape));
  if (!view.data && *checkedElementCount(spec.shape) > 0)
    return error(kind + " '" + spec.name + "'" + what + " has no data");
  return llvm::Error::success();
}

/// Every view names one of `specs`, once.
llvm::Error checkViewNames(ArrayRef<TensorView> views, const std::vector<TensorSpec> &specs,
                           StringRef kind, StringRef what) {
  for (auto [i, view] : llvm::enumerate(views)) {
    bool known = llvm::any_of(specs, [&](const TensorSpec &s) { return s.name == view.name; });
    if (!known)
      return error("unknown " + kind + " '" + view.name + "'" + what +
                   " (pf-run --describe lists the model's " + kind + "s)");
    if (findView(views.take_front(i), view.name))
      return error(kind + " '" + view.name + "'" + what + " is given twice");
  }
  return llvm::Error::success();
}

} // namespace

namespace mlir::pf::driver::detail {
/// The entry's memory on the context's backend (CompiledModel::Options::
/// deviceBuffers): parameters and constants copied in once, the arena, and
/// one block per input and output that each run copies in and out.
struct DeviceBuffers {
  pfrt_context *context = nullptr;
  std::vector<void *> blocks; ///< every allocation, freed at the end
  std::vector<void *> buffer; ///< per entry buffer: its copy (params, constants)
  std::vector<void *> inputs, outputs;
  void *arena = nullptr;

  ~DeviceBuffers() {
    for (void *b : blocks)
      pfrt_free(context, b);
  }

  llvm::Expected<void *> allocate(int64_t bytes, llvm::StringRef what) {
    void *data = nullptr;
    if (pfrt_alloc(context, bytes, &data) != PFRT_OK)
      return error("cannot allocate " + what + " on the " + pfrt_backend_name(context) +
                   " backend: " + pfrt_last_error(context));
    blocks.push_back(data);
    return data;
  }

  llvm::Error copyIn(void *device, const void *host, int64_t bytes, llvm::StringRef what) {
    pfrt_tensor view = pf_aot_byte_view(device, bytes);
    if (bytes > 0 && pfrt_copy_from_host(context, host, &view) != PFRT_OK)
      return error("copying " + what + " in: " + pfrt_last_error(context));
    return llvm::Error::success();
  }

  llvm::Error copyOut(void *host, void *device, int64_t bytes, llvm::StringRef what) {
    pfrt_tensor view = pf_aot_byte_view(device, bytes);
    if (bytes > 0 && pfrt_copy_to_host(context, &view, host) != PFRT_OK)
      return error("copying " + what + " out: " + pfrt_last_error(context));
    return llvm::Error::success();
  }

  /// Allocates everything `entry` binds and copies its parameters and
  /// constants in. Several entries of one program (CompiledProgram) pass
  /// the program's backend parameters by name and its one arena instead.
  static llvm::Expected<std::unique_ptr<DeviceBuffers>>
  create(pfrt_context *context, const LoweredEntry &entry,
         const std::map<std::string, void *> *sharedParameters = nullptr,
         void *sharedArena = nullptr) {
    auto device = std::make_unique<DeviceBuffers>();
    device->context = context;
    device->buffer.assign(entry.buffers.size(), nullptr);
    for (auto [i, b] : llvm::enumerate(entry.buffers)) {
      if (!b.hostData)
        continue;
      if (b.kind == mlir::pf::BufferKind::Param && sharedParameters) {
        auto shared = sharedParameters->find(b.name);
        if (shared == sharedParameters->end())
          return error("parameter '" + b.name + "' has no backend copy");
        device->buffer[i] = shared->second;
        continue;
      }
      std::string what = b.name.empty() ? "a constant" : "parameter '" + b.name + "'";
      auto data = device->allocate(b.bytes, what);
      if (!data)
        return data.takeError();
      device->buffer[i] = *data;
      if (auto err = device->copyIn(*data, b.hostData, b.bytes, what))
        return std::move(err);
    }
    auto specBlocks = [&](const std::vector<TensorSpec> &specs, std::vector<void *> &out,
                          llvm::StringRef kind) -> llvm::Error {
      for (const TensorSpec &spec : specs) {
        auto data = device->allocate(*checkedElementCount(spec.shape) * dtypeBytes(spec.dtype),
                                     (kind + " '" + spec.name + "'").str());
        if (!data)
          return data.takeError();
        out.push_back(*data);
      }
      return llvm::Error::success();
    };
    if (auto err = specBlocks(entry.inputSpecs, device->inputs, "input"))
      return std::move(err);
    if (auto err = specBlocks(entry.outputSpecs, device->outputs, "output"))
      return std::move(err);
    if (sharedArena) {
      device->arena = sharedArena;
      return device;
    }
    auto arena = device->allocate(entry.arenaBytes, "the arena");
    if (!arena)
      return arena.takeError();
    device->arena = *arena;
    return device;
  }
};
} // namespace mlir::pf::driver::detail

using mlir::pf::driver::detail::DeviceBuffers;

namespace {
/// Checks `inputs` and `outputs` against the entry's, binds every descriptor
/// (inputs, outputs, scratch for outputs not asked for, arena, parameters
/// and constants) and calls the entry. Outputs the program may leave partly
/// unwritten (TensorSpec::zeroFill, #pf.io's zero_fill) start zeroed, as
/// fresh arrays do; `outputsZeroed` says the caller's already are. The others
/// are written whole by the run, so their buffers are handed over as they
/// are: no memset of BERT-base's 125 MB of logits before every forward.
///
/// With `device`, the step runs on the backend's copies: the inputs are
/// copied in, the outputs to zero zeroed there, and all copied out after.
llvm::Error bindAndCall(LoweredEntry &entry, pfrt_context *context, void *arena,
                        ArrayRef<TensorView> inputs, ArrayRef<TensorView> outputs,
                        llvm::StringRef what, bool outputsZeroed = false,
                        DeviceBuffers *device = nullptr, int64_t *stageValueCopies = nullptr) {
  std::vector<const void *> inputData(entry.inputSpecs.size());
  // Views already in backend memory are bound as they are.
  std::vector<bool> inputInPlace(entry.inputSpecs.size()), outputInPlace(entry.outputSpecs.size());
  for (auto [i, spec] : llvm::enumerate(entry.inputSpecs)) {
    const TensorView *view = findView(inputs, spec.name);
    if (!view)
      return error("missing input '" + spec.name + "'" + what);
    if (auto err = checkView(*view, spec, "input", what))
      return err;
    if (view->onBackend && !device)
      return error("input '" + spec.name + "'" + what +
                   " is in backend memory but the entries run on host memory");
    inputData[i] = view->data;
    inputInPlace[i] = view->onBackend;
  }
  auto countCopy = [&](const TensorSpec &spec) {
    if (stageValueCopies && mlir::pf::isStageValueName(spec.name))
      ++*stageValueCopies;
  };
  if (auto err = checkViewNames(inputs, entry.inputSpecs, "input", what))
    return err;
  if (auto err = checkViewNames(outputs, entry.outputSpecs, "output", what))
    return err;
  std::vector<void *> outputData(entry.outputSpecs.size());
  std::vector<std::unique_ptr<char[]>> scratch;
  for (auto [i, spec] : llvm::enumerate(entry.outputSpecs)) {
    int64_t bytes = *checkedElementCount(spec.shape) * dtypeBytes(spec.dtype);
    const bool zero = spec.zeroFill;
    if (const TensorView *view = findView(outputs, spec.name)) {
      if (auto err = checkView(*view, spec, "output", what))
        return err;
      if (view->onBackend && !device)
        return error("output '" + spec.name + "'" + what +
                     " is in backend memory but the entries run on host memory");
      outputData[i] = view->data;
      outputInPlace[i] = view->onBackend;
      if (bytes > 0 && zero && !outputsZeroed && !view->onBackend)
        std::memset(view->data, 0, bytes);
    } else {
      // Value-initialized (zeros) only where the program may not write it all.
      scratch.push_back(zero ? std::make_unique<char[]>(bytes)
                             : std::unique_ptr<char[]>(new char[bytes]));
      outputData[i] = scratch.back().get();
    }
  }
  std::vector<void *> hostOutputs = outputData;
  if (device) {
    for (auto [i, spec] : llvm::enumerate(entry.inputSpecs)) {
      if (inputInPlace[i])
        continue;
      int64_t bytes = *checkedElementCount(spec.shape) * dtypeBytes(spec.dtype);
      if (auto err =
              device->copyIn(device->inputs[i], inputData[i], bytes, "input '" + spec.name + "'"))
        return err;
      countCopy(spec);
      inputData[i] = device->inputs[i];
    }
    for (auto [i, spec] : llvm::enumerate(entry.outputSpecs)) {
      void *where = outputInPlace[i] ? outputData[i] : device->outputs[i];
      pfrt_tensor view =
          pf_aot_byte_view(where, *checkedElementCount(spec.shape) * dtypeBytes(spec.dtype));
      if (spec.zeroFill && view.shape[0] > 0 && pfrt_fill(context, &view, 0.0) != PFRT_OK)
        return error("zeroing output '" + spec.name + "': " + pfrt_last_error(context));
      outputData[i] = where;
    }
    arena = device->arena;
  }
  for (size_t t = 0; t < entry.table.size(); ++t) {
    int64_t buffer = entry.tensorBuffer[t];
    const LoweredEntry::BufferRef &b = entry.buffers[buffer];
    void *data = nullptr;
    if (b.kind == mlir::pf::BufferKind::Input)
      data = const_cast<void *>(inputData[b.index]);
    else if (b.kind == mlir::pf::BufferKind::Output)
      data = outputData[b.index];
    else if (b.kind == mlir::pf::BufferKind::Arena)
      data = static_cast<char *>(arena) + b.offset;
    else
      data = device ? device->buffer[buffer] : const_cast<void *>(b.hostData);
    entry.table[t].data = data;
  }
  int64_t result = entry.function(context, entry.table.data());
  // Kernels of a device backend run asynchronously: their errors surface
  // here, before any result is read.
  if (device && result == 0 && pfrt_synchronize(context) != PFRT_OK)
    return error(llvm::formatv("the step{0} failed on the {1} backend: {2}", what,
                               pfrt_backend_name(context), pfrt_last_error(context)));
  if (result != 0) {
    int64_t op = (result >> 32) - 1;
    std::string where = op >= 0 && op < int64_t(entry.opNames.size())
                            ? entry.opNames[op]
                            : std::string("output copy");
    return error(llvm::formatv("kernel failed at op #{0} {1}{4}: {2} ({3})", op, where,
                               pfrt_last_error(context),
                               pfrt_status_string(int32_t(result & 0xffffffff)), what));
  }
  if (device)
    for (auto [i, spec] : llvm::enumerate(entry.outputSpecs)) {
      if (outputInPlace[i])
        continue;
      if (auto err = device->copyOut(hostOutputs[i], device->outputs[i],
                                     *checkedElementCount(spec.shape) * dtypeBytes(spec.dtype),
                                     "output '" + spec.name + "'"))
        return err;
      countCopy(spec);
    }
  return llvm::Error::success();
}

/// bindAndCall over NumPy-style arrays: `outputs` receives every output.
llvm::Error bindAndCall(LoweredEntry &entry, pfrt_context *context, void *arena,
                        const std::map<std::string, NpyArray> &inputs,
                        std::map<std::string, NpyArray> &outputs, llvm::StringRef what,
                        DeviceBuffers *device = nullptr, int64_t *stageValueCopies = nullptr) {
  std::vector<TensorView> inputViews;
  for (const auto &[name, array] : inputs)
    inputViews.push_back(
        {name, array.dtype, array.shape, const_cast<char *>(array.data.data())});
  std::vector<TensorView> outputViews;
  for (const TensorSpec &spec : entry.outputSpecs) {
    NpyArray &array = outputs[spec.name];
    array.dtype = spec.dtype;
    array.shape = spec.shape;
    // An array kept from an earlier run keeps its storage: only outputs the
    // program may leave partly unwritten are zeroed again.
    const size_t bytes = array.numElements() * dtypeBytes(spec.dtype);
    if (spec.zeroFill)
      array.data.assign(bytes, 0);
    else
      array.data.resize(bytes);
    outputViews.push_back({spec.name, array.dtype, array.shape, array.data.data()});
  }
  return bindAndCall(entry, context, arena, inputViews, outputViews, what,
                     /*outputsZeroed=*/true, device, stageValueCopies);
}
} // namespace

/// The model being profiled; the JIT-compiled code calls the hooks below
/// around every kernel (a pf-run process runs one model at a time).
static CompiledModel::OpTiming *profiledOps = nullptr;
static size_t profiledOpCount = 0;
static thread_local std::chrono::steady_clock::time_point profileStart;

extern "C" void pf_profile_begin(int64_t) { profileStart = std::chrono::steady_clock::now(); }
extern "C" void pf_profile_end(int64_t op) {
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                        profileStart)
                  .count();
  if (profiledOps && op >= 0 && size_t(op) < profiledOpCount)
    profiledOps[op].ms.push_back(ms);
}

namespace {
/// Points the profile hooks at one model's op timings for one call.
class ProfiledCall {
public:
  explicit ProfiledCall(std::vector<CompiledModel::OpTiming> &timings) {
    profiledOps = timings.data();
    profiledOpCount = timings.size();
  }
  ~ProfiledCall() {
    profiledOps = nullptr;
    profiledOpCount = 0;
  }
};
} // namespace

struct CompiledModel::Impl {
  std::unique_ptr<ExecutionEngine> engine;
  pfrt_context *context = nullptr;
  LoweredEntry entry;
  std::vector<std::vector<char>> constants;
  std::vector<OpTiming> timings;
  void *arena = nullptr;
  std::unique_ptr<DeviceBuffers> device;
  /// Options::ownParameters: the host copies are the model's own (else the
  /// module's weights, which the step never changes).
  bool ownParameters = false;

  ~Impl() {
    std::free(arena);
    device.reset(); // before its context
    if (context)
      pfrt_context_destroy(context);
  }
};

CompiledModel::CompiledModel() : impl(std::make_unique<Impl>()) {}
CompiledModel::~CompiledModel() = default;

llvm::Error CompiledModel::lower(ModuleOp module, const std::string &function, bool profile,
                                 CompiledModel &modelRef) {
  CompiledModel *model = &modelRef;
  Impl &impl = *model->impl;
  MLIRContext *ctx = module.getContext();
  auto start = std::chrono::steady_clock::now();

  PassManager lower(ctx);
  mlir::pf::PFLowerToRuntimeOptions lowerOptions;
  lowerOptions.functionName = function;
  lowerOptions.profile = profile;
  lower.addPass(mlir::pf::createPFLowerToRuntime(lowerOptions));
  if (failed(lower.run(module)))
    return error("lowering to the runtime failed");
  auto entry = module.lookupSymbol<func::FuncOp>("pf_main");
  if (!entry)
    return error("lowering produced no pf_main");

  auto plan = entry->getAttrOfType<mlir::pf::RuntimePlanAttr>(mlir::pf::RuntimePlanAttr::kAttrName);
  if (!plan)
    return error("lowering produced no runtime plan on pf_main");
  SymbolTable symbols(module);
  if (auto err = readPlan(plan, symbols, impl.constants, impl.entry))
    return err;
  model->inputSpecs = impl.entry.inputSpecs;
  model->outputSpecs = impl.entry.outputSpecs;
  model->compileStats.arenaBytes = impl.entry.arenaBytes;
  model->compileStats.peakLiveBytes = impl.entry.peakLiveBytes;
  model->compileStats.parameterBytes = impl.entry.parameterBytes;
  model->compileStats.kernelCalls = int64_t(impl.entry.opNames.size());
  entry->removeAttr(mlir::pf::RuntimePlanAttr::kAttrName);
  stripPFAttributes(module);

  PassManager toLLVM(ctx);
  mlir::pf::buildStandardLLVMLoweringPipeline(toLLVM);
  if (failed(toLLVM.run(module)))
    return error("lowering to the LLVM dialect failed (see the diagnostics above)");
  model->compileStats.lowerSeconds = secondsSince(start);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<CompiledModel>>
CompiledModel::compile(ModuleOp module, const Options &compileOptions) {
  std::unique_ptr<CompiledModel> model(new CompiledModel());
  Impl &impl = *model->impl;
  MLIRContext *ctx = module.getContext();
  bool profile = compileOptions.profile;
  if (auto err = lower(module, compileOptions.function, profile, *model))
    return std::move(err);
  impl.ownParameters = compileOptions.ownParameters;
  if (compileOptions.ownParameters)
    for (LoweredEntry::BufferRef &b : impl.entry.buffers)
      if (b.kind == mlir::pf::BufferKind::Param) {
        const char *data = static_cast<const char *>(b.hostData);
        impl.constants.emplace_back(data, data + b.bytes);
        b.hostData = impl.constants.back().data();
      }
  auto start = std::chrono::steady_clock::now();

  mlir::pf::driver::detail::initializeJit(ctx);
  // ExecutionEngineOptions::transformer is a function_ref: the function it
  // refers to must outlive create(), so it is a named local, not a temporary.
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  auto engine = ExecutionEngine::create(module, options);
  if (!engine)
    return engine.takeError();
  mlir::pf::driver::detail::registerRuntimeKernels(**engine);
  if (profile) {
    (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
      llvm::orc::SymbolMap map;
      map[interner("pf_profile_begin")] = {llvm::orc::ExecutorAddr::fromPtr(&pf_profile_begin),
                                           llvm::JITSymbolFlags::Exported};
      map[interner("pf_profile_end")] = {llvm::orc::ExecutorAddr::fromPtr(&pf_profile_end),
                                         llvm::JITSymbolFlags::Exported};
      return map;
    });
    for (const std::string &name : impl.entry.opNames)
      impl.timings.push_back({name, {}});
  }
  auto symbol = (*engine)->lookup("pf_main");
  if (!symbol)
    return symbol.takeError();
  impl.engine = std::move(*engine);
  impl.entry.function = reinterpret_cast<int64_t (*)(void *, void *)>(*symbol);
  model->compileStats.jitSeconds = secondsSince(start);

  auto context = createContext(compileOptions.threads, compileOptions.backend);
  if (!context)
    return context.takeError();
  impl.context = *context;
  if (pfrt_context_set_gemm_precision(impl.context, compileOptions.gemmPrecision) != PFRT_OK)
    return error(pfrt_last_error(impl.context));
  if (compileOptions.deviceBuffers || compileOptions.backend != PFRT_BACKEND_CPU) {
    if (profile)
      return error("kernel profiles time host calls: they need the host buffers of the CPU "
                   "backend");
    auto device = DeviceBuffers::create(impl.context, impl.entry);
    if (!device)
      return device.takeError();
    impl.device = std::move(*device);
    return model;
  }
  auto arena = allocateArena(model->compileStats.arenaBytes);
  if (!arena)
    return arena.takeError();
  impl.arena = *arena;
  return model;
}

llvm::Error CompiledModel::run(const std::map<std::string, NpyArray> &inputs,
                               std::map<std::string, NpyArray> &outputs) {
  ProfiledCall profiled(impl->timings);
  return bindAndCall(impl->entry, impl->context, impl->arena, inputs, outputs, "",
                     impl->device.get());
}

llvm::Error CompiledModel::run(ArrayRef<TensorView> inputs, ArrayRef<TensorView> outputs) {
  ProfiledCall profiled(impl->timings);
  return bindAndCall(impl->entry, impl->context, impl->arena, inputs, outputs, "",
                     /*outputsZeroed=*/false, impl->device.get());
}

bool CompiledModel::updatesParameters(ModuleOp module) {
  bool updates = false;
  module->walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "pf" && !isMemoryEffectFree(op))
      updates = true;
  });
  return updates;
}

const std::vector<CompiledModel::OpTiming> &CompiledModel::profile() const {
  return impl->timings;
}

//===--- Ahead-of-time output -----------------------------------------------===//

namespace {
/// The symbol of model.o that holds its --aot run's fingerprint, which
/// model_plan.h repeats (PF_MODEL_FINGERPRINT): pf-aot-run compares the two,
/// so that an object and a plan of different runs are never linked together
/// unnoticed.
constexpr llvm::StringLiteral kFingerprintSymbol = "pf_model_fingerprint";

/// Translates `module` (LLVM dialect) and writes it as a PIC object for the
/// host to `path` in `files`, with `fingerprint` as the exported global
/// `fingerprintSymbol`; empty: none (a second object of one library, whose
/// first holds it: two would collide at the link).
llvm::Error emitObject(ModuleOp module, StringRef path, OutputFileSet &files,
                       uint64_t fingerprint,
                       const std::function<void(llvm::Module &)> &addGlobals = nullptr,
                       StringRef fingerprintSymbol = kFingerprintSymbol) {
  MLIRContext *ctx = module.getContext();
  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return error("translation to LLVM IR failed");
  auto *i64 = llvm::Type::getInt64Ty(llvmContext);
  if (!fingerprintSymbol.empty())
    new llvm::GlobalVariable(*llvmModule, i64, /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantInt::get(i64, fingerprint), fingerprintSymbol);
  if (addGlobals)
    addGlobals(*llvmModule);
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return builder.takeError();
  // Position-independent so the object links into executables and shared
  // libraries alike.
  builder->setRelocationModel(llvm::Reloc::PIC_);
  auto machine = builder->createTargetMachine();
  if (!machine)
    return machine.takeError();
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  if (auto err = makeOptimizingTransformer(2, 0, machine->get())(llvmModule.get()))
    return err;
  bool canEmit = true;
  if (auto err = files.add(path, "", [&](llvm::raw_pwrite_stream &os) {
        llvm::legacy::PassManager pm;
        canEmit =
            !(*machine)->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile);
        if (canEmit)
          pm.run(*llvmModule);
      }))
    return err;
  if (!canEmit)
    return error("the host target cannot emit object files");
  return llvm::Error::success();
}

std::string cString(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// One number per compilation, in the object and in its description(s).
uint64_t newFingerprint() {
  std::random_device entropy;
  return (uint64_t(entropy()) << 32) ^ uint64_t(entropy()) ^
         uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// An ahead-of-time weights file: parameters and constants, each 64-byte
/// aligned, in the order planned. The entries of one library share it, so a
/// parameter is stored once (`parameterOffset`, by name) and each entry's
/// constants after what came before.
struct AotWeights {
  std::string bytes;
  std::map<std::string, int64_t> parameterOffset;
};

/// What an ahead-of-time entry's description holds besides its code: where
/// each descriptor's data lives (pf_aot.h's kinds), the entry's parameters by
/// name with their place in the weights, and the weights' size and the
/// fingerprint of the library.
struct AotPlan {
  std::vector<pf_model_tensor_info> tensors;
  std::vector<AotParameter> parameters;
  uint64_t fingerprint = 0;
  int64_t weightsBytes = 0;
};

/// Appends to `weights` the parameters of `entry` not yet there and its
/// constants, in buffer order (with fresh weights: every parameter and
/// constant, as one model's file). `weightsBytes` is the weights' size after
/// this entry; the entries of a library set it to the final size.
AotPlan planAot(const LoweredEntry &entry, AotWeights &weights, uint64_t fingerprint) {
  AotPlan plan;
  plan.fingerprint = fingerprint;
  std::vector<int64_t> weightOffset(entry.buffers.size(), -1);
  for (auto [i, b] : llvm::enumerate(entry.buffers)) {
    if (!b.hostData)
      continue;
    if (b.kind == mlir::pf::BufferKind::Param) {
      // Another entry's copy: the same pf.param, the same bytes.
      auto known = weights.parameterOffset.find(b.name);
      if (known != weights.parameterOffset.end()) {
        weightOffset[i] = known->second;
        continue;
      }
    }
    weights.bytes.append((64 - weights.bytes.size() % 64) % 64, '\0');
    weightOffset[i] = int64_t(weights.bytes.size());
    if (b.kind == mlir::pf::BufferKind::Param)
      weights.parameterOffset[b.name] = weightOffset[i];
    weights.bytes.append(static_cast<const char *>(b.hostData), b.bytes);
  }
  plan.weightsBytes = int64_t(weights.bytes.size());
  for (auto [t, desc] : llvm::enumerate(entry.table)) {
    int64_t buffer = entry.tensorBuffer[t];
    const LoweredEntry::BufferRef &b = entry.buffers[buffer];
    pf_model_tensor_info info;
    std::memset(&info, 0, sizeof info);
    info.kind = b.kind == mlir::pf::BufferKind::Input    ? PF_MODEL_INPUT
                : b.kind == mlir::pf::BufferKind::Output ? PF_MODEL_OUTPUT
                : b.hostData                             ? PF_MODEL_WEIGHTS
                                                         : PF_MODEL_ARENA;
    info.where = info.kind <= PF_MODEL_OUTPUT    ? b.index
                 : info.kind == PF_MODEL_WEIGHTS ? weightOffset[buffer]
                                                 : b.offset;
    info.dtype = desc.dtype;
    info.rank = desc.rank;
    for (int d = 0; d < desc.rank; ++d)
      info.shape[d] = desc.shape[d];
    plan.tensors.push_back(info);
    if (b.kind == mlir::pf::BufferKind::Param &&
        llvm::none_of(plan.parameters, [&](const AotParameter &p) { return p.name == b.name; }))
      plan.parameters.push_back({b.name, desc.dtype,
                                 std::vector<int64_t>(desc.shape, desc.shape + desc.rank),
                                 weightOffset[buffer], b.bytes});
  }
  llvm::sort(plan.parameters,
             [](const AotParameter &a, const AotParameter &b) { return a.name < b.name; });
  return plan;
}

/// The description pf_aot_model_describe() returns (pf_aot.h), as constant
/// globals of `m`: what examples/aot/model_library.c compiles from
/// model_plan.h, without a C compiler or pf's headers. `describeSymbol`
/// names the exported function that returns it, `mainName` the entry's
/// lowered function (a library of several entries has one of each per
/// entry; the private globals' names LLVM makes unique).
void addAotDescription(llvm::Module &m, const AotPlan &plan, const LoweredEntry &entry,
                       StringRef describeSymbol = PF_AOT_MODEL_SYMBOL,
                       StringRef mainName = "pf_main") {
  llvm::LLVMContext &c = m.getContext();
  auto *i32 = llvm::Type::getInt32Ty(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  auto *ptr = llvm::PointerType::get(c, 0);
  auto int32 = [&](int64_t v) { return llvm::ConstantInt::get(i32, v); };
  auto int64 = [&](int64_t v) { return llvm::ConstantInt::get(i64, v); };
  auto global = [&](llvm::Constant *value, const llvm::Twine &name) -> llvm::Constant * {
    return new llvm::GlobalVariable(m, value->getType(), /*isConstant=*/true,
                                    llvm::GlobalValue::PrivateLinkage, value, name);
  };
  // A table of `rows` of `type`, or null when empty (pf_aot.h allows it).
  auto table = [&](llvm::Type *type, llvm::ArrayRef<llvm::Constant *> rows,
                   const llvm::Twine &name) -> llvm::Constant * {
    if (rows.empty())
      return llvm::ConstantPointerNull::get(ptr);
    return global(llvm::ConstantArray::get(llvm::ArrayType::get(type, rows.size()), rows), name);
  };
  auto text = [&](llvm::StringRef s) {
    return global(llvm::ConstantDataArray::getString(c, s, /*AddNull=*/true), "pf_model_name");
  };

  auto *shapeType = llvm::ArrayType::get(i64, PFRT_MAX_RANK);
  auto *tensorType = llvm::StructType::get(c, {i32, i64, i32, i32, shapeType});
  std::vector<llvm::Constant *> tensors;
  for (const pf_model_tensor_info &t : plan.tensors) {
    std::vector<llvm::Constant *> dims;
    for (int d = 0; d < PFRT_MAX_RANK; ++d)
      dims.push_back(int64(t.shape[d]));
    tensors.push_back(llvm::ConstantStruct::get(
        tensorType, {int32(t.kind), int64(t.where), int32(t.dtype), int32(t.rank),
                     llvm::ConstantArray::get(shapeType, dims)}));
  }
  auto *ioType = llvm::StructType::get(c, {ptr, i64});
  auto ioTable = [&](const std::vector<TensorSpec> &specs, const std::vector<int64_t> &indices,
                     const char *name) {
    std::vector<llvm::Constant *> rows;
    for (auto [i, spec] : llvm::enumerate(specs))
      rows.push_back(llvm::ConstantStruct::get(ioType, {text(spec.name), int64(indices[i])}));
    return table(ioType, rows, name);
  };
  std::vector<llvm::Constant *> opNames;
  for (const std::string &name : entry.opNames)
    opNames.push_back(text(name));
  opNames.push_back(llvm::ConstantPointerNull::get(ptr));
  llvm::Function *main = m.getFunction(mainName);
  auto *modelType = llvm::StructType::get(
      c, {i32, i32, i64, i64, i64, i64, i64, ptr, ptr, ptr, ptr, i64, ptr, i32, i64});
  llvm::Constant *model = global(
      llvm::ConstantStruct::get(
          modelType,
          {int32(PF_AOT_MODEL_VERSION), int32(PFRT_ABI_VERSION), int64(int64_t(tensors.size())),
           int64(int64_t(entry.inputSpecs.size())), int64(int64_t(entry.outputSpecs.size())),
           int64(entry.arenaBytes), int64(plan.weightsBytes),
           table(tensorType, tensors, "pf_model_tensors"),
           ioTable(entry.inputSpecs, entry.inputTensor, "pf_model_inputs"),
           ioTable(entry.outputSpecs, entry.outputTensor, "pf_model_outputs"),
           main ? static_cast<llvm::Constant *>(main) : llvm::ConstantPointerNull::get(ptr),
           int64(int64_t(entry.opNames.size())), table(ptr, opNames, "pf_model_op_names"),
           int32(0), int64(int64_t(plan.fingerprint))}),
      "pf_model_description");
  auto *describe =
      llvm::Function::Create(llvm::FunctionType::get(ptr, /*isVarArg=*/false),
                             llvm::GlobalValue::ExternalLinkage, describeSymbol, m);
  llvm::ReturnInst::Create(c, model, llvm::BasicBlock::Create(c, "entry", describe));
}
} // namespace

llvm::Error CompiledModel::writeAot(ModuleOp module, const std::string &directory,
                                    const std::string &function, bool profileHooks) {
  CompiledModel model;
  if (auto err = lower(module, function, profileHooks, model))
    return err;
  Impl &impl = *model.impl;
  AotWeights aotWeights;
  const AotPlan plan = planAot(impl.entry, aotWeights, newFingerprint());
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return error("cannot create '" + directory + "': " + ec.message());
  auto file = [&](StringRef name) {
    SmallString<256> path(directory);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  // The three files are one set: written beside, then renamed together,
  // so a failure (a full disk) leaves the previous set whole.
  OutputFileSet files;
  const uint64_t fingerprint = plan.fingerprint; // in model.o and in model_plan.h
  if (auto err = emitObject(module, file("model.o"), files, fingerprint))
    return err;
  const std::string &weights = aotWeights.bytes;
  if (auto err = files.add(file("model.weights"), "",
                           [&](llvm::raw_pwrite_stream &os) { os << weights; }))
    return err;

  std::string h;
  llvm::raw_string_ostream os(h);
  os << "/* Generated by pf-run --aot: the tensor plan of pf_main (see docs/runtime.md). */\n"
     << "#ifndef PF_MODEL_PLAN_H\n#define PF_MODEL_PLAN_H\n\n#include <stdint.h>\n"
     << "#include \"pf/Runtime/pf_aot.h\"\n\n"
     << "#define PF_MODEL_NUM_TENSORS " << impl.entry.table.size() << "\n"
     << "#define PF_MODEL_NUM_INPUTS " << model.inputSpecs.size() << "\n"
     << "#define PF_MODEL_NUM_OUTPUTS " << model.outputSpecs.size() << "\n"
     << "#define PF_MODEL_ARENA_BYTES " << model.compileStats.arenaBytes << "\n"
     << "#define PF_MODEL_WEIGHTS_BYTES " << weights.size() << "\n"
     << "#define PF_MODEL_NUM_OPS " << impl.entry.opNames.size() << "\n"
     << "/* 1: every kernel call is wrapped in pf_profile_begin/end(op), which the\n"
     << "   driver defines (pf-aot-run --profile). */\n"
     << "#define PF_MODEL_PROFILE_HOOKS " << (profileHooks ? 1 : 0) << "\n"
     << "/* model.o of the same run holds it as " << kFingerprintSymbol << ". */\n"
     << "#define PF_MODEL_FINGERPRINT " << fingerprint << "ULL\n\n"
     << "/* Where each descriptor's data lives (pf_aot.h). */\n"
     << "static const pf_model_tensor_info pf_model_tensors[PF_MODEL_NUM_TENSORS] = {\n";
  for (const pf_model_tensor_info &t : plan.tensors) {
    os << "  {" << t.kind << ", " << t.where << ", " << t.dtype << ", " << t.rank << ", {";
    for (int d = 0; d < t.rank; ++d)
      os << (d ? ", " : "") << t.shape[d];
    os << (t.rank == 0 ? "0" : "") << "}},\n";
  }
  os << "};\n\n";
  auto ioTable = [&](StringRef name, const std::vector<TensorSpec> &specs,
                     const std::vector<int64_t> &tensors, StringRef count) {
    os << "static const pf_model_io " << name << "[" << count << "] = {\n";
    for (auto [i, spec] : llvm::enumerate(specs))
      os << "  {" << cString(spec.name) << ", " << tensors[i] << "},\n";
    os << "};\n";
  };
  os << "/* The ops of the step, by index (a failing kernel's status names one). */\n"
     << "static const char *const pf_model_op_names[PF_MODEL_NUM_OPS + 1] = {\n";
  for (const std::string &name : impl.entry.opNames)
    os << "  " << cString(name) << ",\n";
  os << "  0};\n\n";
  ioTable("pf_model_inputs", model.inputSpecs, impl.entry.inputTensor, "PF_MODEL_NUM_INPUTS");
  ioTable("pf_model_outputs", model.outputSpecs, impl.entry.outputTensor, "PF_MODEL_NUM_OUTPUTS");
  os << R"(
/* The compiled step (pf_model_main_fn): 0, or (op index + 1) << 32 | pfrt
   status of the first failing kernel. */
int64_t pf_main(pfrt_context *ctx, pfrt_tensor *table);

/* Fills table[PF_MODEL_NUM_TENSORS] from the caller's buffers: inputs[i] and
   outputs[i] in pf_model_inputs / pf_model_outputs order, the contents of
   model.weights (64-byte aligned) and an arena of PF_MODEL_ARENA_BYTES. */
static inline void pf_model_bind(pfrt_tensor *table, void *arena, const void *weights,
                                 void *const *inputs, void *const *outputs) {
  for (int i = 0; i < PF_MODEL_NUM_TENSORS; ++i) {
    const pf_model_tensor_info *t = &pf_model_tensors[i];
    char *data = t->kind == PF_MODEL_INPUT    ? (char *)inputs[t->where]
                 : t->kind == PF_MODEL_OUTPUT ? (char *)outputs[t->where]
                 : t->kind == PF_MODEL_WEIGHTS ? (char *)weights + t->where
                                               : (char *)arena + t->where;
    table[i].data = data;
    table[i].dtype = t->dtype;
    table[i].rank = t->rank;
    for (int d = 0; d < PFRT_MAX_RANK; ++d)
      table[i].shape[d] = d < t->rank ? t->shape[d] : 0;
  }
}

#endif /* PF_MODEL_PLAN_H */
)";
  if (auto err =
          files.add(file("model_plan.h"), "", [&](llvm::raw_pwrite_stream &header) { header << h; }))
    return err;
  return files.commit();
}

namespace {
/// The system's C compiler driver, which links an ahead-of-time library
/// (design decision 3 of docs/artifacts.md): $CC, else cc. Found before the
/// compilation, so a machine without one fails fast.
llvm::Expected<std::string> findCDriver(const std::string &library) {
  const char *driverName = std::getenv("CC");
  std::string driverWanted = driverName && *driverName ? driverName : "cc";
  auto linker = llvm::sys::findProgramByName(driverWanted);
  if (!linker)
    return error("no C compiler driver to link " + library + " ('" + driverWanted +
                 "' not found): install one or set CC");
  return *linker;
}

/// emitObject into a new temporary file `object`, which `remover` deletes.
llvm::Error emitTemporaryObject(ModuleOp module, llvm::SmallString<128> &object,
                                llvm::FileRemover &remover, uint64_t fingerprint,
                                const std::function<void(llvm::Module &)> &addGlobals,
                                StringRef fingerprintSymbol = kFingerprintSymbol) {
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("pf-model", "o", object))
    return error("cannot create a temporary object file: " + ec.message());
  remover.setFile(object);
  OutputFileSet objectFile;
  if (auto err = emitObject(module, object, objectFile, fingerprint, addGlobals,
                            fingerprintSymbol))
    return err;
  return objectFile.commit();
}

/// Links `objects` with `linker` into a shared library, beside `library` (so
/// that the caller renames it with the weights, OutputFileSet), and returns
/// its bytes.
llvm::Expected<std::string> linkSharedLibrary(StringRef linker, ArrayRef<StringRef> objects,
                                              const std::string &library) {
  llvm::SmallString<256> linked(library);
  linked += ".link";
  llvm::FileRemover removeLinked(linked);
  std::string message;
  SmallVector<StringRef> args = {linker, "-shared", "-o", linked};
  args.append(objects.begin(), objects.end());
  if (llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 0, 0, &message) != 0)
    return error("linking " + library + " with " + linker + " failed" +
                 (message.empty() ? std::string() : ": " + message));
  auto buffer = llvm::MemoryBuffer::getFile(linked);
  if (!buffer)
    return error("cannot read " + std::string(linked) + ": " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

/// linkSharedLibrary, then `library` and `weights` (the bytes `weightBytes`)
/// replaced together or not at all.
llvm::Error linkLibraryWithWeights(StringRef linker, ArrayRef<StringRef> objects,
                                   const std::string &library, const std::string &weights,
                                   const std::string &weightBytes) {
  auto bytes = linkSharedLibrary(linker, objects, library);
  if (!bytes)
    return bytes.takeError();
  OutputFileSet files;
  if (auto err = files.add(library, "", [&](llvm::raw_pwrite_stream &os) { os << *bytes; }))
    return err;
  if (auto err = files.add(weights, "", [&](llvm::raw_pwrite_stream &os) { os << weightBytes; }))
    return err;
  return files.commit();
}
} // namespace

llvm::Expected<AotLibrary> CompiledModel::writeAotLibrary(ModuleOp module,
                                                         const std::string &library,
                                                         const std::string &weights) {
  auto linker = findCDriver(library);
  if (!linker)
    return linker.takeError();
  CompiledModel model;
  if (auto err = lower(module, "", /*profile=*/false, model))
    return std::move(err);
  const LoweredEntry &entry = model.impl->entry;
  AotWeights aotWeights;
  AotPlan plan = planAot(entry, aotWeights, newFingerprint());
  llvm::SmallString<128> object;
  llvm::FileRemover removeObject;
  if (auto err = emitTemporaryObject(module, object, removeObject, plan.fingerprint,
                                     [&](llvm::Module &m) { addAotDescription(m, plan, entry); }))
    return std::move(err);
  if (auto err = linkLibraryWithWeights(*linker, {object}, library, weights, aotWeights.bytes))
    return std::move(err);
  AotLibrary written;
  written.parameters = std::move(plan.parameters);
  written.fingerprint = plan.fingerprint;
  written.weightsBytes = int64_t(aotWeights.bytes.size());
  written.inputs = model.inputSpecs;
  written.outputs = model.outputSpecs;
  return written;
}

llvm::Expected<std::unique_ptr<CompiledModel>>
CompiledModel::compile(ModuleOp module, int threads, const std::string &function, bool profile) {
  Options options;
  options.threads = threads;
  options.function = function;
  options.profile = profile;
  return compile(module, options);
}

std::vector<CompiledModel::Parameter> CompiledModel::parameters() const {
  std::vector<Parameter> result;
  for (size_t t = 0; t < impl->entry.table.size(); ++t) {
    const LoweredEntry::BufferRef &b = impl->entry.buffers[impl->entry.tensorBuffer[t]];
    if (b.kind != mlir::pf::BufferKind::Param ||
        llvm::any_of(result, [&](const Parameter &p) { return p.name == b.name; }))
      continue;
    Parameter p;
    p.name = b.name;
    p.dtype = impl->entry.table[t].dtype;
    p.shape.assign(impl->entry.table[t].shape, impl->entry.table[t].shape + impl->entry.table[t].rank);
    p.data = const_cast<void *>(b.hostData);
    p.bytes = b.bytes;
    result.push_back(std::move(p));
  }
  llvm::sort(result, [](const Parameter &a, const Parameter &b) { return a.name < b.name; });
  return result;
}

llvm::Error CompiledModel::copyParameters(bool toHost) {
  DeviceBuffers *device = impl->device.get();
  // Weights the model does not own are the module's and never change on the
  // backend: nothing to bring back (nor to write into the module's data).
  if (!device || (toHost && !impl->ownParameters))
    return llvm::Error::success();
  for (auto [i, b] : llvm::enumerate(impl->entry.buffers)) {
    if (b.kind != mlir::pf::BufferKind::Param)
      continue;
    std::string what = "parameter '" + b.name + "'";
    if (auto err = toHost ? device->copyOut(const_cast<void *>(b.hostData), device->buffer[i],
                                            b.bytes, what)
                          : device->copyIn(device->buffer[i], b.hostData, b.bytes, what))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error CompiledModel::copyParametersToHost() { return copyParameters(/*toHost=*/true); }

llvm::Error CompiledModel::copyParametersToBackend() { return copyParameters(/*toHost=*/false); }

//===--- Several entries in one engine ---------------------------------------===//

CompiledProgram::CompiledProgram() = default;
CompiledProgram::~CompiledProgram() {
  std::free(arena.data);
  device.clear(); // before its context
  if (context)
    pfrt_context_destroy(context);
}

namespace {
/// Moves the lowered entry, its globals (renamed after the function, since
/// every lowering numbers its own from 0) and the runtime declarations not
/// yet there from `lowered` into `combined`. Parameters and other pf ops stay
/// behind: the host binds the parameters.
llvm::Error mergeLowered(ModuleOp lowered, ModuleOp combined, StringRef function) {
  SymbolTable loweredSymbols(lowered);
  for (auto global : llvm::make_early_inc_range(lowered.getOps<LLVM::GlobalOp>()))
    if (failed(loweredSymbols.rename(global, ("__" + function + global.getSymName()).str())))
      return error("cannot rename the global '" + global.getSymName() + "' of '" + function + "'");
  SymbolTable combinedSymbols(combined);
  for (Operation &op : llvm::make_early_inc_range(*lowered.getBody())) {
    if (op.getDialect() && op.getDialect()->getNamespace() == "pf")
      continue;
    if (auto symbol = dyn_cast<SymbolOpInterface>(op))
      if (combinedSymbols.lookup(symbol.getNameAttr())) {
        auto func = dyn_cast<func::FuncOp>(op);
        if (func && func.isExternal())
          continue; // a runtime kernel another entry already declares
        return error("the lowering of '" + function + "' defines '" + symbol.getName() +
                     "' a second time");
      }
    op.moveBefore(combined.getBody(), combined.getBody()->end());
  }
  return llvm::Error::success();
}

/// Lowers `function` of `module` as the entry pf_<function> of a module of
/// several (CompiledProgram, a rank's library): with pf-lower-to-runtime on
/// a clone, reads the entry's plan into `entry` (materialized data kept in
/// `constants`) and merges the lowered code into `combined`.
llvm::Error lowerEntry(ModuleOp module, const std::string &function, ModuleOp combined,
                       std::vector<std::vector<char>> &constants, LoweredEntry &entry) {
  auto func = module.lookupSymbol<func::FuncOp>(function);
  if (!func || func.isExternal())
    return error("the module has no function named '" + function + "' with a body");
  OwningOpRef<ModuleOp> clone = module.clone();
  // The per-rank programs call stage functions that the lowering drops.
  for (auto rankProgram : llvm::make_early_inc_range(clone->getOps<mlir::pf::RankProgramOp>()))
    rankProgram.erase();
  PassManager lower(module.getContext());
  mlir::pf::PFLowerToRuntimeOptions lowerOptions;
  lowerOptions.functionName = function;
  lowerOptions.entryName = "pf_" + function;
  lower.addPass(mlir::pf::createPFLowerToRuntime(lowerOptions));
  if (failed(lower.run(*clone)))
    return error("lowering '" + function + "' to the runtime failed");
  auto entryFunc = clone->lookupSymbol<func::FuncOp>(lowerOptions.entryName);
  auto plan = entryFunc ? entryFunc->getAttrOfType<mlir::pf::RuntimePlanAttr>(
                              mlir::pf::RuntimePlanAttr::kAttrName)
                        : mlir::pf::RuntimePlanAttr();
  if (!plan)
    return error("lowering '" + function + "' produced no runtime plan");
  SymbolTable symbols(*clone);
  // Parameter data outlives the clone: resource blobs belong to the
  // context, materialized values to `constants`.
  if (auto err = readPlan(plan, symbols, constants, entry))
    return err;
  entryFunc->removeAttr(mlir::pf::RuntimePlanAttr::kAttrName);
  return mergeLowered(*clone, combined, function);
}
} // namespace

llvm::Expected<std::unique_ptr<CompiledProgram>>
CompiledProgram::compile(ModuleOp module, const Options &options) {
  if (options.functions.empty())
    return error("CompiledProgram: no functions to compile");
  std::unique_ptr<CompiledProgram> program(new CompiledProgram());
  MLIRContext *ctx = module.getContext();
  OwningOpRef<ModuleOp> combined = ModuleOp::create(module.getLoc());
  std::map<std::string, size_t> parameterIndex;
  for (const std::string &function : options.functions) {
    if (program->hasEntry(function))
      return error("function '" + function + "' is listed twice");
    auto entry = std::make_unique<LoweredEntry>();
    if (auto err = lowerEntry(module, function, *combined, program->constants, *entry))
      return std::move(err);
    // One host copy per parameter name, shared by every entry.
    for (LoweredEntry::BufferRef &b : entry->buffers) {
      if (b.kind != mlir::pf::BufferKind::Param)
        continue;
      auto [it, added] = parameterIndex.try_emplace(b.name, program->parameterData.size());
      if (added) {
        const char *data = static_cast<const char *>(b.hostData);
        program->parameterData.emplace_back(data, data + b.bytes);
      } else if (int64_t(program->parameterData[it->second].size()) != b.bytes) {
        return error(llvm::formatv("parameter '{0}' has {1} bytes in '{2}' but {3} elsewhere",
                                   b.name, b.bytes, function,
                                   program->parameterData[it->second].size()));
      }
      b.hostData = program->parameterData[it->second].data();
    }
    for (size_t t = 0; t < entry->table.size(); ++t) {
      const LoweredEntry::BufferRef &b = entry->buffers[entry->tensorBuffer[t]];
      if (b.kind != mlir::pf::BufferKind::Param || program->parameter(b.name))
        continue;
      CompiledModel::Parameter p;
      p.name = b.name;
      p.dtype = entry->table[t].dtype;
      p.shape.assign(entry->table[t].shape, entry->table[t].shape + entry->table[t].rank);
      p.data = const_cast<void *>(b.hostData);
      p.bytes = b.bytes;
      program->params.push_back(std::move(p));
    }
    program->arena.bytes = std::max(program->arena.bytes, entry->arenaBytes);
    program->entryNames.push_back(function);
    program->lowered.push_back(std::move(entry));
  }
  llvm::sort(program->params, [](const CompiledModel::Parameter &a,
                                 const CompiledModel::Parameter &b) { return a.name < b.name; });

  PassManager toLLVM(ctx);
  mlir::pf::buildStandardLLVMLoweringPipeline(toLLVM);
  if (failed(toLLVM.run(*combined)))
    return error("lowering to the LLVM dialect failed (see the diagnostics above)");
  mlir::pf::driver::detail::initializeJit(ctx);
  // A named local: the options' transformer is a function_ref (see above).
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, nullptr);
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  auto engine = ExecutionEngine::create(*combined, engineOptions);
  if (!engine)
    return engine.takeError();
  mlir::pf::driver::detail::registerRuntimeKernels(**engine);
  program->engine = std::move(*engine);
  for (auto [function, entry] : llvm::zip_equal(program->entryNames, program->lowered)) {
    auto symbol = program->engine->lookup("pf_" + function);
    if (!symbol)
      return symbol.takeError();
    entry->function = reinterpret_cast<int64_t (*)(void *, void *)>(*symbol);
  }
  auto context = createContext(options.threads, options.backend, options.device);
  if (!context)
    return context.takeError();
  program->context = *context;
  if (pfrt_context_set_gemm_precision(program->context, options.gemmPrecision) != PFRT_OK)
    return error(pfrt_last_error(program->context));
  if (options.deviceBuffers || options.backend != PFRT_BACKEND_CPU) {
    if (auto err = program->placeOnBackend())
      return std::move(err);
    return program;
  }
  auto arenaData = allocateArena(program->arena.bytes);
  if (!arenaData)
    return arenaData.takeError();
  program->arena.data = *arenaData;
  return program;
}

llvm::Error mlir::pf::driver::detail::lowerRankPrograms(ModuleOp into,
                                                        ArrayRef<Operation *> programs,
                                                        bool overlapTransfers) {
  for (Operation *program : programs)
    into.getBody()->push_back(program->clone());
  PassManager lower(into.getContext());
  mlir::pf::PFLowerRankProgramsOptions lowering;
  lowering.overlap = overlapTransfers;
  lower.addPass(mlir::pf::createPFLowerRankPrograms(lowering));
  mlir::pf::buildStandardLLVMLoweringPipeline(lower);
  if (failed(lower.run(into)))
    return error("lowering the rank program to runtime calls failed (see the diagnostics above)");
  return llvm::Error::success();
}

llvm::Expected<RankLibrary>
CompiledProgram::writeRankLibrary(ModuleOp module, const std::vector<std::string> &functions,
                                  const std::vector<Operation *> &programs, bool overlapTransfers,
                                  const std::string &library, const std::string &weights) {
  if (functions.empty())
    return error("writeRankLibrary: no functions to compile");
  auto linker = findCDriver(library);
  if (!linker)
    return linker.takeError();
  MLIRContext *ctx = module.getContext();
  RankLibrary written;
  // The entries, lowered as compile() lowers them, in one module.
  OwningOpRef<ModuleOp> combined = ModuleOp::create(module.getLoc());
  std::vector<std::vector<char>> constants;
  std::vector<std::unique_ptr<LoweredEntry>> lowered;
  for (const std::string &function : functions) {
    if (llvm::any_of(written.entries,
                     [&](const RankLibrary::Entry &e) { return e.function == function; }))
      return error("function '" + function + "' is listed twice");
    auto entry = std::make_unique<LoweredEntry>();
    if (auto err = lowerEntry(module, function, *combined, constants, *entry))
      return std::move(err);
    RankLibrary::Entry described;
    described.function = function;
    described.describeSymbol = std::string(PF_AOT_MODEL_SYMBOL) + "__" + function;
    described.inputs = entry->inputSpecs;
    described.outputs = entry->outputSpecs;
    described.arenaBytes = entry->arenaBytes;
    written.entries.push_back(std::move(described));
    lowered.push_back(std::move(entry));
  }

  // One weights file: each parameter stored once, where every entry that
  // reads it binds it, and every entry's constants.
  written.fingerprint = newFingerprint();
  AotWeights aotWeights;
  std::vector<AotPlan> plans;
  for (auto [function, entry] : llvm::zip_equal(functions, lowered)) {
    plans.push_back(planAot(*entry, aotWeights, written.fingerprint));
    for (const AotParameter &p : plans.back().parameters) {
      auto known = llvm::find_if(written.parameters,
                                 [&](const AotParameter &q) { return q.name == p.name; });
      if (known == written.parameters.end())
        written.parameters.push_back(p);
      else if (known->bytes != p.bytes)
        return error(llvm::formatv("parameter '{0}' has {1} bytes in '{2}' but {3} elsewhere",
                                   p.name, p.bytes, function, known->bytes));
    }
  }
  llvm::sort(written.parameters,
             [](const AotParameter &a, const AotParameter &b) { return a.name < b.name; });
  // Known only now: every description binds the whole file.
  written.weightsBytes = int64_t(aotWeights.bytes.size());
  for (AotPlan &plan : plans)
    plan.weightsBytes = written.weightsBytes;

  PassManager toLLVM(ctx);
  mlir::pf::buildStandardLLVMLoweringPipeline(toLLVM);
  if (failed(toLLVM.run(*combined)))
    return error("lowering to the LLVM dialect failed (see the diagnostics above)");
  llvm::SmallString<128> entryObject;
  llvm::FileRemover removeEntryObject;
  if (auto err = emitTemporaryObject(
          *combined, entryObject, removeEntryObject, written.fingerprint, [&](llvm::Module &m) {
            for (auto [described, plan, entry] : llvm::zip_equal(written.entries, plans, lowered))
              addAotDescription(m, plan, *entry, described.describeSymbol,
                                "pf_" + described.function);
          }))
    return std::move(err);
  SmallVector<StringRef, 2> objects = {entryObject};

  // The rank programs, lowered as the rank executor lowers them, in a second
  // object without a fingerprint of its own (the library has one).
  llvm::SmallString<128> programObject;
  llvm::FileRemover removeProgramObject;
  if (!programs.empty()) {
    MLIRContext *programContext = programs.front()->getContext();
    OwningOpRef<ModuleOp> programModule = ModuleOp::create(UnknownLoc::get(programContext));
    for (Operation *op : programs) {
      auto program = dyn_cast<mlir::pf::RankProgramOp>(op);
      if (!program)
        return error("writeRankLibrary: '" + op->getName().getStringRef() +
                     "' is not a pf.rank_program");
      std::string name = ("pf_" + program.getSymName()).str();
      if (llvm::is_contained(written.programs, name) || combined->lookupSymbol(name))
        return error("the rank program '" + program.getSymName() +
                     "' would define '" + name + "' a second time");
      written.programs.push_back(name);
    }
    if (auto err = detail::lowerRankPrograms(*programModule, programs, overlapTransfers))
      return std::move(err);
    if (auto err = emitTemporaryObject(*programModule, programObject, removeProgramObject,
                                       written.fingerprint, nullptr, /*fingerprintSymbol=*/""))
      return std::move(err);
    objects.push_back(programObject);
  }

  if (auto err = linkLibraryWithWeights(*linker, objects, library, weights, aotWeights.bytes))
    return std::move(err);
  return written;
}

/// device[0] owns the backend copy of every parameter (copied in once) and
/// the arena sized for the largest entry; device[1 + i] holds entry i's
/// constants, inputs and outputs and points at device[0]'s parameters.
llvm::Error CompiledProgram::placeOnBackend() {
  auto owner = std::make_unique<DeviceBuffers>();
  owner->context = context;
  auto arenaBlock = owner->allocate(arena.bytes, "the arena");
  if (!arenaBlock)
    return arenaBlock.takeError();
  for (const CompiledModel::Parameter &p : params) {
    std::string what = "parameter '" + p.name + "'";
    auto block = owner->allocate(p.bytes, what);
    if (!block)
      return block.takeError();
    if (auto err = owner->copyIn(*block, p.data, p.bytes, what))
      return err;
    backendParameters[p.name] = *block;
  }
  device.push_back(std::move(owner));
  for (const auto &entry : lowered) {
    auto buffers = DeviceBuffers::create(context, *entry, &backendParameters, *arenaBlock);
    if (!buffers)
      return buffers.takeError();
    device.push_back(std::move(*buffers));
  }
  return llvm::Error::success();
}

llvm::Error CompiledProgram::copyParameters(bool toHost) {
  if (device.empty())
    return llvm::Error::success();
  DeviceBuffers &owner = *device.front();
  for (const CompiledModel::Parameter &p : params) {
    std::string what = "parameter '" + p.name + "'";
    void *block = backendParameters.at(p.name);
    if (auto err = toHost ? owner.copyOut(p.data, block, p.bytes, what)
                          : owner.copyIn(block, p.data, p.bytes, what))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error CompiledProgram::copyParametersToHost() { return copyParameters(/*toHost=*/true); }

llvm::Error CompiledProgram::copyParametersToBackend() { return copyParameters(/*toHost=*/false); }

LoweredEntry *CompiledProgram::find(const std::string &function) const {
  for (auto [name, entry] : llvm::zip_equal(entryNames, lowered))
    if (name == function)
      return entry.get();
  return nullptr;
}

bool CompiledProgram::hasEntry(const std::string &function) const { return find(function); }

const std::vector<TensorSpec> &CompiledProgram::inputs(const std::string &function) const {
  static const std::vector<TensorSpec> none;
  LoweredEntry *entry = find(function);
  return entry ? entry->inputSpecs : none;
}

const std::vector<TensorSpec> &CompiledProgram::outputs(const std::string &function) const {
  static const std::vector<TensorSpec> none;
  LoweredEntry *entry = find(function);
  return entry ? entry->outputSpecs : none;
}

const CompiledModel::Parameter *CompiledProgram::parameter(const std::string &name) const {
  for (const CompiledModel::Parameter &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

llvm::Error CompiledProgram::run(const std::string &function,
                                 const std::map<std::string, NpyArray> &inputs,
                                 std::map<std::string, NpyArray> &outputs) {
  auto at = llvm::find(entryNames, function);
  if (at == entryNames.end())
    return error("no compiled function named '" + function + "'");
  size_t index = size_t(at - entryNames.begin());
  DeviceBuffers *buffers = device.empty() ? nullptr : device[1 + index].get();
  return bindAndCall(*lowered[index], context, arena.data, inputs, outputs,
                     " of '" + function + "'", buffers, &stageValueCopyCount);
}

llvm::Error CompiledProgram::run(const std::string &function, ArrayRef<TensorView> inputs,
                                 ArrayRef<TensorView> outputs) {
  auto at = llvm::find(entryNames, function);
  if (at == entryNames.end())
    return error("no compiled function named '" + function + "'");
  size_t index = size_t(at - entryNames.begin());
  DeviceBuffers *buffers = device.empty() ? nullptr : device[1 + index].get();
  for (const TensorSpec &spec : lowered[index]->outputSpecs)
    if (!findView(outputs, spec.name))
      return error("missing output '" + spec.name + "' of '" + function + "'");
  return bindAndCall(*lowered[index], context, arena.data, inputs, outputs,
                     " of '" + function + "'", /*outputsZeroed=*/false, buffers,
                     &stageValueCopyCount);
}

void mlir::pf::driver::detail::initializeJit(MLIRContext *ctx) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);
}

void mlir::pf::driver::detail::registerRuntimeKernels(ExecutionEngine &engine) {
  engine.registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
#define PFRT_KERNEL(name, ...)                                                                     \
  map[interner(#name)] = {llvm::orc::ExecutorAddr::fromPtr(&name), llvm::JITSymbolFlags::Exported};
#include "pf/Runtime/pfrt_abi.def"
#undef PFRT_KERNEL
    return map;
  });
}
