//===- PFProgramOps.cpp - the per-rank program ---------------------------===//
//
// Verifiers of pf.rank_program and its ops (each op's own fields) and
// verifyRankPrograms, the checks across ranks (PFRankProgram.h).
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

#include <map>
#include <set>
#include <tuple>

#include "pf/Dialect/PF/IR/PFProgramEnums.cpp.inc"

using namespace mlir;
using namespace mlir::pf;

//===----------------------------------------------------------------------===//
// Per-op verifiers
//===----------------------------------------------------------------------===//

LogicalResult RankProgramOp::verify() {
  if (getNumRanks() < 1)
    return emitOpError("ranks must be >= 1, got ") << getNumRanks();
  if (getRankValue() < 0 || getRankValue() >= getNumRanks())
    return emitOpError("rank ") << getRankValue() << " is not in [0, " << getNumRanks() << ")";
  if (getNumMicrobatches() < 1)
    return emitOpError("microbatches must be >= 1, got ") << getNumMicrobatches();
  if (getStages().empty())
    return emitOpError("holds no stages");
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t stage : getStages())
    if (stage < 0 || !seen.insert(stage).second)
      return emitOpError("stages must be distinct and non-negative, got ") << getStagesAttr();
  return success();
}

/// Kinds that run once per micro-batch (and so name one).
static bool isPerMicrobatch(StageTaskKind kind) {
  switch (kind) {
  case StageTaskKind::KfacInverse:
  case StageTaskKind::Precondition:
  case StageTaskKind::Update:
    return false;
  default:
    return true;
  }
}

LogicalResult RunStageOp::verify() {
  auto program = (*this)->getParentOfType<RankProgramOp>();
  bool perMicrobatch = isPerMicrobatch(getKind());
  if (perMicrobatch && !getMicrobatch())
    return emitOpError("a ") << stringifyStageTaskKind(getKind()) << " needs a microbatch";
  if (!perMicrobatch && getMicrobatch())
    return emitOpError("a ") << stringifyStageTaskKind(getKind())
                             << " runs once per step and takes no microbatch";
  if (getMicrobatch() && int64_t(*getMicrobatch()) >= program.getNumMicrobatches())
    return emitOpError("microbatch ") << *getMicrobatch() << " is not in [0, "
                                      << program.getNumMicrobatches() << ")";
  if (auto inPlace = getInPlace()) {
    if (getKind() != StageTaskKind::Accumulate)
      return emitOpError("a ") << stringifyStageTaskKind(getKind())
                               << " writes no result over an input (in_place is for accumulate "
                                  "calls, whose functions are elementwise)";
    if (inPlace->size() != getOutputs().size())
      return emitOpError("in_place names ")
             << inPlace->size() << " results, but the call makes " << getOutputs().size();
    llvm::SmallSet<int64_t, 8> taken;
    for (auto [i, over] : llvm::enumerate(*inPlace)) {
      if (over == -1)
        continue;
      if (over < 0 || over >= int64_t(getInputs().size()))
        return emitOpError("in_place: result #")
               << i << " over input #" << over << ", but the call takes " << getInputs().size();
      if (!taken.insert(over).second)
        return emitOpError("in_place: input #") << over << " under two results";
      if (getInputs()[over].getType() != getOutputs()[i].getType())
        return emitOpError("in_place: result #")
               << i << " is " << getOutputs()[i].getType() << " but input #" << over << " is "
               << getInputs()[over].getType();
    }
  }
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    // An accumulate call continues the running sum of the previous one.
    auto producer = dyn_cast_or_null<RunStageOp>(input.getDefiningOp());
    if (getKind() == StageTaskKind::Accumulate && producer &&
        producer.getKind() == StageTaskKind::Accumulate)
      continue;
    std::optional<int64_t> from = microbatchOfStageValue(input);
    if (from && getMicrobatch() && *from != int64_t(*getMicrobatch()))
      return emitOpError("input #") << i << " is a value of micro-batch " << *from
                                    << ", but the call is of micro-batch " << *getMicrobatch();
  }
  return success();
}

llvm::DenseMap<Value, int64_t> mlir::pf::stageValueSlots(Operation *program) {
  llvm::DenseMap<Value, int64_t> slots;
  for (Operation &op : cast<RankProgramOp>(program).getBody().front())
    for (Value result : op.getResults())
      slots.try_emplace(result, int64_t(slots.size()));
  return slots;
}

Value mlir::pf::inPlaceOperand(Operation *op, unsigned result) {
  // An accumulate call as its in_place says (its functions are elementwise:
  // pf-build-rank-programs' buildAccumulate); the root's reduce adds the
  // other member's rows to its piece row by row (addRows); an all-reduce of
  // a value sums it where it is.
  if (auto run = dyn_cast<RunStageOp>(op)) {
    auto inPlace = run.getInPlace();
    if (!inPlace || result >= inPlace->size() || (*inPlace)[result] < 0)
      return Value();
    return run.getInputs()[size_t((*inPlace)[result])];
  }
  if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op))
    return reduce.getPiece();
  // The library sums a partial sum in place (the micro-batches' pieces are
  // summed into a fresh value); a broadcast sends its operand from there.
  if (auto sum = dyn_cast<AllReduceOp>(op))
    return sum.getOrder() == ReductionOrder::Library && sum.getInputs().size() == 1
               ? sum.getInputs().front()
               : Value();
  if (auto broadcast = dyn_cast<BroadcastOp>(op))
    return broadcast.getInput();
  // The clippings scale each gradient (update) where it is.
  if (auto clip = dyn_cast<ClipGradientsOp>(op))
    return result < clip.getGradients().size() ? clip.getGradients()[result] : Value();
  if (auto clip = dyn_cast<KfacKLClipOp>(op))
    return result < clip.getUpdates().size() ? clip.getUpdates()[result] : Value();
  return Value();
}

bool mlir::pf::isProgramCollective(Operation *op) {
  if (isa<BroadcastOp, ReduceMicrobatchOp>(op))
    return true;
  auto sum = dyn_cast<AllReduceOp>(op);
  return sum && sum.getSum() && sum.getOrder() == ReductionOrder::Library;
}

ArrayRef<int64_t> mlir::pf::collectiveMembers(Operation *op) {
  if (auto broadcast = dyn_cast<BroadcastOp>(op))
    return broadcast.getRanks();
  if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op))
    return reduce.getRanks();
  return cast<AllReduceOp>(op).getRanks();
}

SmallVector<SmallVector<int64_t>> mlir::pf::programCommGroups(Operation *program) {
  auto rankProgram = cast<RankProgramOp>(program);
  SmallVector<SmallVector<int64_t>> groups;
  for (Operation &op : rankProgram.getBody().front()) {
    if (!isProgramCollective(&op))
      continue;
    SmallVector<int64_t> members(collectiveMembers(&op));
    llvm::sort(members);
    if (int64_t(members.size()) != rankProgram.getNumRanks() && !llvm::is_contained(groups, members))
      groups.push_back(members);
  }
  return groups;
}

StageValuePlan mlir::pf::planStageValues(Operation *program, bool overlap) {
  constexpr int64_t kAlignment = 64; // PFRT_DEFAULT_ALIGNMENT
  StageValuePlan plan;
  plan.slot = stageValueSlots(program);
  Block &body = cast<RankProgramOp>(program).getBody().front();
  DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = int64_t(index);
  const int64_t end = int64_t(position.size());
  size_t count = plan.slot.size();
  plan.values.resize(count);
  plan.offset.assign(count, 0);
  plan.bytes.assign(count, 0);
  plan.releasedAfter.assign(count, nullptr);
  SmallVector<std::pair<int64_t, int64_t>> lifetime(count); // [made, released]
  SmallVector<bool> saved(count, false);
  for (auto [value, slot] : plan.slot) {
    plan.values[slot] = value;
    auto type = cast<RankedTensorType>(value.getType());
    plan.bytes[slot] = storageBytes(type);
    Operation *last = value.getDefiningOp();
    bool sent = false;
    for (Operation *user : value.getUsers()) {
      sent |= isa<SendActOp>(user);
      if (last->isBeforeInBlock(user))
        last = user;
    }
    bool unreadRecv = isa<RecvActOp>(value.getDefiningOp()) && value.use_empty();
    bool toTheEnd = overlap && (sent || unreadRecv);
    plan.releasedAfter[slot] = toTheEnd ? nullptr : last;
    lifetime[slot] = {position[value.getDefiningOp()], toTheEnd ? end : position[last]};
    saved[slot] = isa<RunStageOp>(value.getDefiningOp()) &&
                  isSavedActivationName(stageValueName(value));
  }
  // A result written over an operand (inPlaceOperand): the operand's
  // bytes, where that op is the operand's last reader and the sizes agree.
  // Any value placed before it that lives past the op overlaps the operand's
  // life too, so it holds none of those bytes; later values avoid both.
  SmallVector<std::optional<size_t>> inPlaceOf(count);
  for (Operation &op : body) {
    for (auto [index, result] : llvm::enumerate(op.getResults())) {
      Value operand = inPlaceOperand(&op, unsigned(index));
      auto found = operand ? plan.slot.find(operand) : plan.slot.end();
      if (found == plan.slot.end())
        continue;
      size_t o = size_t(found->second);
      if (plan.releasedAfter[o] == &op && operand.getType() == result.getType())
        inPlaceOf[size_t(plan.slot.lookup(result))] = o;
    }
  }
  // First fit, in program order: the lowest aligned offset whose bytes no
  // value living at the same time holds.
  for (size_t s = 0; s < count; ++s) {
    if (inPlaceOf[s]) {
      plan.offset[s] = plan.offset[*inPlaceOf[s]];
      continue;
    }
    SmallVector<std::pair<int64_t, int64_t>> taken; // [begin, end) of overlapping lives
    for (size_t t = 0; t < s; ++t)
      if (lifetime[t].first <= lifetime[s].second && lifetime[s].first <= lifetime[t].second)
        taken.push_back({plan.offset[t], plan.offset[t] + plan.bytes[t]});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, stop] : taken) {
      if (offset + plan.bytes[s] <= begin)
        break;
      offset = std::max(offset, int64_t(llvm::alignTo(stop, kAlignment)));
    }
    plan.offset[s] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + plan.bytes[s]);
  }
  // The peaks, at each op (its inputs and outputs both live, a result in
  // its operand's bytes counted once).
  for (int64_t at = 0; at <= end; ++at) {
    int64_t live = 0;
    std::set<int64_t> microbatches;
    for (size_t s = 0; s < count; ++s)
      if (lifetime[s].first <= at && at <= lifetime[s].second) {
        if (!(inPlaceOf[s] && lifetime[s].first == at))
          live += plan.bytes[s];
        if (saved[s])
          microbatches.insert(*microbatchOfStageValue(plan.values[s]));
      }
    plan.liveBytes = std::max(plan.liveBytes, live);
    plan.savedMicrobatches = std::max(plan.savedMicrobatches, int64_t(microbatches.size()));
  }
  return plan;
}

