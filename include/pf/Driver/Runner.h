//===- Runner.h - compile a pf module and run it on the runtime --*- C++ -*-===//
//
// The host side of pf-run: lowers a pf module to the runtime ABI, JIT-compiles
// it with MLIR's ExecutionEngine, fills the tensor table (inputs, outputs,
// parameters, constants, arena) and calls it. MLIR types stay out of this
// header so tools and tests include it cheaply.
//
//===----------------------------------------------------------------------===//
#ifndef PF_DRIVER_RUNNER_H
#define PF_DRIVER_RUNNER_H

#include "pf/Support/AotModel.h"
#include "pf/Support/Model.h"
#include "pf/Support/Npz.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ExecutionEngine;
class MLIRContext;
class ModuleOp;
class Operation;
} // namespace mlir
struct pfrt_context;

namespace mlir::pf::driver {

namespace detail {
struct LoweredEntry;
struct DeviceBuffers;
/// Targets and translations the JIT needs (idempotent).
void initializeJit(mlir::MLIRContext *ctx);
/// Binds every kernel of pfrt_abi.def in `engine` to its address in the
/// linked libpfrt, so the JIT finds the runtime also when libpfrt is not in
/// the process's global symbol scope (a host that loads the C API library
/// with dlopen(RTLD_LOCAL), as Python loads extension modules).
void registerRuntimeKernels(mlir::ExecutionEngine &engine);
/// Clones the pf.rank_program ops `programs` into `into` and lowers them to
/// the LLVM dialect (pf-lower-rank-programs{overlap}, then the standard
/// lowering): the one lowering of pf-train's JIT-compiled rank programs and
/// of an artifact's rank libraries. Each becomes pf_<program>.
llvm::Error lowerRankPrograms(mlir::ModuleOp into, llvm::ArrayRef<mlir::Operation *> programs,
                              bool overlapTransfers);
} // namespace detail

/// A caller-owned tensor: a contiguous row-major buffer with the name, dtype
/// and shape of one of a model's inputs or outputs (the C API's descriptors).
/// Inputs are only read.
struct TensorView {
  llvm::StringRef name;
  int32_t dtype = 0;
  llvm::ArrayRef<int64_t> shape;
  void *data = nullptr;
  /// `data` is in the backend memory of the program's context (a
  /// pipeline's stage value): bound in place, never copied to the host.
  bool onBackend = false;
};

struct CompileStats {
  int64_t arenaBytes = 0;      ///< planned arena for intermediates
  int64_t peakLiveBytes = 0;   ///< largest sum of live intermediates
  int64_t parameterBytes = 0;  ///< weights, read in place
  int64_t kernelCalls = 0;
  double lowerSeconds = 0, jitSeconds = 0;
};

/// What CompiledModel::writeAotLibrary wrote: the description's fingerprint
/// (also the object's pf_model_fingerprint), the weights' size, the
/// parameters and the inputs and outputs.
struct AotLibrary {
  std::vector<AotParameter> parameters;
  uint64_t fingerprint = 0;
  int64_t weightsBytes = 0;
  std::vector<TensorSpec> inputs, outputs;
};

class CompiledModel {
public:
  ~CompiledModel();
  /// Lowers `module` (pf ops, static shapes) and JIT-compiles it. The module
  /// is consumed (rewritten). `threads` = 0 uses the runtime's default.
  /// `function` names the function to run (empty: the first with a body).
  struct Options {
    int threads = 0;          ///< runtime threads; 0 = the runtime's default
    std::string function;     ///< function to run; empty = the first with a body
    bool profile = false;     ///< time every kernel call (see profile())
    /// Copy parameters into buffers the model owns (needed when the step
    /// updates them, e.g. a training step); otherwise they are read in place.
    bool ownParameters = false;
    /// Runtime backend of the model's context (PFRT_BACKEND_CPU or _CUDA).
    int32_t backend = 0;
    /// Hold parameters, constants, the arena, inputs and outputs in backend
    /// memory: parameters copied in once, inputs and outputs at every run.
    /// Always so on CUDA; on the CPU it runs that path for its tests. The
    /// step's parameter updates then stay in backend memory (parameters()
    /// keeps the values the model was compiled with).
    bool deviceBuffers = false;
    /// PFRT_GEMM_*: the model GEMMs' compute precision (CUDA; the CPU
    /// computes f32 whatever is set).
    int32_t gemmPrecision = 0;
  };
  static llvm::Expected<std::unique_ptr<CompiledModel>> compile(mlir::ModuleOp module,
                                                                const Options &options);
  /// Whether `module` updates parameters in place (optimizer, K-FAC state):
  /// such a model needs Options::ownParameters, so that the step writes
  /// copies rather than the imported weights.
  static bool updatesParameters(mlir::ModuleOp module);

  /// Shorthand for inference runs.
  static llvm::Expected<std::unique_ptr<CompiledModel>>
  compile(mlir::ModuleOp module, int threads, const std::string &function = "",
          bool profile = false);

