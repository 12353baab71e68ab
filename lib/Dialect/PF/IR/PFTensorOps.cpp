//===- PFTensorOps.cpp - type inference of the ONNX-subset ops ---------===//
//
// Each op infers its result type from its operand types and, for ops that take
// a shape as a tensor (Reshape, Expand, Slice, ConstantOfShape), from that
// operand when it is a constant. The importer folds shape chains as it builds,
// so BERT exports come out fully static.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/Dialect/Traits.h"

#include "pf/Dialect/PF/IR/PFTensorEnums.cpp.inc"

using namespace mlir;
using namespace mlir::pf;

using Types = SmallVectorImpl<Type>;
using OptLoc = std::optional<Location>;

static std::optional<ArrayRef<int64_t>> shapeOf(Value value) {
  if (auto ranked = dyn_cast<RankedTensorType>(value.getType()))
    return ranked.getShape();
  return std::nullopt;
}

static Type elementOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

static LogicalResult unranked(Types &out, Type element) {
  out.push_back(UnrankedTensorType::get(element));
  return success();
}

/// A ranked result type, refused when its static shape is past
/// kMaxTensorElements (or negative): a folded shape constant can ask for any.
static LogicalResult ranked(OptLoc loc, Types &out, ArrayRef<int64_t> shape, Type element) {
  std::string problem = shapeLimitError(shape);
  if (!problem.empty())
    return emitOptionalError(loc, "result shape ", shapeText(shape), ": ", problem);
  out.push_back(RankedTensorType::get(shape, element));
  return success();
}

/// Broadcast result of several operands with `element` as element type.
static LogicalResult inferBroadcast(OptLoc loc, ValueRange operands,
                                    Type element, Types &out) {
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    auto s = shapeOf(operand);
    if (!s)
      return unranked(out, element);
    auto merged = broadcastShapes(shape, *s);
    if (!merged)
      return emitOptionalError(loc, "operand shapes do not broadcast: ",
                               operands.getTypes());
    shape = *merged;
  }
  return ranked(loc, out, shape, element);
}

static LogicalResult inferBinary(OptLoc loc, Value lhs, Value rhs, Type element,
                                 bool requireSameElement, Types &out) {
  if (requireSameElement && elementOf(lhs) != elementOf(rhs))
    return emitOptionalError(loc, "operands have different element types: ",
                             elementOf(lhs), " and ", elementOf(rhs));
  return inferBroadcast(loc, ValueRange{lhs, rhs}, element, out);
}

#define PF_BINARY_INFER(OP, SAME_ELEMENT, RESULT_ELEMENT)                      \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, OptLoc loc,             \
                                     Adaptor adaptor, Types &out) {            \
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();                      \
    (void)ctx;                                                                 \
    return inferBinary(loc, lhs, rhs, RESULT_ELEMENT, SAME_ELEMENT, out);      \
  }
