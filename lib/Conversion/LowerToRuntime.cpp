//===- LowerToRuntime.cpp - pf ops -> calls of the pfrt C ABI --------------===//
#include "BufferPlan.h"
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

namespace mlir::pf {
#define GEN_PASS_DEF_PFLOWERTORUNTIME
#include "pf/Conversion/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr int kMaxRank = 8; // PFRT_MAX_RANK

/// ONNX / pfrt dtype code of an element type; 0 when the runtime has none.
int32_t dtypeCode(Type element) {
  if (element.isF32()) return 1;
  if (element.isF64()) return 11;
  if (element.isF16()) return 10;
  if (element.isInteger(64)) return 7;
  if (element.isInteger(32)) return 6;
  if (element.isInteger(8)) return 3;
  if (element.isInteger(1)) return 9;
  return 0;
}

/// Emits the calls of one function body.
class CallEmitter {
public:
  CallEmitter(ModuleOp module, func::FuncOp newFunc, BufferPlan &plan, bool profile)
      : module(module), plan(plan), ctx(module.getContext()), builder(ctx), profile(profile) {
    ptrType = LLVM::LLVMPointerType::get(ctx);
    i32 = builder.getI32Type();
    i64 = builder.getI64Type();
    f64 = builder.getF64Type();
    tensorType = LLVM::LLVMStructType::getLiteral(
        ctx, {ptrType, i32, i32, LLVM::LLVMArrayType::get(i64, kMaxRank)});
    Block *entry = newFunc.addEntryBlock();
    context = entry->getArgument(0);
    table = entry->getArgument(1);
    failBlock = new Block();
    newFunc.getBody().push_back(failBlock);
    Value code = failBlock->addArgument(i64, newFunc.getLoc());
    OpBuilder failBuilder = OpBuilder::atBlockEnd(failBlock);
    func::ReturnOp::create(failBuilder, newFunc.getLoc(), code);
    builder.setInsertionPointToEnd(entry);
  }

  LogicalResult emit(Operation *op, int64_t index);
  void finish(Location loc) {
    for (auto [from, to] : plan.outputCopies)
      call(loc, "pfrt_copy", {tensorPtr(loc, from), tensorPtr(loc, to)}, -1);
    func::ReturnOp::create(builder, loc, ValueRange{constI64(loc, 0)});
  }

  /// Each pf.kfac.update_factor: its position among the updates of its
  /// factor in program order, and how many there are.
  DenseMap<Operation *, std::pair<int64_t, int64_t>> factorUpdates;

private:
  // --- operands ------------------------------------------------------------
  Value tensorPtr(Location loc, int64_t tensor) {
    return LLVM::GEPOp::create(builder, loc, ptrType, tensorType, table,
                               ArrayRef<LLVM::GEPArg>{int32_t(tensor)});
  }
  Value operand(Location loc, Value v) {
    if (!v)
      return LLVM::ZeroOp::create(builder, loc, ptrType);
    return tensorPtr(loc, plan.tensorOf.lookup(v));
  }
  Value constI32(Location loc, int64_t v) {
    return arith::ConstantOp::create(builder, loc, builder.getI32IntegerAttr(v));
  }
  Value constI64(Location loc, int64_t v) {
    return arith::ConstantOp::create(builder, loc, builder.getI64IntegerAttr(v));
  }
  Value constF64(Location loc, double v) {
    return arith::ConstantOp::create(builder, loc, builder.getF64FloatAttr(v));
  }
  /// Address of a constant i64 array (axes, permutations, slice bounds).
  Value intArray(Location loc, ArrayRef<int64_t> values) {
    if (values.empty())
      return LLVM::ZeroOp::create(builder, loc, ptrType);
    // One global per distinct array (every block repeats its permutations).
    std::string &name = intArrays[std::vector<int64_t>(values.begin(), values.end())];
    if (!name.empty())
      return LLVM::AddressOfOp::create(builder, loc, ptrType, name);
    name = "__pf_ints_" + std::to_string(globals++);
    {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(i64, values.size());
      LLVM::GlobalOp::create(builder, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal,
                             name, builder.getI64TensorAttr(values));
    }
    return LLVM::AddressOfOp::create(builder, loc, ptrType, name);
  }