std::optional<int64_t> mlir::pf::microbatchOfStageValue(Value value) {
  Operation *def = value.getDefiningOp();
  if (auto run = dyn_cast_or_null<RunStageOp>(def); run && run.getMicrobatch())
    return int64_t(*run.getMicrobatch());
  if (auto recv = dyn_cast_or_null<RecvActOp>(def))
    return int64_t(recv.getMicrobatch());
  if (auto reduce = dyn_cast_or_null<ReduceMicrobatchOp>(def))
    return int64_t(reduce.getMicrobatch());
  return std::nullopt;
}

SmallVector<unsigned> mlir::pf::stageValuePositions(Operation *function, bool results) {
  SmallVector<unsigned> positions;
  auto func = dyn_cast_or_null<FunctionOpInterface>(function);
  if (!func)
    return positions;
  unsigned count = results ? func.getNumResults() : func.getNumArguments();
  for (unsigned i = 0; i < count; ++i)
    if (auto name = results ? func.getResultAttrOfType<StringAttr>(i, kNameAttrName)
                            : func.getArgAttrOfType<StringAttr>(i, kNameAttrName);
        name && isStageValueName(name.getValue()))
      positions.push_back(i);
  return positions;
}

StringRef mlir::pf::stageValueName(Value value) {
  auto nameOf = [](RunStageOp run, unsigned index, bool result) -> StringRef {
    Operation *function = SymbolTable::lookupNearestSymbolFrom(run, run.getStageAttr());
    SmallVector<unsigned> positions =
        stageValuePositions(function, result);
    if (index >= positions.size())
      return {};
    auto func = cast<FunctionOpInterface>(function);
    auto name = result ? func.getResultAttrOfType<StringAttr>(positions[index], kNameAttrName)
                       : func.getArgAttrOfType<StringAttr>(positions[index], kNameAttrName);
    return name ? name.getValue() : StringRef();
  };
  if (auto result = dyn_cast<OpResult>(value))
    if (auto run = dyn_cast<RunStageOp>(result.getOwner()))
      return nameOf(run, result.getResultNumber(), true);
  // A received value: as the first call reading it (in program order; the
  // use list is not in that order) names it.
  OpOperand *first = nullptr;
  for (OpOperand &use : value.getUses())
    if (isa<RunStageOp>(use.getOwner()) &&
        (!first || use.getOwner()->isBeforeInBlock(first->getOwner())))
      first = &use;
  return first ? nameOf(cast<RunStageOp>(first->getOwner()), first->getOperandNumber(), false)
               : StringRef();
}

/// The `pf.stage` of a stage function, or failure (with a diagnostic on `user`).
static FailureOr<int64_t> stageOfFunction(Operation *user, SymbolTableCollection &symbols,
                                          FlatSymbolRefAttr name) {
  auto func = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(user, name);
  if (!func)
    return user->emitOpError("references ") << name << ", which is not a function";
  auto stage = func->getAttrOfType<IntegerAttr>(kStageAttrName);
  if (!stage)
    return user->emitOpError("references ") << name << ", which has no " << kStageAttrName
                                            << " (not a stage function)";
  return stage.getInt();
}

LogicalResult RunStageOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> stage = stageOfFunction(*this, symbols, getStageAttr());
  if (failed(stage))
    return failure();
  auto program = (*this)->getParentOfType<RankProgramOp>();
  if (!program.holdsStage(*stage))
    return emitOpError("runs ") << getStageAttr() << " of stage " << *stage << ", but rank "
                                << program.getRankValue() << " holds stages "
                                << program.getStagesAttr();
  auto func = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(*this, getStageAttr());
  auto check = [&](bool results, TypeRange types) -> LogicalResult {
    SmallVector<unsigned> positions =
        stageValuePositions(func, results);
    ArrayRef<Type> declared = results ? func.getResultTypes() : func.getArgumentTypes();
    SmallVector<Type> expected;
    for (unsigned i : positions)
      expected.push_back(declared[i]);
    if (TypeRange(expected) == types)
      return success();
    InFlightDiagnostic diag = emitOpError("has ")
                              << (results ? "results " : "inputs ") << "(" << types << ") but "
                              << getStageAttr() << "'s stage-value "
                              << (results ? "results" : "arguments") << " are (";
    llvm::interleaveComma(expected, diag);
    return diag << ")";
  };
  if (failed(check(false, getInputs().getTypes())) || failed(check(true, getOutputs().getTypes())))
    return failure();
  // Each operand a call made is the value its argument names (a running sum
  // continues under its own name and is the step's gradient of its piece; a
  // reduce returns the gradient it sums).
  SmallVector<unsigned> arguments =
      stageValuePositions(func, false);
  for (auto [i, input, position] : llvm::enumerate(getInputs(), arguments)) {
    auto argument = func.getArgAttrOfType<StringAttr>(position, kNameAttrName);
    StringRef made;
    if (auto reduce = input.getDefiningOp<ReduceMicrobatchOp>())
      made = reduce.getValue();
    else if (input.getDefiningOp<RunStageOp>())
      made = stageValueName(input);
    // A once-per-step call takes a step gradient where an accumulate call's
    // running sum is the last value of it.
    if (argument && !made.empty() && made != argument.getValue() &&
        !(!isPerMicrobatch(getKind()) && pieceOfRunningSum(made) == argument.getValue()))
      return emitOpError("input #") << i << " is '" << made << "' but " << getStageAttr()
                                    << " takes '" << argument.getValue() << "' there";
  }
  // A result goes over what it is computed from: the running sum it
  // continues, or the piece it weights.
  if (auto inPlace = getInPlace()) {
    SmallVector<unsigned> results = stageValuePositions(func, true);
    for (auto [i, over] : llvm::enumerate(*inPlace)) {
      if (over < 0)
        continue;
      auto result = func.getResultAttrOfType<StringAttr>(results[i], kNameAttrName);
      auto input = func.getArgAttrOfType<StringAttr>(arguments[size_t(over)], kNameAttrName);
      if (!result || !input)
        continue;
      if (input.getValue() != result.getValue() &&
          input.getValue() != pieceOfRunningSum(result.getValue()))
        return emitOpError("in_place: result #")
               << i << " '" << result.getValue() << "' over input #" << over << " '"
               << input.getValue() << "', which it is not computed from";
    }
  }
  return success();
}

static LogicalResult verifyTransfer(Operation *op, int64_t peer, int64_t microbatch,
                                    int64_t tag, StringRef direction) {
  auto program = op->getParentOfType<RankProgramOp>();
  if (tag >= kReduceRowsTag)
    return op->emitOpError("tag ") << tag << " is not below " << kReduceRowsTag
                                   << ", the tag of the row-sparse sums' messages";
  if (peer < 0 || peer >= program.getNumRanks())
    return op->emitOpError() << direction << " rank " << peer << " is not in [0, "
                             << program.getNumRanks() << ")";
  if (peer == program.getRankValue())
    return op->emitOpError() << direction << " rank " << peer << " is its own rank";
  if (microbatch >= program.getNumMicrobatches())
    return op->emitOpError("microbatch ") << microbatch << " is not in [0, "
                                          << program.getNumMicrobatches() << ")";
  return success();
}

LogicalResult SendActOp::verify() {
  if (failed(verifyTransfer(*this, int64_t(getTo()), int64_t(getMicrobatch()),
                            int64_t(getTag()), "to")))
    return failure();
  std::optional<int64_t> from = microbatchOfStageValue(getValue());
  if (from && *from != int64_t(getMicrobatch()))
    return emitOpError("sends a value of micro-batch ")
           << *from << " as micro-batch " << getMicrobatch();
  return success();
}

LogicalResult RecvActOp::verify() {
  return verifyTransfer(*this, int64_t(getFrom()), int64_t(getMicrobatch()), int64_t(getTag()),
                        "from");
}

