//===- DeadCodeElimination.cpp - remove dead ops and unread parameters ---===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFDEADCODEELIMINATION
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct DeadCodeEliminationPass
    : public mlir::pf::impl::PFDeadCodeEliminationBase<DeadCodeEliminationPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(module.getContext());
    module.walk([&](func::FuncOp func) {
      (void)runRegionDCE(rewriter, func.getBody());
    });
    // Parameters nobody reads any more (e.g. after untying or fusion).
    llvm::StringSet<> used;
    if (auto uses = SymbolTable::getSymbolUses(&module.getBodyRegion()))
      for (const SymbolTable::SymbolUse &use : *uses)
        used.insert(use.getSymbolRef().getRootReference().getValue());
    for (auto param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
      if (!used.contains(param.getSymName()))
        param.erase();
  }
};
} // namespace