  /// Calls `name` (declaring it on first use) and branches to the failure
  /// block with (op index << 32 | status) when it does not return 0.
  void call(Location loc, StringRef name, ArrayRef<Value> args, int64_t opIndex) {
    SmallVector<Value> all{context};
    all.append(args.begin(), args.end());
    declare(loc, name, ValueRange(all).getTypes(), {i32});
    if (profile)
      hook(loc, "pf_profile_begin", opIndex);
    auto callOp = func::CallOp::create(builder, loc, name, TypeRange{i32}, all);
    if (profile)
      hook(loc, "pf_profile_end", opIndex);
    Value status = arith::ExtUIOp::create(builder, loc, i64, callOp.getResult(0));
    Value failed = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, status,
                                         constI64(loc, 0));
    Value code = arith::OrIOp::create(
        builder, loc, status, constI64(loc, (opIndex + 1) << 32));
    Block *current = builder.getInsertionBlock();
    Block *next = current->splitBlock(builder.getInsertionPoint());
    builder.setInsertionPointToEnd(current);
    cf::CondBranchOp::create(builder, loc, failed, failBlock, ValueRange{code}, next,
                             ValueRange{});
    builder.setInsertionPointToStart(next);
  }

  void declare(Location loc, StringRef name, TypeRange argTypes, TypeRange results) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(module.getBody());
    auto decl = func::FuncOp::create(builder, loc, name,
                                     builder.getFunctionType(argTypes, results));
    decl.setPrivate();
  }

  /// A host profiling hook around a kernel call (op index -1: output copies).
  void hook(Location loc, StringRef name, int64_t opIndex) {
    declare(loc, name, {i64}, {});
    func::CallOp::create(builder, loc, name, TypeRange{}, ValueRange{constI64(loc, opIndex)});
  }

  /// Entry of a parameter named by symbol.
  Value paramPtr(Location loc, FlatSymbolRefAttr name) {
    if (!name)
      return LLVM::ZeroOp::create(builder, loc, ptrType);
    return tensorPtr(loc, plan.paramTensor.lookup(name.getValue()));
  }
  /// The value of a 0-d tensor (learning rate, step), read at run time.
  Value loadScalar(Location loc, Value v, Type type) {
    Value data = LLVM::LoadOp::create(builder, loc, ptrType, operand(loc, v));
    return LLVM::LoadOp::create(builder, loc, type, data);
  }

  /// Kernels that take an array of descriptors (concat, clipping) get new
  /// table entries viewing `values`, one after the other; returns the first.
  int64_t addContiguousViews(ValueRange values) {
    int64_t first = int64_t(plan.tensors.size());
    for (Value v : values) {
      PlannedTensor view = plan.tensors[plan.tensorOf.lookup(v)];
      plan.addTensor(view.buffer, view.type);
    }
    return first;
  }

  /// A stack slot for one double (outputs of pfrt_dot and friends), allocated
  /// once in the entry block.
  Value scratchF64(Location loc) {
    if (!f64Slot) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(&builder.getInsertionBlock()->getParent()->front());
      Value one = arith::ConstantOp::create(builder, loc, builder.getI64IntegerAttr(1));
      f64Slot = LLVM::AllocaOp::create(builder, loc, ptrType, f64, one);
    }
    return f64Slot;
  }

  /// Runs `body` only when `condition` (i1) holds.
  template <typename Fn>
  void emitIf(Location loc, Value condition, Fn &&body) {
    Block *current = builder.getInsertionBlock();
    Block *cont = current->splitBlock(builder.getInsertionPoint());
    Block *then = new Block();
    cont->getParent()->getBlocks().insert(Region::iterator(cont), then);
    builder.setInsertionPointToEnd(current);
    cf::CondBranchOp::create(builder, loc, condition, then, ValueRange{}, cont, ValueRange{});
    builder.setInsertionPointToStart(then);
    body();
    cf::BranchOp::create(builder, loc, cont);
    builder.setInsertionPointToStart(cont);
  }

  /// The arguments AdamW and LAMB share: parameter, gradient, moments, lr,
  /// betas, eps, weight decay, step, bias correction.
  template <typename AdamLikeOp>
  SmallVector<Value> adamArguments(Location loc, AdamLikeOp u) {
    return {paramPtr(loc, u.getParamAttr()), operand(loc, u.getGrad()),
            paramPtr(loc, u.getExpAvgAttr()), paramPtr(loc, u.getExpAvgSqAttr()),
            loadScalar(loc, u.getLr(), f64), constF64(loc, u.getBeta1().convertToDouble()),
            constF64(loc, u.getBeta2().convertToDouble()),
            constF64(loc, u.getEps().convertToDouble()),
            constF64(loc, u.getWeightDecay().convertToDouble()),
            loadScalar(loc, u.getStep(), i64), constI32(loc, 1) /*bias correction*/};
  }

  // --- per-op emitters -------------------------------------------------------
  LogicalResult emitSimple(Operation *op, StringRef name, int64_t index) {
    SmallVector<Value> args;
    for (Value v : op->getOperands())
      args.push_back(operand(op->getLoc(), v));
    for (Value v : op->getResults())
      args.push_back(operand(op->getLoc(), v));
    call(op->getLoc(), name, args, index);
    return success();
  }

  ModuleOp module;
  BufferPlan &plan;
  MLIRContext *ctx;
  OpBuilder builder;
  Type ptrType, i32, i64, f64, tensorType;
  Value context, table;
  Block *failBlock;
  bool profile;
  Value f64Slot;
  int64_t globals = 0;
  std::map<std::vector<int64_t>, std::string> intArrays;
};

