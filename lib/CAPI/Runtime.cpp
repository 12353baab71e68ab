//===- Runtime.cpp - compile pf IR and run it through the C API -----------===//
//
// A thin layer over pf::driver::CompiledModel, the compiler and runner of
// pf-run: the C descriptors become TensorViews, read and written in place.
//
//===----------------------------------------------------------------------===//
#include "pf-c/Runtime.h"

#include "Diagnostics.h"

#include "pf/Driver/Runner.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <memory>
#include <vector>

using namespace mlir;
namespace drv = mlir::pf::driver;

namespace {
/// What a PfExecutable points at: the model and the descriptors of its
/// inputs, outputs and parameters handed out by pfExecutableGet*.
struct Executable {
  std::unique_ptr<drv::CompiledModel> model;
  std::vector<drv::CompiledModel::Parameter> parameters;
  std::vector<PfTensor> inputs, outputs, parameterTensors;
};

Executable *unwrap(PfExecutable executable) { return static_cast<Executable *>(executable.ptr); }

PfTensor describe(const std::string &name, int32_t dtype, const std::vector<int64_t> &shape,
                  void *data) {
  return PfTensor{name.c_str(), dtype, int32_t(shape.size()), shape.data(), data};
}

std::vector<PfTensor> describe(const std::vector<drv::TensorSpec> &specs) {
  std::vector<PfTensor> tensors;
  for (const drv::TensorSpec &spec : specs)
    tensors.push_back(describe(spec.name, spec.dtype, spec.shape, nullptr));
  return tensors;
}

/// The views of `tensors[0..count)`; `kind` ("input", "output") names them
/// in messages.
llvm::Expected<std::vector<drv::TensorView>> viewsOf(const PfTensor *tensors, intptr_t count,
                                                     const char *kind) {
  if (count < 0 || (count > 0 && !tensors))
    return llvm::createStringError(llvm::formatv("the {0}s are null or their count is negative",
                                                 kind));
  std::vector<drv::TensorView> views;
  for (intptr_t i = 0; i < count; ++i) {
    const PfTensor &t = tensors[i];
    if (!t.name)
      return llvm::createStringError(llvm::formatv("{0} #{1} has no name", kind, i));
    if (t.rank < 0 || t.rank > PFRT_MAX_RANK || (t.rank > 0 && !t.shape))
      return llvm::createStringError(
          llvm::formatv("{0} '{1}' has rank {2} (0 to {3}, with a shape)", kind, t.name, t.rank,
                        PFRT_MAX_RANK));
    views.push_back(drv::TensorView{t.name, t.dtype, llvm::ArrayRef<int64_t>(t.shape, t.rank),
                                    t.data});
  }
  return views;
}
} // namespace

PfCompileOptions pfCompileOptionsGetDefault(void) {
  PfCompileOptions options;
  options.numThreads = 0;
  options.function = nullptr;
  options.backend = PFRT_BACKEND_CPU;
  options.gemmPrecision = PFRT_GEMM_FP32;
  options.deviceBuffers = false;
  return options;
}

/// Hands "error: <message>" to `onError` (which may be null).
static void reportError(const llvm::Twine &message, MlirStringCallback onError, void *userData) {
  std::string text = ("error: " + message + "\n").str();
  if (onError)
    onError(MlirStringRef{text.data(), text.size()}, userData);
}

