//===- ClipGradients.cpp - clip the raw gradients by their global norm -----===//
//
// Runs on the gradients as autodiff made them, before K-FAC preconditioning:
// preconditioned gradients live on another scale (B⁻¹·∇W·A⁻¹ can be orders
// of magnitude larger), and a global norm over them would shrink every
// other parameter's gradient too. K-FAC bounds its own steps by KL-clipping.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFCLIPGRADIENTS
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct ClipGradientsPass : public mlir::pf::impl::PFClipGradientsBase<ClipGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-clip-gradients: no function with a body");
    if (!(maxNorm > 0))
      return func.emitError("pf-clip-gradients: max-norm must be > 0, got ")
             << maxNorm.getValue();
    SymbolTable symbols(module);
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    SmallVector<Value> grads;
    SmallVector<unsigned> positions;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
          name && name.getValue().starts_with("grad/") &&
          symbols.lookup<ParamOp>(name.getValue().drop_front(5))) {
        grads.push_back(ret.getOperand(i));
        positions.push_back(i);
      }
    if (grads.empty())
      return func.emitError("pf-clip-gradients: no grad/<parameter> result; run "
                            "pf-build-gradients first");
    OpBuilder builder(ret);
    auto clip = ClipByGlobalNormOp::create(builder, func.getLoc(), ValueRange(grads).getTypes(),
                                           grads, builder.getF64FloatAttr(maxNorm));
    for (auto [position, clipped] : llvm::zip(positions, clip.getClipped()))
      ret.setOperand(position, clipped);
    return success();
  }
};
} // namespace
