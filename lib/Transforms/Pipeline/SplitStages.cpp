//===- SplitStages.cpp - a training step as per-stage functions ------------===//
//
// Splits the one-micro-batch first-order training step (loss + gradients) into
// `@stage<s>_forward` and `@stage<s>_backward` for every pipeline stage, so a
// schedule can call them in any order. Forward ops are placed by unit (`grain`:
// encoder blocks as pf-partition cuts them, or the embeddings, the blocks or
// their attention and FFN halves, and the head's parts as units of their own),
// cut into contiguous stages by a min-max partition of the units' costs;
// gradient ops go with the forward op they differentiate
// (pf-build-gradients{tag-origin} tags them). Everything that
// crosses stages becomes a named argument/result; see
// docs/pipeline-execution.md for the contract. With split-backward, each
// backward is written as two functions instead, `_backward_input` (the slice
// of the backward that the gradients sent to the previous stage depend on)
// and `_backward_weight` (the rest), for zero-bubble schedules.
//
//===----------------------------------------------------------------------===//
#include "PipelineModel.h"
#include "pf/Schedule/Limits.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Schedule/Partition.h"
#include "pf/Transforms/Pipeline/Passes.h"
#include "pf/Transforms/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <functional>
#include <limits>

namespace mlir::pf {
#define GEN_PASS_DEF_PFSPLITSTAGES
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {

enum class Phase { Forward, Backward };

/// Where an op runs: the forward or backward function of one stage.
struct Placement {
  Phase phase;
  int64_t stage;
};

/// Which ops of a placement one function holds: all of them, or with
/// split-backward one half of a backward.
enum class Part { Whole, Input, Weight };

bool isBackwardOp(Operation *op) {
  return op->hasAttr(kGradOfAttrName) || op->hasAttr(kGradSumAttrName);
}

/// A returned gradient summed from parts computed on several stages (a
/// parameter read by several stages): each stage returns the sum of its parts.
struct SplitSum {
  unsigned resultIndex;
  llvm::MapVector<int64_t, SmallVector<Value>> partsOfStage;
};

/// The values one stage function takes and returns besides graph inputs.
struct StageInterface {
  SmallVector<BlockArgument> graphInputs;
  SmallVector<std::pair<std::string, Value>> inputs;  // (pf.name, original value)
  SmallVector<std::pair<std::string, Value>> outputs; // (pf.name, original value)
};

/// A copy of `op` without the tags of pf-build-gradients (they served here).
Operation *cloneUntagged(OpBuilder &builder, Operation &op, IRMapping &mapping) {
  Operation *clone = builder.clone(op, mapping);
  for (StringRef tag : {kGradIdAttrName, kGradOfAttrName, kGradSumAttrName})
    clone->removeAttr(tag);
  return clone;
}

class StageSplitter {
public:
  StageSplitter(func::FuncOp func, int64_t numStages, bool splitBackward)
      : func(func), numStages(numStages), splitBackward(splitBackward) {}

  LogicalResult place(const BlockAssignment &blocks, ArrayRef<int64_t> stageOfBlock);
  void buildInterfaces();
  /// With `listUnits` every function gets pf.units (grain=block: pf.blocks
  /// names the units).
  void emit(ModuleOp module, ArrayRef<int64_t> stageOfUnit, ArrayRef<StageUnit> units,
            bool listUnits);

private:
  LogicalResult placeBackward(Operation *op);
  LogicalResult checkUses(Operation *user, Placement at);
  void findSplitSums();
  std::string valueId(Value v) const;
  bool byProgramOrder(Value a, Value b) const;
  StageInterface &interfaceOf(Placement p) {
    return interfaces[p.stage * 2 + (p.phase == Phase::Backward)];
  }
  StageInterface &interfaceOf(Placement p, Part part) {
    if (part == Part::Whole)
      return interfaceOf(p);
    return halfInterfaces[p.stage * 2 + (part == Part::Weight)];
  }
  bool isPlacedAt(Operation *op, Placement at) const;
  bool holds(Operation *op, Placement at, Part part) const;
  SmallVector<std::pair<unsigned, Value>> originalResultsOf(Placement at);
  void splitBackwardOf(int64_t stage);
  func::FuncOp buildFunction(OpBuilder &builder, Placement at, Part part,
                             ArrayRef<int64_t> blocks, ArrayRef<StringRef> unitNames);

  func::FuncOp func;
  int64_t numStages;
  bool splitBackward;
  DenseMap<Operation *, Placement> placeOf;
  DenseMap<Operation *, unsigned> indexOf;
  /// Last stage (its forward or backward) that reads each forward value.
  DenseMap<Value, int64_t> lastForwardUse;
  /// Earliest backward stage that reads each backward value.
  DenseMap<Value, int64_t> firstBackwardUse;
  /// Forward values read by each stage's backward.
  SmallVector<llvm::SetVector<Value>> savedOf;
  /// Graph inputs read by each stage function.
  DenseMap<BlockArgument, SmallVector<Placement>> inputUses;
  SmallVector<SplitSum> splitSums;
  DenseSet<Operation *> droppedSums;
  SmallVector<StageInterface> interfaces;
  /// With split-backward: per stage, the ops of its backward_input (the
  /// backward slice of its grad_act/* results), and the interfaces of both
  /// halves (input, weight).
  SmallVector<DenseSet<Operation *>> inputSliceOf;
  SmallVector<StageInterface> halfInterfaces;
};

LogicalResult StageSplitter::place(const BlockAssignment &blocks, ArrayRef<int64_t> stageOfBlock) {
  Block &body = func.getBody().front();
  DenseMap<int64_t, Operation *> forwardOfId;
  for (auto [i, op] : llvm::enumerate(body.without_terminator())) {
    indexOf[&op] = i;
    if (auto id = op.getAttrOfType<IntegerAttr>(kGradIdAttrName))
      forwardOfId[id.getInt()] = &op;
  }
  savedOf.resize(numStages);
  for (Operation &op : body.without_terminator()) {
    if (BlockAssignment::isFree(&op))
      continue;
    if (!isBackwardOp(&op)) {
      placeOf[&op] = {Phase::Forward, stageOfBlock[blocks.blockOf.lookup(&op)]};
      continue;
    }
    if (auto of = op.getAttrOfType<IntegerAttr>(kGradOfAttrName)) {
      Operation *forward = forwardOfId.lookup(of.getInt());
      if (!forward || !placeOf.count(forward))
        return op.emitError("pf-split-stages: cannot place this op: its '")
               << kGradOfAttrName << "' = " << of.getInt() << " names no forward op";
      placeOf[&op] = {Phase::Backward, placeOf[forward].stage};
      continue;
    }
    if (failed(placeBackward(&op)))
      return failure();
  }
  for (Value v : body.getTerminator()->getOperands())
    if (isa<BlockArgument>(v))
      return func.emitError("pf-split-stages: a result is a function argument; no stage "
                            "computes it");
  findSplitSums();
  for (Operation &op : body.without_terminator())
    if (auto it = placeOf.find(&op); it != placeOf.end() && !droppedSums.contains(&op))
      if (failed(checkUses(&op, it->second)))
        return failure();
  return success();
}

/// A sum of partial gradients runs on the earliest stage (the last backward)
/// among its parts, when all of them are there.
LogicalResult StageSplitter::placeBackward(Operation *op) {
  int64_t stage = std::numeric_limits<int64_t>::max();
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (auto it = placeOf.find(def); it != placeOf.end())
        stage = std::min(stage, it->second.stage);
  if (stage == std::numeric_limits<int64_t>::max())
    return op->emitError("pf-split-stages: cannot place this sum of gradients: no operand "
                         "comes from a stage");
  placeOf[op] = {Phase::Backward, stage};
  return success();
}

/// Returned sums (pf.grad_sum trees) whose parts lie on several stages: the
/// partial gradients of a parameter that several stages read.
void StageSplitter::findSplitSums() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, root] : llvm::enumerate(ret.getOperands())) {
    Operation *rootOp = root.getDefiningOp();
    if (!rootOp || !rootOp->hasAttr(kGradSumAttrName) || !root.hasOneUse())
      continue;
    SplitSum split{unsigned(i), {}};
    SmallVector<Operation *> sums;
    // Depth first, left to right: each stage adds its parts in the original order.
    std::function<void(Value)> collect = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasAttr(kGradSumAttrName) && v.hasOneUse()) {
        sums.push_back(def);
        for (Value operand : def->getOperands())
          collect(operand);
        return;
      }
      int64_t stage = numStages - 1;
      if (auto it = def ? placeOf.find(def) : placeOf.end(); it != placeOf.end())
        stage = it->second.stage;
      split.partsOfStage[stage].push_back(v);
    };
    collect(root);
    if (split.partsOfStage.size() < 2)
      continue;
    droppedSums.insert(sums.begin(), sums.end());
    splitSums.push_back(std::move(split));
  }
}

