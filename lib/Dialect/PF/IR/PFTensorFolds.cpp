//===- PFTensorFolds.cpp - constant folding of the tensor ops -----------===//
//
// Folding is what turns an exporter's dynamic-shape arithmetic
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) into constants. It works
// on small constants only; big tensors (weights) are never copied here.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APSInt.h"
#include <functional>

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr int64_t kMaxFoldElements = 1 << 16;

DenseElementsAttr foldableConstant(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.getType().hasStaticShape())
    return nullptr;
  if (!dense.isSplat() && dense.getNumElements() > kMaxFoldElements)
    return nullptr;
  return dense;
}

RankedTensorType staticResultType(Value result) {
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return nullptr;
  return type;
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Builds a tensor of `type` whose element i is `source(i-th multi-index)`.
template <typename Fn>
DenseElementsAttr buildElements(RankedTensorType type, Fn &&source) {
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> strides = stridesOf(shape);
  SmallVector<Attribute> values;
  values.reserve(type.getNumElements());
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0, n = type.getNumElements(); flat < n; ++flat) {
    int64_t rest = flat;
    for (size_t d = 0; d < shape.size(); ++d) {
      index[d] = rest / strides[d];
      rest %= strides[d];
    }
    Attribute value = source(ArrayRef<int64_t>(index));
    if (!value)
      return nullptr;
    values.push_back(value);
  }
  return DenseElementsAttr::get(type, values);
}

/// Element of a constant at a broadcast multi-index of the result.
Attribute broadcastElement(DenseElementsAttr attr, ArrayRef<int64_t> resultIndex) {
  if (attr.isSplat())
    return attr.getSplatValue<Attribute>();
  ArrayRef<int64_t> shape = attr.getType().getShape();
  SmallVector<int64_t> strides = stridesOf(shape);
  size_t offset = resultIndex.size() - shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat += (shape[d] == 1 ? 0 : resultIndex[offset + d]) * strides[d];
  return attr.getValues<Attribute>()[flat];
}

using IntFn = std::function<std::optional<APInt>(const APInt &, const APInt &)>;
using FloatFn = std::function<std::optional<APFloat>(const APFloat &, const APFloat &)>;

/// Folds an elementwise binary op on two constants.
OpFoldResult foldBinary(Value result, Attribute lhsAttr, Attribute rhsAttr,
                        IntFn intFn, FloatFn floatFn) {
  auto lhs = foldableConstant(lhsAttr), rhs = foldableConstant(rhsAttr);
  auto type = staticResultType(result);
  if (!lhs || !rhs || !type)
    return {};
  Type resultElement = type.getElementType();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    Attribute l = broadcastElement(lhs, index), r = broadcastElement(rhs, index);
    if (auto li = dyn_cast<IntegerAttr>(l)) {
      auto ri = dyn_cast<IntegerAttr>(r);
      if (!intFn || !ri)
        return nullptr;
      auto v = intFn(li.getValue(), ri.getValue());
      return v ? IntegerAttr::get(resultElement, *v) : nullptr;
    }
    auto lf = dyn_cast<FloatAttr>(l), rf = dyn_cast<FloatAttr>(r);
    if (!floatFn || !lf || !rf)
      return nullptr;
    auto v = floatFn(lf.getValue(), rf.getValue());
    if (!v)
      return nullptr;
    if (auto intType = dyn_cast<IntegerType>(resultElement)) // comparisons
      return IntegerAttr::get(intType, v->isNonZero() ? 1 : 0);
    return FloatAttr::get(resultElement, *v);
  });
}

/// `lhs` itself when `rhsAttr` is a splat of exactly `unit` (+0.0, not -0.0)
/// and `lhs` already has the result's type: x * 1, x / 1 and x - 0 are exact
/// for every x (signed zeros, infinities and NaNs included), so the autodiff's
/// scalings by one cost no pass over the tensor (the masked-LM logits'
/// gradient is 31M elements).
OpFoldResult foldUnitOperand(Value result, Value lhs, Attribute rhsAttr, double unit) {
  auto splat = dyn_cast_or_null<SplatElementsAttr>(rhsAttr);
  if (!splat || lhs.getType() != result.getType())
    return {};
  Type element = splat.getElementType();
  bool isUnit = false;
  if (isa<FloatType>(element))
    isUnit = splat.getSplatValue<APFloat>().isExactlyValue(unit);
  else if (isa<IntegerType>(element) && !element.isInteger(1))
    isUnit = splat.getSplatValue<APInt>().getSExtValue() == int64_t(unit);
  return isUnit ? OpFoldResult(lhs) : OpFoldResult();
}

