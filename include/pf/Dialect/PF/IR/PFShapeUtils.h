//===- PFShapeUtils.h - shape helpers shared by ops and passes --*- C++ -*-===//
#ifndef PF_DIALECT_PF_IR_PFSHAPEUTILS_H
#define PF_DIALECT_PF_IR_PFSHAPEUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace mlir::pf {

/// The most elements (and so the largest dimension) of a tensor pf accepts:
/// 2^36, 256 GiB of f32. Larger static shapes, in a model or inferred, are
/// refused: their element counts would overflow byte sizes downstream.
constexpr int64_t kMaxTensorElements = int64_t(1) << 36;

/// Why a shape is unacceptable ("dimension 1 is -3", "its 2^40 x 2^40
/// elements exceed ... (kMaxTensorElements)"), or "" when every static
/// dimension is non-negative and their product (overflow-checked) is at most
/// kMaxTensorElements. Dynamic dimensions are skipped.
std::string shapeLimitError(ArrayRef<int64_t> shape);

/// Bytes of one element in the runtime's layout (pfrt's dtypes): a bool
/// (i1) takes a byte, every other integer or float its width rounded up to
/// bytes. The one copy of the rule: arena plans, stage-value plans and
/// constants size buffers by it (an i1 value sized as width / 8 = 0 bytes
/// shared its memory with others).
inline int64_t storageBytesPerElement(Type element) {
  return element.isInteger(1) ? 1 : (int64_t(element.getIntOrFloatBitWidth()) + 7) / 8;
}
/// Bytes of a static tensor of `type` in the runtime's layout.
inline int64_t storageBytes(ShapedType type) {
  return type.getNumElements() * storageBytesPerElement(type.getElementType());
}

/// "[2, ?, 16]": a shape as diagnostics print it.
std::string shapeText(ArrayRef<int64_t> shape);

/// The product of `dims` when it is at most kMaxTensorElements (and no dim is
/// negative); nullopt when it is larger or overflows.
std::optional<int64_t> boundedProduct(ArrayRef<int64_t> dims);

/// A ranked tensor of `shape` (may hold dynamic dims) or, without a shape, an
/// unranked tensor, both of `elementType`.
TensorType makeTensorType(std::optional<ArrayRef<int64_t>> shape, Type elementType);

/// Integer values of a constant 1-D (or scalar) integer tensor, if `value` is
/// produced by a constant.
std::optional<SmallVector<int64_t>> getConstantInts(Value value);

/// Integer values of a constant integer elements attribute.
std::optional<SmallVector<int64_t>> getInts(Attribute attr);

/// Normalizes a possibly negative axis against `rank`; nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Result types an op infers from its current operands and attributes
/// (InferTypeOpInterface). Fails (with the op's diagnostic) when they do not
/// fit, and for ops without the interface.
LogicalResult inferResultTypes(Operation *op, SmallVectorImpl<Type> &types);

/// Numpy broadcast of two shapes; nullopt when they do not broadcast.
std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b);

/// Per-entry ONNX Slice parameters with axes normalized to [0, rank) and
/// steps made explicit (1 when absent).
struct SliceParams {
  SmallVector<int64_t> starts, ends, axes, steps;
};

/// Validates and normalizes constant Slice parameters for a rank-`rank` input:
/// starts/ends (and axes/steps when given) have the same length, axes are in
/// range and unique, steps are nonzero. Errors are reported at `loc` if given.
FailureOr<SliceParams> normalizeSliceParams(std::optional<Location> loc, int64_t rank,
                                            ArrayRef<int64_t> starts,
                                            ArrayRef<int64_t> ends,
                                            std::optional<ArrayRef<int64_t>> axes,
                                            std::optional<ArrayRef<int64_t>> steps);

/// ONNX Slice along one static dimension of size `dim` (step != 0): the first
/// index taken and the number of elements taken.
std::pair<int64_t, int64_t> sliceRange(int64_t dim, int64_t start, int64_t end,
                                       int64_t step);

} // namespace mlir::pf

#endif // PF_DIALECT_PF_IR_PFSHAPEUTILS_H
