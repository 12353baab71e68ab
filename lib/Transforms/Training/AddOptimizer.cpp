//===- AddOptimizer.cpp - in-place optimizer updates from grad/ results -----===//
//
// On a module split into pipeline stages (pf-split-stages), the updates go
// into one new function per stage, `stage<s>_update`, whose arguments are the
// stage's gradients as the host combined them (over micro-batches, tied
// copies summed, clipped): the per-rank programs call it once per step.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFADDOPTIMIZER
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// BERT's recipe: no weight decay on biases and LayerNorm parameters.
bool decays(StringRef param) {
  return !param.ends_with("bias") && !param.contains("LayerNorm") &&
         !param.contains("layer_norm");
}

struct AddOptimizerPass : public mlir::pf::impl::PFAddOptimizerBase<AddOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  /// A zero-initialized state parameter next to `param`; the one that exists
  /// already when two stages update the same (tied) parameter.
  FlatSymbolRefAttr addState(SymbolTable &symbols, ParamOp param, StringRef suffix) {
    std::string name = (param.getSymName() + "." + suffix).str();
    if (auto existing = symbols.lookup<ParamOp>(name))
      return FlatSymbolRefAttr::get(existing.getSymNameAttr());
    OpBuilder builder(param);
    builder.setInsertionPointAfter(param);
    auto type = cast<RankedTensorType>(param.getType());
    auto zero = DenseElementsAttr::get(type, builder.getZeroAttr(type.getElementType()));
    auto state = ParamOp::create(builder, param.getLoc(), name, type, zero);
    symbols.insert(state, builder.getInsertionPoint());
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  }

  Optimizer ruleOfKfacLayers() const {
    switch (kfacOptimizer) {
    case KfacOptimizer::Same: return optimizer;
    case KfacOptimizer::SGD: return Optimizer::SGD;
    case KfacOptimizer::AdamW: return Optimizer::AdamW;
    case KfacOptimizer::LAMB: return Optimizer::LAMB;
    }
    return optimizer;
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> backwards = stageGradientFunctions(module);
    if (!backwards.empty()) {
      for (func::FuncOp backward : backwards) {
        func::FuncOp update = buildStageUpdate(module, symbols, backward);
        // A stage of parameter-free ops only: the cut, not the step, is wrong.
        if (update.getNumArguments() == 0)
          return backward.emitError("pf-add-optimizer: stage ")
                 << backward->getAttrOfType<IntegerAttr>(kStageAttrName).getInt()
                 << " has no parameter to update (its backward returns no "
                    "grad/<parameter>): pf-split-stages gave it only parameter-free ops";
        if (failed(addUpdates(module, symbols, update)))
          return failure();
      }
      return success();
    }
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-add-optimizer: no function with a body");
    return addUpdates(module, symbols, func);
  }

  /// `stage<s>_update(grad/<p>...)` returning its arguments, for the
  /// `grad/<parameter>` results of `backward`; addUpdates turns them into
  /// updates.
  static func::FuncOp buildStageUpdate(ModuleOp module, SymbolTable &symbols,
                                       func::FuncOp backward) {
    SmallVector<Type> types;
    SmallVector<StringAttr> names;
    for (unsigned i = 0; i < backward.getNumResults(); ++i)
      if (auto name = backward.getResultAttrOfType<StringAttr>(i, kNameAttrName);
          name && name.getValue().starts_with("grad/") &&
          symbols.lookup<ParamOp>(name.getValue().drop_front(5))) {
        types.push_back(backward.getResultTypes()[i]);
        names.push_back(name);
      }
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(backward);
    int64_t stage = backward->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
    std::string symbol = "stage" + std::to_string(stage) + "_update";
    auto update = func::FuncOp::create(builder, backward.getLoc(), symbol,
                                       builder.getFunctionType(types, types));
    update->setAttr(kStageAttrName, backward->getAttr(kStageAttrName));
    if (Attribute blocks = backward->getAttr(kStageBlocksAttrName))
      update->setAttr(kStageBlocksAttrName, blocks);
    Block *entry = update.addEntryBlock();
    for (auto [i, name] : llvm::enumerate(names)) {
      update.setArgAttr(i, kNameAttrName, name);
      update.setResultAttr(i, kNameAttrName, name);
    }
    builder.setInsertionPointToEnd(entry);
    func::ReturnOp::create(builder, backward.getLoc(), entry->getArguments());
    symbols.insert(update);
    return update;
  }

  LogicalResult addUpdates(ModuleOp module, SymbolTable &symbols, func::FuncOp func) {
    Block &block = func.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    OpBuilder builder(ret);
    Location loc = func.getLoc();
    // `lr` and `step` may exist already (the K-FAC passes add them).
    Value baseLR = getOrAddScalarArgument(func, "lr", builder.getF64Type());
    Value step = getOrAddScalarArgument(func, "step", builder.getI64Type());
    // Parameters of K-FAC layers (their weights and biases), from the state
    // pf-insert-kfac created.
    llvm::StringSet<> kfacParams;
    for (auto param : module.getOps<ParamOp>())
      if (auto weight = param->getAttrOfType<StringAttr>(kKfacWeightAttrName)) {
        kfacParams.insert(weight.getValue());
        if (auto bias = param->getAttrOfType<StringAttr>(kKfacBiasAttrName))
          kfacParams.insert(bias.getValue());
      }
    Value kfacLR = baseLR;
    if (kfacLRScale != 1.0) {
      auto scalar = RankedTensorType::get({}, builder.getF64Type());
      Value scale = ConstantOp::create(builder, loc, DenseElementsAttr::get(
                                                          scalar, builder.getF64FloatAttr(kfacLRScale)));
      kfacLR = MulOp::create(builder, loc, baseLR, scale);
    }

    SmallVector<Value> grads(ret.getOperands());
    SmallVector<Value> kept;
    SmallVector<Attribute> keptNames;
    int64_t updates = 0;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
      Value grad = grads[i];
      StringRef paramName;
      if (name && name.getValue().starts_with("grad/"))
        paramName = name.getValue().drop_front(5);
      auto param = paramName.empty() ? ParamOp() : symbols.lookup<ParamOp>(paramName);
      if (!param || keepGradients) {
        kept.push_back(grad);
        keptNames.push_back(name ? name : builder.getStringAttr("output" + std::to_string(i)));
      }
      if (!param)
        continue;
      double decay = decays(paramName) ? weightDecay : 0.0;
      auto paramRef = FlatSymbolRefAttr::get(param.getSymNameAttr());
      bool kfacLayer = kfacParams.contains(paramName);
      Optimizer rule = kfacLayer ? ruleOfKfacLayers() : optimizer.getValue();
      Value lr = kfacLayer ? kfacLR : baseLR;
      if (rule == Optimizer::SGD) {
        FlatSymbolRefAttr buffer = momentum != 0 ? addState(symbols, param, "momentum") : nullptr;
        SGDUpdateOp::create(builder, loc, grad, lr, paramRef, buffer,
                            builder.getF64FloatAttr(momentum), builder.getF64FloatAttr(decay),
                            nesterov ? builder.getUnitAttr() : UnitAttr());
      } else {
        FlatSymbolRefAttr m = addState(symbols, param, "exp_avg");
        FlatSymbolRefAttr v = addState(symbols, param, "exp_avg_sq");
        if (rule == Optimizer::AdamW)
          AdamWUpdateOp::create(builder, loc, grad, lr, step, paramRef, m, v,
                                builder.getF64FloatAttr(beta1), builder.getF64FloatAttr(beta2),
                                builder.getF64FloatAttr(eps), builder.getF64FloatAttr(decay));
        else
          LAMBUpdateOp::create(builder, loc, grad, lr, step, paramRef, m, v,
                               builder.getF64FloatAttr(beta1), builder.getF64FloatAttr(beta2),
                               builder.getF64FloatAttr(eps), builder.getF64FloatAttr(decay),
                               builder.getF64FloatAttr(10.0));
      }
      ++updates;
    }
    if (updates == 0)
      return func.emitError("pf-add-optimizer: no result named grad/<parameter>; run "
                            "pf-build-gradients first");
    ret->setOperands(kept);
    SmallVector<DictionaryAttr> argAttrs;
    func.setType(builder.getFunctionType(block.getArgumentTypes(), ValueRange(kept).getTypes()));
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      func.setResultAttrs(i, ArrayRef<NamedAttribute>{});
    for (auto [i, name] : llvm::enumerate(keptNames))
      func.setResultAttr(i, kNameAttrName, name);
    return success();
  }
};
} // namespace
