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

bool isPass(Operation &op) {
  auto run = dyn_cast<RunStageOp>(op);
  return run && run.getMicrobatch().has_value();
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

} // namespace

LogicalResult mlir::pf::addKfacWindowPrograms(ModuleOp module, int64_t steps,
                                              ArrayRef<KfacInversePlacement> placements) {
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
      for (Operation &op : llvm::make_early_inc_range(body))
        if (isa<KfacPromoteInversesOp>(op) ||
            (isa<RunStageOp>(op) && cast<RunStageOp>(op).getKind() == StageTaskKind::KfacInverse))
          op.erase();
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