LogicalResult CallEmitter::emit(Operation *op, int64_t index) {
  Location loc = op->getLoc();
  auto out = [&](Value v) { return operand(loc, v); };
  auto unsupported = [&]() {
    return op->emitError("'") << op->getName()
                              << "' is not supported by the runtime lowering yet";
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ParamRefOp, ConstantOp, ReshapeOp, IdentityOp, SqueezeOp, UnsqueezeOp,
            KFACCaptureOutputOp>(
          [](Operation *) { return success(); }) // buffers, or views of them
      .Case([&](AddOp) { return emitSimple(op, "pfrt_add", index); })
      .Case([&](SubOp) { return emitSimple(op, "pfrt_sub", index); })
      .Case([&](MulOp) { return emitSimple(op, "pfrt_mul", index); })
      .Case([&](DivOp) { return emitSimple(op, "pfrt_div", index); })
      .Case([&](PowOp) { return emitSimple(op, "pfrt_pow", index); })
      .Case([&](EqualOp) { return emitSimple(op, "pfrt_equal", index); })
      .Case([&](WhereOp) { return emitSimple(op, "pfrt_where", index); })
      .Case([&](SqrtOp) { return emitSimple(op, "pfrt_sqrt", index); })
      .Case([&](ErfOp) { return emitSimple(op, "pfrt_erf", index); })
      .Case([&](TanhOp) { return emitSimple(op, "pfrt_tanh", index); })
      .Case([&](ExpOp) { return emitSimple(op, "pfrt_exp", index); })
      .Case([&](NegOp) { return emitSimple(op, "pfrt_neg", index); })
      .Case([&](MatMulOp) { return emitSimple(op, "pfrt_matmul", index); })
      .Case([&](CastOp) { return emitSimple(op, "pfrt_cast", index); })
      .Case([&](ExpandOp e) {
        call(loc, "pfrt_expand", {out(e.getInput()), out(e.getOutput())}, index);
        return success();
      })
      .Case([&](GeluOp g) {
        int64_t approx = g.getApproximate() == "tanh" ? 1 : 0;
        call(loc, "pfrt_gelu", {out(g.getInput()), constI32(loc, approx), out(g.getOutput())},
             index);
        return success();
      })
      .Case([&](GemmOp g) {
        call(loc, "pfrt_gemm",
             {out(g.getA()), out(g.getB()), out(g.getC()),
              constF64(loc, g.getAlpha().convertToDouble()),
              constF64(loc, g.getBeta().convertToDouble()), constI32(loc, g.getTransA()),
              constI32(loc, g.getTransB()), out(g.getOutput())},
             index);
        return success();
      })
      .Case([&](LinearOp l) {
        call(loc, "pfrt_linear",
             {out(l.getInput()), out(l.getWeight()), out(l.getBias()),
              constI32(loc, l.getTransposeWeight()), out(l.getOutput())},
             index);
        return success();
      })
      .Case([&](LayerNormOp n) {
        Value none = LLVM::ZeroOp::create(builder, loc, ptrType);
        call(loc, "pfrt_layer_norm",
             {out(n.getInput()), out(n.getScale()), out(n.getBias()),
              constI64(loc, int64_t(n.getAxis())),
              constF64(loc, n.getEpsilon().convertToDouble()), out(n.getOutput()), none, none},
             index);
        return success();
      })
      .Case([&](LayerNormalizationOp n) {
        call(loc, "pfrt_layer_norm",
             {out(n.getInput()), out(n.getScale()), out(n.getBias()),
              constI64(loc, int64_t(n.getAxis())),
              constF64(loc, n.getEpsilon().convertToDouble()), out(n.getOutput()),
              out(n.getMean()), out(n.getInvStdDev())},
             index);
        return success();
      })
      .Case([&](LayerNormGradOp n) {
        call(loc, "pfrt_layer_norm_backward",
             {out(n.getInput()), out(n.getScale()), out(Value()), out(Value()),
              out(n.getGradOutput()), constI64(loc, int64_t(n.getAxis())),
              constF64(loc, n.getEpsilon().convertToDouble()), constI32(loc, 0),
              constI32(loc, 0), out(n.getGradInput()), out(n.getGradScale()),
              out(n.getGradBias())},
             index);
        return success();
      })
      .Case([&](GeluGradOp g) {
        int64_t approx = g.getApproximate() == "tanh" ? 1 : 0;
        call(loc, "pfrt_gelu_backward",
             {out(g.getInput()), out(g.getGradOutput()), constI32(loc, approx),
              constI32(loc, 0), out(g.getGradInput())},
             index);
        return success();
      })
      .Case([&](SoftmaxGradOp s) {
        call(loc, "pfrt_softmax_backward",
             {out(s.getOutput()), out(s.getGradOutput()), constI64(loc, int64_t(s.getAxis())),
              constI32(loc, 0), out(s.getGradInput())},
             index);
        return success();
      })
      .Case([&](SoftmaxOp s) {
        call(loc, "pfrt_softmax",
             {out(s.getInput()), constI64(loc, int64_t(s.getAxis())), out(s.getOutput())},
             index);
        return success();
      })
      .Case<ReduceMeanOp, ReduceSumOp>([&](auto r) {
        auto type = cast<RankedTensorType>(r.getInput().getType());
        SmallVector<int64_t> axes;
        if (auto given = r.getAxes(); given && !given->empty())
          axes.assign(given->begin(), given->end());
        else if (!r.getNoopWithEmptyAxes())
          for (int64_t i = 0; i < type.getRank(); ++i)
            axes.push_back(i);
        StringRef name = isa<ReduceMeanOp>(op) ? "pfrt_reduce_mean" : "pfrt_reduce_sum";
        if (axes.empty()) {
          call(loc, "pfrt_copy", {out(r.getInput()), out(r.getOutput())}, index);
          return success();
        }
        call(loc, name,
             {out(r.getInput()), intArray(loc, axes), constI32(loc, axes.size()),
              constI32(loc, r.getKeepdims()), out(r.getOutput())},
             index);
        return success();
      })
      .Case([&](TransposeOp t) {
        auto type = cast<RankedTensorType>(t.getInput().getType());
        SmallVector<int64_t> perm;
        if (auto given = t.getPerm())
          perm.assign(given->begin(), given->end());
        else
          for (int64_t i = type.getRank() - 1; i >= 0; --i)
            perm.push_back(i);
        call(loc, "pfrt_transpose",
             {out(t.getInput()), intArray(loc, perm), constI32(loc, perm.size()),
              out(t.getOutput())},
             index);
        return success();
      })
      .Case([&](GatherOp g) {
        call(loc, "pfrt_gather",
             {out(g.getData()), out(g.getIndices()), constI64(loc, int64_t(g.getAxis())),
              out(g.getOutput())},
             index);
        return success();
      })
      .Case([&](SliceOp s) -> LogicalResult {
        auto starts = getConstantInts(s.getStarts()), ends = getConstantInts(s.getEnds());
        std::optional<SmallVector<int64_t>> axes, steps;
        if (s.getAxes())
          axes = getConstantInts(s.getAxes());
        if (s.getSteps())
          steps = getConstantInts(s.getSteps());
        if (!starts || !ends || (s.getAxes() && !axes) || (s.getSteps() && !steps))
          return op->emitError("slice bounds must be constants for the runtime lowering");
        SmallVector<int64_t> allAxes, allSteps;
        for (size_t i = 0; i < starts->size(); ++i) {
          allAxes.push_back(axes ? (*axes)[i] : int64_t(i));
          allSteps.push_back(steps ? (*steps)[i] : 1);
        }
        call(loc, "pfrt_slice",
             {out(s.getData()), intArray(loc, *starts), intArray(loc, *ends),
              intArray(loc, allAxes), intArray(loc, allSteps), constI32(loc, starts->size()),
              out(s.getOutput())},
             index);
        return success();
      })
      .Case([&](ConcatOp c) {
        // pfrt_concat takes an array of descriptors: add table entries that
        // view the inputs, one after the other.
        call(loc, "pfrt_concat",
             {tensorPtr(loc, addContiguousViews(c.getInputs())), constI32(loc, c.getInputs().size()),
              constI64(loc, int64_t(c.getAxis())), out(c.getOutput())},
             index);
        return success();
      })
      .Case([&](ConstantOfShapeOp c) {
        double value = 0;
        if (auto attr = c.getValueAttr()) {
          Attribute v = attr.getValues<Attribute>()[0];
          if (auto f = dyn_cast<FloatAttr>(v))
            value = f.getValueAsDouble();
          else if (auto i = dyn_cast<IntegerAttr>(v))
            value = double(i.getValue().getSExtValue());
        }
        call(loc, "pfrt_fill", {out(c.getOutput()), constF64(loc, value)}, index);
        return success();
      })
      .Case([&](SoftmaxCrossEntropyOp c) {
        call(loc, "pfrt_softmax_cross_entropy",
             {out(c.getLogits()), out(c.getLabels()), constI64(loc, int64_t(c.getIgnoreIndex())),
              constF64(loc, 1.0), out(c.getLoss()), out(c.getGradLogits()), out(c.getCount())},
             index);
        return success();
      })
      .Case([&](GatherGradOp g) {
        call(loc, "pfrt_gather_backward",
             {out(g.getIndices()), out(g.getGradOutput()), constI64(loc, int64_t(g.getAxis())),
              constI32(loc, 0), out(g.getGradData())},
             index);
        return success();
      })
      .Case([&](SGDUpdateOp u) {
        call(loc, "pfrt_sgd_step",
             {paramPtr(loc, u.getParamAttr()), out(u.getGrad()),
              paramPtr(loc, u.getMomentumBufferAttr()), loadScalar(loc, u.getLr(), f64),
              constF64(loc, u.getMomentumBuffer() ? u.getMomentum().convertToDouble() : 0.0),
              constF64(loc, u.getWeightDecay().convertToDouble()), constI32(loc, u.getNesterov())},
             index);
        return success();
      })
      .Case([&](AdamWUpdateOp u) {
        call(loc, "pfrt_adamw_step", adamArguments(loc, u), index);
        return success();
      })
      .Case([&](LAMBUpdateOp u) {
        SmallVector<Value> args = adamArguments(loc, u);
        args.append({constI32(loc, 1) /*nvlamb*/,
                     constF64(loc, u.getMaxTrustRatio().convertToDouble())});
        call(loc, "pfrt_lamb_step", args, index);
        return success();
      })
      .Case([&](ClipByGlobalNormOp c) {
        // Clip copies in place; pfrt_clip_by_global_norm takes the array of
        // their descriptors, so add contiguous table entries viewing them.
        for (auto [grad, clipped] : llvm::zip(c.getGradients(), c.getClipped()))
          call(loc, "pfrt_copy", {out(grad), out(clipped)}, index);
        call(loc, "pfrt_clip_by_global_norm",
             {tensorPtr(loc, addContiguousViews(c.getClipped())), constI32(loc, c.getGradients().size()),
              constF64(loc, c.getMaxNorm().convertToDouble()),
              LLVM::ZeroOp::create(builder, loc, ptrType)},
             index);
        return success();
      })
      .Case([&](KFACKLClipOp k) {
        // ν = min(1, sqrt(κ / (lr² Σ ⟨u, g⟩))), then each result = ν · update.
        Value slot = scratchF64(loc);
        Value total = constF64(loc, 0.0);
        for (auto [u, g] : llvm::zip(k.getUpdates(), k.getGradients())) {
          call(loc, "pfrt_dot", {out(u), out(g), slot}, index);
          total = arith::AddFOp::create(builder, loc, total,
                                        LLVM::LoadOp::create(builder, loc, f64, slot));
        }
        Value lr = loadScalar(loc, k.getLr(), f64);
        Value denom = arith::MulFOp::create(builder, loc,
                                            arith::MulFOp::create(builder, loc, lr, lr), total);
        Value ratio = arith::DivFOp::create(
            builder, loc, constF64(loc, k.getKappa().convertToDouble()), denom);
        Value root = LLVM::SqrtOp::create(builder, loc, ratio);
        Value capped = arith::MinimumFOp::create(builder, loc, root, constF64(loc, 1.0));
        Value positive = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OGT, denom,
                                               constF64(loc, 0.0));
        Value nu = arith::SelectOp::create(builder, loc, positive, capped, constF64(loc, 1.0));
        for (auto [u, c] : llvm::zip(k.getUpdates(), k.getClipped()))
          call(loc, "pfrt_scale", {out(u), nu, out(c)}, index);
        return success();
      })
      .Case([&](KFACUpdateFactorOp u) {
        // At step 1 the factor starts from its first estimate, not from zero.
        // With several updates of one factor (micro-batches), the first one
        // decays (or overwrites) it and the others add their (1 − decay)
        // share; each contributes 1/updates of the new estimate.
        auto [rank, updates] = factorUpdates.lookup(op);
        double decay = u.getDecay().convertToDouble();
        Value step = loadScalar(loc, u.getStep(), i64);
        Value first = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, step,
                                            constI64(loc, 1));
        Value mode = rank == 0
                         ? arith::SelectOp::create(builder, loc, first,
                                                   constI32(loc, 0 /*overwrite*/),
                                                   constI32(loc, 2 /*running average*/))
                               .getResult()
                         : constI32(loc, 1 /*accumulate*/);
        double share = 1.0 / double(std::max<int64_t>(updates, 1));
        Value phase = arith::RemSIOp::create(
            builder, loc, arith::SubIOp::create(builder, loc, step, constI64(loc, 1)),
            constI64(loc, int64_t(u.getEvery())));
        Value due = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, phase,
                                          constI64(loc, 0));
        Value scale = constF64(loc, u.getScale().convertToDouble() * share);
        if (rank != 0)
          scale = arith::SelectOp::create(
              builder, loc, first, scale,
              constF64(loc, u.getScale().convertToDouble() * share * (1 - decay)));
        if (u.getCount()) {
          Value count = arith::SIToFPOp::create(builder, loc, f64,
                                                loadScalar(loc, u.getCount(), i64));
          scale = arith::MulFOp::create(builder, loc, scale,
                                        arith::MulFOp::create(builder, loc, count, count));
        }
        emitIf(loc, due, [&] {
          call(loc, "pfrt_kfac_factor",
               {out(u.getInput()), constI32(loc, u.getBiasColumn()), scale, mode,
                constF64(loc, u.getDecay().convertToDouble()), paramPtr(loc, u.getFactorAttr())},
               index);
        });
        return success();
      })
      .Case([&](KFACRefreshInversesOp r) {
        Value step = loadScalar(loc, r.getStep(), i64);
        Value sinceFirst = arith::SubIOp::create(builder, loc, step, constI64(loc, 1));
        Value phase = arith::RemSIOp::create(builder, loc, sinceFirst,
                                             constI64(loc, int64_t(r.getEvery())));
        Value due = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, phase,
                                          constI64(loc, 0));
        if (int64_t warmup = r.getWarmup(); warmup > 0) {
          Value early = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::sle, step,
                                              constI64(loc, warmup));
          due = arith::OrIOp::create(builder, loc, due, early);
        }
        Value outcome = LLVM::LoadOp::create(builder, loc, ptrType, out(r.getOutcome()));
        LLVM::StoreOp::create(builder, loc, constI32(loc, 0), outcome);
        emitIf(loc, due, [&] {
          call(loc, "pfrt_kfac_damped_inverses",
               {paramPtr(loc, r.getFactorAAttr()), paramPtr(loc, r.getFactorBAttr()),
                constF64(loc, r.getDamping().convertToDouble()),
                constI32(loc, int64_t(r.getRetries())), paramPtr(loc, r.getAInverseAttr()),
                paramPtr(loc, r.getBInverseAttr()), outcome},
               index);
        });
        return success();
      })
      .Case([&](KFACPreconditionOp p) {
        Value none = LLVM::ZeroOp::create(builder, loc, ptrType);
        call(loc, "pfrt_kfac_precondition",
             {out(p.getAInverse()), out(p.getBInverse()), out(p.getWeightGrad()),
              p.getBiasGrad() ? out(p.getBiasGrad()) : none, constI32(loc, 1),
              out(p.getWeightUpdate()), p.getBiasUpdate() ? out(p.getBiasUpdate()) : none},
             index);
        return success();
      })
      .Default([&](Operation *) { return unsupported(); });
}

