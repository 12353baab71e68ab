//===- UntieInitializers.cpp - undo exporter de-duplication ---------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFUNTIEINITIALIZERS
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct UntieInitializersPass
    : public mlir::pf::impl::PFUntieInitializersBase<UntieInitializersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<IdentityOp> identities;
    module.walk([&](IdentityOp op) {
      if (op.getInput().getDefiningOp<ParamRefOp>() && op->hasAttr(kNameAttrName))
        identities.push_back(op);
    });
    // Copies follow their source in graph order (after the copies made
    // before them), so parameter order stays that of the exporter.
    DenseMap<Operation *, Operation *> lastCopy;
    for (IdentityOp identity : identities) {
      auto ref = identity.getInput().getDefiningOp<ParamRefOp>();
      auto source = symbols.lookup<ParamOp>(ref.getName());
      auto name = identity->getAttrOfType<StringAttr>(kNameAttrName);
      if (!source || !name)
        continue;
      Operation *&after = lastCopy[source];
      if (!after)
        after = source;
      OpBuilder builder(source);
      builder.setInsertionPointAfter(after);
      auto copy = ParamOp::create(builder, identity.getLoc(), name.getValue(),
                                  source.getType(), source.getValueAttr());
      // insert() renames on collision so every parameter keeps a unique name.
      symbols.insert(copy, builder.getInsertionPoint());
      after = copy;
      builder.setInsertionPoint(identity);
      auto newRef = ParamRefOp::create(builder, identity.getLoc(), ref.getType(),
                                       copy.getSymName());
      identity.getOutput().replaceAllUsesWith(newRef.getResult());
      identity.erase();
    }
  }
};
} // namespace