PF_BINARY_INFER(AddOp, true, elementOf(lhs))
PF_BINARY_INFER(SubOp, true, elementOf(lhs))
PF_BINARY_INFER(MulOp, true, elementOf(lhs))
PF_BINARY_INFER(DivOp, true, elementOf(lhs))
PF_BINARY_INFER(PowOp, false, elementOf(lhs))
PF_BINARY_INFER(EqualOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(MinOp, true, elementOf(lhs))
PF_BINARY_INFER(MaxOp, true, elementOf(lhs))
PF_BINARY_INFER(GreaterOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(GreaterEqualOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(LessOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(LessEqualOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(AndOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(OrOp, true, IntegerType::get(ctx, 1))
PF_BINARY_INFER(XorOp, true, IntegerType::get(ctx, 1))
#undef PF_BINARY_INFER

#define PF_SAME_TYPE_INFER(OP)                                                 \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc, Adaptor adaptor,   \
                                     Types &out) {                             \
    out.push_back(adaptor.getInput().getType());                               \
    return success();                                                          \
  }
PF_SAME_TYPE_INFER(IdentityOp)
PF_SAME_TYPE_INFER(SqrtOp)
PF_SAME_TYPE_INFER(ErfOp)
PF_SAME_TYPE_INFER(TanhOp)
PF_SAME_TYPE_INFER(ExpOp)
PF_SAME_TYPE_INFER(NegOp)
PF_SAME_TYPE_INFER(NotOp)
PF_SAME_TYPE_INFER(AbsOp)
PF_SAME_TYPE_INFER(SignOp)
PF_SAME_TYPE_INFER(ReciprocalOp)
#undef PF_SAME_TYPE_INFER

/// IsNaN/IsInf: the input's shape, bool elements.
static LogicalResult inferMask(MLIRContext *ctx, Value input, Types &out) {
  out.push_back(makeTensorType(shapeOf(input), IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult IsNaNOp::inferReturnTypes(MLIRContext *ctx, OptLoc, Adaptor adaptor,
                                        Types &out) {
  return inferMask(ctx, adaptor.getInput(), out);
}

LogicalResult IsInfOp::inferReturnTypes(MLIRContext *ctx, OptLoc, Adaptor adaptor,
                                        Types &out) {
  return inferMask(ctx, adaptor.getInput(), out);
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, OptLoc,
                                           Adaptor adaptor, Types &out) {
  out.push_back(adaptor.getValue().getType());
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor, Types &out) {
  if (elementOf(adaptor.getX()) != elementOf(adaptor.getY()))
    return emitOptionalError(loc, "x and y have different element types");
  return inferBroadcast(
      loc, ValueRange{adaptor.getCondition(), adaptor.getX(), adaptor.getY()},
      elementOf(adaptor.getX()), out);
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                       Adaptor adaptor, Types &out) {
  Type to = adaptor.getTo();
  if (!to.isIntOrFloat())
    return emitOptionalError(loc, "cast target must be an integer or float type, got ", to);
  auto shape = shapeOf(adaptor.getInput());
  out.push_back(makeTensorType(shape, to));
  return success();
}

//===--- Linear algebra ------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &out) {
  Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
  if (elementOf(lhs) != elementOf(rhs))
    return emitOptionalError(loc, "matmul operands have different element types");
  auto ls = shapeOf(lhs), rs = shapeOf(rhs);
  if (!ls || !rs)
    return unranked(out, elementOf(lhs));
  if (ls->empty() || rs->empty())
    return emitOptionalError(loc, "matmul operands must have rank >= 1");
  // numpy: a 1-D lhs is a row vector and a 1-D rhs a column vector; the
  // promoted dimension is dropped from the result.
  SmallVector<int64_t> a(*ls), b(*rs);
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t k1 = a.back(), k2 = b[b.size() - 2];
  if (!ShapedType::isDynamic(k1) && !ShapedType::isDynamic(k2) && k1 != k2)
    return emitOptionalError(loc, "matmul contraction dimensions differ: ", k1,
                             " vs ", k2);
  auto batch = broadcastShapes(ArrayRef(a).drop_back(2), ArrayRef(b).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "matmul batch dimensions do not broadcast");
  SmallVector<int64_t> shape(*batch);
  if (!lhsVector)
    shape.push_back(a[a.size() - 2]);
  if (!rhsVector)
    shape.push_back(b.back());
  return ranked(loc, out, shape, elementOf(lhs));
}

double MatMulOp::getForwardFlops() {
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  auto lhs = dyn_cast<RankedTensorType>(getLhs().getType());
  if (!out || !lhs || !out.hasStaticShape() || !lhs.hasStaticShape())
    return 0;
  return 2.0 * out.getNumElements() * lhs.getShape().back();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                       Adaptor adaptor, Types &out) {
  auto as = shapeOf(adaptor.getA()), bs = shapeOf(adaptor.getB());
  Type element = elementOf(adaptor.getA());
  if (elementOf(adaptor.getB()) != element)
    return emitOptionalError(loc, "gemm operands have different element types");
  if (!as || !bs)
    return ranked(loc, out, {ShapedType::kDynamic, ShapedType::kDynamic}, element);
  if (as->size() != 2 || bs->size() != 2)
    return emitOptionalError(loc, "gemm operands must be 2-D");
  int64_t m = adaptor.getTransA() ? (*as)[1] : (*as)[0];
  int64_t ka = adaptor.getTransA() ? (*as)[0] : (*as)[1];
  int64_t kb = adaptor.getTransB() ? (*bs)[1] : (*bs)[0];
  int64_t n = adaptor.getTransB() ? (*bs)[0] : (*bs)[1];
  if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
    return emitOptionalError(loc, "gemm contraction dimensions differ: ", ka, " vs ", kb);
  if (Value c = adaptor.getC()) {
    if (elementOf(c) != element)
      return emitOptionalError(loc, "gemm C has element type ", elementOf(c),
                               ", expected ", element);
    // C broadcasts unidirectionally to [M, N]: it may not grow the result.
    auto cs = shapeOf(c);
    auto merged = cs ? broadcastShapes({m, n}, *cs) : std::nullopt;
    if (cs && (!merged || merged->size() != 2 ||
               llvm::any_of(llvm::zip(*merged, ArrayRef<int64_t>{m, n}), [](auto p) {
                 auto [got, want] = p;
                 return !ShapedType::isDynamic(want) && got != want;
               })))
      return emitOptionalError(loc, "gemm C of type ", c.getType(),
                               " does not broadcast to [M, N]");
  }
  return ranked(loc, out, {m, n}, element);
}

double GemmOp::getForwardFlops() {
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  auto a = dyn_cast<RankedTensorType>(getA().getType());
  if (!out || !a || !out.hasStaticShape() || !a.hasStaticShape())
    return 0;
  return 2.0 * out.getNumElements() * a.getShape()[getTransA() ? 0 : 1];
}

//===--- Shape manipulation ----------------------------------------------===//

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                        Adaptor adaptor, Types &out) {
  Type i64 = IntegerType::get(ctx, 64);
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return ranked(loc, out, {ShapedType::kDynamic}, i64);
  int64_t rank = shape->size();
  auto clamp = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clamp(adaptor.getStart() ? int64_t(*adaptor.getStart()) : 0);
  int64_t end = clamp(adaptor.getEnd() ? int64_t(*adaptor.getEnd()) : rank);
  return ranked(loc, out, {std::max<int64_t>(0, end - start)}, i64);
}

/// Output shape of Reshape for a constant target; nullopt result with success
/// when it cannot be known.
static FailureOr<std::optional<SmallVector<int64_t>>>
reshapeTarget(OptLoc loc, std::optional<ArrayRef<int64_t>> input,
              ArrayRef<int64_t> target, bool allowzero) {
  SmallVector<int64_t> shape(target);
  int64_t inferred = -1;
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (dim == 0 && !allowzero) {
      if (!input) {
        dim = ShapedType::kDynamic; // copies a dimension of an unranked input
      } else if (i >= input->size()) {
        return emitOptionalError(loc, "reshape: 0 at position ", i,
                                 " copies an input dimension that does not exist");
      } else {
        dim = (*input)[i];
      }
    } else if (dim == -1) {
      if (inferred >= 0)
        return emitOptionalError(loc, "reshape: more than one -1 in the target shape");
      inferred = i;
      continue;
    } else if (dim < -1) {
      return emitOptionalError(loc, "reshape: invalid dimension ", dim);
    }
  }
  // Products are overflow-checked: a target such as [2^60 + 1, 16] must not
  // wrap around to the input's element count.
  SmallVector<int64_t> staticDims;
  bool anyDynamic = false;
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (int64_t(i) == inferred)
      continue;
    if (ShapedType::isDynamic(dim))
      anyDynamic = true;
    else
      staticDims.push_back(dim);
  }
  std::string problem = shapeLimitError(staticDims);
  if (!problem.empty())
    return emitOptionalError(loc, "reshape: target shape ", shapeText(target), ": ", problem);
  int64_t known = anyDynamic ? -1 : *boundedProduct(staticDims);
  std::optional<int64_t> total;
  if (input && llvm::none_of(*input, ShapedType::isDynamic)) {
    total = boundedProduct(*input);
    if (!total)
      return emitOptionalError(loc, "reshape: input shape ", shapeText(*input), ": ",
                               shapeLimitError(*input));
  }
  if (inferred >= 0) {
    if (!total || known <= 0) {
      shape[inferred] = ShapedType::kDynamic;
    } else {
      if (*total % known != 0)
        return emitOptionalError(loc, "reshape: cannot reshape ", *total,
                                 " elements into a shape with ", known, " x ?");
      shape[inferred] = *total / known;
    }
  }
  if (total && llvm::none_of(shape, ShapedType::isDynamic)) {
    int64_t outCount = *boundedProduct(shape); // within the limit: checked above
    if (*total != outCount)
      return emitOptionalError(loc, "reshape: element count changes from ", *total,
                               " to ", outCount);
  }
  return std::optional<SmallVector<int64_t>>(shape);
}

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getData());
  auto shapeType = dyn_cast<RankedTensorType>(adaptor.getShape().getType());
  if (shapeType && shapeType.getRank() != 1)
    return emitOptionalError(loc, "reshape: shape operand must be 1-D");
  auto target = getConstantInts(adaptor.getShape());
  if (!target) {
    if (!shapeType || shapeType.isDynamicDim(0))
      return unranked(out, element);
    return ranked(loc, out, SmallVector<int64_t>(shapeType.getDimSize(0), ShapedType::kDynamic),
                  element);
  }
  auto shape = reshapeTarget(loc, shapeOf(adaptor.getData()), *target,
                             adaptor.getAllowzero());
  if (failed(shape))
    return failure();
  return ranked(loc, out, **shape, element);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(out, element);
  int64_t rank = shape->size();
  SmallVector<int64_t> perm;
  if (auto given = adaptor.getPerm())
    perm.assign(given->begin(), given->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (int64_t(perm.size()) != rank)
    return emitOptionalError(loc, "transpose: perm has ", perm.size(),
                             " entries for a rank-", rank, " input");
  SmallVector<bool> seen(rank, false);
  SmallVector<int64_t> result;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOptionalError(loc, "transpose: perm is not a permutation");
    seen[p] = true;
    result.push_back((*shape)[p]);
  }
  return ranked(loc, out, result, element);
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(out, element);
  int64_t rank = shape->size() + adaptor.getAxes().size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : adaptor.getAxes()) {
    auto a = normalizeAxis(axis, rank);
    if (!a || inserted[*a])
      return emitOptionalError(loc, "unsqueeze: invalid or repeated axis ", axis);
    inserted[*a] = true;
  }
  SmallVector<int64_t> result;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    result.push_back(inserted[i] ? 1 : (*shape)[next++]);
  return ranked(loc, out, result, element);
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getInput());
  auto shape = shapeOf(adaptor.getInput());
  if (!shape)
    return unranked(out, element);
  int64_t rank = shape->size();
  SmallVector<bool> removed(rank, false);
  if (auto axes = adaptor.getAxes(); axes && !axes->empty()) {
    for (int64_t axis : *axes) {
      auto a = normalizeAxis(axis, rank);
      if (!a)
        return emitOptionalError(loc, "squeeze: axis ", axis, " out of range");
      if ((*shape)[*a] != 1 && !ShapedType::isDynamic((*shape)[*a]))
        return emitOptionalError(loc, "squeeze: dimension ", *a, " has size ",
                                 (*shape)[*a], ", not 1");
      removed[*a] = true;
    }
  } else {
    if (llvm::any_of(*shape, ShapedType::isDynamic))
      return unranked(out, element);
    for (int64_t i = 0; i < rank; ++i)
      removed[i] = (*shape)[i] == 1;
  }
  SmallVector<int64_t> result;
  for (int64_t i = 0; i < rank; ++i)
    if (!removed[i])
      result.push_back((*shape)[i]);
  return ranked(loc, out, result, element);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &out) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "concat needs at least one input");
  Type element = elementOf(inputs.front());
  std::optional<SmallVector<int64_t>> result;
  int64_t axis = 0;
  for (Value input : inputs) {
    if (elementOf(input) != element)
      return emitOptionalError(loc, "concat inputs have different element types");
    auto shape = shapeOf(input);
    if (!shape)
      return unranked(out, element);
    if (!result) {
      auto a = normalizeAxis(adaptor.getAxis(), shape->size());
      if (!a)
        return emitOptionalError(loc, "concat: axis ", int64_t(adaptor.getAxis()),
                                 " out of range for rank ", shape->size());
      axis = *a;
      result = SmallVector<int64_t>(*shape);
      continue;
    }
    if (shape->size() != result->size())
      return emitOptionalError(loc, "concat inputs have different ranks");
    for (size_t i = 0; i < shape->size(); ++i) {
      int64_t &dim = (*result)[i];
      int64_t other = (*shape)[i];
      if (int64_t(i) == axis) {
        dim = ShapedType::isDynamic(dim) || ShapedType::isDynamic(other)
                  ? ShapedType::kDynamic
                  : dim + other;
      } else if (ShapedType::isDynamic(dim)) {
        dim = other;
      } else if (!ShapedType::isDynamic(other) && other != dim) {
        return emitOptionalError(loc, "concat inputs differ in dimension ", i,
                                 ": ", dim, " vs ", other);
      }
    }
  }
  return ranked(loc, out, *result, element);
}