/// The member list of a collective: at least two distinct ranks of the
/// job, its own among them.
template <typename OpT>
static LogicalResult verifyMembers(OpT op) {
  auto program = op->template getParentOfType<RankProgramOp>();
  ArrayRef<int64_t> ranks = op.getRanks();
  if (ranks.size() < 2)
    return op.emitOpError("needs at least two ranks, got ") << op.getRanksAttr();
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t rank : ranks)
    if (rank < 0 || rank >= program.getNumRanks() || !seen.insert(rank).second)
      return op.emitOpError("ranks must be distinct and in [0, ")
             << program.getNumRanks() << "), got " << op.getRanksAttr();
  if (!seen.contains(program.getRankValue()))
    return op.emitOpError("ranks ") << op.getRanksAttr() << " do not include its own rank "
                                    << program.getRankValue();
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty() != !getSum())
    return emitOpError("sums operands into a result, or a named parameter with neither");
  if (getInputs().empty()) {
    // A gradient or the loss is a value of the program.
    if (getValue() == kLossSumName || getValue().starts_with(kGradientPrefix))
      return emitOpError("sums '") << getValue()
                                   << "' by name, but gradients and the loss are summed as "
                                      "values of the program (operands in, the sum out)";
    if (getOrder() == ReductionOrder::Library)
      return emitOpError("order(library) sums an operand (a partial sum), not the named '")
             << getValue() << "'";
    return verifyMembers(*this);
  }
  if (getValue() != kLossSumName && !getValue().starts_with(kGradientPrefix))
    return emitOpError("sums the operands '")
           << getValue() << "', but only '" << kLossSumName
           << "' and gradients (grad/*) are summed as values";
  for (Value input : getInputs())
    if (input.getType() != getType())
      return emitOpError("operands are ") << getType() << " (the op's type), got "
                                          << input.getType();
  if (getSum().getType() != getType())
    return emitOpError("result is ") << getType() << " (the op's type), got "
                                     << getSum().getType();
  if (getOrder() != ReductionOrder::Library)
    return emitOpError("sums a value as the library adds it, order(library); a gradient's "
                       "pieces are summed in one process's order by pf-build-rank-programs "
                       "(reduces, sends, accumulate calls and a broadcast), not by "
                       "pf.all_reduce");
  if (getInputs().size() != 1)
    return emitOpError("order(library) sums one partial sum per member, got ")
           << getInputs().size() << " operands";
  return verifyMembers(*this);
}

/// A collective with a root: its members, the root among them.
template <typename OpT>
static LogicalResult verifyRootedMembers(OpT op) {
  if (failed(verifyMembers(op)))
    return failure();
  if (!llvm::is_contained(op.getRanks(), int64_t(op.getRoot())))
    return op.emitOpError("root ") << op.getRoot() << " is not one of ranks " << op.getRanksAttr();
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifyRootedMembers(*this)))
    return failure();
  bool isRoot = int64_t(getRoot()) == (*this)->getParentOfType<RankProgramOp>().getRankValue();
  if (!getResult())
    return emitOpError("returns the root's value on every member");
  // The root hands its operand over; every member returns the root's value.
  if (isRoot != bool(getInput()))
    return emitOpError(isRoot ? "on the root takes the value it hands over"
                              : "takes no operand off the root (it receives the root's value)");
  if (getResult().getType() != getType() || (getInput() && getInput().getType() != getType()))
    return emitOpError("operand and result are ") << getType() << " (the op's type)";
  return success();
}

LogicalResult ReduceMicrobatchOp::verify() {
  if (failed(verifyRootedMembers(*this)))
    return failure();
  // The root adds the other member's piece to its own (a + b, exact in any
  // order); with more members the association would be the library's.
  if (getRanks().size() != 2)
    return emitOpError("sums the pieces of exactly two ranks, got ") << getRanksAttr();
  auto program = (*this)->getParentOfType<RankProgramOp>();
  if (int64_t(getMicrobatch()) >= program.getNumMicrobatches())
    return emitOpError("microbatch ")
           << getMicrobatch() << " is not in [0, " << program.getNumMicrobatches() << ")";
  if (kReduceRowsTag + int64_t(getMicrobatch()) > kLargestPortableTag)
    return emitOpError("microbatch ")
           << getMicrobatch() << ": its rows' tag " << kReduceRowsTag << " + "
           << getMicrobatch() << " is past " << kLargestPortableTag
           << ", the largest tag every MPI accepts";
  if (getPiece().getType() != getType() || (getSum() && getSum().getType() != getType()))
    return emitOpError("piece and sum are ") << getType() << " (the op's type)";
  // The root sums into its result; the other member hands its piece over.
  bool isRoot = int64_t(getRoot()) == program.getRankValue();
  if (isRoot != bool(getSum()))
    return emitOpError(isRoot ? "on the root returns the sum"
                              : "hands the piece to the root and returns nothing");
  std::optional<int64_t> from = microbatchOfStageValue(getPiece());
  if (from && *from != int64_t(getMicrobatch()))
    return emitOpError("piece is a value of micro-batch ")
           << *from << ", but the reduce is of micro-batch " << getMicrobatch();
  return success();
}

LogicalResult StepResultOp::verify() {
  auto type = cast<RankedTensorType>(getValue().getType());
  if (getName().starts_with(kGradientPrefix) && getName().size() > kGradientPrefix.size()) {
    if (!isa<FloatType>(type.getElementType()))
      return emitOpError("gradient '") << getName() << "' is not a float tensor, got " << type;
  } else if (getName() != kLossName) {
    return emitOpError("reports '") << getName() << "', but the step's results are '"
                                    << kLossName << "' and its gradients (grad/<param>)";
  } else if (type.getRank() != 0 || !type.getElementType().isF32()) {
    return emitOpError("'") << getName() << "' is an f32 scalar (tensor<f32>), got " << type;
  }
  return success();
}

static LogicalResult verifyGradientOrder(Operation *op, ArrayAttr order);

static LogicalResult verifyNamedGradients(Operation *op, ArrayAttr names, ArrayAttr order,
                                          ValueRange operands, ValueRange results,
                                          StringRef operandKind);

LogicalResult ClipGradientsOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(maxNorm > 0) || !std::isfinite(maxNorm))
    return emitOpError("max_norm must be positive and finite, got ") << maxNorm;
  if (failed(verifyGradientOrder(*this, getOrder())))
    return failure();
  if (getCounted().size() != getNames().size())
    return emitOpError("counted has ") << getCounted().size() << " entries for "
                                       << getNames().size() << " names";
  return verifyNamedGradients(*this, getNames(), getOrder(), getGradients(), getClipped(),
                              "gradient");
}

/// The operands of a step-end collective on gradients: one distinct name
/// of `order` each, and a result of the same type each (the operand
/// scaled in its bytes).
static LogicalResult verifyNamedGradients(Operation *op, ArrayAttr names, ArrayAttr order,
                                          ValueRange operands, ValueRange results,
                                          StringRef operandKind) {
  if (names.size() != operands.size() || results.size() != operands.size())
    return op->emitOpError("names ") << names.size() << " " << operandKind << "s for "
                                     << operands.size() << " operands and " << results.size()
                                     << " results (one each)";
  llvm::StringSet<> seen;
  for (auto [i, entry] : llvm::enumerate(names)) {
    StringRef name = cast<StringAttr>(entry).getValue();
    if (!llvm::is_contained(order.getValue(), entry))
      return op->emitOpError(operandKind) << " #" << i << " '" << name << "' is not in the order";
    if (!seen.insert(name).second)
      return op->emitOpError("names '") << name << "' twice";
    if (operands[i].getType() != results[i].getType())
      return op->emitOpError("result #") << i << " is " << results[i].getType() << " but "
                                         << operandKind << " #" << i << " is "
                                         << operands[i].getType();
  }
  return success();
}

/// `order` of a clipping op: distinct grad/<parameter> names.
static LogicalResult verifyGradientOrder(Operation *op, ArrayAttr order) {
  if (order.empty())
    return op->emitOpError("order names no gradient");
  llvm::StringSet<> seen;
  for (Attribute entry : order) {
    StringRef name = cast<StringAttr>(entry).getValue();
    if (!name.starts_with("grad/") || name.size() == 5)
      return op->emitOpError("order entry '") << name << "' is not a grad/<parameter> name";
    if (!seen.insert(name).second)
      return op->emitOpError("order names '") << name << "' twice";
  }
  return success();
}

LogicalResult KfacKLClipOp::verify() {
  double kappa = getKappa().convertToDouble();
  if (!(kappa > 0) || !std::isfinite(kappa))
    return emitOpError("kappa must be positive and finite, got ") << kappa;
  if (failed(verifyGradientOrder(*this, getOrder())))
    return failure();
  if (getGradients().size() != getUpdates().size())
    return emitOpError("takes the gradient of each update, got ")
           << getUpdates().size() << " updates and " << getGradients().size() << " gradients";
  for (auto [i, update, gradient] : llvm::enumerate(getUpdates(), getGradients()))
    if (update.getType() != gradient.getType())
      return emitOpError("update #") << i << " is " << update.getType() << " but its gradient is "
                                     << gradient.getType();
  if (getCounted().size() != getNames().size())
    return emitOpError("counted has ") << getCounted().size() << " entries for "
                                       << getNames().size() << " names";
  return verifyNamedGradients(*this, getNames(), getOrder(), getUpdates(), getClipped(),
                              "update");
}

//===----------------------------------------------------------------------===//
// verifyRankPrograms
//===----------------------------------------------------------------------===//

