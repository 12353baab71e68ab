//===- PFDialect.cpp - pf dialect registration -------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Dialect/PF/IR/PFOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::pf;

#include "pf/Dialect/PF/IR/PFOpsDialect.cpp.inc"
#include "pf/Dialect/PF/IR/PFInterfaces.cpp.inc"

void PFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pf/Dialect/PF/IR/PFOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *PFDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

bool mlir::pf::areCompatibleTensorTypes(TypeRange lhs, TypeRange rhs) {
  if (lhs.size() != rhs.size())
    return false;
  for (auto [l, r] : llvm::zip(lhs, rhs)) {
    auto lt = dyn_cast<TensorType>(l);
    auto rt = dyn_cast<TensorType>(r);
    if (!lt || !rt) {
      if (l != r)
        return false;
      continue;
    }
    if (lt.getElementType() != rt.getElementType() ||
        failed(verifyCompatibleShape(lt, rt)))
      return false;
  }
  return true;
}

double mlir::pf::tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return static_cast<double>(tensor.getNumElements()) * ((bits + 7) / 8);
}

#define GET_OP_CLASSES
#include "pf/Dialect/PF/IR/PFOps.cpp.inc"
