//===- PFKFACOps.cpp - K-FAC ops ----------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::pf;

using Types = SmallVectorImpl<Type>;
using OptLoc = std::optional<Location>;

static LogicalResult squareFactor(OptLoc loc, Value rowsValue, int64_t extra,
                                  Types &out) {
  auto type = dyn_cast<RankedTensorType>(rowsValue.getType());
  Type element = cast<ShapedType>(rowsValue.getType()).getElementType();
  if (!type) {
    out.push_back(RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, element));
    return success();
  }
  if (type.getRank() < 2)
    return emitOptionalError(loc, "kfac: rows operand must have rank >= 2 (tokens x features), got ",
                             type);
  int64_t features = type.getShape().back();
  int64_t size = ShapedType::isDynamic(features) ? features : features + extra;
  out.push_back(RankedTensorType::get({size, size}, element));
  return success();
}

LogicalResult KFACFactorAOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor, Types &out) {
  return squareFactor(loc, adaptor.getInput(), adaptor.getBiasColumn() ? 1 : 0, out);
}

LogicalResult KFACFactorBOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor, Types &out) {
  return squareFactor(loc, adaptor.getOutputGrad(), 0, out);
}

static LogicalResult checkSquare(OptLoc loc, Value value, StringRef what) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return success();
  if (type.getRank() != 2 || (type.hasStaticShape() && type.getDimSize(0) != type.getDimSize(1)))
    return emitOptionalError(loc, what, " must be a square matrix, got ", type);
  return success();
}

LogicalResult KFACPiOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &out) {
  if (failed(checkSquare(loc, adaptor.getFactorA(), "factor A")) ||
      failed(checkSquare(loc, adaptor.getFactorB(), "factor B")))
    return failure();
  out.push_back(RankedTensorType::get(
      {}, cast<ShapedType>(adaptor.getFactorA().getType()).getElementType()));
  return success();
}

LogicalResult KFACInverseOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor, Types &out) {
  if (failed(checkSquare(loc, adaptor.getFactor(), "factor")))
    return failure();
  out.push_back(adaptor.getFactor().getType());
  return success();
}

LogicalResult KFACInverseOp::verify() {
  if (getSide() != "A" && getSide() != "B")
    return emitOpError("side must be \"A\" or \"B\", got \"") << getSide() << "\"";
  if (getDamping().convertToDouble() < 0)
    return emitOpError("damping must be >= 0, got ") << getDamping().convertToDouble();
  return success();
}

/// The result types of pf.kfac.precondition and pf.kfac.precondition_eigen:
/// ∇W's (and ∇b's), after checking them against the A and B side matrices
/// (`aName`, `bName`: the inverses or the eigenvectors).
static LogicalResult inferPreconditionTypes(OptLoc loc, StringRef opName, Value weightGrad,
                                            Value aMatrix, Value bMatrix, Value biasGrad,
                                            bool weightInOut, StringRef aName,
                                            StringRef bName, Types &out) {
  auto grad = dyn_cast<RankedTensorType>(weightGrad.getType());
  auto aType = dyn_cast<RankedTensorType>(aMatrix.getType());
  auto bType = dyn_cast<RankedTensorType>(bMatrix.getType());
  if (failed(checkSquare(loc, aMatrix, aName)) || failed(checkSquare(loc, bMatrix, bName)))
    return failure();
  // The dimensions of ∇W that are the layer's outputs and inputs.
  const unsigned outDim = weightInOut ? 1 : 0, inDim = 1 - outDim;
  if (grad && grad.getRank() != 2)
    return emitOptionalError(loc, opName, ": weight gradient must be 2-D ",
                             outDim == 0 ? "[out, in]" : "[in, out]", ", got ", grad);
  if (biasGrad) {
    auto biasType = dyn_cast<RankedTensorType>(biasGrad.getType());
    if (biasType && (biasType.getRank() != 1 ||
                     (grad && !grad.isDynamicDim(outDim) && !biasType.isDynamicDim(0) &&
                      biasType.getDimSize(0) != grad.getDimSize(outDim))))
      return emitOptionalError(loc, opName, ": bias gradient must be 1-D of the "
                                            "gradient's output size, got ",
                               biasType);
  }
  if (grad && grad.hasStaticShape() && aType && aType.hasStaticShape() && bType &&
      bType.hasStaticShape()) {
    int64_t out0 = grad.getDimSize(outDim), in = grad.getDimSize(inDim);
    int64_t aSize = aType.getDimSize(0);
    if (bType.getDimSize(0) != out0)
      return emitOptionalError(loc, opName, ": ", bName, " is ", bType.getDimSize(0), "x",
                               bType.getDimSize(0), " but the gradient has ", out0,
                               " outputs");
    if (aSize != in && aSize != in + 1)
      return emitOptionalError(loc, opName, ": ", aName, " is ", aSize, "x", aSize,
                               " but the gradient has ", in, " inputs");
    if (aSize == in + 1 && !biasGrad)
      return emitOptionalError(loc, opName, ": ", aName,
                               " has a bias column but no bias gradient is given");
  }
  out.push_back(weightGrad.getType());
  if (biasGrad)
    out.push_back(biasGrad.getType());
  return success();
}