namespace {

/// One rank's program and its ops in order.
struct Program {
  RankProgramOp op;
  SmallVector<Operation *> ops;
};

/// Where an op is, for diagnostics: "rank 1, op 3".
struct Position {
  int64_t rank;
  size_t index;
};

std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto named = [](Value value) {
    StringRef name = stageValueName(value);
    return name.empty() ? std::string() : "'" + name.str() + "' ";
  };
  if (auto send = dyn_cast<SendActOp>(op))
    os << "send of " << named(send.getValue()) << "(micro-batch " << send.getMicrobatch()
       << ") to rank " << send.getTo() << ", tag " << send.getTag();
  else if (auto recv = dyn_cast<RecvActOp>(op))
    os << "recv of " << named(recv.getValue()) << "(micro-batch " << recv.getMicrobatch()
       << ") from rank " << recv.getFrom() << ", tag " << recv.getTag();
  else if (auto reduce = dyn_cast<AllReduceOp>(op))
    os << "all_reduce of '" << reduce.getValue() << "' over ranks " << reduce.getRanksAttr();
  else if (auto broadcast = dyn_cast<BroadcastOp>(op))
    os << "broadcast of '" << broadcast.getValue() << "' from rank " << broadcast.getRoot()
       << " over ranks " << broadcast.getRanksAttr();
  else if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op))
    os << "reduce of '" << reduce.getValue() << "' (micro-batch " << reduce.getMicrobatch()
       << ") to rank " << reduce.getRoot() << " over ranks " << reduce.getRanksAttr();
  else if (auto run = dyn_cast<RunStageOp>(op))
    os << stringifyStageTaskKind(run.getKind()) << " " << run.getStageAttr();
  else if (isa<ClipGradientsOp, KfacKLClipOp>(op))
    os << op->getName().stripDialect();
  else if (auto result = dyn_cast<StepResultOp>(op))
    os << "step_result '" << result.getName() << "'";
  return text;
}

class Checker {
public:
  /// Checks the set of programs of one step: those without `window_step`
  /// (the default) or those of window step `windowStep`.
  Checker(ModuleOp module, std::optional<int64_t> windowStep = std::nullopt)
      : module(module), windowStep(windowStep) {}

  LogicalResult run() {
    if (failed(collect()))
      return failure();
    bool ok = succeeded(checkTransfers());
    ok &= succeeded(checkAllReduces());
    ok &= succeeded(checkBroadcasts());
    ok &= succeeded(checkReduces());
    ok &= succeeded(checkAccumulates());
    ok &= succeeded(checkStepResults());
    ok &= succeeded(checkStagePasses());
    ok &= succeeded(checkStepEnd());
    ok &= succeeded(checkKfacStepEnd());
    ok &= succeeded(checkCountedOnce<ClipGradientsOp>());
    ok &= succeeded(checkCountedOnce<KfacKLClipOp>());
    ok &= succeeded(checkKfacInverses());
    // A deadlock report is only meaningful once every message has its match.
    if (!ok)
      return failure();
    return simulate();
  }

private:
  ModuleOp module;
  std::optional<int64_t> windowStep;
  SymbolTableCollection symbols;
  SmallVector<Program> programs; // by rank
  int64_t numMicrobatches = 0;

  InFlightDiagnostic error(Position at) {
    return programs[at.rank].ops[at.index]->emitError()
           << "rank " << at.rank << ", op " << at.index << ": ";
  }
  Operation *opAt(Position at) { return programs[at.rank].ops[at.index]; }

  LogicalResult collect() {
    SmallVector<RankProgramOp> found;
    for (RankProgramOp program : module.getOps<RankProgramOp>()) {
      std::optional<uint64_t> step = program.getWindowStep();
      if (step.has_value() == windowStep.has_value() && (!step || int64_t(*step) == *windowStep))
        found.push_back(program);
    }
    if (found.empty())
      return module.emitError("no pf.rank_program to verify");
    int64_t numRanks = found.front().getNumRanks();
    numMicrobatches = found.front().getNumMicrobatches();
    programs.resize(numRanks);
    for (RankProgramOp program : found) {
      if (program.getNumRanks() != numRanks || program.getNumMicrobatches() != numMicrobatches)
        return program.emitError("rank ")
               << program.getRankValue() << ": ranks(" << program.getNumRanks()
               << ") microbatches(" << program.getNumMicrobatches()
               << ") differ from the first program's ranks(" << numRanks << ") microbatches("
               << numMicrobatches << ")";
      Program &slot = programs[program.getRankValue()];
      if (slot.op)
        return program.emitError("rank ") << program.getRankValue() << " has a second program";
      slot.op = program;
      for (Operation &op : program.getBody().front())
        slot.ops.push_back(&op);
    }
    for (auto [rank, program] : llvm::enumerate(programs))
      if (!program.op)
        return module.emitError("no pf.rank_program for rank ")
               << rank << " of " << numRanks;
    return success();
  }

  /// (sender, receiver, tag): what identifies a message.
  using MessageKey = std::tuple<int64_t, int64_t, int64_t>;

