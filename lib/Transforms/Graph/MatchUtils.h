//===- MatchUtils.h - small matchers shared by the fusion passes -*- C++ -*-===//
#ifndef PF_LIB_TRANSFORMS_MATCHUTILS_H
#define PF_LIB_TRANSFORMS_MATCHUTILS_H

#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/Matchers.h"
#include <cmath>
#include <optional>

namespace mlir::pf {

/// The value of a constant float tensor whose elements are all equal.
inline std::optional<double> getSplatFloat(Value value) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// True when `value` is a splat constant within relative `tolerance` of `expected`.
inline bool isSplatNear(Value value, double expected, double tolerance) {
  auto got = getSplatFloat(value);
  return got && std::fabs(*got - expected) <= tolerance * std::fabs(expected);
}

/// The other operand of a two-operand op, given one of them.
inline Value otherOperand(Operation *op, Value one) {
  if (op->getNumOperands() != 2)
    return {};
  if (op->getOperand(0) == one)
    return op->getOperand(1);
  if (op->getOperand(1) == one)
    return op->getOperand(0);
  return {};
}

/// The single user of `value` if it has exactly one use.
inline Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

} // namespace mlir::pf

#endif // PF_LIB_TRANSFORMS_MATCHUTILS_H
