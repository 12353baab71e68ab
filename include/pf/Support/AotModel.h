//===- AotModel.h - A model compiled ahead of time, loaded and run -*- C++ -*-===//
//
// A model in pf_aot.h's format: a shared library exporting
// pf_aot_model_describe() and its weights file (CompiledModel::
// writeAotLibrary, or pf-run --aot with examples/aot/model_library.c).
// openAotLibrary loads and checks the library; AotModel runs it as the
// training loop's driver::Model, on any backend: the MLIR-free trainer runs
// an artifact's step and evaluation with it. On the C++ standard library,
// the runtime's C API and dlopen only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_AOTMODEL_H
#define PF_SUPPORT_AOTMODEL_H

#include "pf/Runtime/pf_aot.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Support/Model.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace mlir::pf::driver {

/// A parameter of a model written ahead of time: where its bytes lie in the
/// model's weights (the training state a trainer checkpoints and resumes).
struct AotParameter {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  int64_t offset = 0, bytes = 0;
};

/// Why `path` is not a whole 64-bit ELF file, or "": every header and every
/// segment the loader maps lies inside it. dlopen maps a truncated library
/// and the first touch of a missing page is SIGBUS.
std::string incompleteElf(const std::string &path);

/// A loaded library and the model it describes, checked: the format and
/// runtime ABI versions, the description (pf::aot::checkAotModel) and that
/// the object's pf_model_fingerprint is the description's. The library
/// stays loaded for the process's life (its code may be running).
/// Binds every descriptor of `m` to its data (pf_aot.h's kinds): inputs[i]
/// and outputs[i] in the model's input and output order, `weights` and
/// `arena` (device memory on a device backend).
void bindAotTable(const pf_aot_model &m, void *const *inputs, void *const *outputs,
                  void *weights, void *arena, pfrt_tensor *table);

struct AotLibraryHandle {
  void *library = nullptr;
  const pf_aot_model *model = nullptr;
};
::pf::Expected<AotLibraryHandle> openAotLibrary(const std::string &path);
/// The steps of openAotLibrary, for a library of several entries (an
/// artifact's rank library): `path` checked whole and loaded (it stays
/// loaded), then the checked description its exported `symbol` returns.
::pf::Expected<void *> loadAotLibrary(const std::string &path);
::pf::Expected<const pf_aot_model *> describeAotEntry(void *library, const std::string &path,
                                                      const std::string &symbol);

/// 64-byte aligned bytes (a model's weights).
using AlignedBytes = std::unique_ptr<char, void (*)(void *)>;

class AotModel final : public Model {
public:
  struct Options {
    int32_t backend = PFRT_BACKEND_CPU; ///< PFRT_BACKEND_*
    int32_t device = 0;                 ///< CUDA device ordinal
    int threads = 0;                    ///< CPU threads; 0: the runtime's default
    int32_t gemmPrecision = 0;          ///< PFRT_GEMM_*
    /// Weights, arena, inputs and outputs in backend memory (always so off
    /// the CPU; on the CPU: a check of that path).
    bool deviceBuffers = false;
  };
  /// Loads `library` and `weights` (its size the description's), with the
  /// parameters' places in the weights (`parameters`, each checked inside).
  static ::pf::Expected<std::unique_ptr<AotModel>>
  load(const std::string &library, const std::string &weights,
       std::vector<AotParameter> parameters, const Options &options);
  ~AotModel() override;

  const pf_aot_model &description() const { return *model; }
  std::vector<ModelParameter> parameters() const override;
  ::pf::Status copyParametersToHost() override;
  ::pf::Status copyParametersToBackend() override;
  /// Runs once. Every input by name, dtype and shape; every output comes
  /// back (zeroed before the run: a step may write part of one).
  ::pf::Status run(const NamedArrays &inputs, NamedArrays &outputs) override;

private:
  AotModel() = default;
  ::pf::Status runtimeError(const std::string &what) const;

  const pf_aot_model *model = nullptr;
  std::string name;
  pfrt_context *context = nullptr;
  bool onBackend = false;
  /// The weights, bound in place on the host: 64-byte aligned, as the
  /// weights file's offsets are (its tensors keep the alignment the kernels
  /// and the JIT-compiled model's buffers have).
  AlignedBytes hostWeights{nullptr, std::free};
  int64_t weightsBytes = 0;
  void *backendWeights = nullptr;
  pfrt_arena *arena = nullptr;
  void *arenaBase = nullptr;
  std::vector<void *> backendInputs, backendOutputs; ///< onBackend only
  std::vector<AotParameter> places;
  std::vector<pfrt_tensor> table;
};

/// `weights` read whole into 64-byte aligned host memory, checked to be
/// `bytes` long (what `library` binds) and to hold every parameter place.
::pf::Expected<AlignedBytes> readAotWeights(const std::string &weights, int64_t bytes,
                                            const std::string &library,
                                            const std::vector<AotParameter> &parameters);
/// The runtime context a model loaded ahead of time runs on (`options`'
/// backend, device, threads and GEMM precision).
::pf::Expected<pfrt_context *> createAotContext(const AotModel::Options &options);

} // namespace mlir::pf::driver

#endif // PF_SUPPORT_AOTMODEL_H
