//===- FuseAttentionSoftmax.cpp - scale + mask + softmax -> one op ---------===//
//
// Attention computes softmax(QKᵀ / √d + mask): three passes over the
// [B, H, S, S] scores (div, add, softmax), each reading and writing all of
// them. pf.scaled_masked_softmax builds each row in cache and normalizes it
// there: one read and one write.
//
//===----------------------------------------------------------------------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSEATTENTIONSOFTMAX
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// Whether `mask` broadcasts to `type` without changing it (same element
/// type, static shape).
bool broadcastsOnto(Value mask, RankedTensorType type) {
  auto maskType = dyn_cast<RankedTensorType>(mask.getType());
  if (!maskType || !maskType.hasStaticShape() || maskType.getElementType() != type.getElementType())
    return false;
  auto merged = broadcastShapes(type.getShape(), maskType.getShape());
  return merged && ArrayRef<int64_t>(*merged) == type.getShape();
}

/// `scores` = x / c or x · c (c a finite, non-zero splat constant) used only
/// here: returns x and sets `scale` (1/c or c); else returns null.
Value unscaled(Value scores, RankedTensorType type, double &scale) {
  if (!scores.hasOneUse())
    return {};
  if (auto div = scores.getDefiningOp<DivOp>()) {
    auto c = getSplatFloat(div.getRhs());
    if (!c || *c == 0 || !std::isfinite(*c) || div.getLhs().getType() != type)
      return {};
    scale = 1.0 / *c;
    return div.getLhs();
  }
  if (auto mul = scores.getDefiningOp<MulOp>()) {
    for (auto [x, constant] :
         {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
      auto c = getSplatFloat(constant);
      if (c && std::isfinite(*c) && x.getType() == type) {
        scale = *c;
        return x;
      }
    }
  }
  return {};
}

struct AttentionSoftmaxPattern : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(softmax.getInput().getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 1 ||
        !isa<FloatType>(type.getElementType()))
      return rewriter.notifyMatchFailure(softmax, "needs a static float input");
    auto axis = normalizeAxis(softmax.getAxis(), type.getRank());
    if (!axis || *axis != type.getRank() - 1)
      return rewriter.notifyMatchFailure(softmax, "not over the last axis");
    Value scores = softmax.getInput(), mask;
    if (auto add = scores.getDefiningOp<AddOp>(); add && scores.hasOneUse()) {
      // The mask is the operand that broadcasts; with two full-shape
      // operands, the scaled scores are the one from a div or mul.
      double ignored;
      for (auto [x, m] :
           {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
        if (x.getType() != type || !broadcastsOnto(m, type))
          continue;
        if (!mask || unscaled(x, type, ignored)) {
          scores = x;
          mask = m;
        }
      }
    }
    double scale = 1.0;
    if (Value x = unscaled(scores, type, scale))
      scores = x;
    if (!mask && scores == softmax.getInput())
      return rewriter.notifyMatchFailure(softmax, "no scaling or mask before it");
    rewriter.replaceOpWithNewOp<ScaledMaskedSoftmaxOp>(softmax, type, scores, mask,
                                                       rewriter.getF64FloatAttr(scale));
    return success();
  }
};

struct FuseAttentionSoftmaxPass
    : public mlir::pf::impl::PFFuseAttentionSoftmaxBase<FuseAttentionSoftmaxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AttentionSoftmaxPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
