//===- CoreModule.cpp - pipefisher._core, the nanobind extension ----------===//
//
// The compiled half of the Python package: thin classes over pf's C API
// (include/pf-c: import, registration, compile and run) and MLIR's (pass
// pipelines, printing, parsing), and the schedule library for cost models
// without a module (what pf-sched runs). The Python half
// (pipefisher/compiler.py, schedule.py, training.py) adds the conveniences:
// NumPy conversions, dictionaries, reports, the trainer.
//
// Failures raise the exception classes of pipefisher/errors.py with the
// diagnostics as text; nothing here aborts on bad input. Long calls (import,
// pass pipelines, compilation, runs) release the GIL.
//
//===----------------------------------------------------------------------===//
#include "pf-c/Import.h"
#include "pf-c/Registration.h"
#include "pf-c/Runtime.h"

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Scheduler.h"
#include "pf/Schedule/Verify.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// Raises pipefisher.errors.<kind>(message, diagnostics).
[[noreturn]] void raise(const char *kind, const std::string &message,
                        const std::string &diagnostics = "") {
  nb::object cls = nb::module_::import_("pipefisher.errors").attr(kind);
  nb::object exc = cls(message, diagnostics);
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

void appendText(MlirStringRef text, void *userData) {
  static_cast<std::string *>(userData)->append(text.data, text.length);
}

MlirStringRef strRef(const std::string &s) { return mlirStringRefCreate(s.data(), s.size()); }

/// Sends what is written on file descriptor 2 into a temporary file while
/// it lives (used for the short calls that print errors there only).
class StderrCapture {
public:
  StderrCapture() {
    std::fflush(stderr);
    file = std::tmpfile();
    saved = file ? ::dup(2) : -1;
    if (saved >= 0 && ::dup2(::fileno(file), 2) < 0) {
      ::close(saved);
      saved = -1;
    }
  }
  ~StderrCapture() { finish(); }

  /// Restores stderr and returns what was written meanwhile.
  std::string finish() {
    std::string text;
    if (saved >= 0) {
      std::fflush(stderr);
      ::dup2(saved, 2);
      ::close(saved);
      saved = -1;
      std::rewind(file);
      char buffer[4096];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0)
        text.append(buffer, n);
    }
    if (file) {
      std::fclose(file);
      file = nullptr;
    }
    return text;
  }

private:
  std::FILE *file = nullptr;
  int saved = -1;
};

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

/// An MLIRContext with the pf dialects; modules and executables keep it alive
/// (a module's weights live in it).
class Context {
public:
  Context() {
    static std::once_flag passes;
    std::call_once(passes, [] { pfRegisterAllPasses(); });
    MlirDialectRegistry registry = mlirDialectRegistryCreate();
    pfRegisterAllDialects(registry);
    context = mlirContextCreate();
    mlirContextAppendDialectRegistry(context, registry);
    mlirDialectRegistryDestroy(registry);
    mlirContextLoadAllAvailableDialects(context);
  }
  ~Context() { mlirContextDestroy(context); }
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  MlirContext get() const { return context; }

  /// Held (with the GIL released) by every call that reads or changes a
  /// module of this context or its diagnostics handlers: MLIR does not
  /// expect one module to be transformed and printed by two threads at once.
  std::mutex mutex;

private:
  MlirContext context;
};

/// Collects the diagnostics of a context while it lives: "LOCATION: error:
/// MESSAGE" lines, with their notes (except the operation MLIR attaches,
/// which for a whole model would be the whole model).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MlirContext context) : context(context) {
    id = mlirContextAttachDiagnosticHandler(context, &DiagnosticCollector::handle, this,
                                            nullptr);
  }
  ~DiagnosticCollector() { mlirContextDetachDiagnosticHandler(context, id); }

  std::string text;

