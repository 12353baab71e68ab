//===- KfacWindowPrograms.cpp - K-FAC inverses placed into the bubbles ------===//
//
// From each rank's warm-up program (pf-build-rank-programs with
// pf-kfac-precondition{bubbles}: the step's inverse calls at its end, then
// pf.kfac_promote_inverses) the K programs of a refresh window: the same
// passes, transfers and step end, the promotion at the start of window step
// 0, and each inverse call in the window step and at the place a placement
// gives (docs/pipeline-execution.md, "K-FAC in the bubbles").
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

namespace mlir::pf {
#define GEN_PASS_DEF_PFKFACWINDOWPROGRAMS
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

/// A forward or backward pass (not a K-FAC factor call, which follows its
/// pass).
bool isPass(Operation &op) {
  auto run = dyn_cast<RunStageOp>(op);
  if (!run)
    return false;
  StageTaskKind kind = run.getKind();
  return kind == StageTaskKind::Forward || kind == StageTaskKind::Backward ||
         kind == StageTaskKind::BackwardInput || kind == StageTaskKind::BackwardWeight;
}

bool isFactorCall(Operation &op) {
  auto run = dyn_cast<RunStageOp>(op);
  return run && (run.getKind() == StageTaskKind::KfacFactorA ||
                 run.getKind() == StageTaskKind::KfacFactorB);
}

bool isStepEnd(Operation &op) {
  if (isa<ClipGradientsOp, KfacKLClipOp>(op))
    return true;
  auto run = dyn_cast<RunStageOp>(op);
  return run && (run.getKind() == StageTaskKind::Precondition ||
                 run.getKind() == StageTaskKind::Update);
}

/// The step end: the first clipping, preconditioning or update call.
Operation *stepEnd(Block &body) {
  for (Operation &op : body)
    if (isStepEnd(op))
      return &op;
  return nullptr;
}

/// Which all-reduces K-FAC work that runs after every pass may precede.
enum class TailRule {
  /// A factor call: before every collective (a factor's sum reads it).
  BeforeCollectives,
  /// An inverse: after the sums of the factors it reads (Chimera's
  /// replicas), before the other collectives.
  AfterFactorSums,
};

/// With every pass done: the first collective or step end after the last
/// pass. The gradient all-reduce blocks until every rank gets there, so work
/// behind it would run after the rank's tail bubble, not in it.
Operation *tailPoint(Block &body, TailRule rule, const std::set<std::string> &factorParams) {
  Operation *lastPass = nullptr;
  for (Operation &op : body)
    if (isPass(op))
      lastPass = &op;
  if (!lastPass)
    return stepEnd(body);
  for (Operation *op = lastPass->getNextNode(); op; op = op->getNextNode()) {
    if (isStepEnd(*op))
      return op;
    // A reduce_microbatch waits on its root only (the other member posts its
    // piece and goes on); a broadcast waits for its root.
    if (auto piece = dyn_cast<ReduceMicrobatchOp>(op)) {
      if (int64_t(piece.getRoot()) == cast<RankProgramOp>(body.getParentOp()).getRankValue())
        return op;
      continue;
    }
    if (isa<BroadcastOp>(op))
      return op;
    auto reduce = dyn_cast<AllReduceOp>(op);
    if (!reduce)
      continue;
    if (rule == TailRule::AfterFactorSums && factorParams.count(reduce.getValue().str()))
      continue;
    return op;
  }
  return nullptr;
}

/// Where the call goes: right before the pass after `afterPasses` passes (a
/// rank waits for that pass's inputs there), or with every pass done, at the
/// tail point.
Operation *insertionPoint(Block &body, int64_t afterPasses, TailRule rule,
                          const std::set<std::string> &factorParams) {
  int64_t passes = 0;
  for (Operation &op : body) {
    if (isPass(op) && passes++ == afterPasses)
      return &op;
    if (isStepEnd(op))
      break;
  }
  return tailPoint(body, rule, factorParams);
}

/// Window step 0: each placed factor call moves later, to right before the
/// pass after `afterPasses` passes (or the step end). Calls are visited in
/// program order and each goes right before its target, so two calls with
/// one target keep their order (a factor's micro-batches stay in order).
void placeFactorCalls(Block &body, int64_t rank,
                      const std::map<std::tuple<int64_t, int64_t, bool, int64_t>, int64_t> &after,
                      const std::set<std::string> &factorParams) {
  SmallVector<RunStageOp> calls;
  for (Operation &op : body)
    if (isFactorCall(op))
      calls.push_back(cast<RunStageOp>(op));
  // The factor's call placed last: the next micro-batch's goes after it.
  std::map<std::pair<int64_t, bool>, Operation *> previous;
  for (RunStageOp call : calls) {
    if (!call.getLayer() || !call.getMicrobatch())
      continue;
    bool isB = call.getKind() == StageTaskKind::KfacFactorB;
    std::pair<int64_t, bool> factor{int64_t(*call.getLayer()), isB};
    auto it = after.find({rank, factor.first, isB, int64_t(*call.getMicrobatch())});
    Operation *target =
        it == after.end()
            ? nullptr
            : insertionPoint(body, it->second, TailRule::BeforeCollectives, factorParams);
    // Never earlier than where it is (right after its pass).
    if (target && call->isBeforeInBlock(target))
      call->moveBefore(target);
    Operation *&last = previous[factor];
    if (last && !last->isBeforeInBlock(call))
      call->moveAfter(last);
    last = call;
  }
}

/// pf-kfac-window-programs: addKfacWindowPrograms with the table given as an
/// option (pf-train computes it from the measured warm-up step).
struct KfacWindowProgramsPass
    : public mlir::pf::impl::PFKfacWindowProgramsBase<KfacWindowProgramsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    FailureOr<KfacPlacementTable> table = decodeKfacPlacementTable(placement, error);
    if (failed(table)) {
      module.emitError("pf-kfac-window-programs: ") << error;
      return signalPassFailure();
    }
    if (failed(addKfacWindowPrograms(module, steps, table->inverses, table->factors)))
      signalPassFailure();
  }
};

} // namespace

