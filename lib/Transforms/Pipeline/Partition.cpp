//===- Partition.cpp - cut the model into pipeline stages -----------------===//
#include "PipelineModel.h"
#include "pf/Schedule/Limits.h"
#include "pf/Schedule/Partition.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFPARTITION
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {

/// Builds the body of one stage: clones its ops, receives what earlier stages
/// computed, sends what later stages need.
class StageBuilder {
public:
  StageBuilder(const BlockAssignment &blocks, ArrayRef<int64_t> stageOfBlock,
               Block &pipelineBody, func::FuncOp func)
      : blocks(blocks), stageOfBlock(stageOfBlock), pipelineBody(pipelineBody), func(func) {}

  int64_t stageOf(Operation *op) const {
    return stageOfBlock[blocks.blockOf.lookup(op)];
  }

  /// Tag of the transfer of `value` (one per value, shared by all receivers).
  int64_t tagOf(Value value) {
    auto [it, inserted] = tags.try_emplace(value, int64_t(tags.size()));
    return it->second;
  }

  /// Stages after `stage` that use `value`.
  SmallVector<int64_t> laterUsers(Value value, int64_t stage) {
    SmallVector<int64_t> users;
    for (Operation *user : value.getUsers()) {
      if (isa<func::ReturnOp>(user) || BlockAssignment::isFree(user))
        continue;
      int64_t s = stageOf(user);
      if (s > stage && !llvm::is_contained(users, s))
        users.push_back(s);
    }
    llvm::sort(users);
    return users;
  }

  LogicalResult build(int64_t stage, OpBuilder &builder) {
    SmallVector<Operation *> ops;
    llvm::SetVector<Value> args;
    bool returnsValues = false;
    for (Operation *op : blocks.ops) {
      if (BlockAssignment::isFree(op) || stageOf(op) != stage)
        continue;
      ops.push_back(op);
      for (Value operand : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(operand))
          args.insert(arg);
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    SmallVector<Value> results;
    for (Value v : ret.getOperands())
      if (Operation *def = v.getDefiningOp(); def && !BlockAssignment::isFree(def) &&
                                              stageOf(def) == stage) {
        results.push_back(v);
        returnsValues = true;
      }

    Location loc = func.getLoc();
    SmallVector<Value> stageInputs;
    for (Value arg : args)
      stageInputs.push_back(pipelineBody.getArgument(cast<BlockArgument>(arg).getArgNumber()));
    auto stageOp = StageOp::create(builder, loc, ValueRange(results).getTypes(), stageInputs,
                                   stage);
    Block *body = new Block();
    stageOp.getBody().push_back(body);
    IRMapping mapping;
    for (Value arg : args)
      mapping.map(arg, body->addArgument(arg.getType(), arg.getLoc()));

    OpBuilder inner = OpBuilder::atBlockEnd(body);
    for (Operation *op : ops) {
      for (Value operand : op->getOperands())
        if (!mapping.contains(operand))
          mapping.map(operand, materialize(operand, stage, inner));
      Operation *clone = inner.clone(*op, mapping);
      // pf-schedule reads the block back instead of re-deriving it.
      clone->setAttr(kBlockAttrName, inner.getI64IntegerAttr(blocks.blockOf.lookup(op)));
      for (Value result : op->getResults())
        for (int64_t dest : laterUsers(result, stage))
          SendOp::create(inner, op->getLoc(), mapping.lookup(result), dest, tagOf(result));
    }
    SmallVector<Value> yielded;
    for (Value v : results)
      yielded.push_back(mapping.lookup(v));
    YieldOp::create(inner, loc, yielded);
    for (auto [i, v] : llvm::enumerate(results))
      finalValues[v] = stageOp.getResult(i);
    (void)returnsValues;
    stageOp->setAttr("blocks", builder.getDenseI64ArrayAttr(blocksOfStage(stage)));
    return success();
  }

  DenseMap<Value, Value> finalValues;

private:
  /// A value defined outside this stage: a clone of a free op, or a receive.
  Value materialize(Value value, int64_t stage, OpBuilder &inner) {
    Operation *def = value.getDefiningOp();
    if (def && BlockAssignment::isFree(def)) {
      IRMapping none;
      return inner.clone(*def, none)->getResult(0);
    }
    int64_t from = stageOf(def);
    return RecvOp::create(inner, def->getLoc(), value.getType(), from, tagOf(value));
  }

  SmallVector<int64_t> blocksOfStage(int64_t stage) {
    SmallVector<int64_t> result;
    for (auto [block, s] : llvm::enumerate(stageOfBlock))
      if (s == stage)
        result.push_back(block);
    return result;
  }

  const BlockAssignment &blocks;
  ArrayRef<int64_t> stageOfBlock;
  Block &pipelineBody;
  func::FuncOp func;
  DenseMap<Value, int64_t> tags;
};

struct PartitionPass : public mlir::pf::impl::PFPartitionBase<PartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func) {
      module.emitError("pf-partition: the module has no function with a body");
      return signalPassFailure();
    }
    if (!func.getBody().front().getOps<PipelineOp>().empty()) {
      func.emitError("pf-partition: the function is already partitioned");
      return signalPassFailure();
    }
    auto blocks = assignBlocks(func);
    if (failed(blocks))
      return signalPassFailure();
    if (stages < 1 || stages > blocks->numBlocks) {
      func.emitError("pf-partition: cannot cut ")
          << blocks->numBlocks << " encoder blocks into " << int64_t(stages) << " stages"
          << (stages > blocks->numBlocks ? " (more stages than layers)" : "");
      return signalPassFailure();
    }
    if (microbatches < 1) {
      func.emitError("pf-partition: microbatches must be >= 1, got ") << int64_t(microbatches);
      return signalPassFailure();
    }
    // Recorded on the pf.pipeline, which pf-schedule and pf-split-stages read.
    if (auto s = sched::checkLimit("microbatches", microbatches, sched::kMaxMicrobatches,
                                   "kMaxMicrobatches");
        !s.ok()) {
      func.emitError("pf-partition: ") << s.message();
      return signalPassFailure();
    }
    if (failed(verifyCostOptions(func, "pf-partition", cost, profile)))
      return signalPassFailure();
    auto costs = buildCostModel(func, *blocks, cost, profile, device);
    if (failed(costs))
      return signalPassFailure();

    std::vector<double> work, memory;
    for (const auto &layer : costs->layers)
      work.push_back(layer.forward + layer.backward());
    if (memoryCapMB > 0)
      memory = blockMemoryMB(*blocks);
    auto partition = sched::partitionMinMax(
        work, int(stages), memory,
        memoryCapMB > 0 ? memoryCapMB : std::numeric_limits<double>::infinity());
    if (!partition) {
      func.emitError("pf-partition: ") << partition.error();
      return signalPassFailure();
    }
    SmallVector<int64_t> stageOfBlock(blocks->numBlocks);
    for (int s = 0; s < partition->numStages(); ++s)
      for (int b = partition->firstLayer[s]; b < partition->firstLayer[s + 1]; ++b)
        stageOfBlock[b] = s;
    rewrite(func, *blocks, stageOfBlock);
  }

  /// Weights, their gradients and two optimizer moments, plus the activations
  /// a stage keeps for its backward pass.
  std::vector<double> blockMemoryMB(const BlockAssignment &blocks) {
    std::vector<double> memory(blocks.numBlocks, 0);
    for (Operation *op : blocks.ops) {
      auto it = blocks.blockOf.find(op);
      if (it == blocks.blockOf.end())
        continue;
      for (Value v : op->getResults())
        memory[it->second] += tensorBytes(v.getType()) / 1e6;
      for (Value v : op->getOperands())
        if (v.getDefiningOp<ParamRefOp>())
          memory[it->second] += 4 * tensorBytes(v.getType()) / 1e6;
    }
    return memory;
  }

  void rewrite(func::FuncOp func, const BlockAssignment &blocks,
               ArrayRef<int64_t> stageOfBlock) {
    Block &entry = func.getBody().front();
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    OpBuilder builder(ret);
    auto pipeline = PipelineOp::create(builder, func.getLoc(), ret.getOperandTypes(),
                                       entry.getArguments(), stages, microbatches,
                                       StringRef("1f1b"));
    Block *body = new Block();
    pipeline.getBody().push_back(body);
    for (BlockArgument arg : entry.getArguments())
      body->addArgument(arg.getType(), arg.getLoc());

    OpBuilder inner = OpBuilder::atBlockEnd(body);
    StageBuilder stagesBuilder(blocks, stageOfBlock, *body, func);
    for (int64_t s = 0; s < stages; ++s)
      (void)stagesBuilder.build(s, inner);
    SmallVector<Value> outputs;
    for (Value v : ret.getOperands()) {
      if (auto it = stagesBuilder.finalValues.find(v); it != stagesBuilder.finalValues.end())
        outputs.push_back(it->second);
      else
        outputs.push_back(cloneReturnedFree(v, inner, body));
    }
    YieldOp::create(inner, func.getLoc(), outputs);
    ret->setOperands(pipeline.getResults());

    // The original ops now live in the stages.
    for (Operation *op : llvm::reverse(blocks.ops)) {
      op->dropAllUses();
      op->erase();
    }
  }

  /// A function result that is a parameter or constant (rare): read it in the
  /// pipeline body itself.
  Value cloneReturnedFree(Value v, OpBuilder &inner, Block *body) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return body->getArgument(arg.getArgNumber());
    IRMapping none;
    return inner.clone(*v.getDefiningOp(), none)->getResult(0);
  }
};
} // namespace
