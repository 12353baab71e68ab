//===- PFParamOps.cpp - named parameters --------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"

using namespace mlir;
using namespace mlir::pf;

LogicalResult ParamOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("type must be a statically shaped tensor, got ") << getType();
  if (auto value = getValueAttr(); value && value.getType() != type)
    return emitOpError("value has type ")
           << value.getType() << " but the parameter is declared " << type;
  return success();
}

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a pf.param";
  if (param.getType() != getType())
    return emitOpError("type ") << getType() << " does not match parameter '"
                                << getName() << "' of type " << param.getType();
  return success();
}
