//===- PFTrainingOps.cpp - loss, gradient helpers, optimizers ---------------===//
#include "pf/Dialect/PF/IR/PFOps.h"

using namespace mlir;
using namespace mlir::pf;

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext *,
                                                      std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &out) {
  auto logits = dyn_cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = dyn_cast<RankedTensorType>(adaptor.getLabels().getType());
  Type element = cast<ShapedType>(adaptor.getLogits().getType()).getElementType();
  if (logits && labels) {
    if (logits.getRank() < 1 || labels.getShape() != logits.getShape().drop_back())
      return emitOptionalError(loc, "softmax_cross_entropy: labels of shape ", labels,
                               " do not match logits ", logits, " without the class dimension");
  }
  out.push_back(RankedTensorType::get({}, element));
  out.push_back(adaptor.getLogits().getType());
  out.push_back(RankedTensorType::get({}, IntegerType::get(adaptor.getLogits().getContext(), 64)));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                                   ArrayRef<bool> wanted,
                                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append(2, Value());
  // grad_logits feeds the backward pass only; a gradient flowing into it
  // (other than the zeros the driver passes for unused results) would be
  // second order.
  if (resultGrads.size() > 1 && resultGrads[1] && !getGradLogits().use_empty())
    return emitError("gradient: differentiating the grad_logits result (a second-order "
                     "gradient) is not supported");
  if (!wanted[0] || !resultGrads[0])
    return success();
  // grad_logits is d(loss)/d(logits); scale it by the incoming d(objective)/d(loss).
  operandGrads[0] = MulOp::create(b, getLoc(), getGradLogits().getType(), getGradLogits(),
                                  resultGrads[0]);
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto input = dyn_cast<RankedTensorType>(getInput().getType());
  auto scale = dyn_cast<RankedTensorType>(getScale().getType());
  if (!input || !scale)
    return success();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= input.getRank())
    return emitOpError("axis ") << axis << " is outside [0, " << input.getRank() << ")";
  if (scale.getShape() != input.getShape().drop_front(axis))
    return emitOpError("scale of shape ")
           << scale << " does not match the normalized dimensions of " << input;
  return success();
}

LogicalResult GeluGradOp::verify() { return verifyGeluApproximation(*this, getApproximate()); }

LogicalResult SoftmaxGradOp::verify() {
  auto output = dyn_cast<RankedTensorType>(getOutput().getType());
  int64_t axis = getAxis();
  if (output && (axis < 0 || axis >= output.getRank()))
    return emitOpError("axis ") << axis << " is outside [0, " << output.getRank() << ")";
  return success();
}

LogicalResult GatherGradOp::verify() {
  auto data = cast<RankedTensorType>(getGradData().getType());
  auto indices = dyn_cast<RankedTensorType>(getIndices().getType());
  auto grad = dyn_cast<RankedTensorType>(getGradOutput().getType());
  if (!cast<ShapedType>(getIndices().getType()).getElementType().isInteger())
    return emitOpError("indices must be integers");
  int64_t axis = int64_t(getAxis());
  if (axis < 0 || axis >= data.getRank())
    return emitOpError("axis ") << axis << " is out of range for rank " << data.getRank();
  if (data.getElementType() != cast<ShapedType>(getGradOutput().getType()).getElementType())
    return emitOpError("gradient and result element types differ");
  if (!indices || !grad)
    return success();
  SmallVector<int64_t> expected(data.getShape().take_front(axis));
  expected.append(indices.getShape().begin(), indices.getShape().end());
  expected.append(data.getShape().begin() + axis + 1, data.getShape().end());
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("grad_output shape ") << grad << " does not match the gather of "
                                              << data << " by " << indices;
  return success();
}

/// The named parameter exists and has the gradient's type.
static LogicalResult checkParam(Operation *op, SymbolTableCollection &symbols,
                                FlatSymbolRefAttr name, Type type, StringRef role) {
  if (!name)
    return success();
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, name);
  if (!param)
    return op->emitOpError(role) << " '" << name.getValue() << "' does not name a pf.param";
  if (param.getType() != type)
    return op->emitOpError(role) << " '" << name.getValue() << "' has type " << param.getType()
                                 << " but the gradient is " << type;
  return success();
}

LogicalResult SGDUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type type = getGrad().getType();
  return success(succeeded(checkParam(*this, symbols, getParamAttr(), type, "param")) &&
                 succeeded(checkParam(*this, symbols, getMomentumBufferAttr(), type,
                                      "momentum_buffer")));
}

LogicalResult AdamWUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type type = getGrad().getType();
  return success(succeeded(checkParam(*this, symbols, getParamAttr(), type, "param")) &&
                 succeeded(checkParam(*this, symbols, getExpAvgAttr(), type, "exp_avg")) &&
                 succeeded(checkParam(*this, symbols, getExpAvgSqAttr(), type, "exp_avg_sq")));
}

LogicalResult LAMBUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Type type = getGrad().getType();
  return success(succeeded(checkParam(*this, symbols, getParamAttr(), type, "param")) &&
                 succeeded(checkParam(*this, symbols, getExpAvgAttr(), type, "exp_avg")) &&
                 succeeded(checkParam(*this, symbols, getExpAvgSqAttr(), type, "exp_avg_sq")));
}

LogicalResult ClipByGlobalNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0))
    return emitOpError("max_norm must be > 0");
  if (getGradients().empty())
    return emitOpError("needs at least one gradient");
  return success();
}