/// Reinterprets a constant with the op's (static) result type.
OpFoldResult foldReshapeLike(Value result, Attribute input) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!dense || !type || !type.hasStaticShape() ||
      type.getNumElements() != dense.getNumElements())
    return {};
  return dense.reshape(type);
}
} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                    [](const APInt &a, const APInt &b) { return a + b; },
                    [](const APFloat &a, const APFloat &b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult same = foldUnitOperand(getOutput(), getLhs(), adaptor.getRhs(), 0.0))
    return same;
  return foldBinary(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                    [](const APInt &a, const APInt &b) { return a - b; },
                    [](const APFloat &a, const APFloat &b) { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult same = foldUnitOperand(getOutput(), getLhs(), adaptor.getRhs(), 1.0))
    return same;
  if (OpFoldResult same = foldUnitOperand(getOutput(), getRhs(), adaptor.getLhs(), 1.0))
    return same;
  return foldBinary(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                    [](const APInt &a, const APInt &b) { return a * b; },
                    [](const APFloat &a, const APFloat &b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult same = foldUnitOperand(getOutput(), getLhs(), adaptor.getRhs(), 1.0))
    return same;
  return foldBinary(
      getOutput(), adaptor.getLhs(), adaptor.getRhs(),
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        if (b.isZero())
          return std::nullopt; // leave division by zero to run time
        return a.sdiv(b);
      },
      [](const APFloat &a, const APFloat &b) { return a / b; });
}

OpFoldResult PowOp::fold(FoldAdaptor) { return {}; }

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      getOutput(), adaptor.getLhs(), adaptor.getRhs(),
      [](const APInt &a, const APInt &b) { return APInt(1, a == b ? 1 : 0); },
      [](const APFloat &a, const APFloat &b) {
        return APFloat(a.compare(b) == APFloat::cmpEqual ? 1.0f : 0.0f);
      });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                    [](const APInt &a, const APInt &b) { return a.slt(b) ? a : b; },
                    [](const APFloat &a, const APFloat &b) { return minimum(a, b); });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                    [](const APInt &a, const APInt &b) { return a.sgt(b) ? a : b; },
                    [](const APFloat &a, const APFloat &b) { return maximum(a, b); });
}

namespace {
/// Folds an ordered comparison; `accepts` says which APFloat outcomes are
/// true (unordered, i.e. NaN, never is), `intTest` the same for signed ints.
OpFoldResult foldCompare(Value result, Attribute lhs, Attribute rhs,
                         bool (*intTest)(const APInt &, const APInt &),
                         std::initializer_list<APFloat::cmpResult> accepts) {
  SmallVector<APFloat::cmpResult, 2> outcomes(accepts);
  return foldBinary(
      result, lhs, rhs,
      [intTest](const APInt &a, const APInt &b) { return APInt(1, intTest(a, b) ? 1 : 0); },
      [outcomes](const APFloat &a, const APFloat &b) {
        return APFloat(llvm::is_contained(outcomes, a.compare(b)) ? 1.0f : 0.0f);
      });
}

/// Folds a bool binary op (the operands are i1 constants).
OpFoldResult foldLogic(Value result, Attribute lhs, Attribute rhs,
                       APInt (*fn)(const APInt &, const APInt &)) {
  return foldBinary(result, lhs, rhs,
                    [fn](const APInt &a, const APInt &b) { return fn(a, b); }, nullptr);
}

/// Folds an elementwise unary op; `fn` returns null for elements it leaves alone.
template <typename Fn>
OpFoldResult foldUnary(Value result, Attribute inputAttr, Fn &&fn) {
  auto input = foldableConstant(inputAttr);
  auto type = staticResultType(result);
  if (!input || !type)
    return {};
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    return fn(broadcastElement(input, index));
  });
}