LogicalResult KFACPreconditionOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                   Adaptor adaptor, Types &out) {
  return inferPreconditionTypes(loc, "kfac.precondition", adaptor.getWeightGrad(),
                                adaptor.getAInverse(), adaptor.getBInverse(),
                                adaptor.getBiasGrad(), adaptor.getWeightInOut(), "A inverse",
                                "B inverse", out);
}

LogicalResult KFACPreconditionEigenOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                        Adaptor adaptor, Types &out) {
  if (failed(inferPreconditionTypes(loc, "kfac.precondition_eigen", adaptor.getWeightGrad(),
                                    adaptor.getAVectors(), adaptor.getBVectors(),
                                    adaptor.getBiasGrad(), adaptor.getWeightInOut(),
                                    "A eigenvectors", "B eigenvectors", out)))
    return failure();
  // Each side's eigenvalues: 1-D, one per eigenvector.
  for (auto [values, vectors, side] :
       {std::tuple{adaptor.getAValues(), adaptor.getAVectors(), "A"},
        std::tuple{adaptor.getBValues(), adaptor.getBVectors(), "B"}}) {
    auto valuesType = dyn_cast<RankedTensorType>(values.getType());
    auto vectorsType = dyn_cast<RankedTensorType>(vectors.getType());
    if (!valuesType)
      continue;
    if (valuesType.getRank() != 1 ||
        (vectorsType && !vectorsType.isDynamicDim(0) && !valuesType.isDynamicDim(0) &&
         valuesType.getDimSize(0) != vectorsType.getDimSize(0)))
      return emitOptionalError(loc, "kfac.precondition_eigen: ", side,
                               " eigenvalues must be 1-D with one value per eigenvector, got ",
                               valuesType, " for ", vectors.getType());
  }
  return success();
}

LogicalResult KFACPreconditionEigenOp::verify() {
  // A constant damping is checked here; a host input by the runtime.
  DenseElementsAttr constant;
  if (!matchPattern(getDamping(), m_Constant(&constant)))
    return success();
  double damping = constant.getSplatValue<APFloat>().convertToDouble();
  if (!(damping > 0) || !std::isfinite(damping))
    return emitOpError("damping must be finite and > 0 (the product's eigenvalues may be 0), "
                       "got ")
           << damping;
  return success();
}

//===--- Stateful K-FAC ------------------------------------------------------===//

/// `name` is a square pf.param of `size` (when known).
static LogicalResult checkFactor(Operation *op, SymbolTableCollection &symbols,
                                 FlatSymbolRefAttr name, int64_t size, StringRef role) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, name);
  if (!param)
    return op->emitOpError(role) << " '" << name.getValue() << "' does not name a pf.param";
  auto type = cast<RankedTensorType>(param.getType());
  if (type.getRank() != 2 || type.getDimSize(0) != type.getDimSize(1))
    return op->emitOpError(role) << " '" << name.getValue() << "' must be square, got " << type;
  if (size >= 0 && type.getDimSize(0) != size)
    return op->emitOpError(role) << " '" << name.getValue() << "' is " << type.getDimSize(0)
                                 << "x" << type.getDimSize(0) << " but the rows have " << size
                                 << " features";
  return success();
}

