//===- NameWeights.cpp - linear weights named after their layer -------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFNAMEWEIGHTS
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The name of a parameter read by `value` (a pf.param_ref), or "".
StringRef paramName(Value value) {
  auto ref = value ? value.getDefiningOp<ParamRefOp>() : ParamRefOp();
  return ref ? ref.getName() : StringRef();
}

struct NameWeightsPass : public mlir::pf::impl::PFNameWeightsBase<NameWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Generated weight name -> the name its layers' biases give it ("" when
    // two layers disagree).
    llvm::MapVector<StringRef, std::string> proposals;
    module.walk([&](LinearOp linear) {
      StringRef weight = paramName(linear.getWeight());
      if (weight.empty() || !isExporterGeneratedName(weight))
        return;
      StringRef bias = paramName(linear.getBias());
      std::string name = bias.ends_with(".bias") ? (bias.drop_back(4) + "weight").str() : "";
      auto [it, isNew] = proposals.try_emplace(weight, name);
      if (!isNew && it->second != name)
        it->second.clear();
    });
    SymbolTable symbols(module);
    for (auto &[weight, name] : proposals) {
      auto param = symbols.lookup<ParamOp>(weight);
      if (!param || name.empty() || symbols.lookup(name))
        continue;
      StringAttr onnxName = param.getSymNameAttr();
      if (failed(symbols.rename(param, StringAttr::get(&getContext(), name)))) {
        param.emitError("pf-name-weights: cannot rename '") << weight << "' to '" << name << "'";
        return signalPassFailure();
      }
      param->setAttr(kOnnxNameAttrName, onnxName);
    }
  }
};
} // namespace
