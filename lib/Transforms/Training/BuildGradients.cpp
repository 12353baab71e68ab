//===- BuildGradients.cpp - reverse-mode autodiff of a pf function ---------===//
//
// Appends the backward pass to the entry function: every op on the path from
// the differentiated values to the objective builds its operand gradients
// through GradientOpInterface; the gradients become extra results
// `grad/<name>`. The pass knows no op by name.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Training/Passes.h"
#include "pf/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFBUILDGRADIENTS
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<ShapedType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

struct BuildGradientsPass : public mlir::pf::impl::PFBuildGradientsBase<BuildGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    nextGradId = 0;
    ModuleOp module = getOperation();
    bool wantParams = wrt == "params" || wrt == "all";
    bool wantInputs = wrt == "inputs" || wrt == "all";
    if (!wantParams && !wantInputs)
      return module.emitError("pf-build-gradients: wrt must be params, inputs or all, got '")
             << wrt << "'";
    func::FuncOp func;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal() && !func && (functionName.empty() || f.getSymName() == functionName))
        func = f;
    if (!func)
      return module.emitError("pf-build-gradients: no function with a body")
             << (functionName.empty() ? "" : " named '" + functionName + "'");
    if (func.getBody().getBlocks().size() != 1)
      return func.emitError("pf-build-gradients: expected a single-block function");
    Block &block = func.getBody().front();
    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    if (!ret)
      return func.emitError("pf-build-gradients: expected a func.return terminator");
    if (seed < 0 || seed >= int64_t(ret.getNumOperands()))
      return func.emitError("pf-build-gradients: seed ")
             << int64_t(seed) << " is not a result index (the function has " << ret.getNumOperands()
             << " results)";
    Value objective = ret.getOperand(seed);
    auto objectiveType = dyn_cast<RankedTensorType>(objective.getType());
    if (!objectiveType || !objectiveType.hasStaticShape() || !isFloatTensor(objective))
      return func.emitError("pf-build-gradients: the objective (result ")
             << int64_t(seed) << ") must be a statically shaped float tensor, got "
             << objective.getType();

    // The differentiated values: named parameter reads and/or float inputs.
    llvm::MapVector<StringRef, SmallVector<Value>> paramReads;
    SmallVector<std::pair<std::string, Value>> inputs;
    DenseSet<Value> varied;
    if (wantParams)
      for (auto ref : block.getOps<ParamRefOp>())
        if (isFloatTensor(ref.getOutput())) {
          paramReads[ref.getName()].push_back(ref.getOutput());
          varied.insert(ref.getOutput());
        }
    if (wantInputs)
      for (BlockArgument arg : block.getArguments())
        if (isFloatTensor(arg)) {
          auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttrName);
          inputs.push_back({name ? name.str() : "input" + std::to_string(arg.getArgNumber()),
                            arg});
          varied.insert(arg);
        }

    // Forward: values that depend on a differentiated value (floats only).
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator()) {
      ops.push_back(&op);
      if (llvm::any_of(op.getOperands(), [&](Value v) { return varied.contains(v); }))
        for (Value r : op.getResults())
          if (isFloatTensor(r))
            varied.insert(r);
    }
    // Backward: values the objective depends on.
    DenseSet<Value> useful{objective};
    for (Operation *op : llvm::reverse(ops))
      if (llvm::any_of(op->getResults(), [&](Value v) { return useful.contains(v); }))
        for (Value v : op->getOperands())
          useful.insert(v);

    OpBuilder b(ret);
    DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted)
        it->second = tagSum(AddOp::create(b, g.getLoc(), it->second, g));
    };
    // d(sum(objective))/d(objective) = ones.
    accumulate(objective,
               ConstantOp::create(b, func.getLoc(),
                                  DenseElementsAttr::get(objectiveType,
                                                         FloatAttr::get(objectiveType.getElementType(), 1.0))));

    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= bool(resultGrads.back());
      }
      if (!any)
        continue;
      SmallVector<bool> wanted;
      for (Value v : op->getOperands())
        wanted.push_back(varied.contains(v) && useful.contains(v) && isFloatTensor(v));
      if (!llvm::is_contained(wanted, true))
        continue;
      auto iface = dyn_cast<GradientOpInterface>(op);
      if (!iface)
        return op->emitError("pf-build-gradients: '")
               << op->getName()
               << "' has no gradient rule (GradientOpInterface) but lies on the path to the "
                  "objective";
      if (llvm::any_of(resultGrads, [](Value g) { return !g; }))
        for (auto [i, r] : llvm::enumerate(op->getResults()))
          if (!resultGrads[i] && isFloatTensor(r)) {
            auto type = dyn_cast<RankedTensorType>(r.getType());
            if (!type || !type.hasStaticShape())
              return op->emitError("pf-build-gradients: result needs a static shape");
            resultGrads[i] = ConstantOp::create(
                b, op->getLoc(),
                DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), 0.0)));
          }
      SmallVector<Value> operandGrads;
      b.setInsertionPoint(ret);
      Operation *lastBefore = ret->getPrevNode();
      if (failed(iface.buildGradient(b, resultGrads, wanted, operandGrads)))
        return op->emitError("pf-build-gradients: could not build the gradient of '")
               << op->getName() << "'";
      tagRule(op, lastBefore, ret);
      if (operandGrads.size() != op->getNumOperands())
        return op->emitError("pf-build-gradients: the gradient rule of '")
               << op->getName() << "' returned " << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (!wanted[i] || !operandGrads[i])
          continue;
        if (operandGrads[i].getType() != v.getType())
          return op->emitError("pf-build-gradients: the gradient of operand #")
                 << i << " of '" << op->getName() << "' has type "
                 << operandGrads[i].getType() << ", expected " << v.getType();
        accumulate(v, operandGrads[i]);
      }
    }

    // The gradients become results; a value nothing reached gets zeros.
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      resultAttrs.push_back(func.getResultAttrDict(i) ? func.getResultAttrDict(i)
                                                      : b.getDictionaryAttr({}));
    auto addResult = [&](StringRef name, Value g, Type type) -> LogicalResult {
      if (!g) {
        auto ranked = dyn_cast<RankedTensorType>(type);
        if (!ranked || !ranked.hasStaticShape())
          return func.emitError("pf-build-gradients: '") << name << "' needs a static shape";
        g = ConstantOp::create(
            b, func.getLoc(),
            DenseElementsAttr::get(ranked, FloatAttr::get(ranked.getElementType(), 0.0)));
      }
      results.push_back(g);
      resultAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(kNameAttrName, b.getStringAttr("grad/" + name))));
      return success();
    };
    b.setInsertionPoint(ret);
    for (auto &[name, reads] : paramReads) {
      Value sum;
      for (Value read : reads)
        if (Value g = grads.lookup(read))
          sum = sum ? Value(tagSum(AddOp::create(b, func.getLoc(), sum, g))) : g;
      if (failed(addResult(name, sum, reads.front().getType())))
        return failure();
    }
    for (auto &[name, arg] : inputs)
      if (failed(addResult(name, grads.lookup(arg), arg.getType())))
        return failure();

    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
    return success();
  }

  /// With tag-origin: `forward` gets a fresh pf.grad_id and the ops its
  /// gradient rule built (after `lastBefore`, before `end`) pf.grad_of = id.
  void tagRule(Operation *forward, Operation *lastBefore, Operation *end) {
    if (!tagOrigin)
      return;
    auto id = IntegerAttr::get(IntegerType::get(&getContext(), 64), nextGradId++);
    forward->setAttr(kGradIdAttrName, id);
    for (Operation *op = lastBefore->getNextNode(); op != end; op = op->getNextNode())
      op->setAttr(kGradOfAttrName, id);
  }

  /// With tag-origin: marks a sum of partial gradients of one value.
  AddOp tagSum(AddOp add) {
    if (tagOrigin)
      add->setAttr(kGradSumAttrName, UnitAttr::get(&getContext()));
    return add;
  }

  int64_t nextGradId = 0;
};

} // namespace