/// Records what `user` reads from other stage functions; fails when a value
/// would have to flow against the pipeline order.
LogicalResult StageSplitter::checkUses(Operation *user, Placement at) {
  for (Value operand : user->getOperands()) {
    if (auto arg = dyn_cast<BlockArgument>(operand)) {
      inputUses[arg].push_back(at);
      continue;
    }
    Operation *def = operand.getDefiningOp();
    auto it = placeOf.find(def);
    if (it == placeOf.end())
      continue; // free: cloned where used
    Placement from = it->second;
    bool forwardUser = at.phase == Phase::Forward;
    bool forwardDef = from.phase == Phase::Forward;
    // Forwards run in stage order, then backwards in reverse stage order.
    bool ordered = forwardDef ? from.stage <= at.stage : !forwardUser && from.stage >= at.stage;
    if (!ordered)
      return user->emitError("pf-split-stages: cannot place this op on the ")
             << (forwardUser ? "forward" : "backward") << " of stage " << at.stage
             << ": it reads a value of the " << (forwardDef ? "forward" : "backward")
             << " of stage " << from.stage << ", which runs after it";
    if (forwardDef) {
      auto [slot, inserted] = lastForwardUse.try_emplace(operand, at.stage);
      if (!inserted)
        slot->second = std::max(slot->second, at.stage);
      if (!forwardUser)
        savedOf[at.stage].insert(operand);
    } else {
      auto [slot, inserted] = firstBackwardUse.try_emplace(operand, at.stage);
      if (!inserted)
        slot->second = std::min(slot->second, at.stage);
    }
  }
  return success();
}