/// A float unary fold: `fn` maps the element's APFloat to the result.
template <typename Fn>
OpFoldResult foldUnaryFloat(Value result, Attribute inputAttr, Fn &&fn) {
  return foldUnary(result, inputAttr, [&](Attribute v) -> Attribute {
    auto f = dyn_cast<FloatAttr>(v);
    return f ? FloatAttr::get(f.getType(), fn(f.getValue())) : Attribute();
  });
}
} // namespace

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                     [](const APInt &a, const APInt &b) { return a.sgt(b); },
                     {APFloat::cmpGreaterThan});
}

OpFoldResult GreaterEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                     [](const APInt &a, const APInt &b) { return a.sge(b); },
                     {APFloat::cmpGreaterThan, APFloat::cmpEqual});
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                     [](const APInt &a, const APInt &b) { return a.slt(b); },
                     {APFloat::cmpLessThan});
}

OpFoldResult LessEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                     [](const APInt &a, const APInt &b) { return a.sle(b); },
                     {APFloat::cmpLessThan, APFloat::cmpEqual});
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldLogic(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                   [](const APInt &a, const APInt &b) { return a & b; });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldLogic(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                   [](const APInt &a, const APInt &b) { return a | b; });
}

OpFoldResult XorOp::fold(FoldAdaptor adaptor) {
  return foldLogic(getOutput(), adaptor.getLhs(), adaptor.getRhs(),
                   [](const APInt &a, const APInt &b) { return a ^ b; });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getOutput(), adaptor.getInput(), [](Attribute v) -> Attribute {
    auto i = dyn_cast<IntegerAttr>(v);
    return i ? IntegerAttr::get(i.getType(), ~i.getValue()) : Attribute();
  });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldUnaryFloat(getOutput(), adaptor.getInput(), [](APFloat x) { return abs(x); });
}

OpFoldResult SignOp::fold(FoldAdaptor adaptor) {
  return foldUnaryFloat(getOutput(), adaptor.getInput(), [](APFloat x) {
    if (x.isNaN() || x.isZero())
      return x;
    APFloat one(x.getSemantics(), 1);
    if (x.isNegative())
      one.changeSign();
    return one;
  });
}