  LogicalResult checkTransfers() {
    std::map<MessageKey, SmallVector<Position>> sends, recvs;
    for (auto [rank, program] : llvm::enumerate(programs))
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        Position at{int64_t(rank), index};
        if (auto send = dyn_cast<SendActOp>(op))
          sends[{at.rank, int64_t(send.getTo()), int64_t(send.getTag())}].push_back(at);
        else if (auto recv = dyn_cast<RecvActOp>(op))
          recvs[{int64_t(recv.getFrom()), at.rank, int64_t(recv.getTag())}].push_back(at);
      }
    bool ok = true;
    for (auto &[key, positions] : sends) {
      auto [from, to, tag] = key;
      size_t matches = recvs.count(key) ? recvs[key].size() : 0;
      if (positions.size() > 1) {
        ok = false;
        error(positions[1]) << "a second send to rank " << to << " with tag " << tag
                            << " (the first is op " << positions[0].index
                            << "): tags must identify messages";
        continue;
      }
      if (matches == 0) {
        ok = false;
        error(positions[0]) << describe(opAt(positions[0])) << " has no matching recv on rank "
                            << to;
        continue;
      }
      if (matches > 1) {
        ok = false;
        error(recvs[key][1]) << "a second recv from rank " << from << " with tag " << tag
                             << " (the first is op " << recvs[key][0].index << ")";
        continue;
      }
      ok &= succeeded(checkPair(positions[0], recvs[key][0]));
    }
    for (auto &[key, positions] : recvs)
      if (!sends.count(key)) {
        ok = false;
        error(positions[0]) << describe(opAt(positions[0])) << " has no matching send on rank "
                            << std::get<0>(key);
      }
    return success(ok);
  }

  LogicalResult checkPair(Position sendAt, Position recvAt) {
    auto send = cast<SendActOp>(opAt(sendAt));
    auto recv = cast<RecvActOp>(opAt(recvAt));
    if (send.getValue().getType() != recv.getType()) {
      InFlightDiagnostic diag = error(recvAt)
                                << describe(recv) << " expects " << recv.getType()
                                << " but rank " << sendAt.rank << " sends "
                                << send.getValue().getType();
      diag.attachNote(send.getLoc()) << "the send (rank " << sendAt.rank << ", op "
                                     << sendAt.index << ")";
      return failure();
    }
    StringRef sent = stageValueName(send.getValue()), received = stageValueName(recv.getValue());
    if (send.getMicrobatch() != recv.getMicrobatch() ||
        (!sent.empty() && !received.empty() && sent != received)) {
      InFlightDiagnostic diag = error(recvAt) << describe(recv) << " matches the "
                                              << describe(send) << " of another value";
      diag.attachNote(send.getLoc()) << "the send (rank " << sendAt.rank << ", op "
                                     << sendAt.index << ")";
      return failure();
    }
    return success();
  }

  /// Whether `member`'s program has an op like `op`.
  template <typename OpT>
  bool hasCounterpart(int64_t member, OpT op) {
    return llvm::any_of(programs[member].ops, [&](Operation *other) {
      auto peer = dyn_cast<OpT>(other);
      if (!peer || peer.getValue() != op.getValue() || peer.getRanks() != op.getRanks() ||
          peer.getType() != op.getType())
        return false;
      if constexpr (std::is_same_v<OpT, ReduceMicrobatchOp>)
        return peer.getRoot() == op.getRoot() && peer.getMicrobatch() == op.getMicrobatch();
      if constexpr (std::is_same_v<OpT, AllReduceOp>)
        return peer.getOrder() == op.getOrder() && bool(peer.getSum()) == bool(op.getSum());
      if constexpr (std::is_same_v<OpT, BroadcastOp>)
        return peer.getRoot() == op.getRoot() && bool(peer.getResult()) == bool(op.getResult());
      return true;
    });
  }

  /// Each member of a collective over some ranks has the same op (value,
  /// ranks, type and, for a broadcast, root); `visit` checks more per op.
  template <typename OpT>
  LogicalResult checkMembers(StringRef what, function_ref<bool(OpT, Position)> visit) {
    bool ok = true;
    for (auto [rank, program] : llvm::enumerate(programs))
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        auto collective = dyn_cast<OpT>(op);
        if (!collective)
          continue;
        Position at{int64_t(rank), index};
        for (int64_t member : collective.getRanks())
          if (!hasCounterpart(member, collective)) {
            ok = false;
            error(at) << describe(collective) << " : " << collective.getType()
                      << " has no counterpart of the same " << what << " on rank " << member;
          }
        ok &= visit(collective, at);
      }
    return success(ok);
  }

  /// Every member of an all_reduce runs one of the same value, ranks, order
  /// and type.
  LogicalResult checkAllReduces() {
    return checkMembers<AllReduceOp>("ranks, order and type",
                                     [](AllReduceOp, Position) { return true; });
  }

  /// Every member of a broadcast runs one of the same value, root, ranks and
  /// type; the root computes the value before it (a step-end call returning
  /// it, or a pf.reduce_microbatch summing it there) and the others do not (they take
  /// the root's).
  LogicalResult checkBroadcasts() {
    return checkMembers<BroadcastOp>(
        "root, ranks and type",
        [&](BroadcastOp broadcast, Position at) { return checkBroadcastSource(broadcast, at); });
  }

  bool checkBroadcastSource(BroadcastOp broadcast, Position at) {
    std::optional<size_t> computedAt, reducedAt, summedAt, clipAt;
    for (size_t i = 0; i < at.index; ++i) {
      Operation *op = programs[at.rank].ops[i];
      if (auto run = dyn_cast<RunStageOp>(op);
          run && !run.getMicrobatch() && returns(run, broadcast.getValue()) && !computedAt)
        computedAt = i;
      if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op);
          reduce && reduce.getValue() == broadcast.getValue())
        reducedAt = i;
      // The bitwise mode's exact sum (pf-build-rank-programs): the root's
      // accumulate calls' running sum, or with one micro-batch the piece it
      // received.
      if (auto run = dyn_cast<RunStageOp>(op);
          run && run.getMicrobatch() && run.getKind() == StageTaskKind::Accumulate &&
          returns(run, runningSumName(broadcast.getValue())))
        summedAt = i;
      if (auto recv = dyn_cast<RecvActOp>(op);
          recv && stageValueName(recv.getValue()) == broadcast.getValue())
        summedAt = i;
      if (isa<ClipGradientsOp>(op) && !clipAt)
        clipAt = i;
    }
    // A gradient summed by pf.reduce_microbatch: the root's accumulated sum, handed back
    // before the clipping reads it.
    if (reducedAt && clipAt) {
      error(at) << describe(broadcast) << " comes after clip_gradients (op " << *clipAt
                << "), which needs the summed gradient on every member";
      return false;
    }
    bool isRoot = int64_t(broadcast.getRoot()) == at.rank;
    if (isRoot && !computedAt && !reducedAt && !summedAt) {
      error(at) << describe(broadcast)
                << ": no step-end call on the root computes it before the broadcast (nor "
                   "do its accumulate calls or a pf.reduce_microbatch sum it there)";
      return false;
    }
    if (!isRoot && computedAt) {
      error(at) << describe(broadcast) << ": this rank computes it too (op " << *computedAt
                << "), but takes the root's";
      return false;
    }
    return true;
  }

  /// Every member of a reduce runs one of the same value, micro-batch, root,
  /// ranks and type, after a call of that micro-batch returned the value on
  /// its rank. The root accumulates the micro-batch's value only after the
  /// reduce (the sum); the others never (they handed theirs over).
  /// Both members also reduce a value's micro-batches in the same order (the
  /// root matches the pieces in the order they were posted).
  LogicalResult checkReduces() {
    bool ok = succeeded(checkMembers<ReduceMicrobatchOp>(
        "micro-batch, root, ranks and type",
        [&](ReduceMicrobatchOp reduce, Position at) { return checkReduceSource(reduce, at); }));
    // rank -> value -> (its root, the micro-batches in program order)
    std::map<int64_t, std::map<std::string, std::pair<int64_t, SmallVector<int64_t>>>> order;
    for (auto [rank, program] : llvm::enumerate(programs))
      for (Operation *op : program.ops)
        if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op)) {
          auto &[root, micro] = order[int64_t(rank)][reduce.getValue().str()];
          root = int64_t(reduce.getRoot());
          micro.push_back(int64_t(reduce.getMicrobatch()));
        }
    for (auto &[rank, values] : order)
      for (auto &[value, rootAndMicro] : values) {
        const auto &[root, micro] = rootAndMicro;
        if (root == rank || root < 0 || root >= int64_t(programs.size()))
          continue;
        const SmallVector<int64_t> &atRoot = order[root][value].second;
        if (atRoot == micro)
          continue;
        ok = false;
        InFlightDiagnostic diag = programs[rank].op.emitError("rank ")
                                  << rank << " reduces '" << value << "' in micro-batch order [";
        llvm::interleaveComma(micro, diag);
        diag << "] but its root, rank " << root << ", in [";
        llvm::interleaveComma(atRoot, diag);
        diag << "] (the root takes the pieces in the order they are posted)";
      }
    return success(ok);
  }

  bool checkReduceSource(ReduceMicrobatchOp reduce, Position at) {
    const Program &program = programs[at.rank];
    auto ofMicrobatch = [&](RunStageOp run) {
      return run && run.getMicrobatch() && *run.getMicrobatch() == reduce.getMicrobatch();
    };
    bool returned = false;
    for (size_t i = 0; i < at.index; ++i)
      if (auto run = dyn_cast<RunStageOp>(program.ops[i]);
          ofMicrobatch(run) && run.getKind() != StageTaskKind::Accumulate &&
          returns(run, reduce.getValue()))
        returned = true;
    if (!returned) {
      error(at) << describe(reduce) << ": no call of micro-batch " << reduce.getMicrobatch()
                << " on this rank returns it before the reduce";
      return false;
    }
    bool isRoot = int64_t(reduce.getRoot()) == at.rank;
    for (auto [index, op] : llvm::enumerate(program.ops)) {
      auto run = dyn_cast<RunStageOp>(op);
      if (!ofMicrobatch(run) || run.getKind() != StageTaskKind::Accumulate ||
          !takes(run, reduce.getValue()))
        continue;
      if (!isRoot) {
        error(at) << describe(reduce) << ": this rank hands its piece to the root but "
                  << describe(run) << " (op " << index << ") accumulates it";
        return false;
      }
      if (index < at.index) {
        error(at) << describe(reduce) << " comes after " << describe(run) << " (op " << index
                  << "), which accumulates the micro-batch's sum";
        return false;
      }
    }
    return true;
  }

  /// Each accumulation of a rank (pf-build-rank-programs' count-weighted
  /// sum of gradients: the accumulate calls returning the same running sums,
  /// one function per position) runs once per micro-batch whose pieces it
  /// takes, in micro-batch order (the order of the single-process sum), and
  /// takes every such piece the rank returns: all micro-batches of a stage
  /// only this rank runs; a replica's own micro-batches, whose partial sum a
  /// pf.all_reduce order(library) completes. After its first call each one
  /// takes the running sums it continues. A rank holds one piece of a
  /// gradient per micro-batch: no two of its calls return the same `grad/*`
  /// (or a same-rank `grad_part/*`) of one micro-batch, and an accumulate
  /// call takes only pieces a call of its micro-batch returned before it.
  LogicalResult checkAccumulates() {
    bool ok = true;
    auto isPiece = [](StringRef name) {
      return name.starts_with(kGradientPrefix) || name.starts_with(kGradientPartPrefix);
    };
    for (auto [rank, program] : llvm::enumerate(programs)) {
      std::set<std::pair<std::string, int64_t>> returned; // (piece, micro-batch)
      /// The sums it returns -> the micro-batches accumulated, the pieces
      /// taken, and its first call.
      struct Accumulation {
        std::set<int64_t> micros;
        std::set<std::string> pieces;
        size_t first = 0;
      };
      std::map<std::string, Accumulation> accumulations;
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        // A piece the other member sent (the bitwise mode's exact sums)
        // is this rank's to accumulate.
        if (auto recv = dyn_cast<RecvActOp>(op))
          if (StringRef name = stageValueName(recv.getValue()); isPiece(name))
            returned.insert({name.str(), int64_t(recv.getMicrobatch())});
        auto run = dyn_cast<RunStageOp>(op);
        if (!run || !run.getMicrobatch())
          continue;
        int64_t micro = int64_t(*run.getMicrobatch());
        Position at{int64_t(rank), index};
        if (run.getKind() != StageTaskKind::Accumulate) {
          for (const std::string &name : resultNames(run))
            if (isPiece(name) && !returned.insert({name, micro}).second) {
              ok = false;
              error(at) << describe(run) << " returns '" << name << "' of micro-batch " << micro
                        << " a second time on this rank (a rank holds one piece per "
                           "micro-batch: two stages of one rank sum theirs by an accumulate "
                           "call taking the first's as grad_part/*)";
            }
          continue;
        }
        SmallVector<std::string> sums = resultNames(run);
        auto [it, fresh] = accumulations.try_emplace(llvm::join(sums, ","));
        Accumulation &sum = it->second;
        if (fresh)
          sum.first = index;
        for (const std::string &name : namesOf(run, false)) {
          if (!isPiece(name))
            continue;
          sum.pieces.insert(name);
          if (!returned.count({name, micro})) {
            ok = false;
            error(at) << describe(run) << " of micro-batch " << micro << " takes '" << name
                      << "', which no call of that micro-batch returned on this rank before it";
          }
        }
        if (!sum.micros.empty() && micro <= *sum.micros.rbegin()) {
          ok = false;
          error(at) << describe(run) << " of micro-batch " << micro
                    << " out of order: micro-batch " << *sum.micros.rbegin()
                    << " was accumulated before it (the sum runs in micro-batch order)";
          continue;
        }
        sum.micros.insert(micro);
        if (!fresh)
          for (const std::string &name : sums)
            if (StringRef(name).starts_with(kGradientSumPrefix) && !takes(run, name)) {
              ok = false;
              error(at) << describe(run) << " of micro-batch " << micro
                        << " does not take the running sum '" << name << "' it continues";
            }
      }
      // Every piece of an accumulated gradient this rank returns is added.
      for (auto &[sums, sum] : accumulations) {
        std::set<int64_t> missing;
        for (const auto &[name, micro] : returned)
          if (sum.pieces.count(name) && !sum.micros.count(micro))
            missing.insert(micro);
        if (missing.empty())
          continue;
        ok = false;
        auto diag = error({int64_t(rank), sum.first});
        diag << "the accumulation of " << sums << " adds " << sum.micros.size()
             << " micro-batches but not micro-batch(es) [";
        llvm::interleaveComma(missing, diag);
        diag << "], whose pieces this rank returns";
      }
    }
    return success(ok);
  }

  /// The loss and each gradient leave the step once, from one rank (a
  /// gradient summed over ranks from the one counting it); a program
  /// without any report makes no loss.
  LogicalResult checkStepResults() {
    std::map<std::string, Position> reports; // the loss and gradients -> the report
    bool ok = true;
    for (auto [rank, program] : llvm::enumerate(programs)) {
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        auto result = dyn_cast<StepResultOp>(op);
        if (!result)
          continue;
        Position at{int64_t(rank), index};
        auto [earlier, fresh] = reports.try_emplace(result.getName().str(), at);
        if (!fresh) {
          ok = false;
          error(at) << describe(op) << " is reported a second time (rank "
                    << earlier->second.rank << ", op " << earlier->second.index
                    << " reports it)";
        }
      }
    }
    return success(ok);
  }

  /// The `pf.name`s of the call's function's arguments or results, sorted.
  SmallVector<std::string> namesOf(RunStageOp run, bool results) {
    SmallVector<std::string> names;
    auto func = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
    unsigned count = !func ? 0 : results ? func.getNumResults() : func.getNumArguments();
    for (unsigned i = 0; i < count; ++i)
      if (auto attr = results ? func.getResultAttrOfType<StringAttr>(i, kNameAttrName)
                              : func.getArgAttrOfType<StringAttr>(i, kNameAttrName))
        names.push_back(attr.getValue().str());
    llvm::sort(names);
    return names;
  }
  SmallVector<std::string> resultNames(RunStageOp run) { return namesOf(run, true); }

  /// Whether the call's function takes an argument named `name`.
  bool takes(RunStageOp run, StringRef name) {
    return llvm::is_contained(namesOf(run, false), name.str());
  }

  /// Whether the call's function returns a value named `name`.
  bool returns(RunStageOp run, StringRef name) {
    return llvm::is_contained(namesOf(run, true), name.str());
  }

  /// The stage of a call (its function's pf.stage; the op verifier checked it).
  int64_t stageOf(RunStageOp run) {
    auto func = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
    return func->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
  }

  /// Per stage and micro-batch: one forward, one backward (fused, or an input
  /// half followed by a weight half), the forward first and on the same rank.
  LogicalResult checkStagePasses() {
    using Key = std::tuple<int64_t, int64_t, StageTaskKind>; // stage, micro-batch, kind
    std::map<Key, SmallVector<Position>> calls;
    std::set<int64_t> stages;
    for (auto [rank, program] : llvm::enumerate(programs)) {
      stages.insert(program.op.getStages().begin(), program.op.getStages().end());
      for (auto [index, op] : llvm::enumerate(program.ops))
        if (auto run = dyn_cast<RunStageOp>(op); run && run.getMicrobatch())
          calls[{stageOf(run), int64_t(*run.getMicrobatch()), run.getKind()}].push_back(
              {int64_t(rank), index});
    }
    auto positions = [&](int64_t stage, int64_t micro, StageTaskKind kind) {
      auto it = calls.find({stage, micro, kind});
      return it == calls.end() ? SmallVector<Position>() : it->second;
    };
    bool ok = true;
    for (int64_t stage : stages)
      for (int64_t micro = 0; micro < numMicrobatches; ++micro) {
        auto forwards = positions(stage, micro, StageTaskKind::Forward);
        auto backwards = positions(stage, micro, StageTaskKind::Backward);
        auto inputHalves = positions(stage, micro, StageTaskKind::BackwardInput);
        auto weightHalves = positions(stage, micro, StageTaskKind::BackwardWeight);
        llvm::append_range(backwards, inputHalves);
        if (forwards.empty() || backwards.empty()) {
          ok = false;
          RankProgramOp holder = holderOf(stage);
          holder.emitError("stage ") << stage << " micro-batch " << micro << " has no "
                                     << (forwards.empty() ? "forward" : "backward")
                                     << " on any rank";
          continue;
        }
        if (forwards.size() > 1 || backwards.size() > 1) {
          ok = false;
          Position second = forwards.size() > 1 ? forwards[1] : backwards[1];
          Position first = forwards.size() > 1 ? forwards[0] : backwards[0];
          error(second) << (forwards.size() > 1 ? "forward" : "backward") << " of stage "
                        << stage << " micro-batch " << micro << " runs a second time (first: rank "
                        << first.rank << ", op " << first.index << ")";
          continue;
        }
        ok &= succeeded(checkBefore(forwards[0], backwards[0], stage, micro, "its forward"));
        if (weightHalves.size() != inputHalves.size()) {
          ok = false;
          error(weightHalves.empty() ? inputHalves[0] : weightHalves[0])
              << "stage " << stage << " micro-batch " << micro
              << " needs one backward_input and one backward_weight, got "
              << inputHalves.size() << " and " << weightHalves.size();
        } else if (!weightHalves.empty()) {
          ok &= succeeded(
              checkBefore(inputHalves[0], weightHalves[0], stage, micro, "its backward_input"));
        }
      }
    return success(ok);
  }

  RankProgramOp holderOf(int64_t stage) {
    for (Program &program : programs)
      if (program.op.holdsStage(stage))
        return program.op;
    return programs.front().op;
  }

  LogicalResult checkBefore(Position first, Position later, int64_t stage, int64_t micro,
                            StringRef firstName) {
    StringRef laterKind = stringifyStageTaskKind(cast<RunStageOp>(opAt(later)).getKind());
    if (first.rank != later.rank)
      return error(later) << laterKind << " of stage " << stage << " micro-batch " << micro
                          << " runs on another rank than " << firstName << " (rank "
                          << first.rank << ")";
    if (later.index < first.index)
      return error(later) << laterKind << " of stage " << stage << " micro-batch " << micro
                          << " runs before " << firstName << " (op " << first.index << ")";
    return success();
  }

  /// The end of the step: every rank runs the same clip_gradients (or none),
  /// after its backwards and all-reduces; per-step update calls come after
  /// all of that, and nothing per micro-batch follows an update.
  LogicalResult checkStepEnd() {
    bool ok = true;
    ClipGradientsOp reference;
    int64_t referenceRank = 0;
    for (auto [rank, program] : llvm::enumerate(programs)) {
      std::optional<size_t> clipAt, firstUpdate, lastStepWork;
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        Position at{int64_t(rank), index};
        if (auto clip = dyn_cast<ClipGradientsOp>(op)) {
          if (clipAt) {
            ok = false;
            error(at) << "a second clip_gradients (the first is op " << *clipAt << ")";
            continue;
          }
          clipAt = index;
          if (!reference) {
            reference = clip, referenceRank = rank;
          } else if (clip.getMaxNorm() != reference.getMaxNorm() ||
                     clip.getOrder() != reference.getOrder()) {
            ok = false;
            error(at) << "clip_gradients differs from rank " << referenceRank
                      << "'s (max_norm and order must be the same on every rank)";
          }
          continue;
        }
        auto run = dyn_cast<RunStageOp>(op);
        if (run && run.getKind() == StageTaskKind::Update) {
          if (!firstUpdate)
            firstUpdate = index;
          continue;
        }
        if (firstUpdate && (run ? run.getMicrobatch().has_value() || isKfacStepWork(run) ||
                                      run.getKind() == StageTaskKind::KfacInverse
                                : !isa<ClipGradientsOp>(op))) {
          ok = false;
          error(at) << describe(op) << " comes after the update (op " << *firstUpdate
                    << "): the update ends the step";
        }
        // What makes the gradients: the passes and the all-reduces (per-step
        // K-FAC work is checked by checkKfacStepEnd and checkKfacInverses).
        if ((run && run.getMicrobatch()) || isa<AllReduceOp, ReduceMicrobatchOp>(op))
          lastStepWork = index;
      }
      if (clipAt && lastStepWork && *lastStepWork > *clipAt) {
        ok = false;
        error({int64_t(rank), *lastStepWork})
            << describe(program.ops[*lastStepWork])
            << " comes after clip_gradients (op " << *clipAt
            << "), which needs the step's final gradients";
      }
      if (clipAt && firstUpdate && *firstUpdate < *clipAt) {
        ok = false;
        error({int64_t(rank), *firstUpdate})
            << "the update runs before clip_gradients (op " << *clipAt << ")";
      }
    }
    if (!reference)
      return success(ok);
    for (auto [rank, program] : llvm::enumerate(programs))
      if (llvm::none_of(program.ops, [](Operation *op) { return isa<ClipGradientsOp>(op); })) {
        ok = false;
        program.op.emitError("rank ")
            << rank << " has no clip_gradients but rank " << referenceRank
            << " has one: every rank must take part";
      }
    return success(ok);
  }

  /// Each gradient a clipping op takes on some rank is counted (its term
  /// of the norm or of Σ⟨update, gradient⟩) by exactly one of them.
  template <typename OpT>
  LogicalResult checkCountedOnce() {
    std::map<std::string, SmallVector<Position>> holders, counters;
    for (auto [rank, program] : llvm::enumerate(programs))
      for (auto [index, op] : llvm::enumerate(program.ops))
        if (auto clip = dyn_cast<OpT>(op))
          for (auto [name, counted] : llvm::zip(clip.getNames(), clip.getCounted())) {
            std::string n = cast<StringAttr>(name).str();
            holders[n].push_back({int64_t(rank), index});
            if (counted)
              counters[n].push_back({int64_t(rank), index});
          }
    bool ok = true;
    for (auto &[name, held] : holders) {
      SmallVector<Position> &by = counters[name];
      if (by.size() == 1)
        continue;
      ok = false;
      InFlightDiagnostic diag = error(by.empty() ? held.front() : by[1]);
      diag << OpT::getOperationName() << " takes '" << name << "' on ranks [";
      llvm::interleaveComma(held, diag, [&](Position p) { diag << p.rank; });
      diag << "] but " << (by.empty() ? "none counts it" : "more than one counts it")
           << " (exactly one rank counts each gradient)";
    }
    return success(ok);
  }

  /// The once-per-step K-FAC call that needs the step's gradients.
  static bool isKfacStepWork(RunStageOp run) {
    return run.getKind() == StageTaskKind::Precondition;
  }

  /// K-FAC inverses (in the bubbles or at a warm-up step's end): each call
  /// names its layer and inverts it at most once per step; a call of the
  /// step that gathers curvature (a warm-up step, window step 0) comes after
  /// every per-micro-batch call of its stage, which update the factors; the
  /// promotion of the pending inverses comes after a warm-up step's inverse
  /// calls and before the first of window step 0, and before the precondition
  /// calls; window steps after the first promote nothing.
  LogicalResult checkKfacInverses() {
    bool ok = true;
    bool gathers = !windowStep || *windowStep == 0;
    for (auto [rank, program] : llvm::enumerate(programs)) {
      std::optional<size_t> promoteAt, firstInverse, lastInverse, firstPrecondition;
      llvm::SmallDenseMap<int64_t, size_t> lastPass; // stage -> its last per-micro-batch call
      std::set<int64_t> layers;
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        Position at{int64_t(rank), index};
        if (isa<KfacPromoteInversesOp>(op)) {
          if (promoteAt) {
            ok = false;
            error(at) << "a second kfac_promote_inverses (the first is op " << *promoteAt << ")";
          }
          promoteAt = index;
          continue;
        }
        auto run = dyn_cast<RunStageOp>(op);
        if (!run)
          continue;
        auto function = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
        IntegerAttr stage = function ? function->getAttrOfType<IntegerAttr>(kStageAttrName) : IntegerAttr();
        // (An accumulate call sums gradients; it does not touch factors.)
        if (run.getMicrobatch() && stage && run.getKind() != StageTaskKind::Accumulate)
          lastPass[stage.getInt()] = index;
        if (run.getKind() == StageTaskKind::Precondition && !firstPrecondition)
          firstPrecondition = index;
        if (run.getKind() != StageTaskKind::KfacInverse)
          continue;
        if (!firstInverse)
          firstInverse = index;
        lastInverse = index;
        if (!run.getLayer()) {
          ok = false;
          error(at) << describe(op) << " names no layer";
        } else if (!layers.insert(int64_t(*run.getLayer())).second) {
          ok = false;
          error(at) << describe(op) << " inverts layer " << *run.getLayer()
                    << " a second time in the step";
        }
      }
      // The calls of a curvature step after their stage's last pass.
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        auto run = dyn_cast<RunStageOp>(op);
        if (!gathers || !run || run.getKind() != StageTaskKind::KfacInverse)
          continue;
        auto function = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
        IntegerAttr stage = function ? function->getAttrOfType<IntegerAttr>(kStageAttrName) : IntegerAttr();
        if (!stage)
          continue;
        auto last = lastPass.find(stage.getInt());
        if (last != lastPass.end() && last->second > index) {
          ok = false;
          error({int64_t(rank), index})
              << describe(op) << " runs before op " << last->second << " ("
              << describe(program.ops[last->second])
              << "), which still updates the factors of stage " << stage.getInt();
        }
      }
      ok &= succeeded(checkInverseReductions(int64_t(rank), program));
      Position promotePos{int64_t(rank), promoteAt.value_or(0)};
      if (promoteAt && firstPrecondition && *promoteAt > *firstPrecondition) {
        ok = false;
        error(promotePos) << "kfac_promote_inverses comes after the precondition call (op "
                          << *firstPrecondition << ")";
      }
      if (!windowStep) {
        if (firstInverse && !promoteAt) {
          ok = false;
          error({int64_t(rank), *firstInverse})
              << "the step inverts factors but never runs kfac_promote_inverses";
        } else if (promoteAt && lastInverse && *promoteAt < *lastInverse) {
          ok = false;
          error(promotePos) << "kfac_promote_inverses comes before the kfac_inverse of op "
                            << *lastInverse;
        }
      } else if (*windowStep == 0) {
        if (promoteAt && firstInverse && *promoteAt > *firstInverse) {
          ok = false;
          error(promotePos) << "kfac_promote_inverses comes after the kfac_inverse of op "
                            << *firstInverse << " (it must not promote the new window's inverses)";
        }
      } else if (promoteAt) {
        ok = false;
        error(promotePos) << "kfac_promote_inverses in window step " << *windowStep
                          << ": only a warm-up step and window step 0 promote";
      }
    }
    return success(ok);
  }

  /// A kfac_inverse call reads its layer's factors and writes its inverses:
  /// it comes after an all_reduce of a factor (Chimera's replicas sum them)
  /// and before an all_reduce of an inverse (the owner hands it to the other
  /// replica) in the same step.
  LogicalResult checkInverseReductions(int64_t rank, const Program &program) {
    bool ok = true;
    llvm::StringMap<size_t> reducedAt;
    for (auto [index, op] : llvm::enumerate(program.ops))
      if (auto reduce = dyn_cast<AllReduceOp>(op))
        reducedAt.try_emplace(reduce.getValue(), index);
    if (reducedAt.empty())
      return success();
    for (auto [index, op] : llvm::enumerate(program.ops)) {
      auto run = dyn_cast<RunStageOp>(op);
      if (!run || run.getKind() != StageTaskKind::KfacInverse)
        continue;
      Operation *function =
          symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
      KfacInverseParameters params = kfacInverseParameters(function);
      for (StringRef factor : params.factors)
        if (auto it = reducedAt.find(factor); it != reducedAt.end() && it->second > index) {
          ok = false;
          error({rank, index}) << describe(op) << " inverts '" << factor
                               << "' before its all_reduce (op " << it->second << ")";
        }
      for (StringRef inverse : params.inverses)
        if (auto it = reducedAt.find(inverse); it != reducedAt.end() && it->second < index) {
          ok = false;
          error({rank, index}) << describe(op) << " writes '" << inverse
                               << "' after its all_reduce (op " << it->second << ")";
        }
    }
    return success(ok);
  }

  /// K-FAC at the end of the step: the precondition calls after the
  /// clipping (the true gradients are clipped first) and after every backward
  /// and all-reduce; every rank runs the same kfac_kl_clip (or none), after its
  /// precondition calls and before its update.
  LogicalResult checkKfacStepEnd() {
    bool ok = true;
    KfacKLClipOp reference;
    int64_t referenceRank = 0;
    for (auto [rank, program] : llvm::enumerate(programs)) {
      bool clips = llvm::any_of(program.ops, [](Operation *o) { return isa<ClipGradientsOp>(o); });
      std::optional<size_t> klAt, clipAt, firstKfac;
      for (auto [index, op] : llvm::enumerate(program.ops)) {
        Position at{int64_t(rank), index};
        auto run = dyn_cast<RunStageOp>(op);
        if (isa<ClipGradientsOp>(op))
          clipAt = index;
        bool gradientWork = isa<AllReduceOp, ReduceMicrobatchOp, ClipGradientsOp>(op) ||
                            (run && run.getMicrobatch());
        if (gradientWork && (firstKfac || klAt)) {
          ok = false;
          error(at) << describe(op) << " comes after the K-FAC step work (op "
                    << *(firstKfac ? firstKfac : klAt)
                    << "), which needs the step's final gradients";
        }
        if (run && isKfacStepWork(run)) {
          if (!firstKfac)
            firstKfac = index;
          if (clips && !clipAt) {
            ok = false;
            error(at) << describe(op)
                      << " runs before clip_gradients: K-FAC preconditions the clipped "
                         "gradients";
          }
          if (klAt) {
            ok = false;
            error(at) << describe(op) << " comes after kfac_kl_clip (op " << *klAt
                      << "), which needs every preconditioned gradient";
          }
          continue;
        }
        if (isa<BroadcastOp>(op) && klAt) {
          ok = false;
          error(at) << describe(op) << " comes after kfac_kl_clip (op " << *klAt
                    << "), which needs every preconditioned gradient";
        }
        auto kl = dyn_cast<KfacKLClipOp>(op);
        if (!kl)
          continue;
        if (klAt) {
          ok = false;
          error(at) << "a second kfac_kl_clip (the first is op " << *klAt << ")";
          continue;
        }
        klAt = index;
        if (!reference) {
          reference = kl, referenceRank = rank;
        } else if (kl.getKappa() != reference.getKappa() || kl.getOrder() != reference.getOrder()) {
          ok = false;
          error(at) << "kfac_kl_clip differs from rank " << referenceRank
                    << "'s (kappa and order must be the same on every rank)";
        }
      }
    }
    if (!reference)
      return success(ok);
    for (auto [rank, program] : llvm::enumerate(programs))
      if (llvm::none_of(program.ops, [](Operation *op) { return isa<KfacKLClipOp>(op); })) {
        ok = false;
        program.op.emitError("rank ")
            << rank << " has no kfac_kl_clip but rank " << referenceRank
            << " has one: every rank must take part";
      }
    return success(ok);
  }

  /// Runs all programs with rendezvous semantics: a send and its recv complete
  /// together, when both ranks have reached them; an all_reduce when all its
  /// members have; a reduce_microbatch's root when the other member has
  /// passed its reduce (which does not wait: it posts its piece). Reports the
  /// blocked ranks when no rank can progress.
  LogicalResult simulate() {
    SmallVector<size_t> pc(programs.size(), 0);
    std::set<std::pair<std::string, uint64_t>> posted; // (value, micro-batch)
    auto current = [&](int64_t rank) -> Operation * {
      return pc[rank] < programs[rank].ops.size() ? programs[rank].ops[pc[rank]] : nullptr;
    };
    auto meets = [&](int64_t rank, Operation *op) -> SmallVector<int64_t> {
      if (isa<RunStageOp, KfacPromoteInversesOp, StepResultOp>(op)) // local work
        return {rank};
      if (auto send = dyn_cast<SendActOp>(op)) {
        auto recv = dyn_cast_or_null<RecvActOp>(current(send.getTo()));
        if (recv && int64_t(recv.getFrom()) == rank && recv.getTag() == send.getTag())
          return {rank, int64_t(send.getTo())};
        return {};
      }
      if (auto recv = dyn_cast<RecvActOp>(op)) {
        auto send = dyn_cast_or_null<SendActOp>(current(recv.getFrom()));
        if (send && int64_t(send.getTo()) == rank && send.getTag() == recv.getTag())
          return {rank, int64_t(recv.getFrom())};
        return {};
      }
      if (isa<ClipGradientsOp, KfacKLClipOp>(op)) {
        SmallVector<int64_t> everyone;
        for (int64_t r = 0, e = programs.size(); r < e; ++r) {
          Operation *other = current(r);
          if (!other || other->getName() != op->getName())
            return {};
          everyone.push_back(r);
        }
        return everyone;
      }
      if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
        for (int64_t member : broadcast.getRanks()) {
          auto peer = dyn_cast_or_null<BroadcastOp>(current(member));
          if (!peer || peer.getValue() != broadcast.getValue() ||
              peer.getRanks() != broadcast.getRanks())
            return {};
        }
        return SmallVector<int64_t>(broadcast.getRanks());
      }
      // The other member posts its piece and goes on; the root waits for it.
      if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op)) {
        std::pair<std::string, uint64_t> piece{reduce.getValue().str(), reduce.getMicrobatch()};
        if (int64_t(reduce.getRoot()) != rank) {
          posted.insert(piece);
          return {rank};
        }
        if (posted.count(piece))
          return {rank};
        return {};
      }
      auto reduce = cast<AllReduceOp>(op);
      for (int64_t member : reduce.getRanks()) {
        auto peer = dyn_cast_or_null<AllReduceOp>(current(member));
        if (!peer || peer.getValue() != reduce.getValue() || peer.getRanks() != reduce.getRanks())
          return {};
      }
      return SmallVector<int64_t>(reduce.getRanks());
    };
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (int64_t rank = 0, e = programs.size(); rank < e; ++rank)
        while (Operation *op = current(rank)) {
          SmallVector<int64_t> advancing = meets(rank, op);
          if (advancing.empty())
            break;
          for (int64_t member : advancing)
            ++pc[member];
          progressed = true;
        }
    }
    SmallVector<int64_t> blocked;
    for (int64_t rank = 0, e = programs.size(); rank < e; ++rank)
      if (current(rank))
        blocked.push_back(rank);
    if (blocked.empty())
      return success();
    InFlightDiagnostic diag =
        error({blocked.front(), pc[blocked.front()]})
        << "deadlock: no rank can progress (a send and its recv block until both ranks reach "
           "them); blocked: ";
    llvm::interleaveComma(blocked, diag, [&](int64_t rank) {
      diag << "rank " << rank << " at op " << pc[rank] << " (" << describe(current(rank)) << ")";
    });
    for (int64_t rank : llvm::drop_begin(blocked))
      diag.attachNote(current(rank)->getLoc())
          << "rank " << rank << " is blocked here (op " << pc[rank] << ")";
    return failure();
  }
};

} // namespace

