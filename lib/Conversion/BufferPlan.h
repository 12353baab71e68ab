//===- BufferPlan.h - static buffers of a pf function -------------*- C++ -*-===//
//
// Every tensor value of the entry function gets a table entry (a pfrt_tensor
// descriptor) that points into a buffer. Buffers are the host's (inputs,
// outputs, parameters, constants) or slices of one arena; arena slices are
// placed by liveness so that values that are never alive together share
// memory. View ops (ViewOpInterface: reshape, squeeze, ...) alias their
// source's buffer.
//
//===----------------------------------------------------------------------===//
#ifndef PF_LIB_CONVERSION_BUFFERPLAN_H
#define PF_LIB_CONVERSION_BUFFERPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::pf {

struct PlannedBuffer {
  enum class Kind { Input, Output, Param, Constant, Arena };
  Kind kind = Kind::Arena;
  int64_t index = 0;  ///< input/output position
  StringAttr param;   ///< parameter name
  ElementsAttr value; ///< constant data
  int64_t bytes = 0;
  int64_t offset = 0; ///< arena offset
  int64_t firstUse = 0, lastUse = 0;
  /// Arena buffers: the op whose result it holds (views of it share it).
  Operation *producer = nullptr;
};

struct PlannedTensor {
  int64_t buffer = 0;
  RankedTensorType type;
};

struct BufferPlan {
  SmallVector<PlannedBuffer> buffers;
  SmallVector<PlannedTensor> tensors;
  DenseMap<Value, int64_t> tensorOf;
  /// Table entry of each parameter read by name (optimizer updates).
  llvm::StringMap<int64_t> paramTensor;
  /// Function results that need a copy into their output buffer (they are
  /// inputs, parameters, constants or returned twice): (tensor, output tensor).
  SmallVector<std::pair<int64_t, int64_t>> outputCopies;
  /// The table entry of each function result (its shape is the result's).
  SmallVector<int64_t> outputTensors;
  int64_t arenaBytes = 0;
  /// Largest sum of the sizes of arena buffers alive at one time.
  int64_t peakLiveBytes = 0;

  int64_t addTensor(int64_t buffer, RankedTensorType type) {
    tensors.push_back({buffer, type});
    return int64_t(tensors.size()) - 1;
  }
};

/// Plans the buffers of `func`; fails with a diagnostic on a dynamic shape.
FailureOr<BufferPlan> planBuffers(func::FuncOp func);

} // namespace mlir::pf

#endif // PF_LIB_CONVERSION_BUFFERPLAN_H
