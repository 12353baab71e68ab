//===- TrainingPatterns.cpp - backward kernels, loss, optimizers -----------===//
#include "RuntimeLowering.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr int64_t kOverwrite = 0; // accumulate flags: the step's gradients are fresh

int64_t geluApproximation(StringRef approximate) {
  return approximate == "tanh" ? PFRT_GELU_TANH : PFRT_GELU_EXACT;
}

struct LayerNormGradPattern : RuntimePattern<LayerNormGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    SmallVector<Value> results = l.resultEntries(rewriter, op); // grad x, scale, bias
    // No saved statistics: the kernel recomputes them from x and epsilon.
    if (failed(l.call(rewriter, op, "pfrt_layer_norm_backward",
                      {adaptor.getInput(), adaptor.getScale(), l.nullPtr(rewriter, loc),
                       l.nullPtr(rewriter, loc), adaptor.getGradOutput(),
                       l.constI64(rewriter, loc, int64_t(op.getAxis())),
                       l.constF64(rewriter, loc, op.getEpsilon().convertToDouble()),
                       l.constI32(rewriter, loc, kOverwrite), l.constI32(rewriter, loc, kOverwrite),
                       results[0], results[1], results[2]})))
      return failure();
    replaceByEntries(rewriter, op, results);
    return success();
  }
};