  /// A parameter the model reads (and, with ownParameters, may update): the
  /// training loop's view of one (pf/Support/Model.h).
  using Parameter = ModelParameter;
  /// Every parameter of the lowered function, in a stable order. With
  /// Options::deviceBuffers the model runs on backend copies: `data` is the
  /// host side, brought up to date by copyParametersToHost() (before reading
  /// it: checkpoints, evaluation; a no-op without ownParameters, whose
  /// weights the step never changes) and sent by copyParametersToBackend()
  /// (after writing it: a resumed checkpoint). Without, both are no-ops.
  std::vector<Parameter> parameters() const;
  llvm::Error copyParametersToHost();
  llvm::Error copyParametersToBackend();

  const std::vector<TensorSpec> &inputs() const { return inputSpecs; }
  const std::vector<TensorSpec> &outputs() const { return outputSpecs; }
  const CompileStats &stats() const { return compileStats; }

  /// Per op of the lowered function (in program order): its name (op and
  /// ONNX node) and the wall time of each of its kernel calls, in ms.
  struct OpTiming {
    std::string name;
    std::vector<double> ms;
  };
  /// Empty unless compiled with `profile`; ops without a kernel call (views,
  /// parameters, constants) have no times.
  const std::vector<OpTiming> &profile() const;

  /// Ahead-of-time mode: lowers `module` and writes into `directory`
  /// model.o (pf_main, position-independent, host CPU), model.weights (the
  /// parameters and constants) and model_plan.h (the tensor table and how to
  /// bind inputs, outputs, weights and the arena; see docs/runtime.md), which
  /// a small C driver links with libpfrt.
  /// With `profileHooks` every kernel call is wrapped in calls of
  /// pf_profile_begin(op) / pf_profile_end(op), which the driver defines
  /// (pf-aot-run --profile).
  static llvm::Error writeAot(mlir::ModuleOp module, const std::string &directory,
                              const std::string &function = "", bool profileHooks = false);
  /// Ahead-of-time mode for a runner that loads models with dlopen (the
  /// training artifacts' trainer, pf-aot-run): lowers the first function of
  /// `module`, writes it as the shared library `library` that exports
  /// pf_aot_model_describe() (pf_aot.h; the description is in the object,
  /// linked by the C compiler driver $CC, else cc) and its weights as
  /// `weights`. Both files are replaced together or not at all.
  static llvm::Expected<AotLibrary> writeAotLibrary(mlir::ModuleOp module,
                                                    const std::string &library,
                                                    const std::string &weights);

  /// Runs once; `inputs` are checked against inputs() by name, dtype and shape.
  llvm::Error run(const std::map<std::string, NpyArray> &inputs,
                  std::map<std::string, NpyArray> &outputs);
  /// Runs once on caller-owned buffers, without copies: every input by name
  /// (checked as above) and, for each output the caller wants, a buffer of
  /// its dtype and shape (checked the same way) that the run writes; the
  /// other outputs go to scratch.
  llvm::Error run(llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  llvm::Error copyParameters(bool toHost);
  std::vector<TensorSpec> inputSpecs, outputSpecs;
  CompileStats compileStats;
  CompiledModel();
  /// Lowers to the LLVM dialect and reads the tensor plan into `impl`.
  static llvm::Error lower(mlir::ModuleOp module, const std::string &function, bool profile,
                           CompiledModel &model);
};

/// What CompiledProgram::writeRankLibrary wrote: one shared library per
/// pipeline rank with a pf_aot.h description per stage function and the
/// rank's lowered programs, and the one weights file all its entries bind.
struct RankLibrary {
  uint64_t fingerprint = 0;     ///< one per library, in every entry's description
  int64_t weightsBytes = 0;     ///< the one weights file every entry binds
  struct Entry {
    std::string function;       ///< stage function name, e.g. "stage0_forward"
    std::string describeSymbol; ///< exported: const pf_aot_model *<symbol>(void)
    std::vector<TensorSpec> inputs, outputs;
    int64_t arenaBytes = 0;
  };
  std::vector<Entry> entries;   ///< in `functions` order
  /// Every parameter once (sorted by name), its place in the shared weights.
  std::vector<AotParameter> parameters;
  /// The exported lowered rank programs: "pf_" + the pf.rank_program's sym name.
  std::vector<std::string> programs;
};

/// Several functions of one module compiled into one JIT engine, for a host
/// that runs them in any order (the stage functions of a pipeline rank).
/// Each function `f` is lowered with `pf-lower-to-runtime{function=f
/// entry=pf_f}` on its own clone of the module and the lowered entries are
/// merged into one LLVM module. Every entry's parameter buffers are bound to
/// **one** host copy per parameter name, owned by the program: an update
/// written by one entry (optimizer, K-FAC state) is read by the next. The
/// entries run one at a time and share one arena sized for the largest.
class CompiledProgram {
public:
  ~CompiledProgram();
  struct Options {
    int threads = 0;                    ///< runtime threads; 0 = the runtime's default
    std::vector<std::string> functions; ///< functions to compile (at least one)
    /// As CompiledModel::Options: the context's backend, its device ordinal
    /// (CUDA), the GEMM precision, and whether the entries run on backend
    /// memory (always so on CUDA): one backend copy per parameter shared by
    /// every entry, one arena, inputs and outputs copied at every run.
    int32_t backend = 0;
    int32_t device = 0;
    bool deviceBuffers = false;
    int32_t gemmPrecision = 0;
  };
  static llvm::Expected<std::unique_ptr<CompiledProgram>> compile(mlir::ModuleOp module,
                                                                  const Options &options);