OpFoldResult ReciprocalOp::fold(FoldAdaptor adaptor) {
  return foldUnaryFloat(getOutput(), adaptor.getInput(), [](APFloat x) {
    APFloat one(x.getSemantics(), 1);
    one.divide(x, APFloat::rmNearestTiesToEven);
    return one;
  });
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type)
    return {};
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    Attribute v = broadcastElement(input, index);
    if (auto i = dyn_cast<IntegerAttr>(v))
      return IntegerAttr::get(i.getType(), -i.getValue());
    if (auto f = dyn_cast<FloatAttr>(v))
      return FloatAttr::get(f.getType(), -f.getValue());
    return nullptr; // e.g. complex elements: not folded
  });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto cond = foldableConstant(adaptor.getCondition());
  auto x = foldableConstant(adaptor.getX()), y = foldableConstant(adaptor.getY());
  auto type = staticResultType(getOutput());
  if (!cond || !x || !y || !type)
    return {};
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    bool c = cast<IntegerAttr>(broadcastElement(cond, index)).getValue().getBoolValue();
    return broadcastElement(c ? x : y, index);
  });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type)
    return {};
  Type to = getTo();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    Attribute v = broadcastElement(input, index);
    if (auto i = dyn_cast<IntegerAttr>(v)) {
      bool isSigned = !i.getType().isInteger(1);
      if (auto toInt = dyn_cast<IntegerType>(to)) {
        if (toInt.getWidth() == 1) // to bool: nonzero is true (not truncation)
          return IntegerAttr::get(to, i.getValue().isZero() ? 0 : 1);
        return IntegerAttr::get(to, isSigned ? i.getValue().sextOrTrunc(toInt.getWidth())
                                             : i.getValue().zextOrTrunc(toInt.getWidth()));
      }
      APFloat f(cast<FloatType>(to).getFloatSemantics());
      f.convertFromAPInt(i.getValue(), isSigned, APFloat::rmNearestTiesToEven);
      return FloatAttr::get(to, f);
    }
    auto floatAttr = dyn_cast<FloatAttr>(v);
    if (!floatAttr)
      return nullptr; // e.g. complex elements: not folded
    APFloat f = floatAttr.getValue();
    if (auto toFloat = dyn_cast<FloatType>(to)) {
      bool lost;
      f.convert(toFloat.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return FloatAttr::get(to, f);
    }
    auto toInt = cast<IntegerType>(to);
    if (toInt.getWidth() == 1)
      return IntegerAttr::get(to, f.isZero() ? 0 : 1);
    APSInt result(toInt.getWidth(), /*isUnsigned=*/false);
    bool exact;
    f.convertToInteger(result, APFloat::rmTowardZero, &exact);
    return IntegerAttr::get(to, result);
  });
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto input = dyn_cast<RankedTensorType>(getInput().getType());
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!input || !input.hasStaticShape() || !type || !type.hasStaticShape())
    return {};
  int64_t rank = input.getRank();
  int64_t start = getStart() ? int64_t(*getStart()) : 0;
  if (start < 0)
    start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  ArrayRef<int64_t> dims = input.getShape().slice(start, type.getDimSize(0));
  return DenseIntElementsAttr::get(type, dims);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType() &&
      cast<ShapedType>(getType()).hasStaticShape())
    return getData();
  return foldReshapeLike(getOutput(), adaptor.getData());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getOutput(), adaptor.getInput());
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  // Equal ranked types mean nothing was removed (removing changes the rank);
  // equal unranked types say nothing.
  if (getInput().getType() == getType() && isa<RankedTensorType>(getType()))
    return getInput();
  return foldReshapeLike(getOutput(), adaptor.getInput());
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  auto perm = getPerm();
  bool identity = perm && llvm::equal(*perm, llvm::seq<int64_t>(0, perm->size()));
  if (identity && getInput().getType() == getType())
    return getInput();
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type)
    return {};
  if (input.isSplat())
    return input.resizeSplat(type);
  SmallVector<int64_t> order;
  if (perm)
    order.assign(perm->begin(), perm->end());
  else
    for (int64_t i = type.getRank() - 1; i >= 0; --i)
      order.push_back(i);
  SmallVector<int64_t> inStrides = stridesOf(input.getType().getShape());
  auto values = input.getValues<Attribute>();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    int64_t flat = 0;
    for (size_t d = 0; d < index.size(); ++d)
      flat += index[d] * inStrides[order[d]];
    return values[flat];
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  auto type = staticResultType(getOutput());
  if (!type)
    return {};
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute attr : adaptor.getInputs()) {
    auto dense = foldableConstant(attr);
    if (!dense)
      return {};
    inputs.push_back(dense);
  }
  int64_t axis = *normalizeAxis(getAxis(), type.getRank());
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    int64_t pos = index[axis];
    for (DenseElementsAttr input : inputs) {
      int64_t size = input.getType().getDimSize(axis);
      if (pos < size) {
        SmallVector<int64_t> local(index);
        local[axis] = pos;
        return broadcastElement(input, local);
      }
      pos -= size;
    }
    return nullptr;
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  auto data = foldableConstant(adaptor.getData());
  auto type = staticResultType(getOutput());
  if (!data || !type)
    return {};
  auto starts = getInts(adaptor.getStarts()), ends = getInts(adaptor.getEnds());
  auto steps = getSteps() ? getInts(adaptor.getSteps()) : std::nullopt;
  auto axes = getAxes() ? getInts(adaptor.getAxes()) : std::nullopt;
  if (!starts || !ends || (getSteps() && !steps) || (getAxes() && !axes))
    return {};
  ArrayRef<int64_t> inShape = data.getType().getShape();
  int64_t rank = inShape.size();
  auto params = normalizeSliceParams(
      std::nullopt, rank, *starts, *ends,
      axes ? std::optional<ArrayRef<int64_t>>(*axes) : std::nullopt,
      steps ? std::optional<ArrayRef<int64_t>>(*steps) : std::nullopt);
  if (failed(params) || type.getRank() != rank)
    return {};
  SmallVector<int64_t> begin(rank, 0), stride(rank, 1), sizes(inShape);
  for (size_t i = 0; i < params->axes.size(); ++i) {
    int64_t axis = params->axes[i];
    auto [start, size] = sliceRange(inShape[axis], params->starts[i],
                                    params->ends[i], params->steps[i]);
    begin[axis] = start;
    stride[axis] = params->steps[i];
    sizes[axis] = size;
  }
  // The result type was declared, possibly before the bounds were constants:
  // fold only when it agrees with what the constant bounds select.
  if (ArrayRef<int64_t>(sizes) != type.getShape())
    return {};
  if (data.isSplat())
    return data.resizeSplat(type);
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  auto values = data.getValues<Attribute>();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d)
      flat += (begin[d] + index[d] * stride[d]) * inStrides[d];
    return values[flat];
  });
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto data = foldableConstant(adaptor.getData());
  auto indices = foldableConstant(adaptor.getIndices());
  auto type = staticResultType(getOutput());
  if (!data || !indices || !type)
    return {};
  ArrayRef<int64_t> dataShape = data.getType().getShape();
  int64_t axis = *normalizeAxis(getAxis(), dataShape.size());
  int64_t indexRank = indices.getType().getRank();
  auto indexValues = getInts(indices);
  if (!indexValues)
    return {};
  SmallVector<int64_t> indexStrides = stridesOf(indices.getType().getShape());
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    int64_t flatIndex = 0;
    for (int64_t d = 0; d < indexRank; ++d)
      flatIndex += index[axis + d] * indexStrides[d];
    int64_t picked = (*indexValues)[flatIndex];
    if (picked < 0)
      picked += dataShape[axis];
    if (picked < 0 || picked >= dataShape[axis])
      return nullptr; // out of range: leave it to the runtime check
    SmallVector<int64_t> source(index.begin(), index.begin() + axis);
    source.push_back(picked);
    source.append(index.begin() + axis + indexRank, index.end());
    return broadcastElement(data, source);
  });
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      cast<ShapedType>(getType()).hasStaticShape())
    return getInput();
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type)
    return {};
  // The declared result type may predate a constant shape operand: fold only
  // when the input really broadcasts to it.
  auto merged = broadcastShapes(input.getType().getShape(), type.getShape());
  if (!merged || ArrayRef<int64_t>(*merged) != type.getShape())
    return {};
  if (input.isSplat())
    return input.resizeSplat(type);
  return buildElements(type, [&](ArrayRef<int64_t> index) {
    return broadcastElement(input, index);
  });
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return {};
  if (auto value = getValueAttr()) {
    // Only dense values are read here (not e.g. dense_resource blobs).
    auto dense = dyn_cast<DenseElementsAttr>(value);
    if (!dense || dense.getNumElements() != 1 || dense.getElementType() != type.getElementType())
      return {};
    return DenseElementsAttr::get(type, dense.getValues<Attribute>()[0]);
  }
  return DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), 0.0));
}