static int64_t features(Value rows, bool biasColumn) {
  auto type = dyn_cast<RankedTensorType>(rows.getType());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return -1;
  return type.getShape().back() + (biasColumn ? 1 : 0);
}

LogicalResult KFACUpdateFactorOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return checkFactor(*this, symbols, getFactorAttr(), features(getInput(), getBiasColumn()),
                     "factor");
}

/// An embedding's diagonal factor A and its inverse: 1-D pf.params of one
/// size, without an eigenbasis.
static LogicalResult checkDiagonalFactorA(KFACRefreshInversesOp op,
                                          SymbolTableCollection &symbols) {
  auto inverse = symbols.lookupNearestSymbolFrom<ParamOp>(op, op.getAInverseAttr());
  if (!inverse)
    return op.emitOpError("a_inverse '") << op.getAInverse() << "' does not name a pf.param";
  auto factorType = cast<RankedTensorType>(
      symbols.lookupNearestSymbolFrom<ParamOp>(op, op.getFactorAAttr()).getType());
  if (inverse.getType() != factorType)
    return op.emitOpError("a_inverse '")
           << op.getAInverse() << "' must be " << factorType << " as the diagonal factor_a '"
           << op.getFactorA() << "', got " << inverse.getType();
  if (op.getAValuesAttr())
    return op.emitOpError("a diagonal factor_a '")
           << op.getFactorA() << "' (an embedding's) has no eigenbasis (values)";
  if (failed(checkFactor(op, symbols, op.getFactorBAttr(), -1, "factor_b")))
    return failure();
  return checkFactor(op, symbols, op.getBInverseAttr(), -1, "b_inverse");
}

LogicalResult KFACRefreshInversesOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto factorA = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getFactorAAttr());
  if (factorA && cast<RankedTensorType>(factorA.getType()).getRank() == 1)
    return checkDiagonalFactorA(*this, symbols);
  if (failed(checkFactor(*this, symbols, getFactorAAttr(), -1, "factor_a")) ||
      failed(checkFactor(*this, symbols, getFactorBAttr(), -1, "factor_b")) ||
      failed(checkFactor(*this, symbols, getAInverseAttr(), -1, "a_inverse")) ||
      failed(checkFactor(*this, symbols, getBInverseAttr(), -1, "b_inverse")))
    return failure();
  if (!getAValuesAttr())
    return success();
  // The eigenbasis: a 1-D pf.param of eigenvalues per factor, of its size.
  for (auto [values, factor, role] :
       {std::tuple{getAValuesAttr(), getFactorAAttr(), "a_values"},
        std::tuple{getBValuesAttr(), getFactorBAttr(), "b_values"}}) {
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, values);
    if (!param)
      return emitOpError(role) << " '" << values.getValue() << "' does not name a pf.param";
    auto type = cast<RankedTensorType>(param.getType());
    auto factorType =
        cast<RankedTensorType>(symbols.lookupNearestSymbolFrom<ParamOp>(*this, factor).getType());
    if (type.getRank() != 1 || type.getDimSize(0) != factorType.getDimSize(0))
      return emitOpError(role) << " '" << values.getValue() << "' must be a 1-D pf.param of "
                               << factorType.getDimSize(0) << " values, got " << type;
  }
  return success();
}

LogicalResult KFACRefreshInversesOp::verify() {
  // Not a PF_PositiveI64Attr: pass errors quote this message.
  if (int64_t(getEvery()) < 1)
    return emitOpError("every must be >= 1, got ") << int64_t(getEvery());
  if (getDamping().convertToDouble() < 0)
    return emitOpError("damping must be >= 0");
  if (bool(getAValuesAttr()) != bool(getBValuesAttr()))
    return emitOpError("a_values and b_values go together (the eigenbasis of both factors)");
  return success();
}

/// The token count a capture op scales its factor by (scale_by_loss_count):
/// the sum of the counts of the function's masked-LM losses. The backward
/// pass is built after the losses, so their counts dominate the capture's
/// gradient; several losses (micro-batches) form one count-weighted mean,
/// whose per-token gradients are divided by the total count.
static LogicalResult totalLossCount(OpBuilder &b, Operation *capture, Value &count) {
  capture->getParentRegion()->walk([&](SoftmaxCrossEntropyOp loss) {
    count = count ? AddOp::create(b, capture->getLoc(), count, loss.getCount()).getResult()
                  : loss.getCount();
  });
  if (!count)
    return capture->emitError(
        "scale_by_loss_count, but the function has no pf.softmax_cross_entropy");
  return success();
}

