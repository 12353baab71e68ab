//===- BuildRankPrograms.cpp - per-rank programs from a pipeline schedule --===//
//
// Writes one pf.rank_program per rank from the stage functions of
// pf-split-stages and a schedule of the schedule library, then checks them
// with verifyRankPrograms. Also pf-verify-rank-programs, which only checks.
//
// Communication placement: the programs are the projections of one global
// sequence of events, built by running the schedule's per-rank orders as a
// dataflow (a call runs once its inputs were computed). Each transfer is an
// event of two ranks placed right after the call that computes its value, so
// on the receiver it lands before the call that needs it, and every pair of
// ranks sees its messages in the same order: with blocking (rendezvous) send
// and recv, executing the global sequence is a valid run, so it cannot
// deadlock.
//
// The tied embedding's gradient (two stages on two ranks): the first stage's
// rank posts micro-batch m's piece (pf.reduce_microbatch) right after the
// pass returning it; the root takes it before its first pass that starts no
// earlier than that pass ends in a timed run of the orders (forward 1,
// backward 2, each half 1), so it rarely waits and holds few pieces.
//
// Backward halves (pf-split-stages{split-backward}): zb-h1, zb-h2, zb-v,
// dualpipe and dualpipev call backward_input and backward_weight where their
// orders say; gpipe and 1f1b, and the backwards DualPipe(V) runs whole, call
// the two halves one after the other in place of the fused backward.
//
// Placement: one stage per rank; interleaved stage s on rank s mod D; the V
// schedules (zb-v, dualpipev) stage s < D on rank s, the others on rank
// 2D-1-s, so the V's turn (stages D-1 and D) needs no transfer; two pipes
// (chimera, dualpipe) a micro-batch's stage s on rank s or D-1-s by its pipe.
// A gradient two stages of one rank return (the V's tied embedding) is summed
// on that rank: the first stage's piece is renamed grad_part/<p> and the
// last stage's accumulate_tied functions add it.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Schedule/Limits.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace mlir::pf {
#define GEN_PASS_DEF_PFBUILDRANKPROGRAMS
#define GEN_PASS_DEF_PFVERIFYRANKPROGRAMS
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {

/// A named argument or result of a stage function and its type.
struct NamedValue {
  std::string name;
  RankedTensorType type;
};

SmallVector<NamedValue> namedResults(func::FuncOp func, StringRef prefix) {
  SmallVector<NamedValue> values;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
        name && name.getValue().starts_with(prefix))
      values.push_back({name.str(), cast<RankedTensorType>(func.getResultTypes()[i])});
  return values;
}

bool hasArgument(func::FuncOp func, StringRef name) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (auto attr = func.getArgAttrOfType<StringAttr>(i, kNameAttrName);
        attr && attr.getValue() == name)
      return true;
  return false;
}

/// A stage's functions: a fused backward, or its two halves.
struct StageFunctions {
  func::FuncOp forward, backward, backwardInput, backwardWeight;

  bool isSplit() const { return !backward; }
  /// What computes the grad_act/* results sent to the previous stage.
  func::FuncOp gradientSender() const { return isSplit() ? backwardInput : backward; }
  /// What returns the grad/* results.
  func::FuncOp gradientReturner() const { return isSplit() ? backwardWeight : backward; }
  bool backwardTakes(StringRef name) const {
    return isSplit() ? hasArgument(backwardInput, name) || hasArgument(backwardWeight, name)
                     : hasArgument(backward, name);
  }
};

/// One event of a rank's program.
struct Event {
  enum Kind { Call, Send, Recv } kind;
  sched::PipelineOp pass{};    // Call
  const NamedValue *value{};   // Send, Recv
  int micro = 0;               // Send, Recv
  int peer = 0;                // Send, Recv
  int chunk = 0;               // Send, Recv: the sending stage's chunk (interleaved)
  /// Call: its start and end in placeEvents' timed run of the orders (a
  /// forward takes 1, a backward 2, each backward half 1; transfers 0).
  int64_t start = 0, end = 0;
};