//===--- IsNaN/IsInf, GatherND/ScatterND, CumSum, Trilu, ReduceMax/Min --------===//

OpFoldResult IsNaNOp::fold(FoldAdaptor adaptor) {
  Type i1 = IntegerType::get(getContext(), 1);
  return foldUnary(getOutput(), adaptor.getInput(), [&](Attribute v) -> Attribute {
    auto f = dyn_cast<FloatAttr>(v);
    return f ? IntegerAttr::get(i1, f.getValue().isNaN()) : Attribute();
  });
}

OpFoldResult IsInfOp::fold(FoldAdaptor adaptor) {
  Type i1 = IntegerType::get(getContext(), 1);
  bool negative = getDetectNegative(), positive = getDetectPositive();
  return foldUnary(getOutput(), adaptor.getInput(), [&](Attribute v) -> Attribute {
    auto f = dyn_cast<FloatAttr>(v);
    if (!f)
      return nullptr;
    const APFloat &x = f.getValue();
    bool hit = x.isInfinity() && (x.isNegative() ? negative : positive);
    return IntegerAttr::get(i1, hit);
  });
}

namespace {
Attribute zeroOf(Type element) {
  if (isa<FloatType>(element))
    return FloatAttr::get(element, 0.0);
  return IntegerAttr::get(element, 0);
}

/// `a kind b` on two elements of one type (NaN propagates through max/min;
/// bools are unsigned: max is "or", min is "and"). Null for other kinds.
Attribute combine(Attribute a, Attribute b, ScatterReduction kind) {
  if (kind == ScatterReduction::None)
    return b;
  if (auto fa = dyn_cast<FloatAttr>(a)) {
    auto fb = dyn_cast<FloatAttr>(b);
    if (!fb)
      return nullptr;
    APFloat x = fa.getValue(), y = fb.getValue();
    switch (kind) {
    case ScatterReduction::Add:
      x.add(y, APFloat::rmNearestTiesToEven);
      break;
    case ScatterReduction::Mul:
      x.multiply(y, APFloat::rmNearestTiesToEven);
      break;
    case ScatterReduction::Max:
      x = llvm::maximum(x, y);
      break;
    default:
      x = llvm::minimum(x, y);
      break;
    }
    return FloatAttr::get(fa.getType(), x);
  }
  auto ia = dyn_cast<IntegerAttr>(a), ib = dyn_cast<IntegerAttr>(b);
  if (!ia || !ib)
    return nullptr;
  const APInt &x = ia.getValue(), &y = ib.getValue();
  bool isBool = x.getBitWidth() == 1;
  switch (kind) {
  case ScatterReduction::Add:
    return IntegerAttr::get(ia.getType(), x + y);
  case ScatterReduction::Mul:
    return IntegerAttr::get(ia.getType(), x * y);
  case ScatterReduction::Max:
    return IntegerAttr::get(ia.getType(), isBool ? llvm::APIntOps::umax(x, y) : llvm::APIntOps::smax(x, y));
  default:
    return IntegerAttr::get(ia.getType(), isBool ? llvm::APIntOps::umin(x, y) : llvm::APIntOps::smin(x, y));
  }
}

/// The flat data offset of index tuple `t` (m values, negatives from the end)
/// over dims [first, first + m) of `shape`; nullopt when out of range.
std::optional<int64_t> tupleOffset(ArrayRef<int64_t> tuple, ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> strides, int64_t first) {
  int64_t offset = 0;
  for (auto [j, value] : llvm::enumerate(tuple)) {
    int64_t dim = shape[first + j], v = value;
    if (v < 0)
      v += dim;
    if (v < 0 || v >= dim)
      return std::nullopt;
    offset += v * strides[first + j];
  }
  return offset;
}
} // namespace

