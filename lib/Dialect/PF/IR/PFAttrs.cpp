//===- PFAttrs.cpp - pf attributes (the runtime plan) ----------------------===//
#include "pf/Dialect/PF/IR/PFAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pf;

#include "pf/Dialect/PF/IR/PFEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pf/Dialect/PF/IR/PFAttrs.cpp.inc"

void PFDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pf/Dialect/PF/IR/PFAttrs.cpp.inc"
      >();
}

LogicalResult PlannedBufferAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                        BufferKind kind, int64_t bytes,
                                        std::optional<int64_t> index,
                                        std::optional<int64_t> offset, StringAttr name,
                                        ElementsAttr value) {
  if (bytes < 0)
    return emitError() << "#pf.buffer: bytes must be >= 0, got " << bytes;
  // Exactly the field that locates a buffer of this kind.
  bool wantIndex = kind == BufferKind::Input || kind == BufferKind::Output;
  bool wantOffset = kind == BufferKind::Arena;
  bool wantName = kind == BufferKind::Param;
  bool wantValue = kind == BufferKind::Constant;
  StringRef kindName = stringifyBufferKind(kind);
  auto check = [&](bool present, bool wanted, StringRef field) -> LogicalResult {
    if (present == wanted)
      return success();
    return emitError() << "#pf.buffer of kind '" << kindName << "' "
                       << (wanted ? "needs" : "does not take") << " '" << field << "'";
  };
  if (failed(check(index.has_value(), wantIndex, "index")) ||
      failed(check(offset.has_value(), wantOffset, "offset")) ||
      failed(check(bool(name), wantName, "name")) ||
      failed(check(bool(value), wantValue, "value")))
    return failure();
  if ((index && *index < 0) || (offset && *offset < 0))
    return emitError() << "#pf.buffer: index and offset must be >= 0";
  return success();
}

LogicalResult RuntimePlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      int64_t arenaBytes, ArrayAttr buffers, ArrayAttr inputs,
                                      ArrayAttr opNames, ArrayAttr outputs,
                                      int64_t peakLiveBytes, ArrayAttr tensors) {
  auto allOf = [&](ArrayAttr list, StringRef field, auto isElement,
                   StringRef what) -> LogicalResult {
    for (Attribute a : list)
      if (!isElement(a))
        return emitError() << "#pf.runtime_plan: '" << field << "' holds " << what
                           << " only, got " << a;
    return success();
  };
  if (failed(allOf(buffers, "buffers", llvm::IsaPred<PlannedBufferAttr>, "#pf.buffer")) ||
      failed(allOf(tensors, "tensors", llvm::IsaPred<PlannedTensorAttr>, "#pf.tensor")) ||
      failed(allOf(inputs, "inputs", llvm::IsaPred<PlanIOAttr>, "#pf.io")) ||
      failed(allOf(outputs, "outputs", llvm::IsaPred<PlanIOAttr>, "#pf.io")) ||
      failed(allOf(opNames, "op_names", llvm::IsaPred<StringAttr>, "strings")))
    return failure();
  if (arenaBytes < 0 || peakLiveBytes < 0)
    return emitError() << "#pf.runtime_plan: byte counts must be >= 0";
  // Cross references: tensors into buffers, inputs and outputs into tensors.
  for (auto tensor : tensors.getAsRange<PlannedTensorAttr>())
    if (tensor.getBuffer() < 0 || tensor.getBuffer() >= int64_t(buffers.size()))
      return emitError() << "#pf.runtime_plan: tensor buffer " << tensor.getBuffer()
                         << " out of range (" << buffers.size() << " buffers)";
  for (ArrayAttr list : {inputs, outputs})
    for (auto io : list.getAsRange<PlanIOAttr>())
      if (io.getTensor() < 0 || io.getTensor() >= int64_t(tensors.size()))
        return emitError() << "#pf.runtime_plan: '" << io.getName().getValue()
                           << "' names tensor " << io.getTensor() << " out of range ("
                           << tensors.size() << " tensors)";
  return success();
}
