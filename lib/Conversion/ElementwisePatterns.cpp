//===- ElementwisePatterns.cpp - broadcasting binary and unary ops ---------===//
#include "RuntimeLowering.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
struct GeluPattern : RuntimePattern<GeluOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GeluOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t approximation = op.getApproximate() == "tanh" ? PFRT_GELU_TANH : PFRT_GELU_EXACT;
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_gelu",
                             {adaptor.getInput(), lowering.constI32(rewriter, loc, approximation),
                              out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// A binary op whose kernel takes a kind after the operands:
/// pfrt_compare(ctx, a, b, PFRT_COMPARE_*, out), pfrt_logical(...).
template <typename OpTy>
struct KindCallPattern : RuntimePattern<OpTy> {
  KindCallPattern(const TypeConverter &converter, MLIRContext *ctx, RuntimeLowering &lowering,
                  StringRef kernel, int32_t kind)
      : RuntimePattern<OpTy>(converter, ctx, lowering), kernel(kernel), kind(kind) {}

  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = this->lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(this->lowering.call(rewriter, op, kernel,
                                   {adaptor.getLhs(), adaptor.getRhs(),
                                    this->lowering.constI32(rewriter, loc, kind), out})))
      return failure();
    this->replaceByEntries(rewriter, op, out);
    return success();
  }

  StringRef kernel;
  int32_t kind;
};
/// pfrt_is_inf(ctx, x, detect_negative, detect_positive, out).
struct IsInfPattern : RuntimePattern<IsInfOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(IsInfOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_is_inf",
                             {adaptor.getInput(),
                              lowering.constI32(rewriter, loc, op.getDetectNegative()),
                              lowering.constI32(rewriter, loc, op.getDetectPositive()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};
} // namespace

void mlir::pf::populateElementwisePatterns(const TypeConverter &converter,
                                           RuntimeLowering &lowering,
                                           RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  // Operands then the result, all descriptors.
  patterns.add<KernelCallPattern<AddOp>>(converter, ctx, lowering, "pfrt_add");
  patterns.add<KernelCallPattern<SubOp>>(converter, ctx, lowering, "pfrt_sub");
  patterns.add<KernelCallPattern<MulOp>>(converter, ctx, lowering, "pfrt_mul");
  patterns.add<KernelCallPattern<DivOp>>(converter, ctx, lowering, "pfrt_div");
  patterns.add<KernelCallPattern<PowOp>>(converter, ctx, lowering, "pfrt_pow");
  patterns.add<KernelCallPattern<EqualOp>>(converter, ctx, lowering, "pfrt_equal");
  patterns.add<KernelCallPattern<MinOp>>(converter, ctx, lowering, "pfrt_min");
  patterns.add<KernelCallPattern<MaxOp>>(converter, ctx, lowering, "pfrt_max");
  patterns.add<KindCallPattern<GreaterOp>>(converter, ctx, lowering, "pfrt_compare",
                                           PFRT_COMPARE_GREATER);
  patterns.add<KindCallPattern<GreaterEqualOp>>(converter, ctx, lowering, "pfrt_compare",
                                                PFRT_COMPARE_GREATER_EQUAL);
  patterns.add<KindCallPattern<LessOp>>(converter, ctx, lowering, "pfrt_compare",
                                        PFRT_COMPARE_LESS);
  patterns.add<KindCallPattern<LessEqualOp>>(converter, ctx, lowering, "pfrt_compare",
                                             PFRT_COMPARE_LESS_EQUAL);
  patterns.add<KindCallPattern<AndOp>>(converter, ctx, lowering, "pfrt_logical",
                                       PFRT_LOGICAL_AND);
  patterns.add<KindCallPattern<OrOp>>(converter, ctx, lowering, "pfrt_logical", PFRT_LOGICAL_OR);
  patterns.add<KindCallPattern<XorOp>>(converter, ctx, lowering, "pfrt_logical",
                                       PFRT_LOGICAL_XOR);
  patterns.add<KernelCallPattern<NotOp>>(converter, ctx, lowering, "pfrt_not");
  patterns.add<KernelCallPattern<WhereOp>>(converter, ctx, lowering, "pfrt_where");
  patterns.add<KernelCallPattern<SqrtOp>>(converter, ctx, lowering, "pfrt_sqrt");
  patterns.add<KernelCallPattern<ErfOp>>(converter, ctx, lowering, "pfrt_erf");
  patterns.add<KernelCallPattern<TanhOp>>(converter, ctx, lowering, "pfrt_tanh");
  patterns.add<KernelCallPattern<ExpOp>>(converter, ctx, lowering, "pfrt_exp");
  patterns.add<KernelCallPattern<NegOp>>(converter, ctx, lowering, "pfrt_neg");
  patterns.add<KernelCallPattern<AbsOp>>(converter, ctx, lowering, "pfrt_abs");
  patterns.add<KernelCallPattern<SignOp>>(converter, ctx, lowering, "pfrt_sign");
  patterns.add<KernelCallPattern<ReciprocalOp>>(converter, ctx, lowering, "pfrt_reciprocal");
  patterns.add<KernelCallPattern<IsNaNOp>>(converter, ctx, lowering, "pfrt_is_nan");
  patterns.add<GeluPattern, IsInfPattern>(converter, ctx, lowering);
}
