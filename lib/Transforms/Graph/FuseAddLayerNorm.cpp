//===- FuseAddLayerNorm.cpp - residual add + LayerNorm -> one op -----------===//
//
// Every BERT block ends twice in LayerNorm(x + residual). The sum is written
// by one kernel and read back by the next; pf.add_layer_norm builds each row
// of it in cache and normalizes it there.
//
//===----------------------------------------------------------------------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSEADDLAYERNORM
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// Whether `param` (scale or bias; null is fine) has exactly the normalized
/// shape, as the runtime kernel takes it.
bool hasNormalizedShape(Value param, ArrayRef<int64_t> normalized) {
  if (!param)
    return true;
  auto type = dyn_cast<RankedTensorType>(param.getType());
  return type && type.getShape() == normalized;
}

struct AddLayerNormPattern : public OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormOp norm, PatternRewriter &rewriter) const override {
    Value sum = norm.getInput();
    auto add = sum.getDefiningOp<AddOp>();
    if (!add || !sum.hasOneUse())
      return rewriter.notifyMatchFailure(norm, "input is not an add used only here");
    auto type = dyn_cast<RankedTensorType>(sum.getType());
    if (!type || !type.hasStaticShape() || add.getLhs().getType() != type ||
        add.getRhs().getType() != type)
      return rewriter.notifyMatchFailure(norm, "the add broadcasts or is not static");
    auto axis = normalizeAxis(norm.getAxis(), type.getRank());
    if (!axis)
      return failure();
    ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
    if (!hasNormalizedShape(norm.getScale(), normalized) ||
        !hasNormalizedShape(norm.getBias(), normalized))
      return rewriter.notifyMatchFailure(norm, "scale or bias broadcasts");
    rewriter.replaceOpWithNewOp<AddLayerNormOp>(norm, type, add.getLhs(), add.getRhs(),
                                                norm.getScale(), norm.getBias(), norm.getAxisAttr(),
                                                norm.getEpsilonAttr());
    return success();
  }
};

struct FuseAddLayerNormPass : public mlir::pf::impl::PFFuseAddLayerNormBase<FuseAddLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AddLayerNormPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
