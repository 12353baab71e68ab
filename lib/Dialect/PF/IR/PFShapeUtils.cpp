//===- PFShapeUtils.cpp - shape helpers --------------------------------===//
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <algorithm>
#include <limits>

using namespace mlir;

std::optional<int64_t> mlir::pf::boundedProduct(ArrayRef<int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return std::nullopt;
    // product * d <= limit, without forming product * d.
    if (d != 0 && product > kMaxTensorElements / d)
      return std::nullopt;
    product *= d;
  }
  if (llvm::is_contained(dims, 0))
    return 0;
  return product;
}

std::string mlir::pf::shapeText(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? ", " : "") + (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return text + "]";
}

std::string mlir::pf::shapeLimitError(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> dims;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (ShapedType::isDynamic(d))
      continue;
    if (d < 0)
      return "dimension " + std::to_string(i) + " is negative (" + std::to_string(d) + ")";
    if (d > kMaxTensorElements)
      return "dimension " + std::to_string(i) + " (" + std::to_string(d) +
             ") exceeds the limit of " + std::to_string(kMaxTensorElements) +
             " elements (kMaxTensorElements)";
    dims.push_back(d);
  }
  if (boundedProduct(dims))
    return "";
  std::string product;
  for (int64_t d : dims)
    product += (product.empty() ? "" : " x ") + std::to_string(d);
  return "its " + product + " elements exceed the limit of " +
         std::to_string(kMaxTensorElements) + " (kMaxTensorElements)";
}

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

LogicalResult mlir::pf::inferResultTypes(Operation *op, SmallVectorImpl<Type> &types) {
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return failure();
  return infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                op->getRegions(), types);
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

FailureOr<mlir::pf::SliceParams> mlir::pf::normalizeSliceParams(
    std::optional<Location> loc, int64_t rank, ArrayRef<int64_t> starts,
    ArrayRef<int64_t> ends, std::optional<ArrayRef<int64_t>> axes,
    std::optional<ArrayRef<int64_t>> steps) {
  if (starts.size() != ends.size())
    return emitOptionalError(loc, "slice: starts and ends differ in length (",
                             starts.size(), " vs ", ends.size(), ")");
  if (axes && axes->size() != starts.size())
    return emitOptionalError(loc, "slice: axes and starts differ in length (",
                             axes->size(), " vs ", starts.size(), ")");
  if (steps && steps->size() != starts.size())
    return emitOptionalError(loc, "slice: steps and starts differ in length (",
                             steps->size(), " vs ", starts.size(), ")");
  SliceParams p{SmallVector<int64_t>(starts), SmallVector<int64_t>(ends), {}, {}};
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : int64_t(i);
    auto a = normalizeAxis(axis, rank);
    if (!a)
      return emitOptionalError(loc, "slice: axis ", axis, " out of range for rank ", rank);
    if (seen[*a])
      return emitOptionalError(loc, "slice: axis ", axis, " is repeated");
    seen[*a] = true;
    int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0)
      return emitOptionalError(loc, "slice: step must not be 0");
    p.axes.push_back(*a);
    p.steps.push_back(step);
  }
  return p;
}

std::pair<int64_t, int64_t> mlir::pf::sliceRange(int64_t dim, int64_t start,
                                                 int64_t end, int64_t step) {
  auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0)
      v += dim;
    return std::clamp(v, lo, hi);
  };
  if (dim <= 0)
    return {0, 0};
  // Written so that huge steps (INT64_MAX / INT64_MIN) cannot overflow.
  if (step > 0) {
    start = clampIndex(start, 0, dim);
    end = clampIndex(end, 0, dim);
    int64_t span = end - start;
    return {start, span <= 0 ? 0 : 1 + (span - 1) / step};
  }
  start = clampIndex(start, 0, dim - 1);
  end = clampIndex(end, -1, dim - 1);
  int64_t span = start - end;
  if (span <= 0)
    return {start, 0};
  if (step == std::numeric_limits<int64_t>::min())
    return {start, 1};
  return {start, 1 + (span - 1) / -step};
}