std::string StageSplitter::valueId(Value v) const {
  auto result = cast<OpResult>(v);
  std::string id = std::to_string(indexOf.lookup(result.getOwner()));
  if (result.getResultNumber() > 0)
    id += "#" + std::to_string(result.getResultNumber());
  return id;
}

bool StageSplitter::byProgramOrder(Value a, Value b) const {
  auto ra = cast<OpResult>(a), rb = cast<OpResult>(b);
  unsigned ia = indexOf.lookup(ra.getOwner()), ib = indexOf.lookup(rb.getOwner());
  return ia != ib ? ia < ib : ra.getResultNumber() < rb.getResultNumber();
}

void StageSplitter::buildInterfaces() {
  interfaces.resize(2 * numStages);
  auto byProgramOrder = [&](Value a, Value b) { return this->byProgramOrder(a, b); };
  auto sorted = [&](auto &map) {
    SmallVector<std::pair<Value, int64_t>> entries(map.begin(), map.end());
    llvm::sort(entries, [&](auto &a, auto &b) { return byProgramOrder(a.first, b.first); });
    return entries;
  };
  // Activations: from the defining stage to the last stage that reads them,
  // through every stage between (each stage talks to its neighbours only).
  for (auto [v, last] : sorted(lastForwardUse)) {
    int64_t from = placeOf[v.getDefiningOp()].stage;
    for (int64_t s = from; s < last; ++s) {
      interfaceOf({Phase::Forward, s}).outputs.push_back({kActivationPrefix.str() + valueId(v), v});
      interfaceOf({Phase::Forward, s + 1}).inputs.push_back({kActivationPrefix.str() + valueId(v), v});
    }
  }
  for (int64_t s = 0; s < numStages; ++s) {
    SmallVector<Value> saved(savedOf[s].begin(), savedOf[s].end());
    llvm::sort(saved, byProgramOrder);
    for (Value v : saved) {
      interfaceOf({Phase::Forward, s}).outputs.push_back({kSavedPrefix.str() + valueId(v), v});
      interfaceOf({Phase::Backward, s}).inputs.push_back({kSavedPrefix.str() + valueId(v), v});
    }
  }
  // Gradients of activations flow the other way, also stage by stage.
  for (auto [g, first] : sorted(firstBackwardUse)) {
    int64_t from = placeOf[g.getDefiningOp()].stage;
    for (int64_t s = from; s > first; --s) {
      interfaceOf({Phase::Backward, s}).outputs.push_back({kActivationGradientPrefix.str() + valueId(g), g});
      interfaceOf({Phase::Backward, s - 1}).inputs.push_back({kActivationGradientPrefix.str() + valueId(g), g});
    }
  }
  for (BlockArgument arg : func.getBody().front().getArguments())
    for (Placement p : inputUses.lookup(arg))
      if (!llvm::is_contained(interfaceOf(p).graphInputs, arg))
        interfaceOf(p).graphInputs.push_back(arg);
  if (!splitBackward)
    return;
  inputSliceOf.resize(numStages);
  halfInterfaces.resize(2 * numStages);
  for (int64_t s = 0; s < numStages; ++s)
    splitBackwardOf(s);
}