DictionaryAttr bufferAttr(Builder &b, const PlannedBuffer &buffer) {
  SmallVector<NamedAttribute> fields;
  auto kindName = [&]() {
    switch (buffer.kind) {
    case PlannedBuffer::Kind::Input: return "input";
    case PlannedBuffer::Kind::Output: return "output";
    case PlannedBuffer::Kind::Param: return "param";
    case PlannedBuffer::Kind::Constant: return "constant";
    case PlannedBuffer::Kind::Arena: return "arena";
    }
    return "arena";
  };
  fields.push_back(b.getNamedAttr("kind", b.getStringAttr(kindName())));
  fields.push_back(b.getNamedAttr("bytes", b.getI64IntegerAttr(buffer.bytes)));
  switch (buffer.kind) {
  case PlannedBuffer::Kind::Input:
  case PlannedBuffer::Kind::Output:
    fields.push_back(b.getNamedAttr("index", b.getI64IntegerAttr(buffer.index)));
    break;
  case PlannedBuffer::Kind::Param:
    fields.push_back(b.getNamedAttr("name", buffer.param));
    break;
  case PlannedBuffer::Kind::Constant:
    fields.push_back(b.getNamedAttr("value", buffer.value));
    break;
  case PlannedBuffer::Kind::Arena:
    fields.push_back(b.getNamedAttr("offset", b.getI64IntegerAttr(buffer.offset)));
    break;
  }
  return b.getDictionaryAttr(fields);
}