OpFoldResult GatherNDOp::fold(FoldAdaptor adaptor) {
  auto data = foldableConstant(adaptor.getData());
  auto indices = foldableConstant(adaptor.getIndices());
  auto type = staticResultType(getOutput());
  if (!data || !indices || !type)
    return {};
  auto idx = getInts(indices);
  if (!idx)
    return {};
  ArrayRef<int64_t> dataShape = data.getType().getShape();
  ArrayRef<int64_t> idxShape = indices.getType().getShape();
  int64_t b = getBatchDims(), m = idxShape.back(), q = idxShape.size();
  SmallVector<int64_t> dataStrides = stridesOf(dataShape), idxStrides = stridesOf(idxShape);
  auto values = data.getValues<Attribute>();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    // index = indices' leading dims (batch included) ++ the slice position.
    int64_t tupleAt = 0, offset = 0;
    for (int64_t d = 0; d < q - 1; ++d)
      tupleAt += index[d] * idxStrides[d];
    for (int64_t d = 0; d < b; ++d)
      offset += index[d] * dataStrides[d];
    auto tuple = ArrayRef<int64_t>(*idx).slice(tupleAt, m);
    auto at = tupleOffset(tuple, dataShape, dataStrides, b);
    if (!at)
      return nullptr; // out of range: leave it to the runtime check
    offset += *at;
    for (int64_t d = q - 1, s = b + m; d < int64_t(index.size()); ++d, ++s)
      offset += index[d] * dataStrides[s];
    return values[offset];
  });
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor adaptor) {
  auto data = foldableConstant(adaptor.getData());
  auto indices = foldableConstant(adaptor.getIndices());
  auto updates = foldableConstant(adaptor.getUpdates());
  auto type = staticResultType(getOutput());
  if (!data || !indices || !updates || !type || data.getType() != type)
    return {};
  // Big splat indices or updates would be expanded element by element.
  if (indices.getNumElements() > kMaxFoldElements || updates.getNumElements() > kMaxFoldElements)
    return {};
  auto idx = getInts(indices);
  if (!idx)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  int64_t m = indices.getType().getShape().back();
  SmallVector<int64_t> strides = stridesOf(shape);
  int64_t slice = 1;
  for (int64_t d : shape.drop_front(m))
    slice *= d;
  SmallVector<Attribute> out(data.getValues<Attribute>());
  auto up = updates.getValues<Attribute>();
  int64_t tuples = m ? int64_t(idx->size()) / m : 0;
  for (int64_t t = 0; t < tuples; ++t) {
    auto at = tupleOffset(ArrayRef<int64_t>(*idx).slice(t * m, m), shape, strides, 0);
    if (!at)
      return {};
    for (int64_t e = 0; e < slice; ++e) {
      Attribute v = combine(out[*at + e], up[t * slice + e], getReduction());
      if (!v)
        return {};
      out[*at + e] = v;
    }
  }
  return DenseElementsAttr::get(type, out);
}

