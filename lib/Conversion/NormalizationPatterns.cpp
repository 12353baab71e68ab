//===- NormalizationPatterns.cpp - layer norm, softmax, reductions ---------===//
#include "RuntimeLowering.h"
#include "pf/Dialect/PF/IR/PFOps.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
/// pf.layer_norm (no statistics) and pf.layer_normalization (optional mean
/// and inverse standard deviation outputs) are one kernel.
template <typename OpTy>
struct LayerNormPattern : RuntimePattern<OpTy> {
  using RuntimePattern<OpTy>::RuntimePattern;
  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = this->lowering;
    Location loc = op.getLoc();
    SmallVector<Value> results = l.resultEntries(rewriter, op);
    // Outputs: y, then mean and inv_std_dev when the op has them.
    Value mean = results.size() > 1 ? results[1] : l.nullPtr(rewriter, loc);
    Value invStdDev = results.size() > 2 ? results[2] : l.nullPtr(rewriter, loc);
    if (failed(l.call(rewriter, op, "pfrt_layer_norm",
                      {adaptor.getInput(), adaptor.getScale(), l.orNull(rewriter, loc, adaptor.getBias()),
                       l.constI64(rewriter, loc, int64_t(op.getAxis())),
                       l.constF64(rewriter, loc, op.getEpsilon().convertToDouble()), results[0],
                       mean, invStdDev})))
      return failure();
    this->replaceByEntries(rewriter, op, results);
    return success();
  }
};

struct SoftmaxPattern : RuntimePattern<SoftmaxOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_softmax",
                             {adaptor.getInput(),
                              lowering.constI64(rewriter, loc, int64_t(op.getAxis())), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// softmax(scale * x + mask) over the last axis; no mask is a null pointer.
struct ScaledMaskedSoftmaxPattern : RuntimePattern<ScaledMaskedSoftmaxOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ScaledMaskedSoftmaxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    if (failed(l.call(rewriter, op, "pfrt_softmax_scaled_masked",
                      {adaptor.getInput(), l.orNull(rewriter, loc, adaptor.getMask()),
                       l.constF64(rewriter, loc, op.getScale().convertToDouble()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct AddLayerNormPattern : RuntimePattern<AddLayerNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(AddLayerNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    if (failed(l.call(rewriter, op, "pfrt_add_layer_norm",
                      {adaptor.getInput(), adaptor.getResidual(), adaptor.getScale(),
                       l.orNull(rewriter, loc, adaptor.getBias()),
                       l.constI64(rewriter, loc, int64_t(op.getAxis())),
                       l.constF64(rewriter, loc, op.getEpsilon().convertToDouble()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// ONNX axes semantics resolved here: no axes means all of them unless
/// noop_with_empty_axes, where the reduction is a copy.
template <typename OpTy>
struct ReducePattern : RuntimePattern<OpTy> {
  ReducePattern(const TypeConverter &converter, MLIRContext *ctx, RuntimeLowering &lowering,
                StringRef kernel)
      : RuntimePattern<OpTy>(converter, ctx, lowering), kernel(kernel) {}

  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = this->lowering;
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getInput().getType());
    SmallVector<int64_t> axes;
    if (auto given = op.getAxes(); given && !given->empty())
      axes.assign(given->begin(), given->end());
    else if (!op.getNoopWithEmptyAxes())
      for (int64_t i = 0; i < type.getRank(); ++i)
        axes.push_back(i);
    Value out = l.entryOf(rewriter, loc, op.getOutput());
    LogicalResult called =
        axes.empty()
            ? l.call(rewriter, op, "pfrt_copy", {adaptor.getInput(), out})
            : l.call(rewriter, op, kernel,
                     {adaptor.getInput(), l.intArray(rewriter, loc, axes),
                      l.constI32(rewriter, loc, axes.size()),
                      l.constI32(rewriter, loc, op.getKeepdims()), out});
    if (failed(called))
      return failure();
    this->replaceByEntries(rewriter, op, out);
    return success();
  }

private:
  StringRef kernel;
};
} // namespace

void mlir::pf::populateNormalizationPatterns(const TypeConverter &converter,
                                             RuntimeLowering &lowering,
                                             RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<LayerNormPattern<LayerNormOp>, LayerNormPattern<LayerNormalizationOp>,
               SoftmaxPattern, ScaledMaskedSoftmaxPattern, AddLayerNormPattern>(converter, ctx,
                                                                                lowering);
  patterns.add<ReducePattern<ReduceMeanOp>>(converter, ctx, lowering, "pfrt_reduce_mean");
  patterns.add<ReducePattern<ReduceSumOp>>(converter, ctx, lowering, "pfrt_reduce_sum");
  patterns.add<ReducePattern<ReduceMaxOp>>(converter, ctx, lowering, "pfrt_reduce_max");
  patterns.add<ReducePattern<ReduceMinOp>>(converter, ctx, lowering, "pfrt_reduce_min");
}