bool StageSplitter::isPlacedAt(Operation *op, Placement at) const {
  auto it = op ? placeOf.find(op) : placeOf.end();
  return it != placeOf.end() && !droppedSums.contains(op) && it->second.phase == at.phase &&
         it->second.stage == at.stage;
}

bool StageSplitter::holds(Operation *op, Placement at, Part part) const {
  if (!isPlacedAt(op, at))
    return false;
  if (part == Part::Whole)
    return true;
  return inputSliceOf[at.stage].contains(op) == (part == Part::Input);
}

/// The input half of stage s's backward is the backward slice, within the
/// stage's backward, of its grad_act/* results: what the previous stage waits
/// for. The weight half is the rest (weight gradients and their sums). The
/// weight half reads, besides graph inputs, the stage's saved/* and grad_act/*
/// arguments by their names (a host keeps them until the weight half ran) and
/// the values the input half computed for it, which the input half returns as
/// wsaved/<id>. So stage 0, which sends no gradient, has an empty input half:
/// its whole backward is deferrable weight work.
void StageSplitter::splitBackwardOf(int64_t s) {
  Placement at{Phase::Backward, s};
  const StageInterface &whole = interfaceOf(at);
  DenseSet<Operation *> &slice = inputSliceOf[s];
  SmallVector<Operation *> work;
  for (auto &entry : whole.outputs)
    work.push_back(entry.second.getDefiningOp());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!isPlacedAt(op, at) || !slice.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      work.push_back(operand.getDefiningOp());
  }

  // What each half reads from outside itself.
  DenseSet<Value> wholeInputs;
  for (auto &entry : whole.inputs)
    wholeInputs.insert(entry.second);
  DenseSet<Value> inputReads, weightReads;
  DenseSet<BlockArgument> inputGraphReads, weightGraphReads;
  auto noteRead = [&](Value v, bool byInputHalf) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      (byInputHalf ? inputGraphReads : weightGraphReads).insert(arg);
      return;
    }
    bool fromInputHalf = !byInputHalf && slice.contains(v.getDefiningOp());
    if (wholeInputs.contains(v) || fromInputHalf)
      (byInputHalf ? inputReads : weightReads).insert(v);
  };
  for (Operation &op : func.getBody().front().without_terminator())
    if (isPlacedAt(&op, at))
      for (Value operand : op.getOperands())
        noteRead(operand, slice.contains(&op));
  for (auto [i, v] : originalResultsOf(at))
    noteRead(v, false);
  for (const SplitSum &split : splitSums)
    if (auto parts = split.partsOfStage.find(s); parts != split.partsOfStage.end())
      for (Value part : parts->second)
        noteRead(part, false);

  StageInterface &input = interfaceOf(at, Part::Input);
  StageInterface &weight = interfaceOf(at, Part::Weight);
  for (BlockArgument arg : whole.graphInputs) {
    if (inputGraphReads.contains(arg))
      input.graphInputs.push_back(arg);
    if (weightGraphReads.contains(arg))
      weight.graphInputs.push_back(arg);
  }
  for (auto &entry : whole.inputs) {
    // A relayed grad_act/* (an input that is also a result) is the input half's.
    bool relayed = llvm::any_of(whole.outputs, [&](auto &out) { return out.second == entry.second; });
    if (inputReads.contains(entry.second) || relayed)
      input.inputs.push_back(entry);
    if (weightReads.contains(entry.second))
      weight.inputs.push_back(entry);
  }
  input.outputs = whole.outputs;
  SmallVector<Value> computed;
  for (Value v : weightReads)
    if (!wholeInputs.contains(v))
      computed.push_back(v);
  llvm::sort(computed, [&](Value a, Value b) { return byProgramOrder(a, b); });
  for (Value v : computed) {
    input.outputs.push_back({kWeightSavedPrefix.str() + valueId(v), v});
    weight.inputs.push_back({kWeightSavedPrefix.str() + valueId(v), v});
  }
}

