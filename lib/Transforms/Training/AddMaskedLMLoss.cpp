//===- AddMaskedLMLoss.cpp - masked-LM cross-entropy as the objective -------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFADDMASKEDLMLOSS
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct AddMaskedLMLossPass
    : public mlir::pf::impl::PFAddMaskedLMLossBase<AddMaskedLMLossPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func)
      return getOperation().emitError("pf-add-masked-lm-loss: no function with a body");
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int64_t index = -1;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName); name && name == output)
        index = i;
    if (index < 0)
      return func.emitError("pf-add-masked-lm-loss: the function has no result named '")
             << output.getValue() << "'";
    Value logits = ret.getOperand(index);
    auto type = dyn_cast<RankedTensorType>(logits.getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 2 ||
        !isa<FloatType>(type.getElementType()))
      return func.emitError("pf-add-masked-lm-loss: logits must be a static float tensor "
                            "[..., vocabulary], got ")
             << logits.getType();

    OpBuilder builder(ret);
    auto labelsType = RankedTensorType::get(type.getShape().drop_back(), builder.getI64Type());
    Block &block = func.getBody().front();
    Value labels = block.addArgument(labelsType, func.getLoc());
    auto loss = SoftmaxCrossEntropyOp::create(builder, func.getLoc(), logits, labels,
                                              builder.getI64IntegerAttr(ignoreIndex));

    SmallVector<Value> results{loss.getLoss()};
    SmallVector<Attribute> names{builder.getStringAttr("loss")};
    if (keepOutputs)
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        results.push_back(ret.getOperand(i));
        auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
        names.push_back(name ? name : builder.getStringAttr("output" + std::to_string(i)));
      }
    ret->setOperands(results);
    func.setType(builder.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    func.setArgAttr(block.getNumArguments() - 1, kNameAttrName, builder.getStringAttr("labels"));
    for (auto [i, name] : llvm::enumerate(names))
      func.setResultAttr(i, kNameAttrName, name);
    return success();
  }
};
} // namespace
