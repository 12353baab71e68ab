//===- Model.h - A compiled function the training loop runs -----*- C++ -*-===//
//
// The training loop runs compiled functions (the held-out evaluation; the
// step of an artifact) without knowing how they were compiled: MLIR's JIT
// in pf-train (driver::CompiledModel behind an adapter), or an artifact's
// shared object in the MLIR-free trainer. On the C++ standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_MODEL_H
#define PF_SUPPORT_MODEL_H

#include "pf/Support/Npz.h"
#include "pf/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlir::pf::driver {

/// A parameter a compiled function reads (and, when it owns its
/// parameters, updates in place): the host copy at `data`.
struct ModelParameter {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  void *data = nullptr;
  int64_t bytes = 0;
};

/// A named input or output of a compiled function.
struct TensorSpec {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  /// Outputs: the program may leave part of it unwritten (an op that writes
  /// in place or under a condition), so every run starts it from zeros. The
  /// others are written whole and their buffers are not cleared first.
  bool zeroFill = false;
};

/// Named host arrays: a function's inputs or outputs.
using NamedArrays = std::map<std::string, NpyArray>;

class Model {
public:
  virtual ~Model() = default;
  /// Every parameter, in a stable order; `data` is the host side, brought
  /// up to date by copyParametersToHost() and sent to the function's memory
  /// (a GPU's) by copyParametersToBackend().
  virtual std::vector<ModelParameter> parameters() const = 0;
  virtual ::pf::Status copyParametersToHost() = 0;
  virtual ::pf::Status copyParametersToBackend() = 0;
  /// Runs once; `inputs` are checked by name, dtype and shape.
  virtual ::pf::Status run(const NamedArrays &inputs, NamedArrays &outputs) = 0;
};

} // namespace mlir::pf::driver

#endif // PF_SUPPORT_MODEL_H
