//===- PFFusedOps.cpp - pf.linear ---------------------------------------===//
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