/// Normalized Slice parameters when all index operands are constants; nullopt
/// (with success) when some are not.
static FailureOr<std::optional<SliceParams>>
getSliceParams(OptLoc loc, int64_t rank, Value startsV, Value endsV,
               Value axesV, Value stepsV) {
  auto starts = getConstantInts(startsV), ends = getConstantInts(endsV);
  std::optional<SmallVector<int64_t>> axes, steps;
  if (axesV)
    axes = getConstantInts(axesV);
  if (stepsV)
    steps = getConstantInts(stepsV);
  if (!starts || !ends || (axesV && !axes) || (stepsV && !steps))
    return std::optional<SliceParams>();
  auto p = normalizeSliceParams(loc, rank, *starts, *ends,
                                axes ? std::optional<ArrayRef<int64_t>>(*axes) : std::nullopt,
                                steps ? std::optional<ArrayRef<int64_t>>(*steps) : std::nullopt);
  if (failed(p))
    return failure();
  return std::optional<SliceParams>(std::move(*p));
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getData());
  auto shape = shapeOf(adaptor.getData());
  if (!shape)
    return unranked(out, element);
  auto params = getSliceParams(loc, shape->size(), adaptor.getStarts(),
                               adaptor.getEnds(), adaptor.getAxes(),
                               adaptor.getSteps());
  if (failed(params))
    return failure();
  SmallVector<int64_t> result(*shape);
  if (!*params) {
    // Unknown bounds: the sliced dimensions may shrink. They are known when
    // axes is a constant, or (without axes) the first len(starts) ones.
    SmallVector<bool> sliced(result.size(), true);
    std::optional<SmallVector<int64_t>> axes;
    if (Value axesV = adaptor.getAxes())
      axes = getConstantInts(axesV);
    auto startsType = dyn_cast<RankedTensorType>(adaptor.getStarts().getType());
    if (axes) {
      sliced.assign(result.size(), false);
      for (int64_t axis : *axes)
        if (auto a = normalizeAxis(axis, result.size()))
          sliced[*a] = true;
    } else if (!adaptor.getAxes() && startsType && startsType.getRank() == 1 &&
               !startsType.isDynamicDim(0)) {
      for (size_t i = startsType.getDimSize(0); i < result.size(); ++i)
        sliced[i] = false;
    }
    for (auto [d, s] : llvm::zip(result, sliced))
      if (s)
        d = ShapedType::kDynamic;
    return ranked(loc, out, result, element);
  }
  const SliceParams &p = **params;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    int64_t &dim = result[p.axes[i]];
    if (!ShapedType::isDynamic(dim))
      dim = sliceRange(dim, p.starts[i], p.ends[i], p.steps[i]).second;
  }
  return ranked(loc, out, result, element);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getData());
  if (!elementOf(adaptor.getIndices()).isInteger())
    return emitOptionalError(loc, "gather: indices must be integers");
  auto data = shapeOf(adaptor.getData()), indices = shapeOf(adaptor.getIndices());
  if (!data || !indices)
    return unranked(out, element);
  auto axis = normalizeAxis(adaptor.getAxis(), data->size());
  if (!axis)
    return emitOptionalError(loc, "gather: axis ", int64_t(adaptor.getAxis()),
                             " out of range for rank ", data->size());
  SmallVector<int64_t> result(data->begin(), data->begin() + *axis);
  result.append(indices->begin(), indices->end());
  result.append(data->begin() + *axis + 1, data->end());
  return ranked(loc, out, result, element);
}