  /// Ahead-of-time mode of a pipeline rank: writes the shared library
  /// `library` holding every function of `functions`, each lowered as
  /// compile() lowers it and described as writeAotLibrary describes its
  /// model, exported as pf_aot_model_describe__<function>() (pf_aot.h), and
  /// the pf.rank_program ops `programs` lowered as the rank executor lowers
  /// them (`overlapTransfers`: its Options::overlapTransfers), exported as
  /// pf_<program>. Their pfrt_rank_* and pfrt_comm_* calls, like the
  /// kernels, stay undefined: the executable that loads the library
  /// defines them. `weights` holds every parameter once and each entry's
  /// constants; every description binds it whole. Linked by $CC (else cc);
  /// both files are replaced together or not at all.
  static llvm::Expected<RankLibrary>
  writeRankLibrary(mlir::ModuleOp module, const std::vector<std::string> &functions,
                   const std::vector<mlir::Operation *> &programs, bool overlapTransfers,
                   const std::string &library, const std::string &weights);

  /// The compiled functions, in Options::functions order.
  const std::vector<std::string> &entries() const { return entryNames; }
  bool hasEntry(const std::string &function) const;
  /// Inputs and outputs of one entry (empty for an unknown name).
  const std::vector<TensorSpec> &inputs(const std::string &function) const;
  const std::vector<TensorSpec> &outputs(const std::string &function) const;

  /// Runs `function` once; `inputs` are checked by name, dtype and shape.
  llvm::Error run(const std::string &function, const std::map<std::string, NpyArray> &inputs,
                  std::map<std::string, NpyArray> &outputs);
  /// Runs `function` on caller-owned buffers, every input and output given
  /// by name: a view `onBackend` (only when onBackendMemory()) is bound in
  /// place, a host view is copied in (out) when the entries run on backend
  /// memory.
  llvm::Error run(const std::string &function, llvm::ArrayRef<TensorView> inputs,
                  llvm::ArrayRef<TensorView> outputs);
  /// Host↔backend copies of stage values (PFStageValues.h) the runs made:
  /// what a pipeline on backend memory must keep at 0.
  int64_t stageValueCopies() const { return stageValueCopyCount; }

  /// The shared parameters (every one some entry reads), sorted by name;
  /// `data` is the single copy every entry reads and writes, or with
  /// Options::deviceBuffers the host side of the backend copy, brought up to
  /// date by copyParametersToHost() and sent by copyParametersToBackend()
  /// (both no-ops without device buffers).
  const std::vector<CompiledModel::Parameter> &parameters() const { return params; }
  llvm::Error copyParametersToHost();
  llvm::Error copyParametersToBackend();
  /// Whether the entries run on backend memory (Options::deviceBuffers or a
  /// non-CPU backend).
  bool onBackendMemory() const { return !device.empty(); }
  /// The context the entries run on (its backend's memory for transfers).
  pfrt_context *runtimeContext() const { return context; }
  /// nullptr for a name no entry reads.
  const CompiledModel::Parameter *parameter(const std::string &name) const;
  /// The one arena: the largest entry's.
  int64_t arenaBytes() const { return arena.bytes; }

private:
  struct Arena {
    void *data = nullptr;
    int64_t bytes = 0;
  };
  CompiledProgram();
  llvm::Error copyParameters(bool toHost);
  llvm::Error placeOnBackend();
  std::vector<std::string> entryNames;
  std::vector<std::unique_ptr<detail::LoweredEntry>> lowered;
  std::vector<std::vector<char>> constants, parameterData;
  std::vector<CompiledModel::Parameter> params;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  pfrt_context *context = nullptr;
  Arena arena;
  /// With device buffers: [0] owns the backend copy of every parameter and
  /// the arena; [1 + i] holds entry i's constants, inputs and outputs.
  std::vector<std::unique_ptr<detail::DeviceBuffers>> device;
  std::map<std::string, void *> backendParameters;
  int64_t stageValueCopyCount = 0;
  detail::LoweredEntry *find(const std::string &function) const;
};

} // namespace mlir::pf::driver

#endif // PF_DRIVER_RUNNER_H
