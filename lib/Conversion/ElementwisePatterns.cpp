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
  patterns.add<KernelCallPattern<WhereOp>>(converter, ctx, lowering, "pfrt_where");
  patterns.add<KernelCallPattern<SqrtOp>>(converter, ctx, lowering, "pfrt_sqrt");
  patterns.add<KernelCallPattern<ErfOp>>(converter, ctx, lowering, "pfrt_erf");
  patterns.add<KernelCallPattern<TanhOp>>(converter, ctx, lowering, "pfrt_tanh");
  patterns.add<KernelCallPattern<ExpOp>>(converter, ctx, lowering, "pfrt_exp");
  patterns.add<KernelCallPattern<NegOp>>(converter, ctx, lowering, "pfrt_neg");
  patterns.add<GeluPattern>(converter, ctx, lowering);
}