/// The step's own results (loss, grad/<param>) that the function at `at`
/// returns, with their result index; a free result (a constant gradient)
/// goes to the last stage's backward.
SmallVector<std::pair<unsigned, Value>> StageSplitter::originalResultsOf(Placement at) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<std::pair<unsigned, Value>> ownResults;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (llvm::any_of(splitSums, [&](const SplitSum &s) { return s.resultIndex == i; }))
      continue;
    Operation *def = v.getDefiningOp();
    auto it = def ? placeOf.find(def) : placeOf.end();
    bool here = it != placeOf.end()
                    ? it->second.phase == at.phase && it->second.stage == at.stage
                    : at.phase == Phase::Backward && at.stage == numStages - 1;
    if (here)
      ownResults.push_back({unsigned(i), v});
  }
  return ownResults;
}

func::FuncOp StageSplitter::buildFunction(OpBuilder &builder, Placement at, Part part,
                                          ArrayRef<int64_t> blocks,
                                          ArrayRef<StringRef> unitNames) {
  StageInterface &iface = interfaceOf(at, part);
  Location loc = func.getLoc();
  MLIRContext *ctx = func.getContext();
  auto nameAttr = [&](StringRef name) {
    return DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, kNameAttrName),
                                                    StringAttr::get(ctx, name))});
  };
  // Results: this function's interface outputs, then the original results it
  // computes (the input half of a backward returns none: grad/* are weight work).
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  bool returnsOwn = part != Part::Input;
  SmallVector<std::pair<unsigned, Value>> ownResults;
  if (returnsOwn)
    ownResults = originalResultsOf(at);

  SmallVector<Type> argTypes, resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  for (BlockArgument arg : iface.graphInputs) {
    argTypes.push_back(arg.getType());
    argAttrs.push_back(func.getArgAttrDict(arg.getArgNumber()));
  }
  for (auto &[name, v] : iface.inputs) {
    argTypes.push_back(v.getType());
    argAttrs.push_back(nameAttr(name));
  }
  for (auto &[name, v] : iface.outputs) {
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(nameAttr(name));
  }
  for (auto [i, v] : ownResults) {
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(func.getResultAttrDict(i));
  }
  for (const SplitSum &split : splitSums)
    if (split.partsOfStage.count(at.stage) && at.phase == Phase::Backward && returnsOwn) {
      resultTypes.push_back(ret.getOperand(split.resultIndex).getType());
      resultAttrs.push_back(func.getResultAttrDict(split.resultIndex));
    }

  static constexpr StringLiteral backwardSuffix[] = {"_backward", "_backward_input",
                                                    "_backward_weight"};
  std::string name = "stage" + std::to_string(at.stage) +
                     (at.phase == Phase::Forward ? "_forward" : backwardSuffix[int(part)].str());
  auto stageFunc = func::FuncOp::create(builder, loc, name,
                                        FunctionType::get(ctx, argTypes, resultTypes));
  stageFunc.setAllArgAttrs(argAttrs);
  stageFunc.setAllResultAttrs(resultAttrs);
  stageFunc->setAttr(kStageAttrName, builder.getI64IntegerAttr(at.stage));
  // A stage of the embeddings or the head alone holds no encoder block.
  if (!blocks.empty())
    stageFunc->setAttr(kStageBlocksAttrName, builder.getDenseI64ArrayAttr(blocks));
  if (!unitNames.empty())
    stageFunc->setAttr(kStageUnitsAttrName, builder.getStrArrayAttr(unitNames));
  Block *body = stageFunc.addEntryBlock();

  IRMapping mapping;
  unsigned argIndex = 0;
  for (BlockArgument arg : iface.graphInputs)
    mapping.map(arg, body->getArgument(argIndex++));
  for (auto &entry : iface.inputs)
    mapping.map(entry.second, body->getArgument(argIndex++));

  OpBuilder inner = OpBuilder::atBlockEnd(body);
  auto lookup = [&](Value v) -> Value {
    if (Value mapped = mapping.lookupOrNull(v))
      return mapped;
    // Parameters and constants are read again in every function that uses them.
    IRMapping none;
    Value clone = cloneUntagged(inner, *v.getDefiningOp(), none)->getResult(0);
    mapping.map(v, clone);
    return clone;
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!holds(&op, at, part))
      continue;
    for (Value operand : op.getOperands())
      (void)lookup(operand);
    cloneUntagged(inner, op, mapping);
  }
  SmallVector<Value> results;
  for (auto &entry : iface.outputs)
    results.push_back(lookup(entry.second));
  for (auto [i, v] : ownResults)
    results.push_back(lookup(v));
  for (const SplitSum &split : splitSums) {
    if (at.phase != Phase::Backward || !returnsOwn)
      continue;
    auto parts = split.partsOfStage.find(at.stage);
    if (parts == split.partsOfStage.end())
      continue;
    Value sum;
    for (Value part : parts->second) {
      Value mapped = lookup(part);
      sum = sum ? Value(AddOp::create(inner, loc, sum, mapped)) : mapped;
    }
    results.push_back(sum);
  }
  func::ReturnOp::create(inner, loc, results);
  return stageFunc;
}

