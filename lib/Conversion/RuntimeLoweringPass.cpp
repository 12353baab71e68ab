//===- RuntimeLoweringPass.cpp - pf-lower-to-runtime -----------------------===//
//
// 1. Plans the buffers of the entry function (BufferPlan.cpp).
// 2. Moves its body into pf_main(ctx, table) -> i64 and converts every pf op
//    with the patterns of its family (a dialect conversion: tensors become
//    pointers to their table entries).
// 3. Lowers the scf.if of conditional kernels to cf and wraps every kernel
//    call in a status check (and the profiling hooks).
// 4. Writes the plan (#pf.runtime_plan) on pf_main for the host.
//
//===----------------------------------------------------------------------===//
#include "BufferPlan.h"
#include "RuntimeABI.h"
#include "RuntimeLowering.h"
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFAttrs.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFLOWERTORUNTIME
#include "pf/Conversion/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
using abi::dtypeCode;

/// The op and, when it came from ONNX, its node: what a failing status and
/// the profile name.
std::string describe(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    text += " (node '" + name.getName().str() + "')";
  return text;
}

/// Whether some pattern of `patterns` can convert `op`.
bool hasPattern(const FrozenRewritePatternSet &patterns, Operation *op) {
  if (patterns.getOpSpecificNativePatterns().count(op->getName()))
    return true;
  return llvm::any_of(patterns.getMatchAnyOpNativePatterns(), [&](const RewritePattern &p) {
    std::optional<TypeID> id = p.getRootInterfaceID();
    return id && op->getName().hasInterface(*id);
  });
}

/// Which outputs the host must zero before a run (#pf.io's zero_fill). An
/// output is written whole when it is an output copy (pfrt_copy) or when its
/// buffer's producer is free of memory effects and all of that op's calls
/// run unconditionally: such an op's kernels write every element of their
/// results (intermediates in the arena, never zeroed and reused from run to
/// run, already rely on it). Kept zeroed: outputs of ops that write in place
/// or whose kernels run under a condition (K-FAC refreshes not due).
/// `writers` holds each output's producer index (-1: none or not free of
/// effects; -2: a copy), `calls` the emitted calls inside pf_main `entry`.
SmallVector<bool> outputsToZero(ArrayRef<int64_t> writers,
                                ArrayRef<std::pair<func::CallOp, int64_t>> calls,
                                func::FuncOp entry) {
  DenseMap<int64_t, bool> unconditional; // op index -> every call at the top level
  for (auto [call, index] : calls) {
    bool top = call->getParentOp() == entry.getOperation();
    auto [it, inserted] = unconditional.try_emplace(index, top);
    if (!top)
      it->second = false;
  }
  SmallVector<bool> zero;
  for (int64_t writer : writers)
    zero.push_back(writer != -2 && !(writer >= 0 && unconditional.lookup(writer)));
  return zero;
}

/// Branches to `failBlock` with ((op index + 1) << 32 | status) after every
/// call that does not return 0, and brackets each call with the host's
/// profiling hooks when `profile` is set.
void insertStatusChecks(func::FuncOp func, ArrayRef<std::pair<func::CallOp, int64_t>> calls,
                        bool profile) {
  // No kernel calls (an empty function, such as stage 0's backward_input of
  // pf-split-stages{split-backward}): nothing can fail, and a failure block
  // without predecessors would not survive the conversion to LLVM.
  if (calls.empty())
    return;
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  Type i64 = b.getI64Type();
  auto *failBlock = new Block();
  func.getBody().push_back(failBlock);
  Value code = failBlock->addArgument(i64, func.getLoc());
  b.setInsertionPointToEnd(failBlock);
  func::ReturnOp::create(b, func.getLoc(), code);

  ModuleOp module = func->getParentOfType<ModuleOp>();
  auto hook = [&](Location loc, StringRef name, int64_t index) {
    if (!module.lookupSymbol(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(module.getBody());
      func::FuncOp::create(b, loc, name, b.getFunctionType({i64}, {})).setPrivate();
    }
    Value op = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(index));
    func::CallOp::create(b, loc, name, TypeRange{}, ValueRange{op});
  };
  for (auto [call, index] : calls) {
    Location loc = call.getLoc();
    if (profile) {
      b.setInsertionPoint(call);
      hook(loc, "pf_profile_begin", index);
    }
    b.setInsertionPointAfter(call);
    if (profile)
      hook(loc, "pf_profile_end", index);
    Value status = arith::ExtUIOp::create(b, loc, i64, call.getResult(0));
    Value failed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, status,
                                         arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
    Value code = arith::OrIOp::create(
        b, loc, status, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr((index + 1) << 32)));
    Block *current = b.getInsertionBlock();
    Block *next = current->splitBlock(b.getInsertionPoint());
    b.setInsertionPointToEnd(current);
    cf::CondBranchOp::create(b, loc, failed, failBlock, ValueRange{code}, next, ValueRange{});
  }
}