private:
  static void print(MlirDiagnostic diag, std::string &out, const char *indent) {
    std::string message;
    mlirDiagnosticPrint(diag, appendText, &message);
    if (message.rfind("see current operation:", 0) == 0)
      return;
    std::string location;
    mlirLocationPrint(mlirDiagnosticGetLocation(diag), appendText, &location);
    const char *severity = "error";
    switch (mlirDiagnosticGetSeverity(diag)) {
    case MlirDiagnosticWarning: severity = "warning"; break;
    case MlirDiagnosticNote: severity = "note"; break;
    case MlirDiagnosticRemark: severity = "remark"; break;
    default: break;
    }
    out += indent + location + ": " + severity + ": " + message + "\n";
    for (intptr_t i = 0, e = mlirDiagnosticGetNumNotes(diag); i < e; ++i)
      print(mlirDiagnosticGetNote(diag, i), out, "  ");
  }
  static MlirLogicalResult handle(MlirDiagnostic diag, void *userData) {
    print(diag, static_cast<DiagnosticCollector *>(userData)->text, "");
    return mlirLogicalResultSuccess();
  }

  MlirContext context;
  MlirDiagnosticHandlerID id;
};

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

class Module {
public:
  Module(std::shared_ptr<Context> context, MlirModule module)
      : context(std::move(context)), module(module) {}
  ~Module() {
    if (!mlirModuleIsNull(module))
      mlirModuleDestroy(module);
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  static std::shared_ptr<Module> importONNX(const std::string &path,
                                            const std::vector<std::string> &dims,
                                            const std::vector<std::string> &shapes,
                                            bool weights, bool graphPasses, bool allowDynamic,
                                            const std::string &entry) {
    auto context = std::make_shared<Context>();
    std::vector<const char *> dimPtrs, shapePtrs;
    for (const std::string &d : dims)
      dimPtrs.push_back(d.c_str());
    for (const std::string &s : shapes)
      shapePtrs.push_back(s.c_str());
    PfImportOptions options = pfImportOptionsGetDefault();
    options.dims = dimPtrs.data();
    options.numDims = intptr_t(dimPtrs.size());
    options.shapes = shapePtrs.data();
    options.numShapes = intptr_t(shapePtrs.size());
    options.loadWeights = weights;
    options.graphPasses = graphPasses;
    options.allowDynamic = allowDynamic;
    options.entryName = entry.c_str();
    std::string diagnostics;
    MlirModule module;
    {
      nb::gil_scoped_release release;
      module = pfImportONNXFile(context->get(), strRef(path), &options, appendText, &diagnostics);
    }
    if (mlirModuleIsNull(module))
      raise("ONNXImportError", "cannot import '" + path + "'", diagnostics);
    return std::make_shared<Module>(context, module);
  }

  static std::shared_ptr<Module> parse(const std::string &text) {
    auto context = std::make_shared<Context>();
    DiagnosticCollector diagnostics(context->get());
    MlirModule module = mlirModuleCreateParse(context->get(), strRef(text));
    if (mlirModuleIsNull(module))
      raise("ParseError", "cannot parse the module", diagnostics.text);
    return std::make_shared<Module>(context, module);
  }

  std::string str(bool elideWeights, bool generic) const {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(context->mutex);
    std::string text;
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    if (elideWeights) {
      mlirOpPrintingFlagsElideLargeElementsAttrs(flags, 16);
      mlirOpPrintingFlagsElideLargeResourceString(flags, 64);
    }
    if (generic)
      mlirOpPrintingFlagsPrintGenericOpForm(flags);
    mlirOperationPrintWithFlags(mlirModuleGetOperation(module), flags, appendText, &text);
    mlirOpPrintingFlagsDestroy(flags);
    return text;
  }

  void runPipeline(const std::string &pipeline) {
    std::string text = pipeline;
    if (text.rfind("builtin.module(", 0) != 0)
      text = "builtin.module(" + text + ")";
    MlirPassManager pm = mlirPassManagerCreate(context->get());
    std::string parseErrors;
    MlirLogicalResult parsed;
    {
      // LLVM's option parser prints what is wrong with an option on stderr
      // (docs/embedding.md); catch it for the exception.
      StderrCapture capture;
      parsed = mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm), strRef(text),
                                     appendText, &parseErrors);
      std::string printed = capture.finish();
      if (mlirLogicalResultIsFailure(parsed) && !printed.empty())
        parseErrors = printed + (parseErrors.empty() || parseErrors.back() == '\n' ? "" : "\n") +
                      parseErrors;
    }
    if (mlirLogicalResultIsFailure(parsed)) {
      mlirPassManagerDestroy(pm);
      raise("PipelineError", "cannot parse the pass pipeline '" + pipeline + "'", parseErrors);
    }
    MlirLogicalResult result;
    std::string diagnostics;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(context->mutex);
      DiagnosticCollector collector(context->get());
      result = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
      diagnostics = collector.text;
    }
    mlirPassManagerDestroy(pm);
    if (mlirLogicalResultIsFailure(result))
      raise("PipelineError", "the pass pipeline '" + pipeline + "' failed", diagnostics);
  }

  std::shared_ptr<Module> clone() const {
    MlirOperation copy;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(context->mutex);
      copy = mlirOperationClone(mlirModuleGetOperation(module));
    }
    return std::make_shared<Module>(context, mlirModuleFromOperation(copy));
  }

  bool verify() const {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(context->mutex);
    return mlirOperationVerify(mlirModuleGetOperation(module));
  }

  std::shared_ptr<Context> context;
  MlirModule module;
};