void StageSplitter::emit(ModuleOp module, ArrayRef<int64_t> stageOfUnit,
                         ArrayRef<StageUnit> units, bool listUnits) {
  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(func);
  for (int64_t s = 0; s < numStages; ++s) {
    // The encoder blocks with a unit on the stage (a block cut in its halves
    // is listed by both stages) and the units' names.
    SmallVector<int64_t> blocks;
    SmallVector<StringRef> unitNames;
    for (auto [u, stage] : llvm::enumerate(stageOfUnit)) {
      if (stage != s)
        continue;
      if (listUnits)
        unitNames.push_back(units[u].name);
      if (units[u].block >= 0 && !llvm::is_contained(blocks, units[u].block))
        blocks.push_back(units[u].block);
    }
    buildFunction(builder, {Phase::Forward, s}, Part::Whole, blocks, unitNames);
    if (!splitBackward) {
      buildFunction(builder, {Phase::Backward, s}, Part::Whole, blocks, unitNames);
      continue;
    }
    for (Part half : {Part::Input, Part::Weight})
      buildFunction(builder, {Phase::Backward, s}, half, blocks, unitNames);
  }
  func.erase();
}

/// The K-FAC factor updates of a step with pf-insert-kfac, made per call: a
/// stage function runs once per micro-batch, but the single-process step's N
/// updates of a factor form one running-average step (the first decays, each
/// adds 1/N). Each update gets the graph input `microbatch` (the host passes
/// the call's micro-batch index) and `updates` = N. The B updates' loss count
/// (a forward value of the last stage, which earlier stages' backwards run
/// without) becomes the graph input `loss_count`: the host counts the
/// micro-batch's labels, the number the loss op counts.
LogicalResult makeFactorUpdatesPerCall(func::FuncOp func, int64_t microbatches) {
  SmallVector<KFACUpdateFactorOp> updates;
  func.walk([&](KFACUpdateFactorOp op) { updates.push_back(op); });
  if (updates.empty())
    return success();
  if (microbatches < 1)
    return func.emitError("pf-split-stages: microbatches must be >= 1, got ") << microbatches;
  // Recorded as each update's count, which pf-build-rank-programs matches.
  if (auto s = sched::checkLimit("microbatches", microbatches, sched::kMaxMicrobatches,
                                 "kMaxMicrobatches");
      !s.ok())
    return func.emitError("pf-split-stages: ") << s.message();
  Type i64 = IntegerType::get(func.getContext(), 64);
  Value microbatch = getOrAddScalarArgument(func, "microbatch", i64);
  Value lossCount;
  for (KFACUpdateFactorOp update : updates) {
    if (update.getMicrobatch())
      return update.emitError("pf-split-stages: this K-FAC update is per call already (it "
                              "has a microbatch)");
    if (Value count = update.getCount()) {
      if (!count.getDefiningOp<SoftmaxCrossEntropyOp>())
        return update.emitError("pf-split-stages: the count of this K-FAC update is not the "
                                "token count of one pf.softmax_cross_entropy (was the step "
                                "split into micro-batches before?)");
      if (!lossCount)
        lossCount = getOrAddScalarArgument(func, "loss_count", i64);
      update.getCountMutable().assign(lossCount);
    }
    update.getMicrobatchMutable().assign(microbatch);
    update.setUpdates(uint64_t(microbatches));
  }
  return success();
}

