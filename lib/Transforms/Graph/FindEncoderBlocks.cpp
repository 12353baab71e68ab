//===- FindEncoderBlocks.cpp - encoder blocks from the graph's structure ---===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFINDENCODERBLOCKS
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The ops from one LayerNorm (exclusive) to the next (inclusive).
struct Segment {
  bool softmax = false, gelu = false;
  /// The closing LayerNorm normalizes a residual sum.
  bool residual = false;
  llvm::SetVector<StringRef> params;

  bool isAttention() const { return softmax && !gelu && residual; }
  bool isFeedForward() const { return gelu && !softmax && residual; }
};

SmallVector<Segment> segmentsOf(func::FuncOp func) {
  SmallVector<Segment> segments(1);
  for (Operation &op : func.getBody().front()) {
    Segment &current = segments.back();
    current.softmax |= isa<SoftmaxOp>(op);
    current.gelu |= isa<GeluOp>(op);
    for (Value operand : op.getOperands())
      if (auto ref = operand.getDefiningOp<ParamRefOp>())
        current.params.insert(ref.getName());
    if (auto norm = dyn_cast<LayerNormOp>(op)) {
      current.residual = bool(norm.getInput().getDefiningOp<AddOp>());
      segments.emplace_back();
    }
  }
  return segments;
}

struct FindEncoderBlocksPass
    : public mlir::pf::impl::PFFindEncoderBlocksBase<FindEncoderBlocksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || namesGiveBlocks(func))
      return;
    SmallVector<Segment> segments = segmentsOf(func);
    // Each segment's block (kOutside: none), then each parameter's (kMixed:
    // read in two blocks, or in a block and outside).
    constexpr int64_t kOutside = -1, kMixed = -2;
    SmallVector<int64_t> segmentBlock(segments.size(), kOutside);
    int64_t blocks = 0;
    for (size_t i = 0; i + 1 < segments.size(); ++i)
      if (segments[i].isAttention() && segments[i + 1].isFeedForward()) {
        segmentBlock[i] = segmentBlock[i + 1] = blocks++;
        ++i;
      }
    if (blocks == 0)
      return;
    llvm::MapVector<StringRef, int64_t> blockOf;
    for (auto [segment, block] : llvm::zip(segments, segmentBlock))
      for (StringRef param : segment.params) {
        auto [it, isNew] = blockOf.try_emplace(param, block);
        if (!isNew && it->second != block)
          it->second = kMixed;
      }
    SymbolTable symbols(module);
    Builder builder(&getContext());
    for (auto [name, block] : blockOf)
      if (Operation *param = symbols.lookup(name); param && block >= 0)
        param->setAttr(kEncoderBlockAttrName, builder.getI64IntegerAttr(block));
    emitRemark(func.getLoc()) << "pf-find-encoder-blocks: no parameter name gives an encoder "
                                 "block; found "
                              << blocks
                              << " from the graph's structure (attention and feed-forward, "
                                 "each closed by a residual LayerNorm)";
  }

  static bool namesGiveBlocks(func::FuncOp func) {
    bool named = false;
    func.walk([&](ParamRefOp ref) {
      if (encoderBlockOfName(ref.getName()))
        named = true;
      return named ? WalkResult::interrupt() : WalkResult::advance();
    });
    return named;
  }
};
} // namespace