/// The window programs against the warm-up programs: window steps 0..K-1
/// all present, the same K everywhere, window step 0 promotes wherever the
/// warm-up step does, and every layer the warm-up step inverts is inverted
/// in exactly one window step by one of the ranks that invert it in the
/// warm-up step. A layer that several ranks invert in the warm-up step
/// (Chimera's replicas) is inverted by one of them in the window; each of
/// them all-reduces the layer's inverses over exactly those ranks in window
/// step K-1 (the inverting rank hands them to the others).
static std::string listOf(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(v);
  return text + "]";
}

static LogicalResult checkWindows(ModuleOp module, int64_t &steps) {
  steps = 0;
  std::map<int64_t, std::set<int64_t>> warmupRanks;        // layer -> inverting ranks
  std::map<int64_t, std::pair<int64_t, int64_t>> inverted; // layer -> (rank, window step)
  std::map<int64_t, Operation *> inverseFunction;          // layer -> warm-up callee
  std::map<int64_t, bool> warmupPromotes, windowPromotes;
  std::map<int64_t, RankProgramOp> warmupProgram, lastWindowProgram;
  SymbolTableCollection symbols;
  auto forEachInverse = [](RankProgramOp program, auto &&visit) {
    for (Operation &op : program.getBody().front())
      if (auto run = dyn_cast<RunStageOp>(op);
          run && run.getKind() == StageTaskKind::KfacInverse && run.getLayer())
        visit(run, int64_t(*run.getLayer()));
  };
  auto promotes = [](RankProgramOp program) {
    return !program.getBody().front().getOps<KfacPromoteInversesOp>().empty();
  };
  SmallVector<RankProgramOp> windows;
  for (RankProgramOp program : module.getOps<RankProgramOp>()) {
    int64_t rank = program.getRankValue();
    if (!program.getWindowStep()) {
      if (program.getWindowSteps())
        return program.emitOpError("window_steps without window_step");
      forEachInverse(program, [&](RunStageOp run, int64_t l) {
        warmupRanks[l].insert(rank);
        inverseFunction[l] =
            symbols.lookupNearestSymbolFrom<FunctionOpInterface>(run, run.getStageAttr());
      });
      warmupPromotes[rank] = promotes(program);
      warmupProgram[rank] = program;
      continue;
    }
    if (!program.getWindowSteps())
      return program.emitOpError("window_step without window_steps");
    int64_t K = int64_t(*program.getWindowSteps()), k = int64_t(*program.getWindowStep());
    if (steps && K != steps)
      return program.emitOpError("window_steps(") << K << ") differs from another program's ("
                                                   << steps << ")";
    steps = K;
    if (k >= K)
      return program.emitOpError("window_step ") << k << " is not in [0, " << K << ")";
    if (k == 0)
      windowPromotes[rank] = promotes(program);
    if (k == K - 1)
      lastWindowProgram[rank] = program;
    windows.push_back(program);
  }
  if (!steps)
    return success();
  for (RankProgramOp program : windows) {
    int64_t rank = program.getRankValue(), k = int64_t(*program.getWindowStep());
    bool ok = true;
    forEachInverse(program, [&](RunStageOp run, int64_t l) {
      if (!ok)
        return;
      auto [it, inserted] = inverted.insert({l, {rank, k}});
      if (!inserted) {
        ok = false;
        program.emitOpError("layer ") << l << " is inverted twice in a window (rank "
                                      << it->second.first << " in window step "
                                      << it->second.second << ", rank " << rank
                                      << " in window step " << k << ")";
      } else if (!warmupRanks[l].count(rank)) {
        ok = false;
        program.emitOpError("rank ") << rank << " inverts layer " << l
                                     << " in the window but not in the warm-up step";
      }
    });
    if (!ok)
      return failure();
  }
  for (auto &[layer, ranks] : warmupRanks) {
    if (!inverted.count(layer))
      return warmupProgram[*ranks.begin()].emitError("rank ")
             << *ranks.begin() << ": the window programs never invert layer " << layer
             << "; every layer must be inverted once per window";
    if (ranks.size() < 2)
      continue;
    SmallVector<int64_t> members(ranks.begin(), ranks.end());
    for (int64_t rank : ranks)
      for (StringRef inverse : kfacInverseParameters(inverseFunction[layer]).inverses) {
        RankProgramOp last = lastWindowProgram[rank];
        bool found = last && llvm::any_of(last.getBody().front().getOps<AllReduceOp>(),
                                          [&](AllReduceOp reduce) {
                                            return reduce.getValue() == inverse &&
                                                   llvm::equal(reduce.getRanks(), members);
                                          });
        if (!found)
          return warmupProgram[rank].emitError("rank ")
                 << rank << ": layer " << layer << " is inverted on ranks " << listOf(members)
                 << " in the warm-up step, so window step " << steps - 1
                 << " must all-reduce '" << inverse << "' over them";
      }
  }
  for (auto &[rank, program] : warmupProgram)
    if (warmupPromotes[rank] != windowPromotes[rank])
      return program.emitError("rank ")
             << rank << ": window step 0 must run kfac_promote_inverses exactly when the "
                        "warm-up program does";
  return success();
}

KfacInverseParameters mlir::pf::kfacInverseParameters(Operation *function) {
  KfacInverseParameters params;
  if (!function)
    return params;
  function->walk([&](KFACRefreshInversesOp refresh) {
    params.factors.push_back(refresh.getFactorA());
    params.factors.push_back(refresh.getFactorB());
    params.inverses.push_back(refresh.getAInverse());
    params.inverses.push_back(refresh.getBInverse());
    // The eigenbasis: the eigenvalues are the refresh's state as well.
    if (auto values = refresh.getAValuesAttr()) {
      params.inverses.push_back(values.getValue());
      params.inverses.push_back(refresh.getBValuesAttr().getValue());
    }
  });
  return params;
}

LogicalResult mlir::pf::verifyRankPrograms(ModuleOp module) {
  if (failed(Checker(module).run()))
    return failure();
  int64_t steps = 0;
  if (failed(checkWindows(module, steps)))
    return failure();
  bool ok = true;
  for (int64_t k = 0; k < steps; ++k)
    ok &= succeeded(Checker(module, k).run());
  return success(ok);
}
