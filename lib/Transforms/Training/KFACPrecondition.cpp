//===- KFACPrecondition.cpp - precondition K-FAC layers' gradients ----------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFKFACPRECONDITION
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct KFACPreconditionPass
    : public mlir::pf::impl::PFKFACPreconditionBase<KFACPreconditionPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-kfac-precondition: no function with a body");
    if (refreshEvery < 1 || retries < 0 || damping < 0 || refreshWarmup < 0)
      return func.emitError("pf-kfac-precondition: refresh-every must be >= 1, retries, "
                            "refresh-warmup and damping >= 0");
    SymbolTable symbols(module);
    Block &block = func.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value step;
    for (unsigned i = 0; i < block.getNumArguments(); ++i)
      if (auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttrName); name && name == "step")
        step = block.getArgument(i);
    if (!step)
      return func.emitError("pf-kfac-precondition: no 'step' argument; run pf-insert-kfac first");

    llvm::StringMap<unsigned> resultOf;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName))
        resultOf[name.getValue()] = i;

    OpBuilder builder(ret);
    SmallVector<Value> results(ret.getOperands());
    Value issues;
    int64_t layers = 0;
    // For KL-clipping: (result position, preconditioned update, raw gradient).
    SmallVector<std::tuple<unsigned, Value, Value>> updates;
    SmallVector<std::pair<std::string, Value>> exported;
    for (auto factorA : module.getOps<ParamOp>()) {
      if (!factorA.getSymName().ends_with(".kfac.A"))
        continue;
      auto weightName = factorA->getAttrOfType<StringAttr>(kKfacWeightAttrName);
      auto biasName = factorA->getAttrOfType<StringAttr>(kKfacBiasAttrName);
      if (!weightName)
        continue;
      auto weightGrad = resultOf.find(("grad/" + weightName.getValue()).str());
      if (weightGrad == resultOf.end())
        continue;
      std::string prefix = (weightName.getValue() + ".kfac.").str();
      // The layer's ops carry its weight's location (the ONNX initializer
      // name), so profiles attribute them to the right block.
      Location loc = factorA.getLoc();
      auto sym = [&](StringRef suffix) {
        return FlatSymbolRefAttr::get(builder.getContext(), prefix + suffix.str());
      };
      auto inverse = [&](StringRef suffix) -> Value {
        auto param = symbols.lookup<ParamOp>(prefix + suffix.str());
        return ParamRefOp::create(builder, loc, param.getType(), param.getSymName());
      };
      auto refresh = KFACRefreshInversesOp::create(
          builder, loc, RankedTensorType::get({}, builder.getI32Type()), step, sym("A"), sym("B"),
          sym("A_inv"), sym("B_inv"), builder.getF64FloatAttr(damping),
          builder.getI64IntegerAttr(refreshEvery), builder.getI64IntegerAttr(retries),
          builder.getI64IntegerAttr(refreshWarmup));
      issues = issues ? AddOp::create(builder, loc, issues, refresh.getOutcome()).getResult()
                      : refresh.getOutcome();

      Value gradW = results[weightGrad->second];
      Value gradB;
      auto biasGrad = biasName ? resultOf.find(("grad/" + biasName.getValue()).str())
                               : resultOf.end();
      if (biasGrad != resultOf.end())
        gradB = results[biasGrad->second];
      auto precondition = KFACPreconditionOp::create(
          builder, loc, gradW, inverse("A_inv"), inverse("B_inv"), gradB);
      results[weightGrad->second] = precondition.getWeightUpdate();
      updates.push_back({weightGrad->second, precondition.getWeightUpdate(), gradW});
      if (exportFactors)
        for (StringRef suffix : {"A", "B", "A_inv", "B_inv"})
          exported.push_back({("kfac/" + suffix + "/" + weightName.getValue()).str(),
                              inverse(suffix)});
      if (gradB) {
        results[biasGrad->second] = precondition.getBiasUpdate();
        updates.push_back({biasGrad->second, precondition.getBiasUpdate(), gradB});
      }
      ++layers;
    }
    if (layers == 0)
      return func.emitError("pf-kfac-precondition: no grad/<weight> result of a layer "
                            "pf-insert-kfac prepared; run pf-insert-kfac and "
                            "pf-build-gradients first");
    if (klClip < 0)
      return func.emitError("pf-kfac-precondition: kl-clip must be >= 0");
    if (klClip > 0) {
      Value lr = getOrAddScalarArgument(func, "lr", builder.getF64Type());
      SmallVector<Value> u, g;
      for (auto &[position, update, grad] : updates) {
        u.push_back(update);
        g.push_back(grad);
      }
      auto clip = KFACKLClipOp::create(builder, func.getLoc(), ValueRange(u).getTypes(), lr, u, g,
                                       builder.getF64FloatAttr(klClip));
      for (auto [entry, clipped] : llvm::zip(updates, clip.getClipped()))
        results[std::get<0>(entry)] = clipped;
    }
    results.push_back(issues);
    unsigned first = results.size() - 1;
    for (auto &[name, value] : exported)
      results.push_back(value);
    ret->setOperands(results);
    func.setType(builder.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    func.setResultAttr(first, kNameAttrName, builder.getStringAttr("kfac/issues"));
    for (auto [i, entry] : llvm::enumerate(exported))
      func.setResultAttr(first + 1 + i, kNameAttrName, builder.getStringAttr(entry.first));
    return success();
  }
};
} // namespace