struct GeluGradPattern : RuntimePattern<GeluGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GeluGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getGradInput());
    if (failed(lowering.call(
            rewriter, op, "pfrt_gelu_backward",
            {adaptor.getInput(), adaptor.getGradOutput(),
             lowering.constI32(rewriter, loc, geluApproximation(op.getApproximate())),
             lowering.constI32(rewriter, loc, kOverwrite), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct SoftmaxGradPattern : RuntimePattern<SoftmaxGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getGradInput());
    if (failed(lowering.call(rewriter, op, "pfrt_softmax_backward",
                             {adaptor.getOutput(), adaptor.getGradOutput(),
                              lowering.constI64(rewriter, loc, int64_t(op.getAxis())),
                              lowering.constI32(rewriter, loc, kOverwrite), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct GatherGradPattern : RuntimePattern<GatherGradOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GatherGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getGradData());
    if (failed(lowering.call(rewriter, op, "pfrt_gather_backward",
                             {adaptor.getIndices(), adaptor.getGradOutput(),
                              lowering.constI64(rewriter, loc, int64_t(op.getAxis())),
                              lowering.constI32(rewriter, loc, kOverwrite), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct SoftmaxCrossEntropyPattern : RuntimePattern<SoftmaxCrossEntropyOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SoftmaxCrossEntropyOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> results = lowering.resultEntries(rewriter, op); // loss, grad, count
    if (failed(lowering.call(rewriter, op, "pfrt_softmax_cross_entropy",
                             {adaptor.getLogits(), adaptor.getLabels(),
                              lowering.constI64(rewriter, loc, int64_t(op.getIgnoreIndex())),
                              lowering.constF64(rewriter, loc, 1.0) /*grad scale*/, results[0],
                              results[1], results[2]})))
      return failure();
    replaceByEntries(rewriter, op, results);
    return success();
  }
};

/// Clipping works in place on copies of the gradients; the kernel takes the
/// array of their descriptors, so contiguous table entries view them.
struct ClipByGlobalNormPattern : RuntimePattern<ClipByGlobalNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ClipByGlobalNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    SmallVector<Value> clipped = l.resultEntries(rewriter, op);
    for (auto [grad, copy] : llvm::zip(adaptor.getGradients(), clipped))
      if (failed(l.call(rewriter, op, "pfrt_copy", {grad, copy})))
        return failure();
    Value tensors = l.tensorPtr(rewriter, loc, l.addContiguousViews(op.getClipped()));
    if (failed(l.call(rewriter, op, "pfrt_clip_by_global_norm",
                      {tensors, l.constI32(rewriter, loc, op.getGradients().size()),
                       l.constF64(rewriter, loc, op.getMaxNorm().convertToDouble()),
                       l.nullPtr(rewriter, loc) /*norm not kept*/})))
      return failure();
    replaceByEntries(rewriter, op, clipped);
    return success();
  }
};

/// pfrt_weighted_add(sum, input, count, total or 1, out): the counts read
/// as i64 (dividing by 1 is exact, so no total divides by nothing).
struct WeightedAddPattern : RuntimePattern<WeightedAddOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(WeightedAddOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    FailureOr<Value> count =
        l.readScalar(rewriter, op, op.getCount(), adaptor.getCount(), rewriter.getI64Type());
    if (failed(count))
      return failure();
    Value total = l.constI64(rewriter, loc, 1);
    if (op.getTotal()) {
      FailureOr<Value> read =
          l.readScalar(rewriter, op, op.getTotal(), adaptor.getTotal(), rewriter.getI64Type());
      if (failed(read))
        return failure();
      total = *read;
    }
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    if (failed(l.call(rewriter, op, "pfrt_weighted_add",
                      {adaptor.getSum(), adaptor.getInput(), *count, total, out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct SGDUpdatePattern : RuntimePattern<SGDUpdateOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SGDUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    double momentum = op.getMomentumBuffer() ? op.getMomentum().convertToDouble() : 0.0;
    FailureOr<Value> lr =
        l.readScalar(rewriter, op, op.getLr(), adaptor.getLr(), rewriter.getF64Type());
    if (failed(lr))
      return failure();
    if (failed(l.call(rewriter, op, "pfrt_sgd_step",
                      {l.paramPtr(rewriter, loc, op.getParamAttr()), adaptor.getGrad(),
                       l.paramPtr(rewriter, loc, op.getMomentumBufferAttr()), *lr,
                       l.constF64(rewriter, loc, momentum),
                       l.constF64(rewriter, loc, op.getWeightDecay().convertToDouble()),
                       l.constI32(rewriter, loc, op.getNesterov())})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// AdamW and LAMB share their leading arguments: parameter, gradient,
/// moments, lr, betas, eps, weight decay, step, bias correction (on).
template <typename OpTy>
FailureOr<SmallVector<Value>> adamArguments(RuntimeLowering &l, OpBuilder &b, OpTy op,
                                            typename OpTy::Adaptor adaptor) {
  Location loc = op.getLoc();
  FailureOr<Value> lr = l.readScalar(b, op, op.getLr(), adaptor.getLr(), b.getF64Type());
  FailureOr<Value> step = l.readScalar(b, op, op.getStep(), adaptor.getStep(), b.getI64Type());
  if (failed(lr) || failed(step))
    return failure();
  return SmallVector<Value>{l.paramPtr(b, loc, op.getParamAttr()),
                            adaptor.getGrad(),
                            l.paramPtr(b, loc, op.getExpAvgAttr()),
                            l.paramPtr(b, loc, op.getExpAvgSqAttr()),
                            *lr,
                            l.constF64(b, loc, op.getBeta1().convertToDouble()),
                            l.constF64(b, loc, op.getBeta2().convertToDouble()),
                            l.constF64(b, loc, op.getEps().convertToDouble()),
                            l.constF64(b, loc, op.getWeightDecay().convertToDouble()),
                            *step,
                            l.constI32(b, loc, 1) /*bias correction*/};
}

struct AdamWUpdatePattern : RuntimePattern<AdamWUpdateOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AdamWUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> args = adamArguments(lowering, rewriter, op, adaptor);
    if (failed(args) || failed(lowering.call(rewriter, op, "pfrt_adamw_step", *args)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

struct LAMBUpdatePattern : RuntimePattern<LAMBUpdateOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(LAMBUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    FailureOr<SmallVector<Value>> leading = adamArguments(lowering, rewriter, op, adaptor);
    if (failed(leading))
      return failure();
    SmallVector<Value> args = std::move(*leading);
    args.append({lowering.constI32(rewriter, loc, 1) /*nvlamb*/,
                 lowering.constF64(rewriter, loc, op.getMaxTrustRatio().convertToDouble())});
    if (failed(lowering.call(rewriter, op, "pfrt_lamb_step", args)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::pf::populateTrainingPatterns(const TypeConverter &converter,
                                        RuntimeLowering &lowering,
                                        RewritePatternSet &patterns) {
  patterns.add<LayerNormGradPattern, GeluGradPattern, SoftmaxGradPattern, GatherGradPattern,
               SoftmaxCrossEntropyPattern, ClipByGlobalNormPattern, WeightedAddPattern,
               SGDUpdatePattern, AdamWUpdatePattern, LAMBUpdatePattern>(
      converter, patterns.getContext(), lowering);
}