LogicalResult KFACCaptureOutputOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                                 ArrayRef<bool> wanted,
                                                 SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append(getOperation()->getNumOperands(), Value());
  Value grad = resultGrads.empty() ? Value() : resultGrads.front();
  if (!grad)
    return success();
  Value count;
  if (getScaleByLossCount() && failed(totalLossCount(b, getOperation(), count)))
    return failure();
  KFACUpdateFactorOp::create(b, getLoc(), grad, getStep(), count, Value(), Value(), getFactorAttr(),
                             UnitAttr(), getScaleAttr(), getDecayAttr(), getEveryAttr(),
                             b.getI64IntegerAttr(1));
  operandGrads[0] = grad;
  return success();
}

LogicalResult KFACUpdateFactorOp::verify() {
  double decay = getDecay().convertToDouble();
  if (!(decay >= 0 && decay < 1))
    return emitOpError("decay must be in [0, 1), got ") << decay;
  if (!getMicrobatch() && getUpdates() != 1)
    return emitOpError("updates ") << getUpdates()
                                   << " needs a microbatch operand (one update per call)";
  return success();
}

/// pf.kfac.graft and pf.kfac.kl_clip: one gradient and one result of the
/// update's type per update, at least one update.
static LogicalResult verifyUpdatesAndGradients(Operation *op, ValueRange updates,
                                               ValueRange gradients, ValueRange results) {
  if (updates.size() != gradients.size() || updates.size() != results.size())
    return op->emitOpError("needs one gradient and one result per update");
  for (auto [u, g, r] : llvm::zip(updates, gradients, results))
    if (u.getType() != g.getType() || u.getType() != r.getType())
      return op->emitOpError("update, gradient and result types differ: ")
             << u.getType() << ", " << g.getType() << ", " << r.getType();
  if (updates.empty())
    return op->emitOpError("needs at least one update");
  return success();
}

LogicalResult KFACGraftOp::verify() {
  return verifyUpdatesAndGradients(*this, getUpdates(), getGradients(), getGrafted());
}

LogicalResult KFACKLClipOp::verify() {
  if (!(getKappa().convertToDouble() > 0))
    return emitOpError("kappa must be > 0");
  return verifyUpdatesAndGradients(*this, getUpdates(), getGradients(), getClipped());
}

//===--- LayerNorm scale and shift ---------------------------------------------===//

LogicalResult KFACPreconditionLayerNormOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                            Adaptor adaptor, Types &out) {
  auto factor = dyn_cast<RankedTensorType>(adaptor.getFactor().getType());
  auto scaleGrad = dyn_cast<RankedTensorType>(adaptor.getScaleGrad().getType());
  if (factor && (factor.getRank() != 2 || (!factor.isDynamicDim(1) && factor.getDimSize(1) != 2 &&
                                           factor.getDimSize(1) != 3)))
    return emitOptionalError(loc,
                             "kfac.precondition_layer_norm: the factor must be [h, 3] "
                             "(2x2 blocks) or [h, 2] (their diagonal), got ",
                             factor);
  if (adaptor.getScaleGrad().getType() != adaptor.getBiasGrad().getType())
    return emitOptionalError(loc,
                             "kfac.precondition_layer_norm: the scale and bias gradients "
                             "differ: ",
                             adaptor.getScaleGrad().getType(), " and ",
                             adaptor.getBiasGrad().getType());
  if (factor && scaleGrad &&
      (scaleGrad.getRank() != 1 || (!factor.isDynamicDim(0) && !scaleGrad.isDynamicDim(0) &&
                                    factor.getDimSize(0) != scaleGrad.getDimSize(0))))
    return emitOptionalError(loc,
                             "kfac.precondition_layer_norm: the gradients must be [h] for "
                             "a factor ",
                             factor, ", got ", scaleGrad);
  out.push_back(adaptor.getScaleGrad().getType());
  out.push_back(adaptor.getBiasGrad().getType());
  return success();
}