OpFoldResult CumSumOp::fold(FoldAdaptor adaptor) {
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type || input.getType() != type)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  int64_t axis = *normalizeAxis(getAxis(), shape.size());
  int64_t len = shape[axis], stride = stridesOf(shape)[axis];
  SmallVector<Attribute> in(input.getValues<Attribute>()), out(in.size());
  Attribute zero = zeroOf(type.getElementType());
  // Walk each line along the axis, from its first element in scan order.
  for (int64_t flat = 0, n = in.size(); flat < n; ++flat) {
    if ((flat / stride) % len != 0)
      continue;
    Attribute acc = zero;
    for (int64_t s = 0; s < len; ++s) {
      int64_t at = flat + (getReverse() ? len - 1 - s : s) * stride;
      Attribute next = combine(acc, in[at], ScatterReduction::Add);
      if (!next)
        return {};
      out[at] = getExclusive() ? acc : next;
      acc = next;
    }
  }
  return DenseElementsAttr::get(type, out);
}

OpFoldResult TriluOp::fold(FoldAdaptor adaptor) {
  auto input = foldableConstant(adaptor.getInput());
  auto type = staticResultType(getOutput());
  if (!input || !type || input.getType() != type)
    return {};
  Attribute zero = zeroOf(type.getElementType());
  int64_t k = getK();
  bool upper = getUpper();
  return buildElements(type, [&](ArrayRef<int64_t> index) -> Attribute {
    int64_t diff = index.back() - index[index.size() - 2];
    bool keep = upper ? diff >= k : diff <= k;
    return keep ? broadcastElement(input, index) : zero;
  });
}

/// ReduceMax/ReduceMin of a constant: every input element is combined into
/// the output element it reduces to.
template <typename OpTy>
static OpFoldResult foldReduceExtreme(OpTy op, Attribute inputAttr, ScatterReduction kind) {
  auto input = foldableConstant(inputAttr);
  auto type = staticResultType(op.getOutput());
  if (!input || !type || input.getNumElements() == 0)
    return {};
  if (input.isSplat()) // the extreme of copies of one value is that value
    return DenseElementsAttr::get(type, input.getSplatValue<Attribute>());
  if (input.getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> shape = input.getType().getShape();
  int64_t rank = shape.size();
  SmallVector<bool> reduced(rank, false);
  if (auto axes = op.getAxes(); axes && !axes->empty()) {
    for (int64_t a : *axes)
      reduced[*normalizeAxis(a, rank)] = true;
  } else if (!op.getNoopWithEmptyAxes()) {
    reduced.assign(rank, true);
  }
  // Output strides over the input's dims (0 where reduced).
  SmallVector<int64_t> outStrides(rank, 0), inStrides = stridesOf(shape);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d)
    if (!reduced[d]) {
      outStrides[d] = stride;
      stride *= shape[d];
    }
  if (stride != type.getNumElements())
    return {};
  SmallVector<Attribute> out(stride);
  auto values = input.getValues<Attribute>();
  for (int64_t flat = 0, n = input.getNumElements(); flat < n; ++flat) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d)
      o += (flat / inStrides[d]) % shape[d] * outStrides[d];
    out[o] = out[o] ? combine(out[o], values[flat], kind) : values[flat];
    if (!out[o])
      return {};
  }
  return DenseElementsAttr::get(type, out);
}

OpFoldResult ReduceMaxOp::fold(FoldAdaptor adaptor) {
  return foldReduceExtreme(*this, adaptor.getInput(), ScatterReduction::Max);
}

OpFoldResult ReduceMinOp::fold(FoldAdaptor adaptor) {
  return foldReduceExtreme(*this, adaptor.getInput(), ScatterReduction::Min);
}
