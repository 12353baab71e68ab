//===- SplitMicrobatches.cpp - one training step over several micro-batches ===//
//
// The function is imported for one micro-batch; this pass repeats its body
// once per micro-batch on slices of batch-sized arguments, and combines the
// masked-LM losses into the whole batch's loss. Autodiff afterwards sums the
// parameter gradients over the repeats, and each repeat's K-FAC factor
// updates become PipeFisher's per-micro-batch curvature work.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Schedule/Limits.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFSPLITMICROBATCHES
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
Value constantI64(OpBuilder &b, Location loc, ArrayRef<int64_t> values, bool scalar = false) {
  auto type = RankedTensorType::get(scalar ? ArrayRef<int64_t>{} : ArrayRef<int64_t>{int64_t(values.size())},
                                    b.getI64Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
}

/// Rows [index·rows, (index+1)·rows) of `value` along dimension 0.
Value sliceRows(OpBuilder &b, Location loc, Value value, int64_t index, int64_t rows) {
  return SliceOp::create(b, loc, value, constantI64(b, loc, {index * rows}),
                         constantI64(b, loc, {(index + 1) * rows}), constantI64(b, loc, {0}),
                         Value());
}

/// Σ_m w_m·piece_m with w_m = count_m / Σ count (0 when no token counts, as
/// the loss op does). count_m·piece_m is added to a running sum right where
/// micro-batch m computed its piece, so only that sum stays live across the
/// later micro-batches; the division by Σ count comes at the end.
class WeightedSum {
public:
  WeightedSum(OpBuilder &b, Location loc, ArrayRef<Value> counts, Operation *end)
      : b(b), loc(loc), counts(counts), end(end) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(end);
    for (Value count : counts)
      total = total ? AddOp::create(b, loc, total, count).getResult() : count;
    Value none = EqualOp::create(b, loc, total, constantI64(b, loc, {0}, /*scalar=*/true));
    total = WhereOp::create(b, loc, none, constantI64(b, loc, {1}, true), total);
  }

  Value sum(ArrayRef<Value> pieces) {
    OpBuilder::InsertionGuard guard(b);
    Type element = cast<ShapedType>(pieces[0].getType()).getElementType();
    TypeAttr to = TypeAttr::get(element);
    Value acc;
    for (auto [count, piece] : llvm::zip(counts, pieces)) {
      if (Operation *def = piece.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPoint(end);
      Value term = MulOp::create(b, loc, piece.getType(), piece, CastOp::create(b, loc, count, to));
      acc = acc ? AddOp::create(b, loc, acc, term).getResult() : term;
    }
    b.setInsertionPoint(end);
    return DivOp::create(b, loc, acc.getType(), acc, CastOp::create(b, loc, total, to));
  }

private:
  OpBuilder &b;
  Location loc;
  SmallVector<Value> counts;
  Operation *end;
  Value total;
};

struct SplitMicrobatchesPass
    : public mlir::pf::impl::PFSplitMicrobatchesBase<SplitMicrobatchesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-split-microbatches: no function with a body");
    if (microbatches < 1)
      return func.emitError("pf-split-microbatches: microbatches must be >= 1, got ")
             << microbatches.getValue();
    // A copy of the step per micro-batch: 10^8 of them once took 9 GB and
    // 10^12 aborted in SmallVector.
    if (auto s = ::pf::sched::checkLimit("microbatches", microbatches,
                                         ::pf::sched::kMaxMicrobatches, "kMaxMicrobatches");
        !s.ok())
      return func.emitError("pf-split-microbatches: ") << s.message();
    if (microbatches == 1)
      return success();
    Block &block = func.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    if (failed(checkResults(func, ret)))
      return failure();

    SmallVector<Operation *> body;
    for (Operation &op : block.without_terminator())
      body.push_back(&op);

    // Slices of the batch-sized arguments, one list per micro-batch.
    OpBuilder builder(&block, block.begin());
    SmallVector<IRMapping> maps(microbatches);
    for (BlockArgument arg : block.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      if (!type.hasStaticShape())
        return func.emitError("pf-split-microbatches: argument ")
               << arg.getArgNumber() << " has a dynamic shape " << type;
      int64_t rows = type.getDimSize(0);
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = rows * microbatches;
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
      Value first = sliceRows(builder, func.getLoc(), arg, 0, rows);
      arg.replaceAllUsesExcept(first, first.getDefiningOp());
      // The body now reads slice 0; its repeats read slice m instead.
      for (int64_t m = 1; m < microbatches; ++m)
        maps[m].map(first, sliceRows(builder, func.getLoc(), arg, m, rows));
    }

    // The body once more per further micro-batch, in order.
    builder.setInsertionPoint(ret);
    for (int64_t m = 1; m < microbatches; ++m)
      for (Operation *op : body)
        builder.clone(*op, maps[m]);

    // Each micro-batch's loss is a mean over its counted tokens; weighted by
    // count_m / Σ count they add up to the whole batch's mean, and so do the
    // gradients of the per-micro-batch losses.
    auto loss = ret.getOperand(0).getDefiningOp<SoftmaxCrossEntropyOp>();
    SmallVector<Value> counts;
    for (const IRMapping &map : maps)
      counts.push_back(map.lookupOrDefault(loss.getCount()));
    WeightedSum weighted(builder, ret.getLoc(), counts, ret);
    SmallVector<Value> results;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      SmallVector<Value> pieces;
      for (const IRMapping &map : maps)
        pieces.push_back(map.lookupOrDefault(value));
      auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
      if (i == 0 || (name && name.getValue().starts_with("grad/")))
        results.push_back(weighted.sum(pieces));
      else
        results.push_back(ConcatOp::create(builder, ret.getLoc(), pieces, 0));
    }
    ret->setOperands(results);
    func.setType(builder.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    func->setAttr(kMicrobatchesAttrName, builder.getI64IntegerAttr(microbatches));
    return success();
  }

  /// Result 0 must be the masked-LM loss; gradients (`grad/...`) are summed,
  /// the others must have a leading (batch) dimension to concatenate along.
  LogicalResult checkResults(func::FuncOp func, func::ReturnOp ret) {
    if (ret.getNumOperands() == 0 ||
        !ret.getOperand(0).getDefiningOp<SoftmaxCrossEntropyOp>())
      return func.emitError("pf-split-microbatches: result 0 must be the loss of a "
                            "pf.softmax_cross_entropy; run pf-add-masked-lm-loss first");
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto type = dyn_cast<RankedTensorType>(ret.getOperand(i).getType());
      auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
      if (name && name.getValue().starts_with("grad/")) {
        if (!type || !isa<FloatType>(type.getElementType()))
          return func.emitError("pf-split-microbatches: gradient result ")
                 << i << " is not a float tensor";
        continue;
      }
      if (!type || type.getRank() == 0)
        return func.emitError("pf-split-microbatches: result ")
               << i << " has no batch dimension to concatenate the micro-batches along";
    }
    return success();
  }
};
} // namespace