struct LowerToRuntimePass : public mlir::pf::impl::PFLowerToRuntimeBase<LowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override;

  func::FuncOp findFunction(ModuleOp module);
  RuntimePlanAttr buildPlan(func::FuncOp func, const BufferPlan &plan, ArrayRef<Attribute> opNames,
                            ArrayRef<int32_t> dtypes, ArrayRef<bool> outputZeroFill);
};

func::FuncOp LowerToRuntimePass::findFunction(ModuleOp module) {
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal() && (functionName.empty() || f.getSymName() == functionName))
      return f;
  if (functionName.empty())
    module.emitError("pf-lower-to-runtime: no function with a body");
  else
    module.emitError("pf-lower-to-runtime: no function named '")
        << functionName.getValue() << "' with a body";
  return {};
}

void LowerToRuntimePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  func::FuncOp func = findFunction(module);
  if (!func)
    return signalPassFailure();
  if (func.getBody().getBlocks().size() != 1) {
    func.emitError("pf-lower-to-runtime: expected a single-block function");
    return signalPassFailure();
  }
  FailureOr<BufferPlan> plan = planBuffers(func);
  if (failed(plan))
    return signalPassFailure();
  SmallVector<int32_t> dtypes;
  for (const PlannedTensor &t : plan->tensors) {
    dtypes.push_back(dtypeCode(t.type.getElementType()));
    if (dtypes.back() == 0) {
      func.emitError("pf-lower-to-runtime: element type ")
          << t.type.getElementType() << " has no runtime dtype";
      return signalPassFailure();
    }
  }

  // pf_main(ctx, table) -> i64 takes over the body.
  OpBuilder builder(func);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  auto entryFunc = func::FuncOp::create(builder, func.getLoc(), entryName,
                                        builder.getFunctionType({ptr, ptr}, {builder.getI64Type()}));
  Block *entry = entryFunc.addEntryBlock();
  Block &body = func.getBody().front();
  entry->getOperations().splice(entry->end(), body.getOperations());
  RuntimeLowering lowering(module, *plan, *entry);

  SmallVector<Attribute> opNames;
  llvm::StringMap<SmallVector<Operation *>> updatesOf;
  for (Operation &op : entry->without_terminator()) {
    lowering.opIndex[&op] = int64_t(opNames.size());
    opNames.push_back(builder.getStringAttr(describe(&op)));
    if (auto update = dyn_cast<KFACUpdateFactorOp>(op))
      updatesOf[update.getFactor()].push_back(update);
    else if (auto update = dyn_cast<KFACUpdateLayerNormFactorOp>(op))
      updatesOf[update.getFactor()].push_back(update);
    else if (auto update = dyn_cast<KFACUpdateEmbeddingFactorOp>(op))
      updatesOf[update.getFactor()].push_back(update);
  }
  for (auto &factor : updatesOf) {
    for (auto [rank, op] : llvm::enumerate(factor.second))
      lowering.factorUpdates[op] = {int64_t(rank), int64_t(factor.second.size())};
    // A per-call update (with its micro-batch) is the only one of its factor.
    if (factor.second.size() > 1 && llvm::any_of(factor.second, [](Operation *op) {
          auto update = dyn_cast<KFACUpdateFactorOp>(op);
          return update && update.getMicrobatch();
        })) {
      factor.second.front()->emitError("pf-lower-to-runtime: factor '")
          << factor.first() << "' has " << factor.second.size()
          << " updates in one function, one of them per micro-batch call (with a "
             "microbatch operand): such an update must be the function's only one";
      return signalPassFailure();
    }
  }
  // Each output's writer, read before the conversion erases the ops.
  SmallVector<int64_t> outputWriters;
  for (int64_t tensor : plan->outputTensors) {
    if (llvm::any_of(plan->outputCopies, [&](auto copy) { return copy.second == tensor; })) {
      outputWriters.push_back(-2);
      continue;
    }
    Operation *producer = plan->buffers[plan->tensors[tensor].buffer].producer;
    outputWriters.push_back(
        producer && isMemoryEffectFree(producer) ? lowering.opIndex.lookup(producer) : -1);
  }
  // Arguments become their table entries (cast back to tensors until the
  // conversion has replaced their users).
  builder.setInsertionPointToStart(entry);
  for (BlockArgument arg : body.getArguments()) {
    Value entryPtr = lowering.tensorPtr(builder, func.getLoc(), plan->tensorOf.lookup(arg));
    auto cast = UnrealizedConversionCastOp::create(builder, func.getLoc(), arg.getType(), entryPtr);
    arg.replaceAllUsesWith(cast.getResult(0));
    // Patterns look operands up in the plan (concat's contiguous views).
    plan->tensorOf[cast.getResult(0)] = plan->tensorOf.lookup(arg);
    lowering.arguments.insert(cast.getResult(0));
  }

  RuntimeTypeConverter converter(ctx);
  RewritePatternSet patternList(ctx);
  populateRuntimeLoweringPatterns(converter, lowering, patternList);
  FrozenRewritePatternSet patterns(std::move(patternList));
  ConversionTarget target(*ctx);
  target.addIllegalDialect<PFDialect>();
  target.addLegalDialect<arith::ArithDialect, LLVM::LLVMDialect, scf::SCFDialect>();
  target.addLegalOp<func::FuncOp, func::CallOp, UnrealizedConversionCastOp>();
  // The source function's return becomes pf_main's `return 0`.
  target.addDynamicallyLegalOp<func::ReturnOp>([](func::ReturnOp op) {
    auto parent = op->getParentOfType<func::FuncOp>();
    return TypeRange(op.getOperandTypes()) == parent.getFunctionType().getResults();
  });
  for (Operation &op : entry->getOperations())
    if (target.isIllegal(&op) && !hasPattern(patterns, &op)) {
      op.emitError("'") << op.getName() << "' is not supported by the runtime lowering yet";
      return signalPassFailure();
    }
  ConversionConfig config;
  // Folding would replace values by others with different table entries.
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (failed(applyFullConversion(entryFunc, target, patterns, config)))
    return signalPassFailure();
  SmallVector<UnrealizedConversionCastOp> casts;
  entryFunc.walk([&](UnrealizedConversionCastOp cast) { casts.push_back(cast); });
  reconcileUnrealizedCasts(casts);
  // Entries of views, parameters and constants that no kernel reads.
  SmallVector<LLVM::GEPOp> unused;
  entryFunc.walk([&](LLVM::GEPOp gep) {
    if (gep->use_empty())
      unused.push_back(gep);
  });
  for (LLVM::GEPOp gep : unused)
    gep.erase();

  SmallVector<bool> outputZeroFill = outputsToZero(outputWriters, lowering.calls, entryFunc);

  // Conditional kernels (scf.if) to branches, then the status checks.
  ConversionTarget cfTarget(*ctx);
  cfTarget.addIllegalOp<scf::IfOp>();
  cfTarget.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  RewritePatternSet cfPatterns(ctx);
  populateSCFToControlFlowConversionPatterns(cfPatterns);
  if (failed(applyPartialConversion(entryFunc, cfTarget, std::move(cfPatterns))))
    return signalPassFailure();
  insertStatusChecks(entryFunc, lowering.calls, profile);

  // Contiguous views added by the patterns get their dtypes too.
  for (size_t t = dtypes.size(); t < plan->tensors.size(); ++t)
    dtypes.push_back(dtypeCode(plan->tensors[t].type.getElementType()));
  entryFunc->setAttr(RuntimePlanAttr::kAttrName,
                     buildPlan(func, *plan, opNames, dtypes, outputZeroFill));
  entryFunc->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
  func.erase();
  // A lowered module runs one function: drop the other pf functions (e.g.
  // the other stage functions of pf-split-stages), which are not lowered.
  for (auto other : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (other != entryFunc && !other.isExternal())
      other.erase();
}

