//===- PFShapeUtils.cpp - shape helpers --------------------------------===//
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

TensorType mlir::pf::makeTensorType(std::optional<ArrayRef<int64_t>> shape,
                                    Type elementType) {
  if (!shape)
    return UnrankedTensorType::get(elementType);
  return RankedTensorType::get(*shape, elementType);
}

std::optional<SmallVector<int64_t>> mlir::pf::getInts(Attribute attr) {
  auto ints = dyn_cast_or_null<DenseIntElementsAttr>(attr);
  if (!ints)
    return std::nullopt;
  SmallVector<int64_t> values;
  values.reserve(ints.getNumElements());
  for (const APInt &v : ints.getValues<APInt>())
    values.push_back(ints.getElementType().isInteger(1) ? v.getZExtValue()
                                                        : v.getSExtValue());
  return values;
}

std::optional<SmallVector<int64_t>> mlir::pf::getConstantInts(Value value) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  return getInts(attr);
}

std::optional<int64_t> mlir::pf::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<SmallVector<int64_t>>
mlir::pf::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1) {
      result[i] = db;
    } else if (db == 1) {
      result[i] = da;
    } else if (ShapedType::isDynamic(da)) {
      result[i] = db; // a dynamic dim must equal a non-1 static one
    } else if (ShapedType::isDynamic(db) || da == db) {
      result[i] = da;
    } else {
      return std::nullopt;
    }
  }
  return result;
}