LogicalResult GatherNDOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                           Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getData());
  auto data = shapeOf(adaptor.getData()), indices = shapeOf(adaptor.getIndices());
  if (!data || !indices)
    return unranked(out, element);
  int64_t b = adaptor.getBatchDims(), r = data->size(), q = indices->size();
  if (q < 1)
    return emitOptionalError(loc, "gather_nd: indices must have rank >= 1");
  if (b >= std::min(r, q))
    return emitOptionalError(loc, "gather_nd: batch_dims ", b,
                             " must be less than the ranks of data (", r, ") and indices (", q,
                             ")");
  int64_t m = indices->back();
  if (ShapedType::isDynamic(m))
    return unranked(out, element);
  if (m < 1 || m > r - b)
    return emitOptionalError(loc, "gather_nd: the last dimension of indices (", m,
                             ") must be in [1, ", r - b, "]");
  for (int64_t i = 0; i < b; ++i)
    if ((*data)[i] != (*indices)[i] && !ShapedType::isDynamic((*data)[i]) &&
        !ShapedType::isDynamic((*indices)[i]))
      return emitOptionalError(loc, "gather_nd: batch dimension ", i, " differs: ", (*data)[i],
                               " in data, ", (*indices)[i], " in indices");
  SmallVector<int64_t> result(indices->drop_back());
  result.append(data->begin() + b + m, data->end());
  return ranked(loc, out, result, element);
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  Value data = adaptor.getData();
  if (elementOf(adaptor.getUpdates()) != elementOf(data))
    return emitOptionalError(loc, "scatter_nd: updates have element type ",
                             elementOf(adaptor.getUpdates()), ", data has ", elementOf(data));
  auto shape = shapeOf(data), indices = shapeOf(adaptor.getIndices()),
       updates = shapeOf(adaptor.getUpdates());
  if (shape && indices && updates && !indices->empty() &&
      !ShapedType::isDynamic(indices->back())) {
    int64_t m = indices->back(), r = shape->size();
    if (m < 1 || m > r)
      return emitOptionalError(loc, "scatter_nd: the last dimension of indices (", m,
                               ") must be in [1, ", r, "]");
    SmallVector<int64_t> expected(indices->drop_back());
    expected.append(shape->begin() + m, shape->end());
    if (!areCompatibleTensorTypes(
            TypeRange{RankedTensorType::get(expected, elementOf(data))},
            TypeRange{adaptor.getUpdates().getType()}))
      return emitOptionalError(loc, "scatter_nd: updates have shape ", shapeText(*updates),
                               ", expected ", shapeText(expected));
  } else if (indices && indices->empty()) {
    return emitOptionalError(loc, "scatter_nd: indices must have rank >= 1");
  }
  out.push_back(data.getType());
  return success();
}