RuntimePlanAttr LowerToRuntimePass::buildPlan(func::FuncOp func, const BufferPlan &plan,
                                              ArrayRef<Attribute> opNames, ArrayRef<int32_t> dtypes,
                                              ArrayRef<bool> outputZeroFill) {
  MLIRContext *ctx = &getContext();
  Builder b(ctx);
  SmallVector<Attribute> buffers, tensors, inputs, outputs;
  for (const PlannedBuffer &buffer : plan.buffers) {
    std::optional<int64_t> index, offset;
    StringAttr name;
    ElementsAttr value;
    BufferKind kind = BufferKind::Arena;
    switch (buffer.kind) {
    case PlannedBuffer::Kind::Input: kind = BufferKind::Input; index = buffer.index; break;
    case PlannedBuffer::Kind::Output: kind = BufferKind::Output; index = buffer.index; break;
    case PlannedBuffer::Kind::Param: kind = BufferKind::Param; name = buffer.param; break;
    case PlannedBuffer::Kind::Constant: kind = BufferKind::Constant; value = buffer.value; break;
    case PlannedBuffer::Kind::Arena: kind = BufferKind::Arena; offset = buffer.offset; break;
    }
    buffers.push_back(PlannedBufferAttr::get(ctx, kind, buffer.bytes, index, offset, name, value));
  }
  for (auto [t, dtype] : llvm::zip_equal(plan.tensors, dtypes))
    tensors.push_back(PlannedTensorAttr::get(ctx, t.buffer, dtype,
                                             b.getDenseI64ArrayAttr(t.type.getShape())));
  auto io = [&](StringAttr name, const Twine &fallback, int64_t tensor, bool zeroFill = false) {
    return PlanIOAttr::get(ctx, name ? name : b.getStringAttr(fallback), tensor, zeroFill);
  };
  for (BlockArgument arg : func.getArguments())
    inputs.push_back(io(func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttrName),
                        "input" + Twine(arg.getArgNumber()), plan.tensorOf.lookup(arg)));
  for (auto [i, tensor] : llvm::enumerate(plan.outputTensors))
    outputs.push_back(io(func.getResultAttrOfType<StringAttr>(i, kNameAttrName),
                         "output" + Twine(i), tensor, outputZeroFill[i]));
  return RuntimePlanAttr::get(ctx, plan.arenaBytes, b.getArrayAttr(buffers),
                              b.getArrayAttr(inputs), b.getArrayAttr(opNames),
                              b.getArrayAttr(outputs), plan.peakLiveBytes,
                              b.getArrayAttr(tensors));
}
} // namespace

void mlir::pf::populateRuntimeLoweringPatterns(const TypeConverter &converter,
                                               RuntimeLowering &lowering,
                                               RewritePatternSet &patterns) {
  populateElementwisePatterns(converter, lowering, patterns);
  populateLinalgPatterns(converter, lowering, patterns);
  populateNormalizationPatterns(converter, lowering, patterns);
  populateDataMovementPatterns(converter, lowering, patterns);
  populateTrainingPatterns(converter, lowering, patterns);
  populateKFACPatterns(converter, lowering, patterns);
}