struct LowerToRuntimePass : public mlir::pf::impl::PFLowerToRuntimeBase<LowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal() && !func && (functionName.empty() || f.getSymName() == functionName))
        func = f;
    if (!func) {
      if (functionName.empty())
        module.emitError("pf-lower-to-runtime: no function with a body");
      else
        module.emitError("pf-lower-to-runtime: no function named '")
            << functionName.getValue() << "' with a body";
      return signalPassFailure();
    }
    if (func.getBody().getBlocks().size() != 1) {
      func.emitError("pf-lower-to-runtime: expected a single-block function");
      return signalPassFailure();
    }
    auto plan = planBuffers(func);
    if (failed(plan))
      return signalPassFailure();

    OpBuilder builder(func);
    Type ptr = LLVM::LLVMPointerType::get(&getContext());
    auto newFunc = func::FuncOp::create(builder, func.getLoc(), entryName,
                                        builder.getFunctionType({ptr, ptr}, {builder.getI64Type()}));
    CallEmitter emitter(module, newFunc, *plan, profile);
    llvm::StringMap<SmallVector<Operation *>> updatesOf;
    func.walk([&](KFACUpdateFactorOp u) { updatesOf[u.getFactor()].push_back(u); });
    for (auto &entry : updatesOf)
      for (auto [rank, op] : llvm::enumerate(entry.second))
        emitter.factorUpdates[op] = {int64_t(rank), int64_t(entry.second.size())};
    SmallVector<Attribute> opNames;
    int64_t index = 0;
    for (Operation &op : func.getBody().front().without_terminator()) {
      if (failed(emitter.emit(&op, index)))
        return signalPassFailure();
      opNames.push_back(builder.getStringAttr(describe(&op)));
      ++index;
    }
    emitter.finish(func.getLoc());

    // What the host needs to fill the table and call the function.
    SmallVector<Attribute> buffers, tensors;
    for (const PlannedBuffer &b : plan->buffers)
      buffers.push_back(bufferAttr(builder, b));
    for (const PlannedTensor &t : plan->tensors) {
      int32_t dtype = dtypeCode(t.type.getElementType());
      if (dtype == 0) {
        func.emitError("pf-lower-to-runtime: element type ")
            << t.type.getElementType() << " has no runtime dtype";
        return signalPassFailure();
      }
      tensors.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("buffer", builder.getI64IntegerAttr(t.buffer)),
           builder.getNamedAttr("dtype", builder.getI32IntegerAttr(dtype)),
           builder.getNamedAttr("shape", builder.getDenseI64ArrayAttr(t.type.getShape()))}));
    }
    SmallVector<Attribute> inputs, outputs;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      inputs.push_back(ioAttr(builder, func.getArgAttrOfType<StringAttr>(i, "pf.name"),
                              "input" + std::to_string(i), plan->tensorOf.lookup(func.getArgument(i))));
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      outputs.push_back(ioAttr(builder, func.getResultAttrOfType<StringAttr>(i, "pf.name"),
                               "output" + std::to_string(i), plan->outputTensors[i]));
    newFunc->setAttr("pf.buffers", builder.getArrayAttr(buffers));
    newFunc->setAttr("pf.tensors", builder.getArrayAttr(tensors));
    newFunc->setAttr("pf.inputs", builder.getArrayAttr(inputs));
    newFunc->setAttr("pf.outputs", builder.getArrayAttr(outputs));
    newFunc->setAttr("pf.op_names", builder.getArrayAttr(opNames));
    newFunc->setAttr("pf.arena_bytes", builder.getI64IntegerAttr(plan->arenaBytes));
    newFunc->setAttr("pf.peak_live_bytes", builder.getI64IntegerAttr(plan->peakLiveBytes));
    newFunc->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
    func.erase();
    // A lowered module runs one function: drop the other pf functions (e.g.
    // the other stage functions of pf-split-stages), which are not lowered.
    for (auto other : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (other != newFunc && !other.isExternal())
        other.erase();
  }

  static std::string describe(Operation *op) {
    std::string text = op->getName().getStringRef().str();
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      text += " (node '" + name.getName().str() + "')";
    return text;
  }

  static DictionaryAttr ioAttr(OpBuilder &b, StringAttr name, const std::string &fallback,
                               int64_t tensor) {
    return b.getDictionaryAttr(
        {b.getNamedAttr("name", name ? name : b.getStringAttr(fallback)),
         b.getNamedAttr("tensor", b.getI64IntegerAttr(tensor))});
  }
};
} // namespace
