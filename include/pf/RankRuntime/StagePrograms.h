//===- StagePrograms.h - A rank's compiled stage functions ------*- C++ -*-===//
//
// The stage functions one rank calls, compiled as entries that share one
// copy of every parameter: JIT-compiled by pf-train (CompiledProgram behind
// an adapter) or loaded from an artifact's rank library by pf-trainer
// (AotStagePrograms). The rank runner calls them through this interface.
// On the C++ standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_RANKRUNTIME_STAGEPROGRAMS_H
#define PF_RANKRUNTIME_STAGEPROGRAMS_H

#include "pf/Support/Model.h"

typedef struct pfrt_context pfrt_context;

namespace mlir::pf::driver {

/// A caller-owned tensor bound to an entry's input or output by name.
struct StageView {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  void *data = nullptr;
  /// In the backend memory of the entries' context (a stage value): bound in
  /// place, never copied to the host.
  bool onBackend = false;
};

class StagePrograms {
public:
  virtual ~StagePrograms() = default;
  virtual bool hasEntry(const std::string &function) const = 0;
  /// An entry's inputs and outputs (empty for an unknown name).
  virtual const std::vector<TensorSpec> &inputs(const std::string &function) const = 0;
  virtual const std::vector<TensorSpec> &outputs(const std::string &function) const = 0;
  /// Runs `function` on caller-owned buffers, every input and output named.
  virtual ::pf::Status run(const std::string &function, const std::vector<StageView> &inputs,
                           const std::vector<StageView> &outputs) = 0;
  /// Runs `function` on host arrays; every output comes back.
  virtual ::pf::Status run(const std::string &function, const NamedArrays &inputs,
                           NamedArrays &outputs) = 0;
  /// Every parameter some entry reads, sorted by name: the one copy every
  /// entry reads and writes (on backend memory: its host side).
  virtual const std::vector<ModelParameter> &parameters() const = 0;
  const ModelParameter *parameter(const std::string &name) const {
    for (const ModelParameter &p : parameters())
      if (p.name == name)
        return &p;
    return nullptr;
  }
  virtual ::pf::Status copyParametersToHost() = 0;
  virtual ::pf::Status copyParametersToBackend() = 0;
  /// Whether the entries run on backend memory (a GPU, or the CPU check of
  /// that path).
  virtual bool onBackendMemory() const = 0;
  virtual pfrt_context *runtimeContext() const = 0;
  /// Host↔backend copies of stage values the runs made (0 when every stage
  /// value is bound in place).
  virtual int64_t stageValueCopies() const = 0;
};

} // namespace mlir::pf::driver

#endif // PF_RANKRUNTIME_STAGEPROGRAMS_H