LogicalResult CumSumOp::inferReturnTypes(MLIRContext *, OptLoc loc, Adaptor adaptor,
                                         Types &out) {
  if (auto shape = shapeOf(adaptor.getInput()))
    if (!normalizeAxis(adaptor.getAxis(), shape->size()))
      return emitOptionalError(loc, "cumsum: axis ", int64_t(adaptor.getAxis()),
                               " out of range for rank ", shape->size());
  out.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext *, OptLoc loc, Adaptor adaptor,
                                        Types &out) {
  if (auto shape = shapeOf(adaptor.getInput()); shape && shape->size() < 2)
    return emitOptionalError(loc, "trilu: the input must have rank >= 2, got rank ",
                             shape->size());
  out.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &out) {
  Type element = elementOf(adaptor.getInput());
  auto target = getConstantInts(adaptor.getShape());
  auto shape = shapeOf(adaptor.getInput());
  if (target && llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return emitOptionalError(loc, "expand: negative dimension in the target shape");
  if (!target || !shape)
    return unranked(out, element);
  auto result = broadcastShapes(*shape, *target);
  if (!result)
    return emitOptionalError(loc, "expand: input does not broadcast to the target shape");
  return ranked(loc, out, *result, element);
}

LogicalResult ConstantOfShapeOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                  Adaptor adaptor, Types &out) {
  Type element = Float32Type::get(ctx);
  if (auto value = adaptor.getValueAttr()) {
    if (value.getNumElements() != 1)
      return emitOptionalError(loc, "constant_of_shape: value must have one element");
    element = value.getElementType();
  }
  auto shapeType = dyn_cast<RankedTensorType>(adaptor.getShape().getType());
  if (shapeType && shapeType.getRank() != 1)
    return emitOptionalError(loc, "constant_of_shape: shape operand must be 1-D, got ",
                             shapeType);
  auto target = getConstantInts(adaptor.getShape());
  if (!target) {
    if (!shapeType || shapeType.isDynamicDim(0))
      return unranked(out, element);
    return ranked(loc, out, SmallVector<int64_t>(shapeType.getDimSize(0), ShapedType::kDynamic),
                  element);
  }
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return emitOptionalError(loc, "constant_of_shape: negative dimension");
  return ranked(loc, out, *target, element);
}

