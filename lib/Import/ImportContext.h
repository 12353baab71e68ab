//===- ImportContext.h - state shared by the ONNX importer pieces -*- C++ -*-===//
#ifndef PF_LIB_IMPORT_IMPORTCONTEXT_H
#define PF_LIB_IMPORT_IMPORTCONTEXT_H

#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <string>

namespace mlir::pf::onnx_import {

/// One ONNX node being converted: its inputs as values (null for omitted
/// optional inputs), attributes, opset, and helpers that build pf ops.
class NodeContext {
public:
  NodeContext(OpBuilder &builder, const onnx::NodeProto &node, Location loc,
              int64_t opset, SmallVector<Value> inputs)
      : builder(builder), node(node), loc(loc), opset(opset), inputs(std::move(inputs)) {}

  OpBuilder &builder;
  const onnx::NodeProto &node;
  Location loc;
  int64_t opset;
  SmallVector<Value> inputs;

  /// Input `i`, or null when absent.
  Value input(size_t i) const { return i < inputs.size() ? inputs[i] : Value(); }
  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t fallback) const;
  float floatAttr(StringRef name, float fallback) const;
  std::string stringAttr(StringRef name, StringRef fallback) const;
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) const;

  /// Reports a problem with this node (names the node, op type and opset).
  InFlightDiagnostic error() const;

  /// Gives a freshly built op its inferred result types and folds it. Returns
  /// the (possibly folded) results, or failure after reporting the problem.
  FailureOr<SmallVector<Value>> finish(Operation *op);

  /// Placeholder result type for ops whose types `finish` infers.
  Type placeholder() { return UnrankedTensorType::get(builder.getF32Type()); }

  /// Constant integer values of input `i` (axes, shapes); reports an error
  /// when it is present but not constant.
  FailureOr<std::optional<SmallVector<int64_t>>> constantInts(size_t i, StringRef what);
  /// A 1-D i64 constant.
  Value i64Constant(ArrayRef<int64_t> values);
};

/// How diagnostics name a node: its name, or (the ONNX text format and some
/// exporters leave names empty) its first output, as the node's location does.
std::string displayName(const onnx::NodeProto &node);

using Converter = std::function<FailureOr<SmallVector<Value>>(NodeContext &)>;

/// Converters by ONNX op type (default domain).
const llvm::StringMap<Converter> &getConverters();

/// Element type of an ONNX TensorProto::DataType; null for unsupported ones.
Type convertElementType(MLIRContext *context, int32_t dataType);

/// "STRING (8)": an ONNX data type for diagnostics.
std::string dataTypeName(int32_t dataType);

/// The type of a TensorProto; an error when its element type is unsupported or
/// its shape negative or past kMaxTensorElements.
FailureOr<RankedTensorType> tensorType(MLIRContext *context, const onnx::TensorProto &tensor,
                                       Location loc);

/// Checks, without reading it, that a tensor holds (inline) or declares
/// (external length) exactly the bytes its shape and type need: what
/// --no-weights does instead of converting.
LogicalResult checkTensorData(MLIRContext *context, const onnx::TensorProto &tensor,
                              Location loc);

/// A constant elements attribute of a TensorProto (used by Constant nodes and
/// small initializers). `baseDir` resolves external data.
FailureOr<ElementsAttr> convertTensor(MLIRContext *context, const onnx::TensorProto &tensor,
                                      StringRef baseDir, Location loc, bool asResource,
                                      StringRef resourceName = {});

} // namespace mlir::pf::onnx_import

#endif // PF_LIB_IMPORT_IMPORTCONTEXT_H
