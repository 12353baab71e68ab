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

/// Where the call goes: right before the pass after `afterPasses` passes (a
/// rank waits for that pass's inputs there), or with every pass done, before
/// the step end.
Operation *insertionPoint(Block &body, int64_t afterPasses) {
  int64_t passes = 0;
  for (Operation &op : body) {
    if (isPass(op) && passes++ == afterPasses)
      return &op;
    if (isStepEnd(op))
      return &op;
  }
  return nullptr;
}

/// Window step 0: each placed factor call moves later, to right before the
/// pass after `afterPasses` passes (or the step end). Calls are visited in
/// program order and each goes right before its target, so two calls with
/// one target keep their order (a factor's micro-batches stay in order).
void placeFactorCalls(Block &body, int64_t rank,
                      const std::map<std::tuple<int64_t, int64_t, bool, int64_t>, int64_t> &after) {
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
    Operation *target = it == after.end() ? nullptr : insertionPoint(body, it->second);
    // Never earlier than where it is (right after its pass).
    if (target && call->isBeforeInBlock(target))
      call->moveBefore(target);
    Operation *&last = previous[factor];
    if (last && !last->isBeforeInBlock(call))
      call->moveAfter(last);
    last = call;
  }
}

} // namespace

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
  OpBuilder builder(module.getContext());
  for (RankProgramOp program : warmup) {
    int64_t rank = program.getRankValue();
    SmallVector<RunStageOp> inverses;
    bool promotes = false;
    for (Operation &op : program.getBody().front()) {
      if (auto run = dyn_cast<RunStageOp>(op); run && run.getKind() == StageTaskKind::KfacInverse)
        inverses.push_back(run);
      promotes |= isa<KfacPromoteInversesOp>(op);
    }
    for (RunStageOp inverse : inverses)
      if (!inverse.getLayer() || !byLayer.count({rank, int64_t(*inverse.getLayer())}))
        return inverse.emitError(llvm::formatv("K-FAC window: no placement for the inverse "
                                               "of layer {0} on rank {1}",
                                               inverse.getLayer() ? int64_t(*inverse.getLayer())
                                                                  : -1,
                                               rank));
    builder.setInsertionPointAfter(program);
    for (int64_t k = 0; k < steps; ++k) {
      auto window = cast<RankProgramOp>(builder.clone(*program));
      window.setSymName(llvm::formatv("{0}_window{1}", program.getSymName(), k).str());
      window.setWindowStep(uint64_t(k));
      window.setWindowSteps(uint64_t(steps));
      Block &body = window.getBody().front();
      // Only window step 0 gathers curvature: the factor calls of the others
      // would do nothing (their `kfac_curvature` input is 0).
      for (Operation &op : llvm::make_early_inc_range(body))
        if (isa<KfacPromoteInversesOp>(op) || (k > 0 && isFactorCall(op)) ||
            (isa<RunStageOp>(op) && cast<RunStageOp>(op).getKind() == StageTaskKind::KfacInverse))
          op.erase();
      if (k == 0)
        placeFactorCalls(body, rank, factorAfter);
      if (k == 0 && promotes) {
        OpBuilder start = OpBuilder::atBlockBegin(&body);
        KfacPromoteInversesOp::create(start, program.getLoc());
      }
      for (RunStageOp inverse : inverses) {
        const KfacInversePlacement &p = *byLayer.at({rank, int64_t(*inverse.getLayer())});
        if (p.windowStep != k)
          continue;
        Operation *before = insertionPoint(body, p.afterPasses);
        OpBuilder at(body.getParentOp()->getContext());
        if (before)
          at.setInsertionPoint(before);
        else
          at.setInsertionPointToEnd(&body);
        at.clone(*inverse);
      }
      builder.setInsertionPointAfter(window);
    }
  }
  return verifyRankPrograms(module);
}
