//===- PFFusedOps.cpp - ops created by the graph passes ----------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

using namespace mlir;
using namespace mlir::pf;

static int64_t dimOrDynamic(Value value, int64_t dim) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() <= dim)
    return ShapedType::kDynamic;
  return type.getDimSize(dim < 0 ? type.getRank() + dim : dim);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Value input = adaptor.getInput(), weight = adaptor.getWeight();
  Type element = cast<ShapedType>(input.getType()).getElementType();
  for (Value operand : {weight, adaptor.getBias()})
    if (operand && cast<ShapedType>(operand.getType()).getElementType() != element)
      return emitOptionalError(loc, "linear: operands have different element types");
  auto weightType = dyn_cast<RankedTensorType>(weight.getType());
  if (weightType && weightType.getRank() != 2)
    return emitOptionalError(loc, "linear: weight must be 2-D, got ", weightType);
  bool transposed = adaptor.getTransposeWeight();
  int64_t in = dimOrDynamic(weight, transposed ? 1 : 0);
  int64_t outFeatures = dimOrDynamic(weight, transposed ? 0 : 1);
  if (Value bias = adaptor.getBias()) {
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    if (biasType && (biasType.getRank() != 1 ||
                     (!biasType.isDynamicDim(0) && !ShapedType::isDynamic(outFeatures) &&
                      biasType.getDimSize(0) != outFeatures))) {
      if (ShapedType::isDynamic(outFeatures))
        return emitOptionalError(loc, "linear: bias must be 1-D, got ", biasType);
      return emitOptionalError(loc, "linear: bias must be 1-D of size ", outFeatures,
                               ", got ", biasType);
    }
  }
  auto inputType = dyn_cast<RankedTensorType>(input.getType());
  if (!inputType)
    return out.push_back(UnrankedTensorType::get(element)), success();
  if (inputType.getRank() < 1)
    return emitOptionalError(loc, "linear: input must have rank >= 1");
  int64_t inputFeatures = inputType.getShape().back();
  if (!ShapedType::isDynamic(inputFeatures) && !ShapedType::isDynamic(in) &&
      inputFeatures != in)
    return emitOptionalError(loc, "linear: input has ", inputFeatures,
                             " features but the weight expects ", in);
  SmallVector<int64_t> shape(inputType.getShape());
  shape.back() = outFeatures;
  out.push_back(RankedTensorType::get(shape, element));
  return success();
}

int64_t LinearOp::getInFeatures() {
  return dimOrDynamic(getWeight(), getTransposeWeight() ? 1 : 0);
}
int64_t LinearOp::getOutFeatures() {
  return dimOrDynamic(getWeight(), getTransposeWeight() ? 0 : 1);
}

Value LinearOp::getKFACInput() { return getInput(); }
Value LinearOp::getKFACWeight() { return getWeight(); }
Value LinearOp::getKFACBias() { return getBias(); }
int64_t LinearOp::getKFACInFeatures() { return getInFeatures(); }
int64_t LinearOp::getKFACOutFeatures() { return getOutFeatures(); }

StringRef LinearOp::getKFACWeightName() {
  if (auto ref = getWeight().getDefiningOp<ParamRefOp>())
    return ref.getName();
  return {};
}

double LinearOp::getForwardFlops() {
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  int64_t in = getInFeatures();
  if (!out || !out.hasStaticShape() || ShapedType::isDynamic(in))
    return 0;
  return 2.0 * out.getNumElements() * in;
}

//===--- Fusions for inference ---------------------------------------------===//

static std::optional<ArrayRef<int64_t>> rankedShape(Value value) {
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return std::nullopt;
}

static Type elementTypeOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

LogicalResult ScaledMaskedSoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                      Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Value input = adaptor.getInput(), mask = adaptor.getMask();
  auto shape = rankedShape(input);
  if (shape && shape->empty())
    return emitOptionalError(loc, "scaled_masked_softmax: input must have rank >= 1");
  if (mask) {
    if (elementTypeOf(mask) != elementTypeOf(input))
      return emitOptionalError(loc, "scaled_masked_softmax: mask and input have different "
                                    "element types");
    auto maskShape = rankedShape(mask);
    if (shape && maskShape) {
      auto merged = broadcastShapes(*shape, *maskShape);
      if (!merged || merged->size() != shape->size() ||
          llvm::any_of(llvm::zip(*merged, *shape), [](auto pair) {
            auto [m, s] = pair;
            return !ShapedType::isDynamic(s) && !ShapedType::isDynamic(m) && m != s;
          }))
        return emitOptionalError(loc, "scaled_masked_softmax: mask ", shapeText(*maskShape),
                                 " does not broadcast to the input ", shapeText(*shape));
    }
  }
  out.push_back(input.getType());
  return success();
}

double ScaledMaskedSoftmaxOp::getForwardFlops() {
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  return type && type.hasStaticShape() ? 7.0 * type.getNumElements() : 0;
}