struct SplitStagesPass : public mlir::pf::impl::PFSplitStagesBase<SplitStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func) {
      module.emitError("pf-split-stages: the module has no function with a body");
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock() ||
        !isa<func::ReturnOp>(func.getBody().front().getTerminator())) {
      func.emitError("pf-split-stages: expected a single-block function ending in func.return");
      return signalPassFailure();
    }
    bool hasGradients = false;
    func.walk([&](Operation *op) { hasGradients |= op->hasAttr(kGradOfAttrName); });
    if (!hasGradients) {
      func.emitError("pf-split-stages: the function has no tagged gradient ops: build the "
                     "step with pf-build-gradients{tag-origin=true}");
      return signalPassFailure();
    }
    if (failed(makeFactorUpdatesPerCall(func, microbatches)))
      return signalPassFailure();
    auto all = assignUnits(func, grain);
    if (failed(all))
      return signalPassFailure();
    int64_t numUnits = all->units.size();
    if (stages < 1 || stages > numUnits) {
      auto diag = func.emitError("pf-split-stages: cannot cut ");
      if (grain == StageGrain::Block)
        diag << all->numBlocks << " encoder blocks into " << int64_t(stages) << " stages"
             << (stages > numUnits ? " (more stages than blocks)" : "");
      else
        diag << numUnits << " units of grain=" << grainName() << " into " << int64_t(stages)
             << " stages" << (stages > numUnits ? " (more stages than units)" : "");
      return signalPassFailure();
    }
    UnitAssignment forward = forwardOnly(*all);
    auto stageOfUnit = cut(func, forward);
    if (failed(stageOfUnit))
      return signalPassFailure();

    StageSplitter splitter(func, stages, splitBackward);
    if (failed(splitter.place(forward.ops, *stageOfUnit)))
      return signalPassFailure();
    splitter.buildInterfaces();
    recordGradientOrder(module, func);
    splitter.emit(module, *stageOfUnit, forward.units, grain != StageGrain::Block);
  }

  /// The step's `grad/<param>` results in its result order: the order in
  /// which the single-process step sums the global gradient norm, which the
  /// per-rank programs' clipping repeats (pf.clip_gradients).
  static void recordGradientOrder(ModuleOp module, func::FuncOp func) {
    SmallVector<Attribute> names;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
          name && name.getValue().starts_with("grad/"))
        names.push_back(name);
    if (!names.empty())
      module->setAttr(kStepGradientsAttrName, ArrayAttr::get(module.getContext(), names));
  }

  StringRef grainName() const {
    switch (grain) {
    case StageGrain::Block:
      return "block";
    case StageGrain::Ends:
      return "ends";
    case StageGrain::Half:
      return "half";
    }
    return "?";
  }

  /// The unit assignment of the forward ops (the cost model counts the
  /// backward itself from each forward op).
  static UnitAssignment forwardOnly(const UnitAssignment &all) {
    UnitAssignment forward;
    forward.units = all.units;
    forward.numBlocks = all.numBlocks;
    forward.ops.numBlocks = all.ops.numBlocks;
    forward.ops.kfacLinears = all.ops.kfacLinears;
    for (Operation *op : all.ops.ops) {
      if (isBackwardOp(op))
        continue;
      forward.ops.ops.push_back(op);
      if (auto it = all.ops.blockOf.find(op); it != all.ops.blockOf.end())
        forward.ops.blockOf[op] = it->second;
    }
    return forward;
  }

  /// Stage of every unit: the contiguous min-max cut of the units' forward +
  /// backward costs (grain=block: pf-partition's cut of the blocks).
  FailureOr<SmallVector<int64_t>> cut(func::FuncOp func, const UnitAssignment &units) {
    if (failed(verifyCostOptions(func, "pf-split-stages", cost, profile)))
      return failure();
    auto costs = grain == StageGrain::Block
                     ? buildCostModel(func, units.ops, cost, profile, device)
                     : buildUnitCostModel(func, units, cost, profile, device, microbatches);
    if (failed(costs))
      return failure();
    std::vector<double> work;
    for (const auto &layer : costs->layers)
      work.push_back(layer.forward + layer.backward());
    auto partition = sched::partitionMinMax(work, int(stages), {},
                                            std::numeric_limits<double>::infinity());
    if (!partition)
      return func.emitError("pf-split-stages: ") << partition.error();
    SmallVector<int64_t> stageOfUnit(units.ops.numBlocks);
    for (int s = 0; s < partition->numStages(); ++s)
      for (int u = partition->firstLayer[s]; u < partition->firstLayer[s + 1]; ++u)
        stageOfUnit[u] = s;
    if (printCosts) {
      // "pf-split-stages costs (analytic a100 ...): embeddings 0.012 -> 0, ...;
      // stages 1.234 1.301 (max/mean 1.03)"
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "pf-split-stages costs (" << costs->name << ", ms per micro-batch, forward + "
         << "backward): ";
      for (auto [u, unit] : llvm::enumerate(units.units))
        os << (u ? ", " : "") << unit.name << " " << llvm::format("%.4g", work[u]) << " -> "
           << stageOfUnit[u];
      double total = 0;
      for (double c : partition->stageCost)
        total += c;
      os << "; stages";
      for (double c : partition->stageCost)
        os << " " << llvm::format("%.4g", c);
      os << " (max/mean "
         << llvm::format("%.3f", partition->maxStageCost * double(int64_t(stages)) / total)
         << ")";
      // Not a diagnostic: MLIR would print the whole step function with it.
      llvm::errs() << text << "\n";
    }
    return stageOfUnit;
  }
};

} // namespace
