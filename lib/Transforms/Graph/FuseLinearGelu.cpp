//===- FuseLinearGelu.cpp - linear + GELU -> one op -------------------------===//
//
// BERT's intermediate layer is gelu(x · W + b) over [tokens, 4·hidden]:
// pf.linear copies the bias into its output before the GEMM and pf.gelu then
// reads and writes that output again. pf.linear_gelu runs the GEMM alone and
// adds the bias inside the GELU's one pass over the product.
//
//===----------------------------------------------------------------------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSELINEARGELU
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct LinearGeluPattern : public OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GeluOp gelu, PatternRewriter &rewriter) const override {
    Value product = gelu.getInput();
    auto linear = product.getDefiningOp<LinearOp>();
    if (!linear || !product.hasOneUse())
      return rewriter.notifyMatchFailure(gelu, "input is not a linear used only here");
    if (linear.getType() != gelu.getType())
      return rewriter.notifyMatchFailure(gelu, "types differ");
    // Named after the dense layer (profiles attribute it to its block).
    auto fused = LinearGeluOp::create(rewriter, linear.getLoc(), gelu.getType(), linear.getInput(),
                                      linear.getWeight(), linear.getBias(),
                                      linear.getTransposeWeightAttr(), gelu.getApproximateAttr());
    rewriter.replaceOp(gelu, fused.getResult());
    rewriter.eraseOp(linear);
    return success();
  }
};

struct FuseLinearGeluPass : public mlir::pf::impl::PFFuseLinearGeluBase<FuseLinearGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LinearGeluPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