LogicalResult AddLayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Value input = adaptor.getInput(), residual = adaptor.getResidual();
  if (input.getType() != residual.getType())
    return emitOptionalError(loc, "add_layer_norm: input ", input.getType(), " and residual ",
                             residual.getType(), " differ");
  if (auto shape = rankedShape(input)) {
    auto axis = normalizeAxis(adaptor.getAxis(), shape->size());
    if (!axis)
      return emitOptionalError(loc, "add_layer_norm: axis out of range");
    ArrayRef<int64_t> normalized = shape->drop_front(*axis);
    for (Value param : {adaptor.getScale(), adaptor.getBias()}) {
      if (!param)
        continue;
      auto paramShape = rankedShape(param);
      if (paramShape && *paramShape != normalized)
        return emitOptionalError(loc,
                                 "add_layer_norm: scale and bias must have the "
                                 "normalized shape ",
                                 shapeText(normalized), ", got ", shapeText(*paramShape));
    }
  }
  out.push_back(input.getType());
  return success();
}

double AddLayerNormOp::getForwardFlops() {
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  return type && type.hasStaticShape() ? 9.0 * type.getNumElements() : 0;
}

/// `shape` read through `perm` (absent: the identity); fails unless perm is
/// a permutation of shape's axes.
static FailureOr<SmallVector<int64_t>> permuted(std::optional<Location> loc, StringRef name,
                                                ArrayRef<int64_t> shape,
                                                std::optional<ArrayRef<int64_t>> perm) {
  if (!perm)
    return SmallVector<int64_t>(shape);
  if (perm->size() != shape.size())
    return emitOptionalError(loc, "permuted_matmul: ", name, " has ", perm->size(),
                             " entries for rank ", shape.size());
  SmallVector<bool> seen(shape.size(), false);
  SmallVector<int64_t> result;
  for (int64_t p : *perm) {
    if (p < 0 || p >= int64_t(shape.size()) || seen[p])
      return emitOptionalError(loc, "permuted_matmul: ", name, " is not a permutation");
    seen[p] = true;
    result.push_back(shape[p]);
  }
  return result;
}

LogicalResult PermutedMatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &out) {
  Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
  Type element = elementTypeOf(lhs);
  if (elementTypeOf(rhs) != element)
    return emitOptionalError(loc, "permuted_matmul: operands have different element types");
  auto lhsShape = rankedShape(lhs), rhsShape = rankedShape(rhs);
  if (!lhsShape || !rhsShape)
    return out.push_back(UnrankedTensorType::get(element)), success();
  if (lhsShape->size() < 2 || lhsShape->size() != rhsShape->size())
    return emitOptionalError(loc, "permuted_matmul: operands must have one rank >= 2, got ",
                             lhsShape->size(), " and ", rhsShape->size());
  auto a = permuted(loc, "lhs_perm", *lhsShape, adaptor.getLhsPerm());
  auto b = permuted(loc, "rhs_perm", *rhsShape, adaptor.getRhsPerm());
  if (failed(a) || failed(b))
    return failure();
  size_t rank = a->size();
  auto differ = [](int64_t x, int64_t y) {
    return !ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y;
  };
  for (size_t i = 0; i + 2 < rank; ++i)
    if (differ((*a)[i], (*b)[i]))
      return emitOptionalError(loc, "permuted_matmul: batch dimensions differ: ", shapeText(*a),
                               " and ", shapeText(*b));
  if (differ((*a)[rank - 1], (*b)[rank - 2]))
    return emitOptionalError(loc, "permuted_matmul: contraction dimensions differ: ", shapeText(*a),
                             " and ", shapeText(*b));
  SmallVector<int64_t> product(ArrayRef<int64_t>(*a).drop_back(2));
  product.push_back((*a)[rank - 2]);
  product.push_back((*b)[rank - 1]);
  auto result = permuted(loc, "result_perm", product, adaptor.getResultPerm());
  if (failed(result))
    return failure();
  out.push_back(RankedTensorType::get(*result, element));
  return success();
}

double PermutedMatMulOp::getForwardFlops() {
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  auto lhs = dyn_cast<RankedTensorType>(getLhs().getType());
  if (!out || !lhs || !out.hasStaticShape() || !lhs.hasStaticShape())
    return 0;
  // The contraction is lhs's last logical dimension.
  int64_t last = lhs.getRank() - 1;
  int64_t k = lhs.getDimSize(getLhsPerm() ? (*getLhsPerm())[last] : last);
  return 2.0 * out.getNumElements() * k;
}

LogicalResult LinearGeluOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &out) {
  // A linear layer's result: pf.linear's rules.
  LinearOp::Properties linearProperties;
  linearProperties.transpose_weight = adaptor.getTransposeWeightAttr();
  LinearOp::Adaptor linear(adaptor.getOperands(), DictionaryAttr(), linearProperties);
  return LinearOp::inferReturnTypes(ctx, loc, linear, out);
}

LogicalResult LinearGeluOp::verify() { return verifyGeluApproximation(*this, getApproximate()); }

double LinearGeluOp::getForwardFlops() {
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  int64_t in = dimOrDynamic(getWeight(), getTransposeWeight() ? 1 : 0);
  if (!out || !out.hasStaticShape() || ShapedType::isDynamic(in))
    return 0;
  return (2.0 * in + 8.0) * out.getNumElements();
}
