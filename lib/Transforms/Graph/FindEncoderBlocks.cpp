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
    if (!func)
      return;
    bool named = namesGiveBlocks(func);
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
    if (named) {
      placeUnnamed(func, symbols, segments, segmentBlock, blocks, blockOf);
      return;
    }
    for (auto [name, block] : blockOf)
      if (Operation *param = symbols.lookup(name); param && block >= 0)
        param->setAttr(kEncoderBlockAttrName, builder.getI64IntegerAttr(block));
    emitRemark(func.getLoc()) << "pf-find-encoder-blocks: no parameter name gives an encoder "
                                 "block; found "
                              << blocks
                              << " from the graph's structure (attention and feed-forward, "
                                 "each closed by a residual LayerNorm)";
  }

  /// Names give the blocks, but an exporter-named parameter inside a block
  /// (`onnx::MatMul_N`, the folded weight of a linear without a bias, which
  /// pf-name-weights cannot name after its bias) says nothing: when the
  /// structure's blocks are the named ones (the named parameters read in
  /// each structural block all name one block, in order), such a parameter
  /// read in one structural block only gets that block's number.
  void placeUnnamed(func::FuncOp func, SymbolTable &symbols, ArrayRef<Segment> segments,
                    ArrayRef<int64_t> segmentBlock, int64_t blocks,
                    const llvm::MapVector<StringRef, int64_t> &blockOf) {
    constexpr int64_t kNone = -1;
    SmallVector<int64_t> namedBlock(blocks, kNone);
    for (auto [segment, block] : llvm::zip(segments, segmentBlock)) {
      if (block < 0)
        continue;
      for (StringRef param : segment.params) {
        std::optional<int64_t> named = encoderBlockOfName(param);
        if (!named)
          continue;
        if (namedBlock[block] != kNone && namedBlock[block] != *named)
          return; // the structure's blocks are not the named ones
        namedBlock[block] = *named;
      }
    }
    for (int64_t b = 0; b < blocks; ++b)
      if (namedBlock[b] == kNone || (b > 0 && namedBlock[b] <= namedBlock[b - 1]))
        return;
    Builder builder(&getContext());
    int64_t placed = 0;
    for (auto [name, block] : blockOf) {
      if (block < 0 || !isExporterGeneratedName(name) || encoderBlockOfName(name))
        continue;
      Operation *param = symbols.lookup(name);
      if (!param || param->hasAttr(kEncoderBlockAttrName))
        continue;
      param->setAttr(kEncoderBlockAttrName, builder.getI64IntegerAttr(namedBlock[block]));
      ++placed;
    }
    if (placed > 0)
      emitRemark(func.getLoc())
          << "pf-find-encoder-blocks: " << placed
          << " exporter-named parameter(s) read inside the named encoder blocks placed in "
             "their block from the graph's structure";
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