//===----------------------------------------------------------------------===//
// Executable
//===----------------------------------------------------------------------===//

/// A tensor's description: name, dtype code (pf-c/Runtime.h) and shape.
using TensorInfo = std::tuple<std::string, int, std::vector<int64_t>>;

TensorInfo info(const PfTensor &t) {
  return {t.name, t.dtype, std::vector<int64_t>(t.shape, t.shape + t.rank)};
}

using Array = nb::ndarray<nb::c_contig, nb::device::cpu>;

class Executable {
public:
  Executable(std::shared_ptr<Context> context, PfExecutable executable)
      : context(std::move(context)), executable(executable) {}
  ~Executable() { pfExecutableDestroy(executable); }
  Executable(const Executable &) = delete;
  Executable &operator=(const Executable &) = delete;

  static std::shared_ptr<Executable> compile(const Module &module, int threads,
                                             const std::string &function, int backend,
                                             int gemmPrecision, bool deviceBuffers) {
    PfCompileOptions options = pfCompileOptionsGetDefault();
    options.numThreads = threads;
    options.function = function.empty() ? nullptr : function.c_str();
    options.backend = backend;
    options.gemmPrecision = gemmPrecision;
    options.deviceBuffers = deviceBuffers;
    std::string diagnostics;
    PfExecutable executable;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(module.context->mutex);
      executable = pfCompile(module.module, &options, appendText, &diagnostics);
    }
    if (pfExecutableIsNull(executable))
      raise("CompileError", "cannot compile the module", diagnostics);
    return std::make_shared<Executable>(module.context, executable);
  }

  std::vector<TensorInfo> inputs() const {
    std::vector<TensorInfo> out;
    for (intptr_t i = 0, e = pfExecutableGetNumInputs(executable); i < e; ++i)
      out.push_back(info(pfExecutableGetInput(executable, i)));
    return out;
  }
  std::vector<TensorInfo> outputs() const {
    std::vector<TensorInfo> out;
    for (intptr_t i = 0, e = pfExecutableGetNumOutputs(executable); i < e; ++i)
      out.push_back(info(pfExecutableGetOutput(executable, i)));
    return out;
  }
  std::vector<TensorInfo> parameterInfos() const {
    std::vector<TensorInfo> out;
    for (intptr_t i = 0, e = pfExecutableGetNumParameters(executable); i < e; ++i)
      out.push_back(info(pfExecutableGetParameter(executable, i)));
    return out;
  }

  /// Brings the parameters' host copies up to date (`toHost`) or sends them
  /// to the backend; a no-op on the CPU.
  void copyParameters(bool toHost) {
    std::string diagnostics;
    MlirLogicalResult result;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      result = pfExecutableCopyParameters(executable, toHost, appendText, &diagnostics);
    }
    if (mlirLogicalResultIsFailure(result))
      raise("RunError", "cannot copy the parameters", diagnostics);
  }

  /// Parameter `pos` as a NumPy array over the executable's buffer (for a
  /// training step its own copy, which every run updates); `owner` (the
  /// Python object of this executable) stays alive while the array does.
  nb::ndarray<nb::numpy> parameter(intptr_t pos, nb::handle owner) const {
    if (pos < 0 || pos >= pfExecutableGetNumParameters(executable))
      throw nb::index_error("parameter index out of range");
    PfTensor t = pfExecutableGetParameter(executable, pos);
    std::vector<size_t> shape(t.shape, t.shape + t.rank);
    return nb::ndarray<nb::numpy>(t.data, shape.size(), shape.data(), owner, nullptr,
                                  dlpackType(t.dtype));
  }

  static nb::dlpack::dtype dlpackType(int code) {
    using nb::dlpack::dtype_code;
    auto make = [](dtype_code c, int bits) {
      return nb::dlpack::dtype{uint8_t(c), uint8_t(bits), 1};
    };
    switch (code) {
    case PF_DTYPE_FLOAT32: return make(dtype_code::Float, 32);
    case PF_DTYPE_FLOAT64: return make(dtype_code::Float, 64);
    case PF_DTYPE_FLOAT16: return make(dtype_code::Float, 16);
    case PF_DTYPE_INT8: return make(dtype_code::Int, 8);
    case PF_DTYPE_INT32: return make(dtype_code::Int, 32);
    case PF_DTYPE_INT64: return make(dtype_code::Int, 64);
    case PF_DTYPE_BOOL: return make(dtype_code::Bool, 8);
    default: throw nb::value_error(("unknown pf dtype code " + std::to_string(code)).c_str());
    }
  }

  /// Runs once: `inputs` and `outputs` are (name, dtype code, array) with
  /// C-contiguous arrays of the model's shapes, which the caller (Python)
  /// checked; the C API checks again and reports mismatches.
  void run(const std::vector<std::tuple<std::string, int, Array>> &inputs,
           const std::vector<std::tuple<std::string, int, Array>> &outputs) {
    std::vector<std::vector<int64_t>> shapes;
    shapes.reserve(inputs.size() + outputs.size());
    auto describe = [&](const std::tuple<std::string, int, Array> &entry) {
      const Array &a = std::get<2>(entry);
      std::vector<int64_t> shape(a.ndim());
      for (size_t d = 0; d < a.ndim(); ++d)
        shape[d] = int64_t(a.shape(d));
      shapes.push_back(std::move(shape));
      return PfTensor{std::get<0>(entry).c_str(), int32_t(std::get<1>(entry)),
                      int32_t(a.ndim()), shapes.back().data(), a.data()};
    };
    std::vector<PfTensor> in, out;
    for (const auto &entry : inputs)
      in.push_back(describe(entry));
    for (const auto &entry : outputs)
      out.push_back(describe(entry));
    std::string diagnostics;
    MlirLogicalResult result;
    {
      // One run at a time: a model's runs share its arena (and a training
      // step its weights).
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      result = pfExecutableRun(executable, in.data(), intptr_t(in.size()), out.data(),
                               intptr_t(out.size()), appendText, &diagnostics);
    }
    if (mlirLogicalResultIsFailure(result))
      raise("RunError", "the run failed", diagnostics);
  }

  std::shared_ptr<Context> context;
  PfExecutable executable;
  std::mutex mutex;
};