LogicalResult KFACUpdateLayerNormFactorOp::verify() {
  double decay = getDecay().convertToDouble();
  if (!(decay >= 0 && decay < 1))
    return emitOpError("decay must be in [0, 1), got ") << decay;
  if (!(getEpsilon().convertToDouble() >= 0))
    return emitOpError("epsilon must be >= 0");
  if (getInput().getType() != getOutputGrad().getType())
    return emitOpError("input and output_grad types differ: ")
           << getInput().getType() << " and " << getOutputGrad().getType();
  return success();
}

LogicalResult KFACUpdateLayerNormFactorOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getFactorAttr());
  if (!param)
    return emitOpError("factor '") << getFactor() << "' does not name a pf.param";
  auto type = cast<RankedTensorType>(param.getType());
  int64_t h = features(getInput(), false);
  if (type.getRank() != 2 || (type.getDimSize(1) != 2 && type.getDimSize(1) != 3) ||
      (h >= 0 && type.getDimSize(0) != h))
    return emitOpError("factor '") << getFactor() << "' must be [" << h << ", 3] (2x2 blocks) or ["
                                   << h << ", 2] (their diagonal), got " << type;
  return success();
}

LogicalResult KFACCaptureLayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                                    ArrayRef<bool> wanted,
                                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append(getOperation()->getNumOperands(), Value());
  Value grad = resultGrads.empty() ? Value() : resultGrads.front();
  if (!grad)
    return success();
  Value count;
  if (getScaleByLossCount() && failed(totalLossCount(b, getOperation(), count)))
    return failure();
  KFACUpdateLayerNormFactorOp::create(b, getLoc(), getInput(), grad, getStep(), count, Value(),
                                      getFactorAttr(), getEpsilonAttr(), getScaleAttr(),
                                      getDecayAttr(), getEveryAttr());
  // The LayerNorm's input is only read: its gradient comes from the LayerNorm.
  operandGrads[0] = grad;
  return success();
}

//===--- Embeddings ------------------------------------------------------------===//

LogicalResult KFACUpdateEmbeddingFactorOp::verify() {
  double decay = getDecay().convertToDouble();
  if (!(decay >= 0 && decay < 1))
    return emitOpError("decay must be in [0, 1), got ") << decay;
  return success();
}

LogicalResult KFACUpdateEmbeddingFactorOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getFactorAttr());
  if (!param)
    return emitOpError("factor '") << getFactor() << "' does not name a pf.param";
  auto type = cast<RankedTensorType>(param.getType());
  if (type.getRank() != 1)
    return emitOpError("factor '")
           << getFactor() << "' must be 1-D [vocab] (the diagonal of A), got " << type;
  return success();
}

LogicalResult KFACPreconditionEmbeddingOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                            Adaptor adaptor, Types &out) {
  auto grad = dyn_cast<RankedTensorType>(adaptor.getWeightGrad().getType());
  auto aType = dyn_cast<RankedTensorType>(adaptor.getAInverse().getType());
  if (aType && aType.getRank() != 1)
    return emitOptionalError(loc,
                             "kfac.precondition_embedding: A inverse must be 1-D [vocab] "
                             "(the diagonal), got ",
                             aType);
  if (failed(checkSquare(loc, adaptor.getBInverse(), "B inverse")))
    return failure();
  auto bType = dyn_cast<RankedTensorType>(adaptor.getBInverse().getType());
  if (grad && grad.getRank() != 2)
    return emitOptionalError(loc,
                             "kfac.precondition_embedding: weight gradient must be 2-D "
                             "[vocab, h], got ",
                             grad);
  if (grad && grad.hasStaticShape() && aType && aType.hasStaticShape() && bType &&
      bType.hasStaticShape() &&
      (grad.getDimSize(0) != aType.getDimSize(0) || grad.getDimSize(1) != bType.getDimSize(0)))
    return emitOptionalError(loc, "kfac.precondition_embedding: weight gradient ", grad,
                             " does not match A inverse ", aType, " and B inverse ", bType);
  out.push_back(adaptor.getWeightGrad().getType());
  return success();
}
