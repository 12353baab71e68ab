//===- FuseLinear.cpp - MatMul(+Add) / Gemm with a parameter -> pf.linear ---===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSELINEAR
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

/// A weight that is a named parameter, read directly ([in, out]) or through a
/// 2-D transpose ([out, in]).
struct ParamWeight {
  Value param;
  bool transposed = false;
  int64_t outFeatures = ShapedType::kDynamic;
};

std::optional<ParamWeight> matchParamWeight(Value weight) {
  auto is2D = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.getRank() == 2 && type.hasStaticShape();
  };
  if (!is2D(weight))
    return std::nullopt;
  if (weight.getDefiningOp<ParamRefOp>())
    return ParamWeight{weight, false, cast<RankedTensorType>(weight.getType()).getDimSize(1)};
  auto transpose = weight.getDefiningOp<TransposeOp>();
  if (!transpose || !transpose.getInput().getDefiningOp<ParamRefOp>())
    return std::nullopt;
  auto perm = transpose.getPerm();
  if (perm && !(perm->size() == 2 && (*perm)[0] == 1 && (*perm)[1] == 0))
    return std::nullopt;
  Value param = transpose.getInput();
  return ParamWeight{param, true, cast<RankedTensorType>(param.getType()).getDimSize(0)};
}

/// A 1-D bias of the output size added to the product (either Add order).
Value matchBias(AddOp add, Value product, int64_t outFeatures) {
  Value bias = otherOperand(add, product);
  auto type = bias ? dyn_cast<RankedTensorType>(bias.getType()) : RankedTensorType();
  if (!type || type.getRank() != 1 || type.getDimSize(0) != outFeatures ||
      add.getType() != product.getType())
    return {};
  return bias;
}

/// The matmul's weight and the Add that adds a bias to it, if any.
struct LinearMatch {
  ParamWeight weight;
  AddOp add;
  Value bias;
};

std::optional<LinearMatch> matchMatMul(MatMulOp matmul) {
  auto weight = matchParamWeight(matmul.getRhs());
  auto inputType = dyn_cast<RankedTensorType>(matmul.getLhs().getType());
  if (!weight || !inputType || inputType.getRank() < 2)
    return std::nullopt;
  LinearMatch match{*weight, {}, {}};
  if (auto add = dyn_cast_or_null<AddOp>(soleUser(matmul.getResult())))
    if (Value bias = matchBias(add, matmul.getResult(), weight->outFeatures)) {
      match.add = add;
      match.bias = bias;
    }
  return match;
}

struct MatMulToLinear : public OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp matmul, PatternRewriter &rewriter) const override {
    auto match = matchMatMul(matmul);
    if (!match)
      return failure();
    Operation *root = match->add ? match->add.getOperation() : matmul.getOperation();
    rewriter.setInsertionPoint(root);
    auto linear = LinearOp::create(rewriter, root->getLoc(), root->getResult(0).getType(),
                                   matmul.getLhs(), match->weight.param, match->bias,
                                   match->weight.transposed);
    rewriter.replaceOp(root, linear.getResult());
    return success();
  }
};

/// Gemm(A, B, C) with alpha = beta = 1 and A not transposed.
struct GemmToLinear : public OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp gemm, PatternRewriter &rewriter) const override {
    if (gemm.getTransA() || !gemm.getAlpha().isExactlyValue(1.0) ||
        (gemm.getC() && !gemm.getBeta().isExactlyValue(1.0)))
      return failure();
    auto param = gemm.getB().getDefiningOp<ParamRefOp>();
    auto type = param ? dyn_cast<RankedTensorType>(param.getType()) : RankedTensorType();
    if (!type || type.getRank() != 2)
      return failure();
    int64_t outFeatures = type.getDimSize(gemm.getTransB() ? 0 : 1);
    Value bias = gemm.getC();
    if (bias) {
      auto biasType = dyn_cast<RankedTensorType>(bias.getType());
      if (!biasType || biasType.getRank() != 1 || biasType.getDimSize(0) != outFeatures)
        return failure();
    }
    rewriter.replaceOpWithNewOp<LinearOp>(gemm, gemm.getType(), gemm.getA(), gemm.getB(),
                                          bias, gemm.getTransB());
    return success();
  }
};

struct FuseLinearPass : public mlir::pf::impl::PFFuseLinearBase<FuseLinearPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatMulToLinear, GemmToLinear>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