//===----------------------------------------------------------------------===//
// Schedules from a cost model (pf-sched's path)
//===----------------------------------------------------------------------===//

template <typename T> T check(::pf::Expected<T> value) {
  if (!value)
    raise("ScheduleError", value.error());
  return value.take();
}

/// Schedules one refresh window, as pf-sched does, and returns the report
/// (JSON), the SVG timeline, the Chrome trace and the text report.
std::tuple<std::string, std::string, std::string, std::string, std::vector<std::string>>
scheduleCosts(const std::string &profileJson, const std::string &profileSource,
              const std::string &device, const std::string &model, int microbatchSize,
              int seqLen, const std::string &precision, const std::string &schedule, int stages,
              int microbatches, int layersPerStage, int chunks, const std::string &policy,
              int refreshSteps, std::optional<double> maxOverhead, double margin,
              int splitPieces, bool steadyState, std::optional<double> memoryCapGB,
              double optimizerStates, bool validate) {
  using namespace pf::sched;
  using ::pf::Expected;
  using ::pf::Status;
  CostModel costs;
  if (!profileJson.empty()) {
    costs = check(parseProfile(profileJson, profileSource));
  } else {
    DeviceSpec dev = check(findDevice(device));
    TransformerSpec spec = check(findModel(model));
    Precision prec = check(parsePrecision(precision));
    if (microbatchSize > 0)
      spec.microBatch = microbatchSize;
    if (seqLen > 0)
      spec.seqLen = seqLen;
    costs = analyticCostModel(dev, spec, prec);
  }
  ScheduleRequest request;
  request.kind = check(parseScheduleKind(schedule));
  request.kfac.policy = check(parsePolicy(policy));
  request.devices = stages;
  request.microbatches = microbatches;
  request.layersPerStage = layersPerStage;
  request.chunks = chunks;
  request.kfac.refreshSteps = refreshSteps;
  request.kfac.splitPieces = splitPieces;
  if (maxOverhead)
    request.kfac.maxOverhead = *maxOverhead;
  request.kfac.margin = margin;
  request.kfac.steadyState = steadyState;
  if (memoryCapGB)
    request.memory.capBytes = *memoryCapGB * 1e9;
  request.memory.optimizerStates = optimizerStates;
  request.validate = validate;
  Expected<ScheduleResult> result = [&] {
    nb::gil_scoped_release release;
    return schedulePipeline(costs, request);
  }();
  ScheduleResult r = check(std::move(result));
  if (validate) {
    Status verified = verifyProgram(r.program);
    if (!verified.ok())
      raise("ScheduleError", "invalid schedule: " + verified.message());
  }
  return {reportToJson(r.report), timelineToSvg(r.timeline, r.report),
          timelineToChromeTrace(r.timeline, r.report), reportToText(r.report), costs.warnings};
}

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "pf's compiler and runtime (the compiled half of pipefisher; use the "
            "functions of the pipefisher package).";

  // Imported a second time (its entry removed from sys.modules and imported
  // again), the module's init runs again; nanobind keeps the classes of the
  // first run, so they are reused rather than registered twice.
  nb::handle registeredModule = nb::type<Module>(), registeredExecutable = nb::type<Executable>();
  if (registeredModule.is_valid() && registeredExecutable.is_valid()) {
    m.attr("Module") = registeredModule;
    m.attr("Executable") = registeredExecutable;
  } else {
    nb::class_<Module>(m, "Module", "A pf module (MLIR) and the context that owns its weights.")
        .def_static("import_onnx", &Module::importONNX, "path"_a, "dims"_a, "shapes"_a,
                    "weights"_a, "graph_passes"_a, "allow_dynamic"_a, "entry"_a)
        .def_static("parse", &Module::parse, "text"_a)
        .def("to_string", &Module::str, "elide_weights"_a = false, "generic"_a = false)
        .def("run_pipeline", &Module::runPipeline, "pipeline"_a)
        .def("clone", &Module::clone)
        .def("verify", &Module::verify);

    nb::class_<Executable>(m, "Executable", "A compiled pf module.")
        .def_static("compile", &Executable::compile, "module"_a, "threads"_a, "function"_a,
                    "backend"_a = 0, "gemm_precision"_a = 0, "device_buffers"_a = false)
        .def("copy_parameters", &Executable::copyParameters, "to_host"_a)
        .def_prop_ro("inputs", &Executable::inputs)
        .def_prop_ro("outputs", &Executable::outputs)
        .def_prop_ro("parameters", &Executable::parameterInfos)
        .def(
            "parameter",
            [](nb::handle self, intptr_t pos) {
              return nb::cast<const Executable &>(self).parameter(pos, self);
            },
            "pos"_a)
        .def("run", &Executable::run, "inputs"_a, "outputs"_a);
  }

  m.def("schedule_costs", &scheduleCosts, "profile_json"_a, "profile_source"_a, "device"_a,
        "model"_a, "microbatch_size"_a, "seq_len"_a, "precision"_a, "schedule"_a, "stages"_a,
        "microbatches"_a, "layers_per_stage"_a, "chunks"_a, "policy"_a, "refresh_steps"_a,
        "max_overhead"_a.none(), "margin"_a, "split_pieces"_a, "steady_state"_a,
        "memory_cap_gb"_a.none(), "optimizer_states"_a, "validate"_a);
}