//===--- Reductions and normalization ----------------------------------------===//

static LogicalResult inferReduce(OptLoc loc, Value input,
                                 std::optional<ArrayRef<int64_t>> axes,
                                 bool keepdims, bool noopWithEmptyAxes,
                                 Types &out) {
  Type element = elementOf(input);
  auto shape = shapeOf(input);
  if (!shape)
    return unranked(out, element);
  int64_t rank = shape->size();
  if ((!axes || axes->empty()) && noopWithEmptyAxes)
    return ranked(loc, out, *shape, element);
  SmallVector<bool> reduced(rank, !axes || axes->empty());
  if (axes)
    for (int64_t axis : *axes) {
      auto a = normalizeAxis(axis, rank);
      if (!a)
        return emitOptionalError(loc, "reduce: axis ", axis, " out of range for rank ", rank);
      reduced[*a] = true;
    }
  SmallVector<int64_t> result;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      result.push_back((*shape)[i]);
    else if (keepdims)
      result.push_back(1);
  }
  return ranked(loc, out, result, element);
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                             Adaptor adaptor, Types &out) {
  return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), out);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), out);
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), out);
}

LogicalResult ReduceMinOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), out);
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor, Types &out) {
  if (auto shape = shapeOf(adaptor.getInput()))
    if (!normalizeAxis(adaptor.getAxis(), shape->size()))
      return emitOptionalError(loc, "softmax: axis ", int64_t(adaptor.getAxis()),
                               " out of range for rank ", shape->size());
  out.push_back(adaptor.getInput().getType());
  return success();
}