FailureOr<KfacPlacementTable> mlir::pf::decodeKfacPlacementTable(ArrayRef<int64_t> table,
                                                                 std::string &error) {
  if (table.size() % 4 != 0) {
    error = llvm::formatv("the placement has {0} numbers, not 4 per row", table.size()).str();
    return failure();
  }
  KfacPlacementTable out;
  for (size_t row = 0; row < table.size() / 4; ++row) {
    int64_t rank = table[4 * row], layer = table[4 * row + 1], where = table[4 * row + 2];
    int64_t after = table[4 * row + 3];
    auto bad = [&](StringRef what, int64_t value) {
      error = llvm::formatv("placement row {0}: {1} {2} is negative", row, what, value).str();
      return failure();
    };
    if (rank < 0)
      return bad("rank", rank);
    if (layer < 0)
      return bad("layer", layer);
    if (after < 0)
      return bad("passes before it", after);
    if (where >= 0) {
      out.inverses.push_back({rank, layer, where, after});
      continue;
    }
    // where = -(1 + 2·micro-batch + isB); -where - 1 cannot overflow.
    int64_t code = -(where + 1);
    out.factors.push_back({rank, layer, code % 2 == 1, code / 2, after});
  }
  return out;
}

LogicalResult mlir::pf::addKfacWindowPrograms(ModuleOp module, int64_t steps,
                                              ArrayRef<KfacInversePlacement> placements,
                                              ArrayRef<KfacFactorCallPlacement> factors) {
  if (steps < 1)
    return module.emitError("K-FAC window: steps per window must be >= 1, got ") << steps;
  SmallVector<RankProgramOp> warmup;
  for (RankProgramOp program : module.getOps<RankProgramOp>()) {
    if (program.getWindowStep())
      return program.emitError("K-FAC window: the module has window programs already");
    warmup.push_back(program);
  }
  if (warmup.empty())
    return module.emitError("K-FAC window: no pf.rank_program (run pf-build-rank-programs)");
  std::map<std::pair<int64_t, int64_t>, const KfacInversePlacement *> byLayer;
  for (const KfacInversePlacement &p : placements) {
    if (p.windowStep < 0 || p.windowStep >= steps)
      return module.emitError(llvm::formatv(
          "K-FAC window: layer {0} of rank {1} placed in window step {2}, not in [0, {3})",
          p.layer, p.rank, p.windowStep, steps));
    if (!byLayer.insert({{p.rank, p.layer}, &p}).second)
      return module.emitError(llvm::formatv("K-FAC window: layer {0} of rank {1} placed twice",
                                            p.layer, p.rank));
  }
  std::map<std::tuple<int64_t, int64_t, bool, int64_t>, int64_t> factorAfter;
  for (const KfacFactorCallPlacement &f : factors)
    if (!factorAfter.insert({{f.rank, f.layer, f.isB, f.microbatch}, f.afterPasses}).second)
      return module.emitError(llvm::formatv(
          "K-FAC window: factor {0} of layer {1}, micro-batch {2}, rank {3} placed twice",
          f.isB ? "B" : "A", f.layer, f.microbatch, f.rank));
  // A layer several ranks invert in the warm-up step (Chimera's replicas):
  // the placement gives it to one of them.
  std::map<int64_t, SmallVector<int64_t>> invertingRanks;
  for (RankProgramOp program : warmup)
    for (RunStageOp run : program.getBody().front().getOps<RunStageOp>())
      if (run.getKind() == StageTaskKind::KfacInverse && run.getLayer())
        invertingRanks[int64_t(*run.getLayer())].push_back(program.getRankValue());
  for (auto &[layer, ranks] : invertingRanks) {
    int64_t placedOn = llvm::count_if(
        ranks, [&, layer = layer](int64_t rank) { return byLayer.count({rank, layer}); });
    if (placedOn != 1)
      return module.emitError(llvm::formatv(
          "K-FAC window: the inverse of layer {0} is placed on {1} of the ranks that invert it "
          "in the warm-up step, not on one",
          layer, placedOn));
  }
  SymbolTableCollection symbols;
  std::set<std::string> factorParams;
  module.walk([&](KFACUpdateFactorOp update) { factorParams.insert(update.getFactor().str()); });
  OpBuilder builder(module.getContext());
  for (RankProgramOp program : warmup) {
    int64_t rank = program.getRankValue();
    SmallVector<RunStageOp> inverses;
    bool promotes = false;
    // The inverses this rank hands over or receives in window step K-1.
    std::map<std::string, SmallVector<int64_t>> sharedInverses;
    for (Operation &op : program.getBody().front()) {
      promotes |= isa<KfacPromoteInversesOp>(op);
      auto run = dyn_cast<RunStageOp>(op);
      if (!run || run.getKind() != StageTaskKind::KfacInverse)
        continue;
      if (!run.getLayer())
        return run.emitError("K-FAC window: an inverse call without a layer");
      int64_t layer = int64_t(*run.getLayer());
      if (byLayer.count({rank, layer}))
        inverses.push_back(run);
      const SmallVector<int64_t> &ranks = invertingRanks[layer];
      if (ranks.size() > 1)
        for (StringRef inverse :
             kfacInverseParameters(symbols.lookupNearestSymbolFrom(run, run.getStageAttr()))
                 .inverses)
          sharedInverses[inverse.str()] = ranks;
    }
    builder.setInsertionPointAfter(program);
    for (int64_t k = 0; k < steps; ++k) {
      auto window = cast<RankProgramOp>(builder.clone(*program));
      window.setSymName(llvm::formatv("{0}_window{1}", program.getSymName(), k).str());
      window.setWindowStep(uint64_t(k));
      window.setWindowSteps(uint64_t(steps));
      Block &body = window.getBody().front();
      // Only window step 0 gathers curvature: the factor calls of the others
      // would do nothing (their `kfac_curvature` input is 0), and Chimera's
      // replicas have no new factors to sum.
      for (Operation &op : llvm::make_early_inc_range(body)) {
        auto reduce = dyn_cast<AllReduceOp>(op);
        bool factorSum = reduce && factorParams.count(reduce.getValue().str());
        if (isa<KfacPromoteInversesOp>(op) || (k > 0 && (isFactorCall(op) || factorSum)) ||
            (isa<RunStageOp>(op) && cast<RunStageOp>(op).getKind() == StageTaskKind::KfacInverse))
          op.erase();
      }
      if (k == 0)
        placeFactorCalls(body, rank, factorAfter, factorParams);
      if (k == 0 && promotes) {
        OpBuilder start = OpBuilder::atBlockBegin(&body);
        KfacPromoteInversesOp::create(start, program.getLoc());
      }
      for (RunStageOp inverse : inverses) {
        const KfacInversePlacement &p = *byLayer.at({rank, int64_t(*inverse.getLayer())});
        if (p.windowStep != k)
          continue;
        Operation *before =
            insertionPoint(body, p.afterPasses, TailRule::AfterFactorSums, factorParams);
        OpBuilder at(body.getParentOp()->getContext());
        if (before)
          at.setInsertionPoint(before);
        else
          at.setInsertionPointToEnd(&body);
        at.clone(*inverse);
      }
      // The last window step: the inverting replica hands each shared
      // layer's pending inverses to the others (the executor sums them with
      // -0.0, the identity, on the ranks that did not invert the layer).
      if (k == steps - 1 && !sharedInverses.empty()) {
        OpBuilder at(module.getContext());
        if (Operation *end = stepEnd(body))
          at.setInsertionPoint(end);
        else
          at.setInsertionPointToEnd(&body);
        for (const auto &[name, ranks] : sharedInverses) {
          auto param = symbols.lookupNearestSymbolFrom<ParamOp>(
              module, StringAttr::get(module.getContext(), name));
          if (!param)
            return module.emitError("K-FAC window: no pf.param '") << name << "'";
          AllReduceOp::create(at, program.getLoc(), name, ranks, ReductionOrder::Microbatch,
                              cast<RankedTensorType>(param.getType()));
        }
      }
      builder.setInsertionPointAfter(window);
    }
  }
  return verifyRankPrograms(module);
}
