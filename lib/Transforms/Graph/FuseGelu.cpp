//===- FuseGelu.cpp - GELU (erf and tanh forms) -> pf.gelu -----------------===//
//
// Exporters write GELU as a product of three factors in varying order and
// association: 0.5 · x · (1 + erf(x / √2)), or with tanh(√(2/π)·(x + 0.044715·x³)).
// The matcher flattens Mul trees into factor lists so the order does not matter.
//
//===----------------------------------------------------------------------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFUSEGELU
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kTanhCubic = 0.044715;

/// Appends the factors of a product; inner Muls are expanded only when the
/// product is their sole user (otherwise they are shared and must stay).
void collectFactors(Value value, bool isRoot, SmallVectorImpl<Value> &factors) {
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul || (!isRoot && !value.hasOneUse())) {
    factors.push_back(value);
    return;
  }
  collectFactors(mul.getLhs(), false, factors);
  collectFactors(mul.getRhs(), false, factors);
}

/// Splits `factors` into one splat constant near `constant` and the rest.
bool takeConstant(SmallVectorImpl<Value> &factors, double constant, double tol) {
  for (auto it = factors.begin(); it != factors.end(); ++it)
    if (isSplatNear(*it, constant, tol)) {
      factors.erase(it);
      return true;
    }
  return false;
}

/// The operand of `1 + v` (either order), or null.
Value onePlus(Value value, double tol) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return {};
  if (isSplatNear(add.getLhs(), 1.0, tol))
    return add.getRhs();
  if (isSplatNear(add.getRhs(), 1.0, tol))
    return add.getLhs();
  return {};
}

/// erf's argument is x / √2 or x · (1/√2).
bool isErfArgument(Value arg, Value x, double tol) {
  if (auto div = arg.getDefiningOp<DivOp>())
    return div.getLhs() == x && isSplatNear(div.getRhs(), kSqrt2, tol);
  SmallVector<Value> factors;
  collectFactors(arg, true, factors);
  return factors.size() == 2 && takeConstant(factors, 1.0 / kSqrt2, tol) &&
         factors.front() == x;
}

/// x³ as Pow(x, 3) or as a product x · x · x (with the constant already taken).
bool isCubeFactors(ArrayRef<Value> factors, Value x, double tol) {
  if (factors.size() == 1)
    if (auto pow = factors.front().getDefiningOp<PowOp>())
      return pow.getLhs() == x && isSplatNear(pow.getRhs(), 3.0, tol);
  return factors.size() == 3 && llvm::all_of(factors, [&](Value f) { return f == x; });
}

/// tanh's argument is √(2/π) · (x + 0.044715 · x³).
bool isTanhArgument(Value arg, Value x, double tol) {
  SmallVector<Value> outer;
  collectFactors(arg, true, outer);
  if (outer.size() != 2 || !takeConstant(outer, kSqrt2OverPi, tol))
    return false;
  auto sum = outer.front().getDefiningOp<AddOp>();
  if (!sum)
    return false;
  Value cubic = otherOperand(sum, x);
  if (!cubic)
    return false;
  SmallVector<Value> inner;
  collectFactors(cubic, true, inner);
  return takeConstant(inner, kTanhCubic, tol) && isCubeFactors(inner, x, tol);
}

struct GeluPattern : public OpRewritePattern<MulOp> {
  GeluPattern(MLIRContext *ctx, double tolerance)
      : OpRewritePattern(ctx), tolerance(tolerance) {}

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(root.getResult(), true, factors);
    if (factors.size() != 3 || !takeConstant(factors, 0.5, tolerance))
      return failure();
    for (int pick = 0; pick < 2; ++pick) {
      Value x = factors[pick], gate = onePlus(factors[1 - pick], tolerance);
      if (!gate)
        continue;
      StringRef approximate;
      if (auto erf = gate.getDefiningOp<ErfOp>(); erf && isErfArgument(erf.getInput(), x, tolerance))
        approximate = "none";
      else if (auto tanh = gate.getDefiningOp<TanhOp>();
               tanh && isTanhArgument(tanh.getInput(), x, tolerance))
        approximate = "tanh";
      else
        continue;
      if (x.getType() != root.getType())
        return failure();
      rewriter.replaceOpWithNewOp<GeluOp>(root, root.getType(), x,
                                          rewriter.getStringAttr(approximate));
      return success();
    }
    return failure();
  }

  double tolerance;
};

struct FuseGeluPass : public mlir::pf::impl::PFFuseGeluBase<FuseGeluPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GeluPattern>(&getContext(), tolerance);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
