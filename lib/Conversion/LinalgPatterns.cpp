//===- LinalgPatterns.cpp - matmul, gemm, linear ---------------------------===//
#include "RuntimeLowering.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
struct GemmPattern : RuntimePattern<GemmOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GemmOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(
            rewriter, op, "pfrt_gemm",
            {adaptor.getA(), adaptor.getB(), lowering.orNull(rewriter, loc, adaptor.getC()),
             lowering.constF64(rewriter, loc, op.getAlpha().convertToDouble()),
             lowering.constF64(rewriter, loc, op.getBeta().convertToDouble()),
             lowering.constI32(rewriter, loc, op.getTransA()),
             lowering.constI32(rewriter, loc, op.getTransB()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct LinearPattern : RuntimePattern<LinearOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_linear",
                             {adaptor.getInput(), adaptor.getWeight(),
                              lowering.orNull(rewriter, loc, adaptor.getBias()),
                              lowering.constI32(rewriter, loc, op.getTransposeWeight()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};
struct LinearGeluPattern : RuntimePattern<LinearGeluOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LinearGeluOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    int64_t approximation = op.getApproximate() == "tanh" ? PFRT_GELU_TANH : PFRT_GELU_EXACT;
    if (failed(l.call(rewriter, op, "pfrt_linear_gelu",
                      {adaptor.getInput(), adaptor.getWeight(),
                       l.orNull(rewriter, loc, adaptor.getBias()),
                       l.constI32(rewriter, loc, op.getTransposeWeight()),
                       l.constI32(rewriter, loc, approximation), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// The permutations go as constant arrays of the operands' rank; an absent
/// one (the identity) as a null pointer.
struct PermutedMatMulPattern : RuntimePattern<PermutedMatMulOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(PermutedMatMulOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    auto perm = [&](std::optional<ArrayRef<int64_t>> p) {
      return p ? l.intArray(rewriter, loc, *p) : l.nullPtr(rewriter, loc);
    };
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    if (failed(l.call(rewriter, op, "pfrt_matmul_permuted",
                      {adaptor.getLhs(), perm(op.getLhsPerm()), adaptor.getRhs(),
                       perm(op.getRhsPerm()), perm(op.getResultPerm()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};
} // namespace

void mlir::pf::populateLinalgPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                      RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelCallPattern<MatMulOp>>(converter, ctx, lowering, "pfrt_matmul");
  patterns.add<GemmPattern, LinearPattern, LinearGeluPattern, PermutedMatMulPattern>(converter, ctx,
                                                                                     lowering);
}