PfExecutable pfCompile(MlirModule module, const PfCompileOptions *options,
                       MlirStringCallback onError, void *userData) {
  if (mlirModuleIsNull(module)) {
    reportError("pfCompile: the module is null (a failed import or parse returns one)", onError,
                userData);
    return PfExecutable{nullptr};
  }
  ModuleOp source = unwrap(module);
  mlir::pf::capi::DiagnosticCapture diagnostics(source.getContext(), "<module>");
  if (!mlir::pf::capi::checkSharedTypeIDs(source.getContext(), diagnostics)) {
    diagnostics.report(onError, userData);
    return PfExecutable{nullptr};
  }
  const PfCompileOptions given = options ? *options : pfCompileOptionsGetDefault();
  if (given.numThreads < 0 || given.numThreads > PFRT_MAX_THREADS) {
    diagnostics.error(llvm::formatv("numThreads {0} is outside 0..{1} (PFRT_MAX_THREADS)",
                                    given.numThreads, PFRT_MAX_THREADS));
    diagnostics.report(onError, userData);
    return PfExecutable{nullptr};
  }
  drv::CompiledModel::Options compileOptions;
  compileOptions.threads = given.numThreads;
  if (given.function)
    compileOptions.function = given.function;
  compileOptions.ownParameters = drv::CompiledModel::updatesParameters(source);
  compileOptions.backend = given.backend;
  compileOptions.gemmPrecision = given.gemmPrecision;
  compileOptions.deviceBuffers = given.deviceBuffers;
  // The lowering rewrites the module it gets; the caller keeps theirs.
  OwningOpRef<ModuleOp> copy(source.clone());
  auto compiled = drv::CompiledModel::compile(*copy, compileOptions);
  if (!compiled) {
    diagnostics.error(compiled.takeError());
    diagnostics.report(onError, userData);
    return PfExecutable{nullptr};
  }
  auto executable = std::make_unique<Executable>();
  executable->model = std::move(*compiled);
  executable->inputs = describe(executable->model->inputs());
  executable->outputs = describe(executable->model->outputs());
  executable->parameters = executable->model->parameters();
  for (const drv::CompiledModel::Parameter &p : executable->parameters)
    executable->parameterTensors.push_back(describe(p.name, p.dtype, p.shape, p.data));
  diagnostics.report(onError, userData);
  return PfExecutable{executable.release()};
}

void pfExecutableDestroy(PfExecutable executable) { delete unwrap(executable); }

/// The tensor at `pos` of one of an executable's lists; a tensor with a
/// null name for a null executable or a position outside the list.
static PfTensor tensorAt(PfExecutable executable,
                         std::vector<PfTensor> Executable::*list, intptr_t pos) {
  if (!executable.ptr || pos < 0 || pos >= intptr_t((unwrap(executable)->*list).size()))
    return PfTensor{nullptr, 0, 0, nullptr, nullptr};
  return (unwrap(executable)->*list)[size_t(pos)];
}

static intptr_t countOf(PfExecutable executable, std::vector<PfTensor> Executable::*list) {
  return executable.ptr ? intptr_t((unwrap(executable)->*list).size()) : 0;
}

intptr_t pfExecutableGetNumInputs(PfExecutable executable) {
  return countOf(executable, &Executable::inputs);
}

PfTensor pfExecutableGetInput(PfExecutable executable, intptr_t pos) {
  return tensorAt(executable, &Executable::inputs, pos);
}

intptr_t pfExecutableGetNumOutputs(PfExecutable executable) {
  return countOf(executable, &Executable::outputs);
}

PfTensor pfExecutableGetOutput(PfExecutable executable, intptr_t pos) {
  return tensorAt(executable, &Executable::outputs, pos);
}

intptr_t pfExecutableGetNumParameters(PfExecutable executable) {
  return countOf(executable, &Executable::parameterTensors);
}

PfTensor pfExecutableGetParameter(PfExecutable executable, intptr_t pos) {
  return tensorAt(executable, &Executable::parameterTensors, pos);
}

MlirLogicalResult pfExecutableCopyParameters(PfExecutable executable, bool toHost,
                                             MlirStringCallback onError, void *userData) {
  if (!executable.ptr) {
    reportError("pfExecutableCopyParameters: the executable is null", onError, userData);
    return mlirLogicalResultFailure();
  }
  drv::CompiledModel &model = *unwrap(executable)->model;
  if (auto err = toHost ? model.copyParametersToHost() : model.copyParametersToBackend()) {
    reportError(llvm::toString(std::move(err)), onError, userData);
    return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

MlirLogicalResult pfExecutableRun(PfExecutable executable, const PfTensor *inputs,
                                  intptr_t numInputs, const PfTensor *outputs,
                                  intptr_t numOutputs, MlirStringCallback onError,
                                  void *userData) {
  auto fail = [&](llvm::Error err) {
    reportError(llvm::toString(std::move(err)), onError, userData);
    return mlirLogicalResultFailure();
  };
  if (!executable.ptr)
    return fail(llvm::createStringError("pfExecutableRun: the executable is null"));
  auto inputViews = viewsOf(inputs, numInputs, "input");
  if (!inputViews)
    return fail(inputViews.takeError());
  auto outputViews = viewsOf(outputs, numOutputs, "output");
  if (!outputViews)
    return fail(outputViews.takeError());
  if (auto err = unwrap(executable)->model->run(*inputViews, *outputViews))
    return fail(std::move(err));
  return mlirLogicalResultSuccess();
}
