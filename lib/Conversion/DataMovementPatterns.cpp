//===- DataMovementPatterns.cpp - views, layout, copies, constants ---------===//
#include "RuntimeLowering.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Runtime/pfrt.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
/// Views (ViewOpInterface), parameters and constants have planned entries
/// and no kernel: their results are those entries.
class ViewPattern : public OpInterfaceConversionPattern<ViewOpInterface> {
public:
  ViewPattern(const TypeConverter &converter, MLIRContext *ctx, RuntimeLowering &lowering)
      : OpInterfaceConversionPattern(converter, ctx), lowering(lowering) {}
  LogicalResult matchAndRewrite(ViewOpInterface op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, lowering.resultEntries(rewriter, op));
    return success();
  }

private:
  RuntimeLowering &lowering;
};

template <typename OpTy>
struct PlannedEntryPattern : RuntimePattern<OpTy> {
  using RuntimePattern<OpTy>::RuntimePattern;
  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, this->lowering.resultEntries(rewriter, op));
    return success();
  }
};

struct TransposePattern : RuntimePattern<TransposeOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getInput().getType());
    SmallVector<int64_t> perm;
    if (auto given = op.getPerm())
      perm.assign(given->begin(), given->end());
    else
      for (int64_t i = type.getRank() - 1; i >= 0; --i)
        perm.push_back(i);
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_transpose",
                             {adaptor.getInput(), lowering.intArray(rewriter, loc, perm),
                              lowering.constI32(rewriter, loc, perm.size()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct GatherPattern : RuntimePattern<GatherOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_gather",
                             {adaptor.getData(), adaptor.getIndices(),
                              lowering.constI64(rewriter, loc, int64_t(op.getAxis())), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct GatherNDPattern : RuntimePattern<GatherNDOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(GatherNDOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_gather_nd",
                             {adaptor.getData(), adaptor.getIndices(),
                              lowering.constI64(rewriter, loc, int64_t(op.getBatchDims())),
                              out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// The reduction enum's values are the runtime's PFRT_SCATTER_* (checked
/// below), so it passes through as an i32.
static_assert(int(ScatterReduction::None) == PFRT_SCATTER_NONE &&
              int(ScatterReduction::Add) == PFRT_SCATTER_ADD &&
              int(ScatterReduction::Mul) == PFRT_SCATTER_MUL &&
              int(ScatterReduction::Max) == PFRT_SCATTER_MAX &&
              int(ScatterReduction::Min) == PFRT_SCATTER_MIN);
struct ScatterNDPattern : RuntimePattern<ScatterNDOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ScatterNDOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_scatter_nd",
                             {adaptor.getData(), adaptor.getIndices(), adaptor.getUpdates(),
                              lowering.constI32(rewriter, loc, int32_t(op.getReduction())),
                              out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct CumSumPattern : RuntimePattern<CumSumOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(CumSumOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_cumsum",
                             {adaptor.getInput(), lowering.constI64(rewriter, loc, op.getAxis()),
                              lowering.constI32(rewriter, loc, op.getExclusive()),
                              lowering.constI32(rewriter, loc, op.getReverse()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct TriluPattern : RuntimePattern<TriluOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(TriluOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_trilu",
                             {adaptor.getInput(), lowering.constI64(rewriter, loc, op.getK()),
                              lowering.constI32(rewriter, loc, op.getUpper()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// Bounds, axes and steps become constant arrays (all axes and steps
/// spelled out, as pfrt_slice takes them).
struct SlicePattern : RuntimePattern<SliceOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto starts = getConstantInts(op.getStarts()), ends = getConstantInts(op.getEnds());
    std::optional<SmallVector<int64_t>> axes, steps;
    if (op.getAxes())
      axes = getConstantInts(op.getAxes());
    if (op.getSteps())
      steps = getConstantInts(op.getSteps());
    if (!starts || !ends || (op.getAxes() && !axes) || (op.getSteps() && !steps))
      return op.emitError("slice bounds must be constants for the runtime lowering");
    SmallVector<int64_t> allAxes, allSteps;
    for (size_t i = 0; i < starts->size(); ++i) {
      allAxes.push_back(axes ? (*axes)[i] : int64_t(i));
      allSteps.push_back(steps ? (*steps)[i] : 1);
    }
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_slice",
                             {adaptor.getData(), lowering.intArray(rewriter, loc, *starts),
                              lowering.intArray(rewriter, loc, *ends),
                              lowering.intArray(rewriter, loc, allAxes),
                              lowering.intArray(rewriter, loc, allSteps),
                              lowering.constI32(rewriter, loc, starts->size()), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// pfrt_concat takes an array of descriptors: new table entries view the
/// inputs, one after the other.
struct ConcatPattern : RuntimePattern<ConcatOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ConcatOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value inputs = lowering.tensorPtr(rewriter, loc, lowering.addContiguousViews(op.getInputs()));
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_concat",
                             {inputs, lowering.constI32(rewriter, loc, op.getInputs().size()),
                              lowering.constI64(rewriter, loc, int64_t(op.getAxis())), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// The target shape is the output's, so only the input goes to the kernel.
struct ExpandPattern : RuntimePattern<ExpandOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ExpandOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Value out = lowering.entryOf(rewriter, op.getLoc(), op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_expand", {adaptor.getInput(), out})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

struct ConstantOfShapePattern : RuntimePattern<ConstantOfShapeOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(ConstantOfShapeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    double value = 0;
    if (auto attr = op.getValueAttr()) {
      Attribute v = attr.getValues<Attribute>()[0];
      if (auto f = dyn_cast<FloatAttr>(v))
        value = f.getValueAsDouble();
      else if (auto i = dyn_cast<IntegerAttr>(v))
        value = double(i.getValue().getSExtValue());
    }
    Location loc = op.getLoc();
    Value out = lowering.entryOf(rewriter, loc, op.getOutput());
    if (failed(lowering.call(rewriter, op, "pfrt_fill",
                             {out, lowering.constF64(rewriter, loc, value)})))
      return failure();
    replaceByEntries(rewriter, op, out);
    return success();
  }
};

/// The end of pf_main: results that are not written in place are copied
/// into their output buffers, then 0 (success) is returned.
struct ReturnPattern : RuntimePattern<func::ReturnOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(func::ReturnOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    for (auto [from, to] : lowering.plan.outputCopies)
      if (failed(lowering.callOutputCopy(rewriter, loc, from, to)))
        return failure();
    func::ReturnOp::create(rewriter, loc, ValueRange{lowering.constI64(rewriter, loc, 0)});
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::pf::populateDataMovementPatterns(const TypeConverter &converter,
                                            RuntimeLowering &lowering,
                                            RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ViewPattern, PlannedEntryPattern<ParamRefOp>, PlannedEntryPattern<ConstantOp>,
               TransposePattern, GatherPattern, GatherNDPattern, ScatterNDPattern,
               CumSumPattern, TriluPattern, SlicePattern, ConcatPattern, ExpandPattern,
               ConstantOfShapePattern, ReturnPattern>(converter, ctx, lowering);
  patterns.add<KernelCallPattern<CastOp>>(converter, ctx, lowering, "pfrt_cast");
}
