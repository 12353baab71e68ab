//===- OutlineKfacFactors.cpp - K-FAC factor updates as own functions ------===//
//
// pf-outline-kfac-factors: each per-call factor update of a pass function
// moves into `stage<s>_kfac_factor_{a,b}_<l>`, so that the rank programs can
// run the curvature work of a micro-batch where the schedule has a bubble
// instead of inside the pass (docs/pipeline-execution.md, "K-FAC in the
// bubbles").
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFAttrNames.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace mlir::pf {
#define GEN_PASS_DEF_PFOUTLINEKFACFACTORS
#include "pf/Transforms/Pipeline/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr llvm::StringLiteral kInversePrefix = "_kfac_inverse_";

bool isPassFunction(func::FuncOp func) {
  StringRef name = func.getSymName();
  return func->hasAttr(kStageAttrName) && name.starts_with("stage") &&
         (name.ends_with("_forward") || name.ends_with("_backward") ||
          name.ends_with("_backward_input") || name.ends_with("_backward_weight"));
}

StringAttr nameOfArgument(func::FuncOp func, unsigned index) {
  return func.getArgAttrOfType<StringAttr>(index, kNameAttrName);
}

struct OutlineKfacFactorsPass
    : public mlir::pf::impl::PFOutlineKfacFactorsBase<OutlineKfacFactorsPass> {
  void runOnOperation() override {
    module = getOperation();
    if (failed(findLayers()))
      return signalPassFailure();
    SmallVector<func::FuncOp> passes;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (isPassFunction(func) && !func.isExternal())
        passes.push_back(func);
    for (func::FuncOp pass : passes) {
      SmallVector<KFACUpdateFactorOp> updates;
      pass.walk([&](KFACUpdateFactorOp update) { updates.push_back(update); });
      for (KFACUpdateFactorOp update : updates)
        if (failed(outline(pass, update)))
          return signalPassFailure();
    }
  }

private:
  ModuleOp module;
  /// factor parameter -> its layer (the index of pf-kfac-precondition).
  std::map<std::string, int64_t> layerOf;

  LogicalResult findLayers() {
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      size_t at = name.find(kInversePrefix);
      int64_t layer = 0;
      if (at == StringRef::npos ||
          name.drop_front(at + kInversePrefix.size()).getAsInteger(10, layer))
        continue;
      func.walk([&](KFACRefreshInversesOp refresh) {
        layerOf[refresh.getFactorA().str()] = layer;
        layerOf[refresh.getFactorB().str()] = layer;
      });
    }
    if (layerOf.empty())
      return module.emitError("pf-outline-kfac-factors: the module has no "
                              "stage<s>_kfac_inverse_<l> functions (run "
                              "pf-kfac-precondition{bubbles} on the split module first)");
    return success();
  }

  /// The pf.name of `value` as an argument of `pass`, or null.
  static StringAttr argumentName(func::FuncOp pass, Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || arg.getOwner() != &pass.getBody().front())
      return {};
    return nameOfArgument(pass, arg.getArgNumber());
  }

  /// The pf.name under which `pass` returns `value` already, or null: a
  /// `saved/*` for the backward (kept on the rank anyway) before an earlier
  /// factor's `kfac_in/*` or an `act/*` (sent away).
  static StringAttr resultName(func::FuncOp pass, Value value) {
    auto ret = cast<func::ReturnOp>(pass.getBody().front().getTerminator());
    StringAttr found;
    for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
      auto name = pass.getResultAttrOfType<StringAttr>(unsigned(i), kNameAttrName);
      if (operand != value || !name)
        continue;
      if (name.getValue().starts_with(kSavedPrefix))
        return name;
      if (!found)
        found = name;
    }
    return found;
  }

  /// Returns `value` from `pass` as `name` (a new result).
  static void addResult(func::FuncOp pass, Value value, StringAttr name) {
    auto ret = cast<func::ReturnOp>(pass.getBody().front().getTerminator());
    ret->insertOperands(ret->getNumOperands(), value);
    NamedAttribute attr(StringAttr::get(pass.getContext(), kNameAttrName), name);
    (void)pass.insertResult(pass.getNumResults(), value.getType(),
                            DictionaryAttr::get(pass.getContext(), {attr}));
  }

  LogicalResult outline(func::FuncOp pass, KFACUpdateFactorOp update) {
    std::string factor = update.getFactor().str();
    auto layer = layerOf.find(factor);
    if (layer == layerOf.end())
      return update.emitOpError("pf-outline-kfac-factors: no inverse function refreshes '")
             << factor << "'";
    bool isA = StringRef(factor).ends_with(".kfac.A");
    int64_t stage = pass->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
    std::string name = "stage" + std::to_string(stage) + "_kfac_factor_" + (isA ? "a" : "b") +
                       "_" + std::to_string(layer->second);
    if (module.lookupSymbol(name))
      return update.emitOpError("pf-outline-kfac-factors: '")
             << factor << "' is updated by two passes (@" << name << " exists)";

    // The new function's arguments: the input, then every scalar operand as
    // the graph input of the same name.
    SmallVector<Value> operands;
    SmallVector<StringAttr> names;
    Value input = update.getInput();
    StringAttr inputName = argumentName(pass, input);
    if (!inputName)
      inputName = resultName(pass, input);
    if (!inputName) {
      inputName = StringAttr::get(&getContext(), kKfacInputPrefix + factor);
      addResult(pass, input, inputName);
    }
    operands.push_back(input);
    names.push_back(inputName);
    for (Value scalar : {update.getStep(), update.getCount(), update.getMicrobatch(),
                         update.getDue()}) {
      if (!scalar || llvm::is_contained(operands, scalar))
        continue;
      StringAttr scalarName = argumentName(pass, scalar);
      if (!scalarName)
        return update.emitOpError("pf-outline-kfac-factors: an operand is not a graph input "
                                  "of @")
               << pass.getSymName();
      operands.push_back(scalar);
      names.push_back(scalarName);
    }

    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(pass);
    auto type = FunctionType::get(&getContext(), ValueRange(operands).getTypes(), {});
    auto func = func::FuncOp::create(builder, update.getLoc(), name, type);
    func->setAttr(kStageAttrName, pass->getAttr(kStageAttrName));
    func->setAttr(kKfacAfterAttrName, builder.getStringAttr(pass.getSymName()));
    for (auto [i, argName] : llvm::enumerate(names))
      func.setArgAttr(unsigned(i), kNameAttrName, argName);
    Block *body = func.addEntryBlock();
    IRMapping mapping;
    mapping.map(operands, body->getArguments());
    builder.setInsertionPointToEnd(body);
    builder.clone(*update, mapping);
    func::ReturnOp::create(builder, update.getLoc());
    update.erase();
    return success();
  }
};
} // namespace
