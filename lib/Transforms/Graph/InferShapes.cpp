//===- InferShapes.cpp - static shape propagation and shape folding -----===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/FoldUtils.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFINFERSHAPES
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

/// How much a type knows: unranked < ranked with dynamic dims < static.
int64_t knownDims(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return -1;
  return llvm::count_if(ranked.getShape(),
                        [](int64_t d) { return !ShapedType::isDynamic(d); });
}

/// Re-infers the result types of one op; returns true when one got refined.
FailureOr<bool> refineOp(Operation *op) {
  if (!isa<InferTypeOpInterface>(op))
    return false;
  SmallVector<Type> inferred;
  if (failed(inferResultTypes(op, inferred)))
    return failure();
  bool changed = false;
  for (auto [result, type] : llvm::zip(op->getResults(), inferred)) {
    if (result.getType() == type || knownDims(type) <= knownDims(result.getType()))
      continue;
    result.setType(type);
    changed = true;
  }
  return changed;
}

/// Makes function signatures agree with what their bodies return.
void updateSignature(func::FuncOp func) {
  if (func.isExternal())
    return;
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (!ret)
    return;
  SmallVector<Type> inputs(func.getBody().front().getArgumentTypes());
  func.setType(FunctionType::get(func.getContext(), inputs, ret.getOperandTypes()));
}

struct InferShapesPass : public mlir::pf::impl::PFInferShapesBase<InferShapesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Folding can expose more static shapes (Shape -> constant -> Reshape), and
    // refined shapes enable more folding: iterate to a fixed point.
    for (int round = 0; round < 32; ++round) {
      bool changed = false;
      WalkResult walk = module.walk([&](Operation *op) {
        FailureOr<bool> refined = refineOp(op);
        if (failed(refined))
          return WalkResult::interrupt();
        changed |= *refined;
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      if (failed(foldAll(module, changed)))
        return signalPassFailure();
      if (!changed)
        break;
    }
    module.walk(updateSignature);
    if (requireStatic && failed(checkStatic(module)))
      signalPassFailure();
  }

  LogicalResult foldAll(ModuleOp module, bool &changed) {
    GreedyRewriteConfig config;
    config.setMaxIterations(4);
    bool folded = false;
    RewritePatternSet none(module.getContext());
    FrozenRewritePatternSet frozen(std::move(none));
    LogicalResult result = success();
    module.walk([&](func::FuncOp func) {
      bool funcChanged = false;
      if (failed(applyPatternsGreedily(func, frozen, config, &funcChanged)))
        result = success(); // not converged is fine: the outer loop iterates
      folded |= funcChanged;
    });
    changed |= folded;
    return result;
  }

  LogicalResult checkStatic(ModuleOp module) {
    LogicalResult status = success();
    module.walk([&](Operation *op) {
      if (isa<func::FuncOp, ModuleOp>(op))
        return;
      for (Value result : op->getResults()) {
        auto type = dyn_cast<TensorType>(result.getType());
        if (type && !type.hasStaticShape()) {
          op->emitError("result type ")
              << type << " is not static after shape inference; fix the dynamic "
                         "input dimensions (e.g. pf-translate --shape NAME=DxD)";
          status = failure();
          return;
        }
      }
    });
    return status;
  }
};
} // namespace
