//===- FuseLayerNorm.cpp - decomposed LayerNorm -> pf.layer_norm ----------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSELAYERNORM
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

/// The first axis of a reduction over the trailing dims of a rank-`rank`
/// tensor with kept dims, or nullopt when the reduction is anything else.
std::optional<int64_t> trailingReduction(ReduceMeanOp mean, int64_t rank) {
  auto axes = mean.getAxes();
  if (!mean.getKeepdims() || !axes || axes->empty())
    return std::nullopt;
  SmallVector<int64_t> normalized;
  for (int64_t axis : *axes) {
    auto a = normalizeAxis(axis, rank);
    if (!a)
      return std::nullopt;
    normalized.push_back(*a);
  }
  llvm::sort(normalized);
  for (size_t i = 0; i < normalized.size(); ++i)
    if (normalized[i] != rank - int64_t(normalized.size()) + int64_t(i))
      return std::nullopt;
  return normalized.front();
}

/// True when `param` (scale or bias) has exactly the normalized dims, up to
/// leading 1s, so that it can become a pf.layer_norm operand.
bool fitsNormalizedDims(Value param, ArrayRef<int64_t> normalized) {
  auto type = dyn_cast<RankedTensorType>(param.getType());
  if (!type || !type.hasStaticShape())
    return false;
  ArrayRef<int64_t> shape = type.getShape();
  while (!shape.empty() && shape.front() == 1 && shape.size() > normalized.size())
    shape = shape.drop_front();
  return shape == normalized;
}

/// Drops leading 1s so the operand is exactly the normalized shape.
Value reshapeToNormalized(PatternRewriter &rewriter, Location loc, Value param,
                          ArrayRef<int64_t> normalized) {
  auto type = cast<RankedTensorType>(param.getType());
  if (type.getShape() == normalized)
    return param;
  auto shapeType = RankedTensorType::get({int64_t(normalized.size())}, rewriter.getI64Type());
  Value shape = ConstantOp::create(rewriter, loc, DenseIntElementsAttr::get(shapeType, normalized));
  return ReshapeOp::create(rewriter, loc, RankedTensorType::get(normalized, type.getElementType()),
                           param, shape, /*allowzero=*/false);
}

/// x − mean(x) / sqrt(mean((x − mean(x))²) + eps) [· scale] [+ bias]
struct DecomposedLayerNorm : public OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DivOp div, PatternRewriter &rewriter) const override {
    auto centered = div.getLhs().getDefiningOp<SubOp>();
    if (!centered)
      return failure();
    Value x = centered.getLhs();
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    auto mean = centered.getRhs().getDefiningOp<ReduceMeanOp>();
    if (!xType || !xType.hasStaticShape() || !mean || mean.getInput() != x)
      return failure();
    auto axis = trailingReduction(mean, xType.getRank());
    if (!axis)
      return failure();

    auto root = div.getRhs().getDefiningOp<SqrtOp>();
    auto addEps = root ? root.getInput().getDefiningOp<AddOp>() : AddOp();
    if (!addEps)
      return failure();
    auto variance = addEps.getLhs().getDefiningOp<ReduceMeanOp>();
    Value epsValue = addEps.getRhs();
    if (!variance) {
      variance = addEps.getRhs().getDefiningOp<ReduceMeanOp>();
      epsValue = addEps.getLhs();
    }
    auto eps = getSplatFloat(epsValue);
    if (!variance || !eps || trailingReduction(variance, xType.getRank()) != axis)
      return failure();
    if (!isSquareOf(variance.getInput(), centered.getResult()))
      return failure();

    ArrayRef<int64_t> normalized = xType.getShape().drop_front(*axis);
    Operation *last = div;
    Value scale, bias;
    // Scale and bias must not broadcast the result to more dims (a
    // [1, 1, 1, n] scale on a rank-3 input): pf.layer_norm keeps x's shape.
    if (auto mul = dyn_cast_or_null<MulOp>(soleUser(div.getResult()))) {
      Value candidate = otherOperand(mul, div.getResult());
      if (candidate && fitsNormalizedDims(candidate, normalized) &&
          mul.getType() == div.getType()) {
        scale = candidate;
        last = mul;
        if (auto add = dyn_cast_or_null<AddOp>(soleUser(mul.getResult()))) {
          Value b = otherOperand(add, mul.getResult());
          if (b && fitsNormalizedDims(b, normalized) && add.getType() == mul.getType()) {
            bias = b;
            last = add;
          }
        }
      }
    }

    Location loc = last->getLoc();
    rewriter.setInsertionPoint(last);
    if (!scale) {
      auto onesType = RankedTensorType::get(normalized, xType.getElementType());
      scale = ConstantOp::create(rewriter, loc, DenseElementsAttr::get(
                                                    onesType, rewriter.getFloatAttr(xType.getElementType(), 1.0)));
    }
    scale = reshapeToNormalized(rewriter, loc, scale, normalized);
    if (bias)
      bias = reshapeToNormalized(rewriter, loc, bias, normalized);
    auto fused = LayerNormOp::create(rewriter, loc, last->getResult(0).getType(), x,
                                     scale, bias, rewriter.getI64IntegerAttr(*axis),
                                     rewriter.getF32FloatAttr(*eps));
    rewriter.replaceOp(last, fused.getResult());
    return success();
  }

  static bool isSquareOf(Value squared, Value base) {
    if (auto pow = squared.getDefiningOp<PowOp>())
      return pow.getLhs() == base && isSplatNear(pow.getRhs(), 2.0, 0);
    if (auto mul = squared.getDefiningOp<MulOp>())
      return mul.getLhs() == base && mul.getRhs() == base;
    return false;
  }
};

/// ONNX LayerNormalization whose statistics outputs nobody reads.
struct LayerNormalizationToLayerNorm : public OpRewritePattern<LayerNormalizationOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormalizationOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getMean().use_empty() || !op.getInvStdDev().use_empty())
      return failure();
    auto fused = LayerNormOp::create(rewriter, op.getLoc(), op.getOutput().getType(),
                                     op.getInput(), op.getScale(), op.getBias(),
                                     op.getAxisAttr(), op.getEpsilonAttr());
    rewriter.replaceAllUsesWith(op.getOutput(), fused.getResult());
    rewriter.eraseOp(op);
    return success();
  }
};

struct FuseLayerNormPass : public mlir::pf::impl::PFFuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposedLayerNorm, LayerNormalizationToLayerNorm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