struct BuildRankProgramsPass
    : public mlir::pf::impl::PFBuildRankProgramsBase<BuildRankProgramsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  ModuleOp module;
  sched::ScheduleKind scheduleKind = sched::ScheduleKind::OneFOneB;

  /// How a step-end pf.all_reduce of `name` adds the members' values: a
  /// gradient by the library unless `deterministic`; a parameter (Chimera's
  /// K-FAC factors) is one value per member, whose sum of two is exact.
  ReductionOrder reductionOrder(StringRef name) const {
    return !deterministic && name.starts_with("grad/") ? ReductionOrder::Library
                                                       : ReductionOrder::Microbatch;
  }
  SmallVector<StageFunctions> stages;
  /// forwardOut[s]: the act/* results of stage s's forward (sent to s+1);
  /// backwardOut[s]: the grad_act/* results of its backward (sent to s-1).
  /// Not resized after findTransfers: events point into them.
  SmallVector<SmallVector<NamedValue>> forwardOut, backwardOut;
  /// Transferred value names in sorted order: tag = index * N + micro-batch.
  llvm::StringMap<int64_t> nameIndex;

  InFlightDiagnostic fail() { return module.emitError("pf-build-rank-programs: "); }

  LogicalResult run() {
    module = getOperation();
    scheduleKind = schedule;
    if (scheduleKind == sched::ScheduleKind::Imported)
      return fail() << "schedule 'imported' is not run by the rank programs; supported: "
                       "gpipe, 1f1b, zb-h1, zb-h2, interleaved, chimera, zb-v, dualpipe, "
                       "dualpipev";
    if (microbatches < 1)
      return fail() << "microbatches must be >= 1, got " << int64_t(microbatches);
    // Checked before narrowing to the scheduler's int: 2^32 + 2 was 2.
    if (auto s = sched::checkLimit("microbatches", microbatches, sched::kMaxMicrobatches,
                                   "kMaxMicrobatches");
        !s.ok())
      return fail() << s.message();
    if (!module.getOps<RankProgramOp>().empty())
      return fail() << "the module already has pf.rank_program ops";
    if (failed(findStages()) || failed(findTransfers()) || failed(placeStages()) ||
        failed(checkKfacUpdates()))
      return failure();
    if (clipNorm < 0 || (clipNorm > 0 && !stepGradients()))
      return fail() << "clip-norm " << double(clipNorm)
                    << (clipNorm < 0 ? " must be >= 0"
                                     : " needs the module's pf.step_gradients (written by "
                                       "pf-split-stages)");
    auto program = buildSchedule();
    if (failed(program))
      return failure();
    auto events = placeEvents(*program);
    if (failed(events))
      return failure();
    findFactorFunctions();
    auto reductions = tiedGradients();
    if (failed(reductions))
      return failure();
    buildAccumulateFunctions(*reductions);
    if (failed(planExactSums(*reductions)))
      return failure();
    emitPrograms(*events, *reductions);
    if (!missingValue.empty())
      return fail() << "a call or send needs " << missingValue
                    << ", which no earlier call or recv on its rank makes";
    return verifyRankPrograms(module);
  }

  LogicalResult findStages() {
    for (int s = 0;; ++s) {
      std::string prefix = "stage" + std::to_string(s);
      auto forward = module.lookupSymbol<func::FuncOp>(prefix + "_forward");
      if (!forward)
        break;
      StageFunctions functions{forward,
                               module.lookupSymbol<func::FuncOp>(prefix + "_backward"),
                               module.lookupSymbol<func::FuncOp>(prefix + "_backward_input"),
                               module.lookupSymbol<func::FuncOp>(prefix + "_backward_weight")};
      bool halves = functions.backwardInput && functions.backwardWeight;
      if (needsHalves() && !halves)
        return fail() << "schedule '" << sched::scheduleKindName(scheduleKind) << "' needs @"
                      << prefix << "_backward_input and @"
                      << prefix << "_backward_weight (run pf-split-stages with "
                      << "split-backward=true)";
      if (!functions.backward && !halves)
        return fail() << "@" << prefix << "_forward has no @" << prefix << "_backward (nor @"
                      << prefix << "_backward_input and @" << prefix << "_backward_weight)";
      if (needsHalves())
        functions.backward = {}; // the halves are what the split schedules call
      else if (functions.backward)
        functions.backwardInput = functions.backwardWeight = {};
      for (func::FuncOp func : {functions.forward, functions.backward,
                                functions.backwardInput, functions.backwardWeight}) {
        if (!func)
          continue;
        auto stage = func->getAttrOfType<IntegerAttr>(kStageAttrName);
        if (!stage || stage.getInt() != s)
          return fail() << "@" << func.getSymName() << " does not carry " << kStageAttrName
                        << " = " << s;
      }
      stages.push_back(functions);
    }
    if (stages.empty())
      return fail() << "no stage functions (@stage0_forward, ...); run pf-split-stages first";
    return success();
  }

  /// The per-call K-FAC factor updates of pf-split-stages count on this many
  /// calls per step (their share of the running average).
  LogicalResult checkKfacUpdates() {
    WalkResult result = module.walk([&](KFACUpdateFactorOp update) {
      if (!update.getMicrobatch() || int64_t(update.getUpdates()) == int64_t(microbatches))
        return WalkResult::advance();
      fail() << "the K-FAC update of '" << update.getFactor() << "' expects "
             << update.getUpdates() << " micro-batch calls per step but the programs have "
             << int64_t(microbatches) << " (run pf-split-stages with microbatches="
             << int64_t(microbatches) << ")";
      return WalkResult::interrupt();
    });
    return failure(result.wasInterrupted());
  }

  /// What crosses each cut, matched by name between neighbours.
  LogicalResult findTransfers() {
    int numStages = stages.size();
    forwardOut.resize(numStages);
    backwardOut.resize(numStages);
    std::set<std::string> names;
    for (int s = 0; s < numStages; ++s) {
      if (s + 1 < numStages)
        forwardOut[s] = namedResults(stages[s].forward, kActivationPrefix);
      if (s > 0)
        backwardOut[s] = namedResults(stages[s].gradientSender(), kActivationGradientPrefix);
      for (const NamedValue &value : forwardOut[s]) {
        if (!hasArgument(stages[s + 1].forward, value.name))
          return fail() << "@" << stages[s].forward.getSymName() << " returns '" << value.name
                        << "', which @" << stages[s + 1].forward.getSymName()
                        << " does not take";
        names.insert(value.name);
      }
      for (const NamedValue &value : backwardOut[s]) {
        if (!stages[s - 1].backwardTakes(value.name))
          return fail() << "@" << stages[s].gradientSender().getSymName() << " returns '"
                        << value.name << "', which the backward of stage " << s - 1
                        << " does not take";
        names.insert(value.name);
      }
    }
    for (const std::string &name : names)
      nameIndex[name] = nameIndex.size();
    return success();
  }

  /// Ranks of the job and where each stage runs: one stage per rank; for
  /// interleaved `chunks` per rank, stage s on rank s mod ranks; for the V
  /// schedules (zb-v, dualpipev) two per rank, stage s < D on rank s, the
  /// others on rank 2D-1-s.
  int numRanks = 0;
  int rankOfStage(int stage) const {
    if (isVShape())
      return stage < numRanks ? stage : 2 * numRanks - 1 - stage;
    return stage % numRanks;
  }
  /// The schedule's layout: with two pipes (Chimera, DualPipe) micro-batch
  /// m's stage s runs on the rank of its pipe (down: s, up: D-1-s).
  sched::PipelineLayout layout;
  bool hasTwoPipes() const {
    return scheduleKind == sched::ScheduleKind::Chimera ||
           scheduleKind == sched::ScheduleKind::DualPipe;
  }
  bool isVShape() const { return sched::placementOf(scheduleKind) == sched::Placement::VShape; }
  /// Each backward as its input and weight halves (the zero-bubble kinds and
  /// DualPipe(V); the latter run some backwards whole: both halves back to
  /// back).
  bool needsHalves() const { return sched::splitsBackward(scheduleKind); }
  int rankOf(int stage, int micro) const {
    return hasTwoPipes() ? layout.deviceOf(layout.pipeOf(micro), stage) : rankOfStage(stage);
  }
  /// Every rank running some micro-batch of `stage`.
  SmallVector<int64_t> ranksOfStage(int stage) const {
    if (!hasTwoPipes())
      return {rankOfStage(stage)};
    int64_t down = layout.deviceOf(0, stage), up = layout.deviceOf(1, stage);
    return down == up ? SmallVector<int64_t>{down} : SmallVector<int64_t>{down, up};
  }

  LogicalResult placeStages() {
    int numStages = stages.size();
    if (isVShape()) {
      if (numStages % 2 != 0 || numStages < 4)
        return fail() << sched::scheduleKindName(scheduleKind)
                      << " needs two stages on each of at least 2 ranks: the module has "
                      << numStages << " stages (run pf-split-stages with stages = 2 × ranks)";
      numRanks = numStages / 2;
      return success();
    }
    if (scheduleKind != sched::ScheduleKind::Interleaved) {
      numRanks = numStages;
      return success();
    }
    if (chunks < 2 || numStages % chunks != 0 || numStages / chunks < 2)
      return fail() << "interleaved needs chunks >= 2 and at least 2 ranks of `chunks` stages "
                       "each: the module has "
                    << numStages << " stages, chunks=" << int64_t(chunks)
                    << " (run pf-split-stages with stages = ranks × chunks)";
    numRanks = numStages / int(chunks);
    return success();
  }

  FailureOr<sched::PipelineProgram> buildSchedule() {
    sched::PipelineConfig config;
    config.kind = scheduleKind;
    config.devices = numRanks;
    config.chunks = int(chunks);
    config.microbatches = int(microbatches);
    // Uniform passes: ZB-H2's list scheduling depends on durations, which
    // are not measured yet (the zero-bubble paper's setting, F = B = W).
    auto program = sched::buildUniformPipeline(config);
    if (!program)
      return fail() << program.error();
    layout = program->layout;
    // gpipe/1f1b over split functions: each backward as its two halves.
    for (auto &order : program->order) {
      std::vector<sched::PipelineOp> passes;
      for (const sched::PipelineOp &pass : order) {
        if (pass.pass != sched::PassKind::Backward || !stages[pass.stage].isSplit()) {
          passes.push_back(pass);
          continue;
        }
        passes.push_back({sched::PassKind::BackwardInput, pass.stage, pass.micro});
        passes.push_back({sched::PassKind::BackwardWeight, pass.stage, pass.micro});
      }
      order = std::move(passes);
    }
    return std::move(*program);
  }

  /// Runs the per-rank orders as a dataflow (one pass per rank and round) and
  /// places each transfer on both ranks right after the pass computing it.
  FailureOr<SmallVector<SmallVector<Event>>> placeEvents(const sched::PipelineProgram &program) {
    int numStages = stages.size(), numMicro = int(microbatches);
    // backwardDone: the fused backward or the input half ran (the grad_act/*
    // for the previous stage exist).
    std::vector<std::vector<bool>> forwardDone(numStages, std::vector<bool>(numMicro)),
        backwardDone = forwardDone;
    auto ready = [&](const sched::PipelineOp &pass) {
      switch (pass.pass) {
      case sched::PassKind::Forward:
        return pass.stage == 0 || forwardDone[pass.stage - 1][pass.micro];
      case sched::PassKind::BackwardWeight:
        return bool(backwardDone[pass.stage][pass.micro]);
      case sched::PassKind::Backward:
      case sched::PassKind::BackwardInput:
        break;
      }
      return forwardDone[pass.stage][pass.micro] &&
             (pass.stage + 1 == numStages || backwardDone[pass.stage + 1][pass.micro]);
    };
    SmallVector<SmallVector<Event>> events(numRanks);
    std::vector<size_t> next(numRanks, 0);
    // The timed run: when each rank is free and each pass's results exist.
    std::vector<int64_t> rankFree(numRanks, 0);
    std::vector<std::vector<int64_t>> forwardEnd(numStages, std::vector<int64_t>(numMicro)),
        backwardEnd = forwardEnd;
    auto timeOf = [&](const sched::PipelineOp &pass, int rank) -> std::pair<int64_t, int64_t> {
      int64_t ready = rankFree[rank], cost = 1;
      switch (pass.pass) {
      case sched::PassKind::Forward:
        if (pass.stage > 0)
          ready = std::max(ready, forwardEnd[pass.stage - 1][pass.micro]);
        break;
      case sched::PassKind::BackwardWeight:
        ready = std::max(ready, backwardEnd[pass.stage][pass.micro]);
        break;
      case sched::PassKind::Backward:
      case sched::PassKind::BackwardInput:
        cost = pass.pass == sched::PassKind::Backward ? 2 : 1;
        ready = std::max(ready, forwardEnd[pass.stage][pass.micro]);
        if (pass.stage + 1 < numStages)
          ready = std::max(ready, backwardEnd[pass.stage + 1][pass.micro]);
        break;
      }
      return {ready, ready + cost};
    };
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (int rank = 0; rank < numRanks; ++rank) {
        if (next[rank] == program.order[rank].size() || !ready(program.order[rank][next[rank]]))
          continue;
        sched::PipelineOp pass = program.order[rank][next[rank]++];
        progressed = true;
        auto [start, end] = timeOf(pass, rank);
        rankFree[rank] = end;
        events[rank].push_back({Event::Call, pass, nullptr, 0, 0, 0, start, end});
        if (pass.pass == sched::PassKind::BackwardWeight)
          continue; // sends nothing
        bool forward = pass.pass == sched::PassKind::Forward;
        (forward ? forwardDone : backwardDone)[pass.stage][pass.micro] = true;
        (forward ? forwardEnd : backwardEnd)[pass.stage][pass.micro] = end;
        int peer = rankOf(forward ? pass.stage + 1 : pass.stage - 1, pass.micro);
        // The V's turn (stages D-1 and D on one rank): the next call finds the
        // values among the micro-batch's on this rank, nothing is sent.
        if (peer == rank)
          continue;
        for (const NamedValue &value : (forward ? forwardOut : backwardOut)[pass.stage]) {
          int chunk = pass.stage / numRanks;
          events[rank].push_back({Event::Send, {}, &value, pass.micro, peer, chunk});
          events[peer].push_back({Event::Recv, {}, &value, pass.micro, rank, chunk});
        }
      }
    }
    for (int rank = 0; rank < numRanks; ++rank)
      if (next[rank] != program.order[rank].size())
        return fail() << "the " << sched::scheduleKindName(scheduleKind)
                      << " order of rank " << rank << " cannot run past pass " << next[rank];
    return events;
  }

  /// A parameter whose partial gradients several stages return.
  struct TiedGradient {
    SmallVector<int64_t> ranks;
    RankedTensorType type;
    int64_t firstStage = -1, lastStage = -1;
    /// Summed per micro-batch by pf.reduce_microbatch on the rank of `lastStage` (the
    /// root), which accumulates it; handed back by pf.broadcast. Otherwise
    /// (Chimera's replicas, one micro-batch) a step-end pf.all_reduce.
    bool perMicrobatch = false;
    /// Both stages on one rank (the V's first and last stage): that rank adds
    /// the two pieces of each micro-batch itself (partAccumulateFunctions);
    /// nothing crosses ranks.
    bool sameRank = false;
    int64_t stageCount = 0;
    int64_t root() const { return ranks.back(); }
  };

  /// grad/<param> returned by several stages' backwards, by name: summed over
  /// the ranks holding those stages, per micro-batch (pf.reduce_microbatch) or at the
  /// end of the step (pf.all_reduce).
  FailureOr<std::map<std::string, TiedGradient>> tiedGradients() {
    std::map<std::string, TiedGradient> byName;
    for (auto [s, functions] : llvm::enumerate(stages))
      for (const NamedValue &grad : namedResults(functions.gradientReturner(), "grad/")) {
        TiedGradient &entry = byName[grad.name];
        if (entry.type && entry.type != grad.type)
          return fail() << "'" << grad.name << "' has type " << entry.type << " on stage "
                        << entry.firstStage << " but " << grad.type << " on stage " << s;
        if (entry.firstStage < 0)
          entry.firstStage = int64_t(s);
        entry.lastStage = int64_t(s);
        ++entry.stageCount;
        for (int64_t rank : ranksOfStage(int(s)))
          if (!llvm::is_contained(entry.ranks, rank))
            entry.ranks.push_back(rank);
        entry.type = grad.type;
      }
    if (hasTwoPipes() && failed(addReplicaFactors(byName)))
      return failure();
    std::map<std::string, TiedGradient> tied;
    for (auto &[name, entry] : byName)
      llvm::sort(entry.ranks);
    for (auto &[name, entry] : byName) {
      if (entry.ranks.size() < 2 && entry.stageCount > 2)
        return fail() << "'" << name << "' is returned by " << entry.stageCount
                      << " stages on rank " << entry.ranks.front()
                      << "; one rank sums the pieces of two stages at most";
      if (entry.ranks.size() < 2 && entry.stageCount == 2) {
        entry.sameRank = true;
        tied[name] = entry;
        continue;
      }
      if (entry.ranks.size() < 2)
        continue;
      // Two stages on two ranks, the root holding the last: the first's
      // pieces go to it per micro-batch (a + b, then weighted, as one
      // process sums them) instead of every piece living to the step end.
      entry.perMicrobatch = tiedPerMicrobatch && !hasTwoPipes() && microbatches >= 2 &&
                            entry.ranks.size() == 2 && entry.firstStage != entry.lastStage &&
                            int64_t(rankOfStage(int(entry.lastStage))) == entry.ranks.back() &&
                            isa<FloatType>(entry.type.getElementType());
      tied[name] = entry;
    }
    return tied;
  }

  /// Chimera with K-FAC: each replica's passes (or, outlined by
  /// pf-outline-kfac-factors, its factor calls) update its own copy of the
  /// stage's factors with its micro-batches' curvature; the two copies are
  /// summed at the end of the step, like the gradients, so both replicas
  /// hold the factors of all N micro-batches. (The member that does not run
  /// micro-batch 0 starts a due update from zero: RankRunner. With K-FAC in
  /// the bubbles, the window programs sum them only in the curvature step
  /// and give each layer's inversion to one replica: addKfacWindowPrograms.)
  LogicalResult addReplicaFactors(std::map<std::string, TiedGradient> &byName) {
    for (auto [s, functions] : llvm::enumerate(stages)) {
      SmallVector<int64_t> ranks = ranksOfStage(int(s));
      if (ranks.size() < 2)
        continue;
      SmallVector<func::FuncOp> updaters;
      for (func::FuncOp function : {functions.forward, functions.backward,
                                    functions.backwardInput, functions.backwardWeight}) {
        if (!function)
          continue;
        updaters.push_back(function);
        if (auto it = factorFunctions.find(function.getSymName()); it != factorFunctions.end())
          for (auto [layer, isB, factor] : it->second)
            updaters.push_back(factor);
      }
      for (func::FuncOp function : updaters) {
        WalkResult walk = function.walk([&](KFACUpdateFactorOp update) {
          StringRef factor = update.getFactorAttr().getValue();
          auto param = module.lookupSymbol<ParamOp>(factor);
          auto type = param ? dyn_cast<RankedTensorType>(param.getType()) : RankedTensorType();
          if (!type) {
            update.emitOpError("updates '") << factor << "', which is not a ranked pf.param";
            return WalkResult::interrupt();
          }
          TiedGradient &entry = byName[factor.str()];
          entry.type = type;
          entry.firstStage = int64_t(s);
          entry.ranks = ranks;
          return WalkResult::advance();
        });
        if (walk.wasInterrupted())
          return failure();
      }
    }
    return success();
  }

  /// The count-weighted sum over the micro-batches of a stage's gradients
  /// that no other rank adds to (`@stage<s>_accumulate*`) and, on the root of
  /// a pf.reduce_microbatch, of the micro-batch's sum of both pieces
  /// (`@stage<s>_accumulate_reduced*`, so that the stage's other pieces need
  /// not wait for the other rank's). An all-reduced gradient sums the
  /// members' pieces of every micro-batch at the step end, so the host
  /// weights those. Called once per micro-batch in micro-batch order, as
  /// pf-split-microbatches sums in one process:
  ///   term = grad/<p> · count_m;  sum = m = 0 ? term : sum + term;
  ///   grad_sum/<p> = m = N−1 ? sum / total : sum
  /// with count_m the micro-batch's counted tokens (`loss_count`) and total
  /// their sum (`loss_total`, 1 when 0). One function per position, each with
  /// only the ops its branch of those selects takes (the same ops, so the
  /// same bits, without computing the branches the selects drop): `_first`
  /// (the term), the middle one (the running sum, N ≥ 3) and `_last` (the
  /// mean). With one micro-batch nothing is weighted, as in one process.
  struct Accumulation {
    func::FuncOp first, middle, last;
    func::FuncOp at(int64_t m, int64_t n) const {
      return m == 0 ? first : m == n - 1 ? last : middle;
    }
  };
  std::map<int64_t, Accumulation> accumulateFunctions, reducedAccumulateFunctions;
  /// Same-rank tied gradients, by the last of their two stages: the first
  /// stage and `stage<last>_accumulate_tied*`, which adds the first stage's
  /// `grad_part/<p>` to the last's `grad/<p>` and weights the sum.
  std::map<int64_t, std::pair<int64_t, Accumulation>> partAccumulateFunctions;

  void buildAccumulateFunctions(const std::map<std::string, TiedGradient> &tied) {
    buildPartAccumulateFunctions(tied);
    if (microbatches < 2)
      return;
    for (auto [s, functions] : llvm::enumerate(stages)) {
      SmallVector<NamedValue> own, reduced;
      for (const NamedValue &grad : namedResults(functions.gradientReturner(), "grad/")) {
        auto it = tied.find(grad.name);
        if (it == tied.end())
          own.push_back(grad);
        else if (it->second.perMicrobatch && it->second.lastStage == int64_t(s))
          reduced.push_back(grad);
      }
      // The loss is weighted as a gradient is (the same term, running sum and
      // mean, so one process's bits) by the calls of the stage computing it,
      // where one rank runs all of its micro-batches. A stage on two ranks
      // (Chimera's, DualPipe's pipes) has each replica's losses gathered
      // and weighted at the step end.
      if (ranksOfStage(int(s)).size() == 1)
        for (const NamedValue &loss : namedResults(functions.forward, kLossName))
          if (loss.name == kLossName)
            own.push_back(loss);
      std::string name = "stage" + std::to_string(s) + "_accumulate";
      if (!own.empty())
        accumulateFunctions[int64_t(s)] = buildAccumulation(int64_t(s), name, own);
      if (!reduced.empty())
        reducedAccumulateFunctions[int64_t(s)] =
            buildAccumulation(int64_t(s), name + "_reduced", reduced);
    }
  }

  /// A gradient two stages of one rank return (the V's tied embedding): the
  /// first stage's piece is renamed `grad_part/<p>` (a rank keeps one
  /// `grad/<p>` per micro-batch) and the last stage's accumulation adds it,
  /// b + a as the two-rank pf.reduce_microbatch and, addition being
  /// commutative, the single-process a + b bit for bit, then weights the sum.
  /// With one micro-batch the function only adds.
  void buildPartAccumulateFunctions(const std::map<std::string, TiedGradient> &tied) {
    std::map<std::pair<int64_t, int64_t>, SmallVector<NamedValue>> byStages;
    for (const auto &[name, entry] : tied)
      if (entry.sameRank)
        byStages[{entry.firstStage, entry.lastStage}].push_back({name, entry.type});
    for (auto &[firstAndLast, grads] : byStages) {
      auto [first, last] = firstAndLast;
      func::FuncOp returner = stages[first].gradientReturner();
      for (unsigned i = 0, e = returner.getNumResults(); i < e; ++i)
        if (auto name = returner.getResultAttrOfType<StringAttr>(i, kNameAttrName);
            name && llvm::any_of(grads, [&](const NamedValue &g) { return g.name == name; }))
          returner.setResultAttr(i, kNameAttrName,
                                 StringAttr::get(module.getContext(), partName(name)));
      std::string name = "stage" + std::to_string(last) + "_accumulate_tied";
      Accumulation functions;
      if (microbatches < 2)
        functions.first = buildAccumulate(last, name, grads, Position::Only, true);
      else
        functions = buildAccumulation(last, name, grads, true);
      partAccumulateFunctions[last] = {first, functions};
    }
  }

  Accumulation buildAccumulation(int64_t stage, StringRef name, ArrayRef<NamedValue> grads,
                                 bool parts = false) {
    Accumulation functions;
    functions.first =
        buildAccumulate(stage, (name + "_first").str(), grads, Position::First, parts);
    if (microbatches > 2)
      functions.middle = buildAccumulate(stage, name.str(), grads, Position::Middle, parts);
    functions.last = buildAccumulate(stage, (name + "_last").str(), grads, Position::Last, parts);
    return functions;
  }

  /// Only: the step's one micro-batch, nothing weighted. Single: a member's
  /// one piece of a gradient the library sums (replicaAccumulations): its
  /// term divided by the step's total at once.
  enum class Position { First, Middle, Last, Only, Single };

  /// With `parts`, each grad/<p> has a same-rank `grad_part/<p>` added first.
  func::FuncOp buildAccumulate(int64_t stage, const std::string &name, ArrayRef<NamedValue> grads,
                               Position position, bool parts = false) {
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    auto scalarI64 = RankedTensorType::get({}, b.getI64Type());
    const bool continues = position == Position::Middle || position == Position::Last;
    const bool weights = position != Position::Only;
    SmallVector<Type> inputs, results;
    SmallVector<std::string> inputNames;
    for (const NamedValue &grad : grads) {
      inputs.push_back(grad.type);
      inputNames.push_back(grad.name);
      if (parts) {
        inputs.push_back(grad.type);
        inputNames.push_back(partName(grad.name));
      }
      if (continues) {
        inputs.push_back(grad.type);
        inputNames.push_back(sumName(grad.name));
      }
      results.push_back(grad.type);
    }
    if (weights) {
      inputs.push_back(scalarI64);
      inputNames.push_back("loss_count");
    }
    const bool divides = position == Position::Last || position == Position::Single;
    if (divides) {
      inputs.push_back(scalarI64);
      inputNames.push_back("loss_total");
    }
    auto func = func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, results));
    func->setAttr(kStageAttrName, b.getI64IntegerAttr(stage));
    Block *entry = func.addEntryBlock();
    for (auto [i, input] : llvm::enumerate(inputNames))
      func.setArgAttr(unsigned(i), kNameAttrName, b.getStringAttr(input));
    for (auto [i, grad] : llvm::enumerate(grads))
      func.setResultAttr(unsigned(i), kNameAttrName, b.getStringAttr(sumName(grad.name)));
    b.setInsertionPointToEnd(entry);
    const unsigned perGrad = 1 + unsigned(parts) + unsigned(continues);
    Value count = weights ? entry->getArgument(perGrad * grads.size()) : Value();
    SmallVector<Value> sums;
    for (auto [i, grad] : llvm::enumerate(grads)) {
      TypeAttr to = TypeAttr::get(grad.type.getElementType());
      Value piece = entry->getArgument(perGrad * i);
      if (parts)
        piece = AddOp::create(b, loc, piece, entry->getArgument(perGrad * i + 1));
      if (!weights) {
        sums.push_back(piece);
        continue;
      }
      Value total = divides ? entry->getArgument(perGrad * grads.size() + 1) : Value();
      if (!continues) {
        Value term = MulOp::create(b, loc, grad.type, piece, CastOp::create(b, loc, count, to));
        sums.push_back(position == Position::Single
                           ? DivOp::create(b, loc, grad.type, term,
                                           CastOp::create(b, loc, total, to))
                           : term);
        continue;
      }
      // sum + piece·c (then / the total): pf.mul, pf.add and pf.div's bits
      // in one pass over the gradient.
      sums.push_back(WeightedAddOp::create(
          b, loc, grad.type, entry->getArgument(perGrad * i + unsigned(parts) + 1), piece, count,
          total));
    }
    func::ReturnOp::create(b, loc, sums);
    return func;
  }

  /// A gradient whose members' values a step-end pf.all_reduce
  /// order(library) adds (Chimera's and DualPipe's replicas; a tied
  /// gradient summed at the step end) with more than one micro-batch: each
  /// member weights the pieces it returns itself, in micro-batch order as
  /// they come out, by accumulate calls (first: the term, then the running
  /// sum, the last one divided by the step's token total; a single piece:
  /// its term over the total), and the library adds the members' partial
  /// sums of Σ_m c_m·x_m / Σ_m c_m. Grouped by the pieces a rank returns
  /// (which micro-batches, from which stage): one call per micro-batch
  /// covers the group.
  struct ReplicaAccumulation {
    /// (micro-batch, the stage returning its piece on this rank), ascending.
    SmallVector<std::pair<int64_t, int64_t>> pieces;
    SmallVector<NamedValue> grads;
    /// The next piece to accumulate.
    size_t next = 0;
  };

  bool isSummedByTheLibrary(const std::string &name, const TiedGradient &entry) const {
    return microbatches >= 2 && !entry.perMicrobatch && !entry.sameRank &&
           reductionOrder(name) == ReductionOrder::Library &&
           isa<FloatType>(entry.type.getElementType());
  }

  /// The loss of a last stage that two ranks run (Chimera's, DualPipe's
  /// pipes), where the library adds the replicas' partial sums: each rank
  /// weights the losses of the micro-batches it ran with that stage's
  /// gradients, and pf.all_reduce sums the two `loss_sum`s (emitReplicatedLoss).
  std::optional<NamedValue> replicatedLoss() {
    const int64_t last = int64_t(stages.size()) - 1;
    if (deterministic || microbatches < 2 || ranksOfStage(int(last)).size() != 2)
      return std::nullopt;
    for (const NamedValue &loss : namedResults(stages[last].forward, kLossName))
      if (loss.name == kLossName)
        return loss;
    return std::nullopt;
  }

  /// This rank's replica accumulations, from its calls in `events`.
  std::vector<ReplicaAccumulation>
  replicaAccumulations(ArrayRef<Event> events, const std::map<std::string, TiedGradient> &tied) {
    std::map<std::string, SmallVector<std::pair<int64_t, int64_t>>> piecesOf;
    std::optional<NamedValue> loss = replicatedLoss();
    for (const Event &event : events) {
      if (event.kind != Event::Call ||
          callOf(event.pass).second != stages[event.pass.stage].gradientReturner())
        continue;
      for (const NamedValue &grad :
           namedResults(stages[event.pass.stage].gradientReturner(), "grad/"))
        if (auto it = tied.find(grad.name);
            it != tied.end() && isSummedByTheLibrary(grad.name, it->second))
          piecesOf[grad.name].push_back({event.pass.micro, event.pass.stage});
      // The loss with the pieces its stage's backward returned (the forward
      // of that micro-batch ran before).
      if (loss && event.pass.stage + 1 == int64_t(stages.size()))
        piecesOf[loss->name].push_back({event.pass.micro, event.pass.stage});
    }
    std::map<SmallVector<std::pair<int64_t, int64_t>>, ReplicaAccumulation> groups;
    for (auto &[name, pieces] : piecesOf) {
      llvm::sort(pieces);
      ReplicaAccumulation &group = groups[pieces];
      group.pieces = pieces;
      group.grads.push_back({name, name == kLossName ? loss->type : tied.at(name).type});
    }
    std::vector<ReplicaAccumulation> result;
    for (auto &[pieces, group] : groups)
      result.push_back(std::move(group));
    return result;
  }

  /// The function of a replica accumulation's i-th of n calls, one per
  /// (stage, gradients, position) over the module.
  std::map<std::tuple<int64_t, std::string, Position>, func::FuncOp> replicaFunctions;
  std::map<std::pair<int64_t, std::string>, int64_t> replicaGroupIds;

  func::FuncOp replicaAccumulateFunction(const ReplicaAccumulation &group, size_t i) {
    const size_t n = group.pieces.size();
    Position position = n == 1       ? Position::Single
                        : i == 0     ? Position::First
                        : i + 1 == n ? Position::Last
                                     : Position::Middle;
    int64_t stage = group.pieces.front().second;
    std::string names;
    for (const NamedValue &grad : group.grads)
      names += grad.name + ",";
    func::FuncOp &function = replicaFunctions[{stage, names, position}];
    if (!function) {
      auto id = replicaGroupIds.try_emplace({stage, names}, int64_t(replicaGroupIds.size()))
                    .first->second;
      static const char *suffix[] = {"_first", "", "_last", "", "_single"};
      std::string name = "stage" + std::to_string(stage) + "_accumulate_replica" +
                         std::to_string(id) + suffix[int(position)];
      function = buildAccumulate(stage, name, group.grads, position);
    }
    return function;
  }

  static std::string sumName(StringRef piece) { return runningSumName(piece); }
  static std::string partName(StringRef grad) { return gradientPartName(grad); }

  /// Per pf.reduce_microbatch'd gradient, by micro-batch: when the first
  /// stage's pass returning its piece ends in placeEvents' timed run.
  std::map<std::string, std::vector<int64_t>> handOverTime;

  void findHandOvers(ArrayRef<SmallVector<Event>> events,
                     const std::map<std::string, TiedGradient> &tied) {
    for (const auto &[name, entry] : tied) {
      if (!entry.perMicrobatch)
        continue;
      std::vector<int64_t> &times = handOverTime[name];
      times.assign(size_t(microbatches), 0);
      const StageFunctions &first = stages[entry.firstStage];
      for (const Event &event : events[rankOfStage(int(entry.firstStage))])
        if (event.kind == Event::Call && event.pass.stage == entry.firstStage &&
            callOf(event.pass).second == first.gradientReturner())
          times[size_t(event.pass.micro)] = event.end;
    }
  }

  void emitPrograms(ArrayRef<SmallVector<Event>> events,
                    const std::map<std::string, TiedGradient> &tied) {
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    findHandOvers(events, tied);
    if (hasTwoPipes() && splitPrecondition)
      splitPreconditioning();
    for (int64_t rank = 0; rank < numRanks; ++rank) {
      SmallVector<int64_t> held;
      for (int64_t s = 0, e = stages.size(); s < e; ++s)
        if (llvm::is_contained(ranksOfStage(int(s)), rank))
          held.push_back(s);
      auto program = RankProgramOp::create(builder, loc, "rank" + std::to_string(rank),
                                           uint64_t(rank), uint64_t(numRanks), held,
                                           uint64_t(microbatches), IntegerAttr(), IntegerAttr());
      OpBuilder body = OpBuilder::atBlockEnd(&program.getBody().emplaceBlock());
      stageValues.clear();
      // A pass's K-FAC factor calls (pf-outline-kfac-factors) follow its
      // sends, right before the rank's next pass: the next stage gets its
      // activations first. Window programs move them into bubbles.
      // The pass whose factor calls are due (null: none).
      const sched::PipelineOp *factorsOf = nullptr;
      // Per stage: the micro-batches whose gradients are out and the next
      // one to accumulate (micro-batch order, whatever the pass order).
      std::map<int64_t, std::set<int64_t>> gradientsOut;
      std::map<int64_t, int64_t> nextToAccumulate, nextReducedToAccumulate, nextPartToAccumulate;
      // pf.reduce_microbatch: on the root, (when the other member's pass
      // ends, name, micro-batch) in time order, and per stage and micro-batch how many of
      // its reduces ran; on the other member, those due after the current
      // pass's sends.
      std::vector<std::tuple<int64_t, std::string, int64_t>> rootReduces;
      std::map<int64_t, std::map<int64_t, int64_t>> reducesDone;
      std::map<int64_t, int64_t> reducesPerMicrobatch;
      SmallVector<std::pair<std::string, int64_t>> handOvers;
      for (const auto &[name, entry] : tied) {
        if (!entry.perMicrobatch || entry.root() != rank)
          continue;
        ++reducesPerMicrobatch[entry.lastStage];
        for (auto [m, time] : llvm::enumerate(handOverTime.at(name)))
          rootReduces.emplace_back(time, name, int64_t(m));
      }
      llvm::sort(rootReduces);
      // The rank's piece of micro-batch m; on the root the sum takes its
      // place (the reduced accumulate call takes it).
      auto emitReduce = [&](const std::string &name, int64_t m) {
        const TiedGradient &entry = tied.at(name);
        auto piece = stageValues.find({m, name});
        if (piece == stageValues.end())
          return noteMissing(name, m);
        Type sumType = entry.root() == rank ? Type(entry.type) : Type();
        auto reduce = ReduceMicrobatchOp::create(body, loc, sumType, name, piece->second,
                                                 uint64_t(m), uint64_t(entry.root()),
                                                 entry.ranks, entry.type);
        if (reduce.getSum())
          piece->second = reduce.getSum();
      };
      std::vector<ReplicaAccumulation> replicaSums =
          replicaAccumulations(events[rank], tied);
      auto emitAccumulate = [&](const Accumulation &functions, int64_t m) {
        emitCall(body, loc, StageTaskKind::Accumulate, functions.at(m, int64_t(microbatches)),
                 body.getI64IntegerAttr(m), IntegerAttr());
      };
      // The stage's own gradients once its pass returned them; the reduced
      // ones once every reduce of the micro-batch ran (each in micro-batch
      // order).
      auto drainAccumulates = [&](int64_t stage) {
        std::set<int64_t> &out = gradientsOut[stage];
        if (auto own = accumulateFunctions.find(stage); own != accumulateFunctions.end())
          for (int64_t &next = nextToAccumulate[stage]; out.count(next); ++next)
            emitAccumulate(own->second, next);
        if (auto reduced = reducedAccumulateFunctions.find(stage);
            reduced != reducedAccumulateFunctions.end())
          for (int64_t &next = nextReducedToAccumulate[stage];
               reducesDone[stage][next] == reducesPerMicrobatch[stage]; ++next)
            emitAccumulate(reduced->second, next);
        for (ReplicaAccumulation &group : replicaSums)
          for (; group.next < group.pieces.size() &&
                 gradientsOut[group.pieces[group.next].second].count(
                     group.pieces[group.next].first);
               ++group.next)
            emitCall(body, loc, StageTaskKind::Accumulate,
                     replicaAccumulateFunction(group, group.next),
                     body.getI64IntegerAttr(group.pieces[group.next].first), IntegerAttr());
        // A same-rank tied gradient once both of its stages returned the
        // micro-batch's pieces.
        for (const auto &[last, firstAndFunctions] : partAccumulateFunctions) {
          const auto &[first, functions] = firstAndFunctions;
          if (stage != first && stage != last)
            continue;
          for (int64_t &next = nextPartToAccumulate[last];
               gradientsOut[first].count(next) && gradientsOut[last].count(next); ++next)
            emitAccumulate(functions, next);
        }
      };
      // The other member posts micro-batch m's piece right after the pass
      // returning it (and that pass's sends); the root takes it before its
      // first pass that starts no earlier than that pass ends in the timed
      // run, so it neither waits (if the run's timing holds) nor holds the
      // piece longer than it must. Nothing the other member needs before
      // that pass comes after it on the root, so it cannot deadlock.
      // In the other member's order (the pieces are matched in the order
      // they are posted), each after the root's own piece is out.
      auto emitRootReduces = [&](int64_t before) {
        size_t done = 0;
        for (; done < rootReduces.size() && std::get<0>(rootReduces[done]) <= before &&
               gradientsOut[tied.at(std::get<1>(rootReduces[done])).lastStage].count(
                   std::get<2>(rootReduces[done]));
             ++done) {
          const auto &[time, name, m] = rootReduces[done];
          emitReduce(name, m);
          int64_t stage = tied.at(name).lastStage;
          ++reducesDone[stage][m];
          drainAccumulates(stage);
        }
        rootReduces.erase(rootReduces.begin(), rootReduces.begin() + done);
      };
      auto flushHandOvers = [&] {
        for (const auto &[name, m] : handOvers)
          emitReduce(name, m);
        handOvers.clear();
      };
      auto emitFactors = [&] {
        if (!factorsOf)
          return;
        emitFactorCalls(body, loc, *factorsOf);
        int64_t stage = factorsOf->stage;
        if (callOf(*factorsOf).second == stages[stage].gradientReturner()) {
          gradientsOut[stage].insert(factorsOf->micro);
          drainAccumulates(stage);
        }
        factorsOf = nullptr;
      };
      for (const Event &event : events[rank]) {
        if (event.kind != Event::Send)
          flushHandOvers();
        if (event.kind == Event::Call) {
          emitFactors();
          emitRootReduces(event.start);
        }
        emitEvent(body, loc, event);
        if (event.kind != Event::Call)
          continue;
        factorsOf = &event.pass;
        if (callOf(event.pass).second == stages[event.pass.stage].gradientReturner())
          for (const auto &[name, entry] : tied)
            if (entry.perMicrobatch && entry.root() != rank && entry.firstStage == event.pass.stage)
              handOvers.emplace_back(name, event.pass.micro);
      }
      flushHandOvers();
      emitFactors();
      emitRootReduces(std::numeric_limits<int64_t>::max());
      // The loss is final once the passes and accumulate calls ran; the
      // step-end collectives come after (the host combines no loss later).
      emitLossResult(body, loc);
      // The gradients several ranks return, summed over them: each rank's
      // step gradient is then a value of its program.
      std::map<std::string, Value> summedGradients;
      for (const auto &[name, entry] : tied)
        if (!entry.sameRank && llvm::is_contained(entry.ranks, rank) &&
            !isSummedExactly(name, entry))
          if (Value sum = emitGradientSum(body, loc, name, entry))
            summedGradients[name] = sum;
      emitExactSums(body, loc, rank, summedGradients);
      std::map<std::string, Value> gradients = rankStepGradients(summedGradients);
      // A gradient summed over ranks is counted (clipping, KL-clip) and
      // reported by its lowest member.
      std::set<std::string> countedElsewhere;
      for (const auto &[name, entry] : tied)
        if (!entry.sameRank && llvm::is_contained(entry.ranks, rank) &&
            entry.ranks.front() != rank)
          countedElsewhere.insert(name);
      emitReplicatedLoss(body, loc);
      emitStepEnd(body, loc, held, std::move(gradients), countedElsewhere);
    }
  }

  /// pf-kfac-precondition's per-layer functions `stage<stage>_<work>_<layer>`
  /// (work: kfac_inverse, kfac_precondition), by layer.
  std::map<int64_t, func::FuncOp> layerFunctions(int64_t stage, StringRef work) {
    std::map<int64_t, func::FuncOp> functions;
    std::string prefix = "stage" + std::to_string(stage) + "_" + work.str() + "_";
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      int64_t layer = 0;
      if (func.getSymName().starts_with(prefix) &&
          !func.getSymName().drop_front(prefix.size()).getAsInteger(10, layer))
        functions[layer] = func;
    }
    return functions;
  }

  /// Chimera with K-FAC: (stage, layer) -> the one replica that
  /// preconditions the layer (the other takes the result by pf.broadcast).
  /// What the call writes (in step mode its inverse refresh) is then state
  /// of the owner only: a rank holds the parameters its calls use, so the
  /// other replica holds no stale copy. Each layer goes to the member with
  /// the least work so far, a layer's work taken as out·in·(out + in) (its
  /// two GEMMs; the inversions scale alike).
  std::map<std::pair<int64_t, int64_t>, int64_t> preconditionOwner;

  void splitPreconditioning() {
    std::map<int64_t, double> load;
    for (int64_t stage = 0, e = stages.size(); stage < e; ++stage) {
      SmallVector<int64_t> members = ranksOfStage(int(stage));
      if (members.size() != 2)
        continue;
      llvm::sort(members);
      for (auto [layer, precondition] : layerFunctions(stage, "kfac_precondition")) {
        double work = 0;
        for (const NamedValue &grad : namedResults(precondition, "grad/"))
          if (grad.type.getRank() == 2) {
            double rows = double(grad.type.getDimSize(0)), cols = double(grad.type.getDimSize(1));
            work += rows * cols * (rows + cols);
          }
        int64_t owner = load[members[1]] < load[members[0]] ? members[1] : members[0];
        load[owner] += work;
        preconditionOwner[{stage, layer}] = owner;
      }
    }
  }

  /// The step end on the rank's gradients of the step (`gradients`, by
  /// name), each op taking them as values and returning the next: the
  /// clipping over all ranks; with K-FAC (pf-kfac-precondition's
  /// `stage<s>_kfac_precondition_<l>`, one call per layer) the clipped
  /// gradients preconditioned (Chimera's split layers broadcast by their
  /// owner) and KL-clipped over all ranks; with `gradient-results` each
  /// gradient handed to the host (by the rank counting it: not those in
  /// `countedElsewhere`, summed over ranks and counted by a lower member);
  /// the updates (pf-add-optimizer's
  /// `stage<s>_update`) taking them.
  void emitStepEnd(OpBuilder &body, Location loc, ArrayRef<int64_t> held,
                   std::map<std::string, Value> gradients,
                   const std::set<std::string> &countedElsewhere) {
    auto named = [&](const std::map<std::string, Value> &values, SmallVector<Value> &operands,
                     SmallVector<Type> &types) {
      SmallVector<StringRef> names;
      for (const auto &[name, value] : values) {
        names.push_back(name);
        operands.push_back(value);
        types.push_back(value.getType());
      }
      return body.getStrArrayAttr(names);
    };
    auto counted = [&](ArrayAttr names) {
      SmallVector<bool> flags;
      for (Attribute name : names)
        flags.push_back(!countedElsewhere.count(cast<StringAttr>(name).str()));
      return body.getDenseBoolArrayAttr(flags);
    };
    if (clipNorm > 0) {
      SmallVector<Value> operands;
      SmallVector<Type> types;
      ArrayAttr names = named(gradients, operands, types);
      auto clip = ClipGradientsOp::create(body, loc, types, operands, names, counted(names),
                                          body.getF64FloatAttr(clipNorm), stepGradients());
      for (auto [name, clipped] : llvm::zip_equal(names, clip.getClipped()))
        gradients[cast<StringAttr>(name).str()] = clipped;
    }
    // The calls below take the gradients by name (emitCall: the step's, -1).
    auto publish = [&] {
      for (const auto &[name, value] : gradients)
        stageValues[{-1, name}] = value;
    };
    publish();
    // K-FAC for the bubbles (pf-kfac-precondition{bubbles}): a warm-up step
    // inverts every layer's factors at its end and promotes the results; the
    // window programs (addKfacWindowPrograms) move these calls into bubbles.
    bool inverted = false;
    for (int64_t stage : held)
      for (auto [layer, inverse] : layerFunctions(stage, "kfac_inverse")) {
        emitCall(body, loc, StageTaskKind::KfacInverse, inverse, IntegerAttr(),
                 body.getI64IntegerAttr(layer));
        inverted = true;
      }
    if (inverted)
      KfacPromoteInversesOp::create(body, loc);
    int64_t rank = cast<RankProgramOp>(body.getBlock()->getParentOp()).getRankValue();
    // A preconditioned gradient the rank does not hold fails the pass.
    for (int64_t stage : held)
      for (auto [layer, precondition] : layerFunctions(stage, "kfac_precondition"))
        for (const NamedValue &grad : namedResults(precondition, "grad/"))
          if (!gradients.count(grad.name))
            return noteMissing(grad.name, -1);
    // The clipped gradients of the preconditioned layers, for the KL-clip.
    std::map<std::string, Value> raw;
    for (int64_t stage : held)
      for (auto [layer, precondition] : layerFunctions(stage, "kfac_precondition")) {
        auto owner = preconditionOwner.find({stage, layer});
        if (owner != preconditionOwner.end() && owner->second != rank)
          continue;
        SmallVector<NamedValue> preconditioned = namedResults(precondition, "grad/");
        for (const NamedValue &grad : preconditioned)
          raw[grad.name] = gradients[grad.name];
        emitCall(body, loc, StageTaskKind::Precondition, precondition, IntegerAttr(),
                 body.getI64IntegerAttr(layer));
        for (const NamedValue &grad : preconditioned)
          gradients[grad.name] = stageValues[{-1, grad.name}];
      }
    // Each split layer's owner hands its preconditioned gradients to the
    // other replica, in one order on every rank.
    for (int64_t stage : held)
      for (auto [layer, precondition] : layerFunctions(stage, "kfac_precondition")) {
        auto owner = preconditionOwner.find({stage, layer});
        if (owner == preconditionOwner.end())
          continue;
        SmallVector<int64_t> members = ranksOfStage(int(stage));
        llvm::sort(members);
        bool isOwner = owner->second == rank;
        for (const NamedValue &grad : namedResults(precondition, "grad/")) {
          if (!isOwner)
            raw[grad.name] = gradients[grad.name];
          Value input = isOwner ? gradients[grad.name] : Value();
          gradients[grad.name] = BroadcastOp::create(body, loc, grad.type, grad.name, input,
                                                     uint64_t(owner->second), members, grad.type)
                                     .getResult();
        }
      }
    auto kappa = module->getAttrOfType<FloatAttr>(kKfacKLClipAttrName);
    auto klOrder = module->getAttrOfType<ArrayAttr>(kKfacKLOrderAttrName);
    if (kappa && klOrder) {
      std::map<std::string, Value> updates;
      SmallVector<Value> rawOperands;
      for (const auto &[name, value] : raw) {
        updates[name] = gradients[name];
        rawOperands.push_back(value);
      }
      SmallVector<Value> operands;
      SmallVector<Type> types;
      ArrayAttr names = named(updates, operands, types);
      auto clip = KfacKLClipOp::create(body, loc, types, operands, rawOperands, names,
                                       counted(names), kappa, klOrder);
      for (auto [name, clipped] : llvm::zip_equal(names, clip.getClipped()))
        gradients[cast<StringAttr>(name).str()] = clipped;
    }
    publish();
    if (gradientResults)
      for (const auto &[name, value] : gradients)
        if (!countedElsewhere.count(name))
          StepResultOp::create(body, loc, body.getStringAttr(name), value);
    SmallVector<func::FuncOp> updates;
    for (int64_t stage : held)
      if (auto update =
              module.lookupSymbol<func::FuncOp>("stage" + std::to_string(stage) + "_update"))
        updates.push_back(update);
    // A rank holding two stages that update one parameter (Chimera's first
    // and last stage share the tied embedding) must apply that update once.
    if (updatesShareAParameter(updates))
      updates = {mergeUpdates(updates, body.getBlock()->getParentOp())};
    for (func::FuncOp update : updates)
      emitCall(body, loc, StageTaskKind::Update, update, IntegerAttr(), IntegerAttr());
  }

  /// The parameter an optimizer update op writes (pf.sgd_update,
  /// pf.adamw_update, pf.lamb_update all name it `param`).
  static FlatSymbolRefAttr updatedParameter(Operation *op) {
    return op->getAttrOfType<FlatSymbolRefAttr>("param");
  }

  static bool updatesShareAParameter(ArrayRef<func::FuncOp> updates) {
    llvm::StringSet<> seen;
    for (func::FuncOp update : updates)
      for (Operation &op : update.getBody().front())
        if (auto param = updatedParameter(&op); param && !seen.insert(param.getValue()).second)
          return true;
    return false;
  }

  /// `@rank<r>_update`: the updates of `updates` in one function, arguments
  /// matched by name, each parameter updated once (the gradients of a shared
  /// parameter are the same combined value on every stage that returns it).
  func::FuncOp mergeUpdates(ArrayRef<func::FuncOp> updates, Operation *program) {
    SmallVector<Type> types;
    SmallVector<StringAttr> names;
    for (func::FuncOp update : updates)
      for (unsigned i = 0; i < update.getNumArguments(); ++i) {
        auto name = update.getArgAttrOfType<StringAttr>(i, kNameAttrName);
        if (!llvm::is_contained(names, name)) {
          names.push_back(name);
          types.push_back(update.getArgumentTypes()[i]);
        }
      }
    OpBuilder builder(program);
    std::string symbol =
        (cast<RankProgramOp>(program).getSymName() + "_update").str();
    auto merged = func::FuncOp::create(builder, program->getLoc(), symbol,
                                       builder.getFunctionType(types, {}));
    merged->setAttr(kStageAttrName, updates.front()->getAttr(kStageAttrName));
    Block *entry = merged.addEntryBlock();
    for (auto [i, name] : llvm::enumerate(names))
      merged.setArgAttr(i, kNameAttrName, name);
    builder.setInsertionPointToEnd(entry);
    llvm::StringSet<> updated;
    for (func::FuncOp update : updates) {
      IRMapping map;
      for (unsigned i = 0; i < update.getNumArguments(); ++i)
        map.map(update.getArgument(i),
                entry->getArgument(llvm::find(names, update.getArgAttrOfType<StringAttr>(
                                                         i, kNameAttrName)) -
                                   names.begin()));
      for (Operation &op : update.getBody().front().without_terminator()) {
        if (auto param = updatedParameter(&op); param && !updated.insert(param.getValue()).second)
          continue;
        builder.clone(op, map);
      }
    }
    func::ReturnOp::create(builder, program->getLoc());
    return merged;
  }

  /// pf-split-stages' record of the step's gradient order.
  ArrayAttr stepGradients() { return module->getAttrOfType<ArrayAttr>(kStepGradientsAttrName); }

  std::pair<StageTaskKind, func::FuncOp> callOf(const sched::PipelineOp &pass) {
    StageFunctions &functions = stages[pass.stage];
    switch (pass.pass) {
    case sched::PassKind::Forward:
      return {StageTaskKind::Forward, functions.forward};
    case sched::PassKind::Backward:
      return {StageTaskKind::Backward, functions.backward};
    case sched::PassKind::BackwardInput:
      return {StageTaskKind::BackwardInput, functions.backwardInput};
    case sched::PassKind::BackwardWeight:
      return {StageTaskKind::BackwardWeight, functions.backwardWeight};
    }
    llvm_unreachable("unknown pass kind");
  }

  /// `stage<s>_kfac_factor_{a,b}_<l>` by the pass function they follow
  /// (`pf.kfac_after`), in layer order, A before B.
  llvm::StringMap<SmallVector<std::tuple<int64_t, bool, func::FuncOp>>> factorFunctions;

  void findFactorFunctions() {
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      auto after = func->getAttrOfType<StringAttr>(kKfacAfterAttrName);
      StringRef name = func.getSymName();
      size_t at = name.rfind('_');
      int64_t layer = 0;
      if (!after || at == StringRef::npos || name.drop_front(at + 1).getAsInteger(10, layer))
        continue;
      bool isB = name.contains("_kfac_factor_b_");
      factorFunctions[after.getValue()].push_back({layer, isB, func});
    }
    for (auto &entry : factorFunctions)
      llvm::sort(entry.second, [](const auto &a, const auto &b) {
        return std::make_pair(std::get<0>(a), std::get<1>(a)) <
               std::make_pair(std::get<0>(b), std::get<1>(b));
      });
  }

  void emitFactorCalls(OpBuilder &builder, Location loc, const sched::PipelineOp &pass) {
    auto it = factorFunctions.find(callOf(pass).second.getSymName());
    if (it == factorFunctions.end())
      return;
    for (auto [layer, isB, func] : it->second)
      emitCall(builder, loc, isB ? StageTaskKind::KfacFactorB : StageTaskKind::KfacFactorA, func,
               builder.getI64IntegerAttr(pass.micro), builder.getI64IntegerAttr(layer));
  }

  /// The rank program being written: its stage values by (micro-batch,
  /// pf.name), the latest of each (a forward relaying a value returns it
  /// anew).
  std::map<std::pair<int64_t, std::string>, Value> stageValues;
  /// The first value a call or send needed that was not there (a schedule
  /// the events got wrong): the pass fails with it.
  std::string missingValue;
  void noteMissing(StringRef name, int64_t m) {
    if (missingValue.empty())
      missingValue = llvm::formatv("'{0}' of micro-batch {1}", name, m).str();
  }

  /// A pf.run_stage of `function` on the rank's values of micro-batch
  /// `micro` (none for a per-step call), its outputs recorded.
  void emitCall(OpBuilder &builder, Location loc, StageTaskKind kind, func::FuncOp function,
                IntegerAttr micro, IntegerAttr layer) {
    int64_t m = micro ? micro.getInt() : -1;
    auto nameAt = [&](unsigned i, bool result) {
      return (result ? function.getResultAttrOfType<StringAttr>(i, kNameAttrName)
                     : function.getArgAttrOfType<StringAttr>(i, kNameAttrName))
          .str();
    };
    // A running sum is the step's, continued from call to call.
    auto keyOf = [&](std::string name) {
      return std::make_pair(isRunningSumName(name) ? int64_t(-1) : m, std::move(name));
    };
    SmallVector<Value> inputs;
    SmallVector<std::string> inputNames;
    for (unsigned i : stageValuePositions(function, false)) {
      inputNames.push_back(nameAt(i, false));
      auto found = stageValues.find(keyOf(nameAt(i, false)));
      Value value = found == stageValues.end() ? Value() : found->second;
      if (!value) {
        noteMissing(nameAt(i, false), m);
        return;
      }
      inputs.push_back(value);
    }
    SmallVector<unsigned> outputs = stageValuePositions(function, true);
    SmallVector<Type> types;
    for (unsigned i : outputs)
      types.push_back(function.getResultTypes()[i]);
    // An accumulate call's result may go over the running sum it continues,
    // else the piece it weights (its function is elementwise).
    DenseI64ArrayAttr inPlace;
    if (kind == StageTaskKind::Accumulate) {
      SmallVector<int64_t> over;
      for (unsigned i : outputs) {
        std::string sum = nameAt(i, true);
        auto at = llvm::find(inputNames, sum);
        if (at == inputNames.end())
          at = llvm::find(inputNames, pieceOfRunningSum(sum));
        over.push_back(at == inputNames.end() ? -1 : int64_t(at - inputNames.begin()));
      }
      inPlace = builder.getDenseI64ArrayAttr(over);
    }
    auto call = RunStageOp::create(builder, loc, types, kind, function.getSymName(), inputs,
                                   micro, layer, inPlace);
    for (auto [result, i] : llvm::zip_equal(call.getOutputs(), outputs))
      stageValues[keyOf(nameAt(i, true))] = result;
  }

  /// The replicas' partial sums of the loss (replicatedLoss), added by the
  /// library after the gradients' all-reduces (K-FAC work placed in a tail
  /// bubble goes before the first of those); the lower rank reports the
  /// step's loss.
  void emitReplicatedLoss(OpBuilder &body, Location loc) {
    auto sum = stageValues.find({-1, kLossSumName.str()});
    if (sum == stageValues.end() || !replicatedLoss())
      return;
    SmallVector<int64_t> members = ranksOfStage(int(stages.size()) - 1);
    llvm::sort(members);
    Value partial = sum->second;
    Value loss = AllReduceOp::create(body, loc, partial.getType(), kLossSumName,
                                     ValueRange{partial}, members,
                                     ReductionOrder::Library,
                                     cast<RankedTensorType>(partial.getType()))
                     .getSum();
    if (cast<RankProgramOp>(body.getBlock()->getParentOp()).getRankValue() == members.front())
      StepResultOp::create(body, loc, body.getStringAttr(kLossName), loss);
  }

  /// The rank's step gradient of `name` before any sum over ranks: its
  /// accumulate calls' last running sum, or its one micro-batch's piece.
  Value partialGradient(StringRef name) {
    if (auto sum = stageValues.find({-1, gradientSumName(name)}); sum != stageValues.end())
      return sum->second;
    if (auto piece = stageValues.find({0, name.str()});
        microbatches == 1 && piece != stageValues.end())
      return piece->second;
    return Value();
  }

  /// The sum of a gradient several ranks return, as this rank's value (a
  /// replica factor's sum in place: none):
  /// - summed per micro-batch on the root (pf.reduce_microbatch and its
  ///   accumulate calls): the root's pf.broadcast of its sum, which the
  ///   other member receives;
  /// - order(library): `%sum = pf.all_reduce "grad/<p>"(%partial)` of this
  ///   rank's weighted sum over the micro-batches it ran.
  /// (The bitwise mode's sums of pieces: emitExactSums.)
  Value emitGradientSum(OpBuilder &body, Location loc, const std::string &name,
                        const TiedGradient &entry) {
    int64_t rank = cast<RankProgramOp>(body.getBlock()->getParentOp()).getRankValue();
    Type type = entry.type;
    // Chimera's K-FAC factors (addReplicaFactors): parameters, summed in place.
    if (!StringRef(name).starts_with(kGradientPrefix)) {
      AllReduceOp::create(body, loc, name, entry.ranks, ReductionOrder::Microbatch, entry.type);
      return Value();
    }
    if (entry.perMicrobatch) {
      Value input;
      if (entry.root() == rank && !(input = partialGradient(name))) {
        noteMissing(gradientSumName(name), -1);
        return Value();
      }
      return BroadcastOp::create(body, loc, type, name, input, uint64_t(entry.root()),
                                 entry.ranks, entry.type)
          .getResult();
    }
    Value partial = partialGradient(name);
    if (!partial) {
      noteMissing(gradientSumName(name), -1);
      return Value();
    }
    return AllReduceOp::create(body, loc, type, name, ValueRange{partial},
                               entry.ranks, ReductionOrder::Library, entry.type)
        .getSum();
  }

  /// The bitwise mode's step-end sums of gradients whose pieces two ranks
  /// return (Chimera's replicas and tied embedding; a tied gradient kept to
  /// the step end with tied-per-microbatch=false): formed by one member, the
  /// owner (the higher), as one process forms them, from the program's own
  /// ops. Per micro-batch in order, the micro-batch's sum comes to the
  /// owner (both hold a piece: the other's rows, pf.reduce_microbatch, a + b
  /// bit for bit; only the other: its piece, pf.send_act / pf.recv_act; only
  /// the owner: its piece), which weights it by an accumulate call (term,
  /// running sum, mean: `stage<s>_accumulate_exact<k>*`); then pf.broadcast
  /// hands the sum to the other member. Gradients with the same members,
  /// stage and holders share the calls.
  struct ExactSum {
    SmallVector<int64_t> ranks;
    int64_t stage = -1;
    /// Per micro-batch: bit 0, the lower member returns a piece; bit 1, the owner.
    SmallVector<uint8_t> holders;
    SmallVector<NamedValue> grads;
    int64_t id = 0;
  };
  std::vector<ExactSum> exactSums;
  /// The loss is one of them (deterministic, a last stage on two ranks).
  bool exactLoss = false;
  /// The index of each exactly summed gradient among them (its send tags).
  std::map<std::string, int64_t> exactSumIndex;

  bool isSummedExactly(const std::string &name, const TiedGradient &entry) const {
    return StringRef(name).starts_with(kGradientPrefix) && !entry.perMicrobatch &&
           !entry.sameRank && reductionOrder(name) == ReductionOrder::Microbatch;
  }

  LogicalResult planExactSums(const std::map<std::string, TiedGradient> &tied) {
    std::map<std::tuple<SmallVector<int64_t>, int64_t, SmallVector<uint8_t>>, ExactSum> groups;
    for (const auto &[name, entry] : tied) {
      if (!isSummedExactly(name, entry) || entry.ranks.size() < 2)
        continue;
      if (entry.ranks.size() != 2 || !isa<FloatType>(entry.type.getElementType()))
        return fail() << "deterministic=true sums a gradient exactly over two ranks and of a "
                         "float type; '"
                      << name << "' is " << entry.type << " over " << entry.ranks.size()
                      << " ranks";
      const int64_t lower = entry.ranks[0], owner = entry.ranks[1];
      SmallVector<uint8_t> holders(size_t(microbatches), 0);
      int64_t stage = -1;
      for (auto [s, functions] : llvm::enumerate(stages)) {
        if (!llvm::any_of(namedResults(functions.gradientReturner(), "grad/"),
                          [&](const NamedValue &grad) { return grad.name == name; }))
          continue;
        if (llvm::is_contained(ranksOfStage(int(s)), owner))
          stage = int64_t(s);
        for (int64_t m = 0; m < int64_t(microbatches); ++m) {
          int64_t rank = rankOf(int(s), int(m));
          holders[size_t(m)] |= rank == lower ? 1 : rank == owner ? 2 : 0;
        }
      }
      if (stage < 0 || llvm::is_contained(holders, 0))
        return fail() << "'" << name << "': a micro-batch's piece is returned by neither of "
                      << "ranks " << lower << " and " << owner;
      ExactSum &group = groups[{entry.ranks, stage, holders}];
      group.ranks = entry.ranks;
      group.stage = stage;
      group.holders = holders;
      group.grads.push_back({name, entry.type});
    }
    // The loss of a last stage two ranks run, weighted as one process
    // weights it (its own accumulate chain, reported by the owner).
    const int64_t last = int64_t(stages.size()) - 1;
    SmallVector<int64_t> lastRanks = ranksOfStage(int(last));
    llvm::sort(lastRanks);
    if (deterministic && microbatches >= 2 && lastRanks.size() == 2)
      for (const NamedValue &loss : namedResults(stages[last].forward, kLossName))
        if (loss.name == kLossName) {
          SmallVector<uint8_t> holders;
          for (int64_t m = 0; m < int64_t(microbatches); ++m)
            holders.push_back(rankOf(int(last), int(m)) == lastRanks[0] ? 1 : 2);
          ExactSum &group = groups[{lastRanks, last, holders}];
          group.ranks = lastRanks;
          group.stage = last;
          group.holders = holders;
          group.grads.push_back(loss);
          exactLoss = true;
        }
    for (auto &[key, group] : groups) {
      group.id = int64_t(exactSums.size());
      for (const NamedValue &grad : group.grads)
        exactSumIndex[grad.name] = int64_t(exactSumIndex.size());
      exactSums.push_back(std::move(group));
    }
    // Tags above every activation's (chunk < stages), below the rows' tags.
    int64_t lastTag = exactSumTag(int64_t(exactSumIndex.size()), 0);
    if (!exactSumIndex.empty() && lastTag > kReduceRowsTag)
      return fail() << "deterministic=true needs send tags up to " << lastTag
                    << " for the gradients' pieces, above the " << kReduceRowsTag
                    << " a rank program has";
    return success();
  }

  int64_t exactSumTag(int64_t index, int64_t m) const {
    return int64_t(stages.size() * nameIndex.size()) * int64_t(microbatches) +
           index * int64_t(microbatches) + m;
  }

  void emitExactSums(OpBuilder &body, Location loc, int64_t rank,
                     std::map<std::string, Value> &sums) {
    const int64_t n = int64_t(microbatches);
    for (const ExactSum &group : exactSums) {
      if (!llvm::is_contained(group.ranks, rank))
        continue;
      const int64_t lower = group.ranks[0], owner = group.ranks[1];
      for (int64_t m = 0; m < n; ++m) {
        const uint8_t held = group.holders[size_t(m)];
        for (const NamedValue &grad : group.grads) {
          auto type = cast<RankedTensorType>(grad.type);
          std::pair<int64_t, std::string> key{m, grad.name};
          auto piece = stageValues.find(key);
          bool mine = (rank == lower && (held & 1)) || (rank == owner && (held & 2));
          if (mine && piece == stageValues.end())
            return noteMissing(grad.name, m);
          if (held == 3) {
            Type sumType = rank == owner ? Type(type) : Type();
            auto reduce = ReduceMicrobatchOp::create(body, loc, sumType, grad.name, piece->second,
                                                     uint64_t(m), uint64_t(owner), group.ranks,
                                                     type);
            if (reduce.getSum())
              piece->second = reduce.getSum();
          } else if (held == 1 && rank == lower) {
            SendActOp::create(body, loc, piece->second, uint64_t(m), uint64_t(owner),
                              uint64_t(exactSumTag(exactSumIndex.at(grad.name), m)));
          } else if (held == 1) {
            stageValues[key] =
                RecvActOp::create(body, loc, type, uint64_t(m), uint64_t(lower),
                                  uint64_t(exactSumTag(exactSumIndex.at(grad.name), m)));
          }
        }
        if (rank == owner && n > 1)
          emitCall(body, loc, StageTaskKind::Accumulate, exactAccumulateFunction(group, m),
                   body.getI64IntegerAttr(m), IntegerAttr());
      }
      for (const NamedValue &grad : group.grads) {
        Value sum;
        // The step's loss: the owner's sum leaves as the step's result.
        if (grad.name == kLossName) {
          if (rank == owner) {
            auto found = stageValues.find({-1, kLossSumName.str()});
            if (found == stageValues.end())
              return noteMissing(kLossSumName, -1);
            StepResultOp::create(body, loc, body.getStringAttr(kLossName), found->second);
          }
          continue;
        }
        if (rank == owner) {
          auto found = n > 1 ? stageValues.find({-1, sumName(grad.name)})
                             : stageValues.find({0, grad.name});
          if (found == stageValues.end())
            return noteMissing(n > 1 ? sumName(grad.name) : grad.name, n > 1 ? -1 : 0);
          sum = found->second;
        }
        sums[grad.name] = BroadcastOp::create(body, loc, grad.type, grad.name, sum,
                                              uint64_t(owner), group.ranks,
                                              cast<RankedTensorType>(grad.type))
                              .getResult();
      }
    }
  }

  /// The accumulate function of an exact sum's call of micro-batch m.
  std::map<std::pair<int64_t, Position>, func::FuncOp> exactFunctions;
  func::FuncOp exactAccumulateFunction(const ExactSum &group, int64_t m) {
    const int64_t n = int64_t(microbatches);
    Position position = m == 0 ? Position::First : m + 1 == n ? Position::Last : Position::Middle;
    func::FuncOp &function = exactFunctions[{group.id, position}];
    if (!function) {
      static const char *suffix[] = {"_first", "", "_last"};
      function = buildAccumulate(group.stage,
                                 "stage" + std::to_string(group.stage) + "_accumulate_exact" +
                                     std::to_string(group.id) + suffix[int(position)],
                                 group.grads, position);
    }
    return function;
  }

  /// The rank's gradients of the step, by name: each running sum no call
  /// takes, each piece with one micro-batch, and the sums over ranks
  /// (`summed`) in place of their pieces.
  std::map<std::string, Value> rankStepGradients(const std::map<std::string, Value> &summed) {
    std::map<std::string, Value> gradients(summed);
    for (const auto &[key, value] : stageValues) {
      const auto &[m, valueName] = key;
      StringRef n(valueName);
      if (!value.use_empty())
        continue;
      if (m < 0 && n.starts_with(kGradientSumPrefix))
        gradients.try_emplace(pieceOfRunningSum(n), value);
      else if (m >= 0 && microbatches == 1 && n.starts_with(kGradientPrefix))
        gradients.try_emplace(valueName, value);
    }
    return gradients;
  }

  /// The loss's pf.step_result: the step's (the last stage's accumulate
  /// calls' running sum, or the one micro-batch's). Where two ranks run the
  /// last stage, the library's sum of their partial sums
  /// (emitReplicatedLoss) or, in the bitwise mode, the exact sum's owner
  /// (emitExactSums) reports it.
  void emitLossResult(OpBuilder &body, Location loc) {
    if (exactLoss)
      return;
    StringAttr name = body.getStringAttr(kLossName);
    if (auto sum = stageValues.find({-1, kLossSumName.str()}); sum != stageValues.end()) {
      if (!replicatedLoss())
        StepResultOp::create(body, loc, name, sum->second);
      return;
    }
    if (auto loss = stageValues.find({0, kLossName.str()});
        microbatches == 1 && loss != stageValues.end())
      StepResultOp::create(body, loc, name, loss->second);
  }

  void emitEvent(OpBuilder &builder, Location loc, const Event &event) {
    if (event.kind == Event::Call) {
      auto [kind, function] = callOf(event.pass);
      emitCall(builder, loc, kind, function, builder.getI64IntegerAttr(event.pass.micro),
               IntegerAttr());
      return;
    }
    // A value relayed through every stage (the attention mask) crosses the
    // same pair of ranks once per chunk under interleaving: the chunk keeps
    // the tags apart (0, and so the plain tag, with one stage per rank).
    int64_t tag = (event.chunk * int64_t(nameIndex.size()) + nameIndex.lookup(event.value->name)) *
                      microbatches +
                  event.micro;
    std::pair<int64_t, std::string> key{event.micro, event.value->name};
    if (event.kind == Event::Send) {
      auto found = stageValues.find(key);
      Value value = found == stageValues.end() ? Value() : found->second;
      if (!value)
        return noteMissing(key.second, key.first);
      SendActOp::create(builder, loc, value, uint64_t(event.micro), uint64_t(event.peer),
                        uint64_t(tag));
    } else {
      stageValues[key] = RecvActOp::create(builder, loc, event.value->type,
                                           uint64_t(event.micro), uint64_t(event.peer),
                                           uint64_t(tag));
    }
  }
};

struct VerifyRankProgramsPass
    : public mlir::pf::impl::PFVerifyRankProgramsBase<VerifyRankProgramsPass> {
  void runOnOperation() override {
    if (failed(verifyRankPrograms(getOperation())))
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