/// Checks that `param` (scale or bias) broadcasts onto the normalized dims.
static LogicalResult checkNormParam(OptLoc loc, StringRef what, Value param,
                                    ArrayRef<int64_t> normalized) {
  if (!param)
    return success();
  auto shape = shapeOf(param);
  if (!shape)
    return success();
  auto merged = broadcastShapes(normalized, *shape);
  if (!merged || merged->size() != normalized.size())
    return emitOptionalError(loc, what, " shape does not match the normalized dimensions");
  for (auto [m, n] : llvm::zip(*merged, normalized))
    if (!ShapedType::isDynamic(n) && m != n)
      return emitOptionalError(loc, what, " shape does not match the normalized dimensions");
  return success();
}

LogicalResult LayerNormalizationOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                     Adaptor adaptor, Types &out) {
  Value input = adaptor.getInput();
  auto shape = shapeOf(input);
  out.push_back(input.getType());
  Type f32 = Float32Type::get(ctx);
  if (!shape) {
    out.push_back(UnrankedTensorType::get(f32));
    out.push_back(UnrankedTensorType::get(f32));
    return success();
  }
  auto axis = normalizeAxis(adaptor.getAxis(), shape->size());
  if (!axis)
    return emitOptionalError(loc, "layer_normalization: axis out of range");
  ArrayRef<int64_t> normalized = shape->drop_front(*axis);
  if (failed(checkNormParam(loc, "scale", adaptor.getScale(), normalized)) ||
      failed(checkNormParam(loc, "bias", adaptor.getBias(), normalized)))
    return failure();
  SmallVector<int64_t> stats(*shape);
  for (size_t i = *axis; i < stats.size(); ++i)
    stats[i] = 1;
  out.push_back(RankedTensorType::get(stats, f32));
  out.push_back(RankedTensorType::get(stats, f32));
  return success();
}

//===--- Fused ops ------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &out) {
  Value input = adaptor.getInput();
  if (auto shape = shapeOf(input)) {
    auto axis = normalizeAxis(adaptor.getAxis(), shape->size());
    if (!axis)
      return emitOptionalError(loc, "layer_norm: axis out of range");
    ArrayRef<int64_t> normalized = shape->drop_front(*axis);
    if (failed(checkNormParam(loc, "scale", adaptor.getScale(), normalized)) ||
        failed(checkNormParam(loc, "bias", adaptor.getBias(), normalized)))
      return failure();
  }
  out.push_back(input.getType());
  return success();
}

double LayerNormOp::getForwardFlops() {
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  return type && type.hasStaticShape() ? 8.0 * type.getNumElements() : 0;
}

LogicalResult GeluOp::inferReturnTypes(MLIRContext *, OptLoc, Adaptor adaptor,
                                       Types &out) {
  out.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult mlir::pf::verifyGeluApproximation(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << approximate << "\"";
  return success();
}

LogicalResult GeluOp::verify() { return verifyGeluApproximation(*this, getApproximate()); }

double GeluOp::getForwardFlops() {
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  return type && type.hasStaticShape() ? 8.0 * type.getNumElements() : 0;
}
