//===- RankProgramLowering.cpp - pf-lower-rank-programs --------------------===//
//
// 1. Moves each selected pf.rank_program's ops into
//    func.func @pf_<program>(%host: !llvm.ptr) -> i32, and plans its values:
//    each SSA stage value (a pf.run_stage output, a pf.recv_act result) is a
//    slot of the host, numbered in program order, released after its last
//    use.
// 2. Converts every op (a dialect conversion; a value becomes its i64 slot)
//    into the func.call of its pfrt_rank_abi.def function: constants for the
//    scalars, constant globals for names, slot lists, rank lists, shapes and
//    orders, the op's index first; then a pfrt_rank_release of each slot
//    whose last use it was.
// 3. Returns the first non-zero status after each call, 0 at the end.
//
//===----------------------------------------------------------------------===//
#include "RuntimeABI.h"
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/DialectConversion.h"

#include <map>

namespace mlir::pf {
#define GEN_PASS_DEF_PFLOWERRANKPROGRAMS
#include "pf/Conversion/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr llvm::StringLiteral kRankCallPrefix = "pfrt_rank_";

/// The constant globals of the lowered programs, one per distinct content.
class RankConstants {
public:
  explicit RankConstants(ModuleOp module) : module(module) {}

  /// A NUL-terminated string, or several back to back (`bytes` holds them).
  Value bytes(OpBuilder &b, Location loc, StringRef bytes) {
    LLVM::GlobalOp &global = strings[bytes];
    if (!global) {
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size());
      global = create(b, loc, type, b.getStringAttr(bytes), "str");
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }
  Value string(OpBuilder &b, Location loc, StringRef text) {
    return bytes(b, loc, (text + llvm::Twine('\0')).str());
  }
  /// `count` strings back to back, each NUL-terminated.
  Value stringList(OpBuilder &b, Location loc, ArrayAttr names) {
    std::string joined;
    for (Attribute name : names)
      joined += cast<StringAttr>(name).getValue().str() + '\0';
    return bytes(b, loc, joined);
  }
  /// A constant i64 array; a null pointer when empty (a scalar's shape).
  Value i64Array(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
    if (values.empty())
      return LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()));
    LLVM::GlobalOp &global = arrays[std::vector<int64_t>(values.begin(), values.end())];
    if (!global) {
      auto type = LLVM::LLVMArrayType::get(b.getI64Type(), values.size());
      auto tensor = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
      global = create(b, loc, type, DenseElementsAttr::get(tensor, values), "i64");
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }

private:
  ModuleOp module;
  llvm::StringMap<LLVM::GlobalOp> strings;
  std::map<std::vector<int64_t>, LLVM::GlobalOp> arrays;
  int64_t count = 0;

  LLVM::GlobalOp create(OpBuilder &b, Location loc, Type type, Attribute value,
                        StringRef kind) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    std::string name = ("__pf_rank_" + kind + "_" + llvm::Twine(count++)).str();
    return LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal,
                                  name, value);
  }
};

/// What every pattern shares: the constants, each op's index in its
/// program, the slots of the values and what each op releases, the callee
/// declarations.
struct LoweringState {
  ModuleOp module;
  RankConstants constants;
  DenseMap<Operation *, int64_t> opIndex;
  DenseMap<Value, int64_t> slot;
  /// The slots whose last use (or, unused, whose making) an op is.
  DenseMap<Operation *, SmallVector<int64_t>> releasedAfter;

  SmallVector<int64_t> slotsOf(ValueRange values) const {
    SmallVector<int64_t> slots;
    for (Value value : values)
      slots.push_back(slot.lookup(value));
    return slots;
  }

  explicit LoweringState(ModuleOp module) : module(module), constants(module) {}

  /// Calls `name` of pfrt_rank_abi.def with the host and `args`, declaring
  /// it on first use; fails when the table does not have it or the
  /// arguments' types differ from the table's.
  LogicalResult call(OpBuilder &b, Operation *op, StringRef name, ArrayRef<Value> args) {
    const abi::Kernel *callee = abi::lookupRankCall(name);
    if (!callee)
      return op->emitOpError("pf-lower-rank-programs: '") << name
                                                          << "' is not in pfrt_rank_abi.def";
    FunctionType type = abi::rankCallType(b.getContext(), *callee);
    SmallVector<Value> all{hostOf(op)};
    llvm::append_range(all, args);
    if (TypeRange(ValueRange(all)) != type.getInputs())
      return op->emitOpError("pf-lower-rank-programs: the arguments of '")
             << name << "' do not match pfrt_rank_abi.def";
    declare(b, name, type);
    func::CallOp::create(b, op->getLoc(), name, type.getResults(), all);
    return success();
  }

  Value index(OpBuilder &b, Operation *op) { return i64(b, op->getLoc(), opIndex.lookup(op)); }
  Value i64(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  }
  Value i32(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 32);
  }
  Value f64(OpBuilder &b, Location loc, double value) {
    return arith::ConstantFloatOp::create(b, loc, b.getF64Type(), llvm::APFloat(value));
  }
  /// (dtype, rank, shape) of a tensor type.
  SmallVector<Value> type(OpBuilder &b, Location loc, RankedTensorType type) {
    return {i32(b, loc, abi::dtypeCode(type.getElementType())), i64(b, loc, type.getRank()),
            constants.i64Array(b, loc, type.getShape())};
  }

private:
  static Value hostOf(Operation *op) {
    return op->getParentOfType<func::FuncOp>().getArgument(0);
  }
  void declare(OpBuilder &b, StringRef name, FunctionType type) {
    if (module.lookupSymbol(name))
      return;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    auto decl = func::FuncOp::create(b, module.getLoc(), name, type);
    decl.setPrivate();
  }
};

template <typename OpT>
struct RankCallPattern : OpConversionPattern<OpT> {
  RankCallPattern(const TypeConverter &converter, MLIRContext *ctx, LoweringState &state)
      : OpConversionPattern<OpT>(converter, ctx), state(state) {}
  LoweringState &state;

  /// The arguments after the op index.
  virtual LogicalResult lower(OpT op, ConversionPatternRewriter &rewriter,
                              SmallVectorImpl<Value> &args, StringRef &callee) const = 0;

  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor,
                                ConversionPatternRewriter &rewriter) const final {
    SmallVector<Value> args{state.index(rewriter, op)};
    StringRef callee;
    if (failed(lower(op, rewriter, args, callee)) ||
        failed(state.call(rewriter, op, callee, args)))
      return failure();
    Location loc = op->getLoc();
    for (int64_t slot : state.releasedAfter.lookup(op))
      if (failed(state.call(rewriter, op, "pfrt_rank_release",
                            {state.index(rewriter, op), state.i64(rewriter, loc, slot)})))
        return failure();
    // Each result becomes its slot.
    SmallVector<Value> slots;
    for (Value result : op->getResults())
      slots.push_back(state.i64(rewriter, loc, state.slot.lookup(result)));
    rewriter.replaceOp(op, slots);
    return success();
  }
};

struct RunStagePattern : RankCallPattern<RunStageOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(RunStageOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    Location loc = op.getLoc();
    args.push_back(state.i32(b, loc, int64_t(op.getKind())));
    args.push_back(state.constants.string(b, loc, op.getStage()));
    args.push_back(state.i64(b, loc, op.getMicrobatch() ? int64_t(*op.getMicrobatch()) : -1));
    args.push_back(state.i64(b, loc, op.getLayer() ? int64_t(*op.getLayer()) : -1));
    args.push_back(state.i64(b, loc, int64_t(op.getInputs().size())));
    args.push_back(state.constants.i64Array(b, loc, state.slotsOf(op.getInputs())));
    args.push_back(state.i64(b, loc, int64_t(op.getOutputs().size())));
    args.push_back(state.constants.i64Array(b, loc, state.slotsOf(op.getOutputs())));
    callee = "pfrt_rank_run_stage";
    return success();
  }
};

template <typename OpT>
struct TransferPattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;
  LogicalResult lower(OpT op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    args.push_back(s.i64(b, loc, s.slot.lookup(op.getValue())));
    args.push_back(s.i64(b, loc, int64_t(op.getMicrobatch())));
    if constexpr (std::is_same_v<OpT, SendActOp>) {
      args.push_back(s.i64(b, loc, int64_t(op.getTo())));
      callee = "pfrt_rank_send";
    } else {
      args.push_back(s.i64(b, loc, int64_t(op.getFrom())));
      callee = "pfrt_rank_recv";
    }
    args.push_back(s.i64(b, loc, int64_t(op.getTag())));
    llvm::append_range(args, s.type(b, loc, cast<RankedTensorType>(op.getValue().getType())));
    return success();
  }
};

/// pf.all_reduce, pf.broadcast and pf.reduce_microbatch: the value, (the
/// micro-batch,) (the root,) the member ranks and the type.
template <typename OpT>
struct MemberCollectivePattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;
  LogicalResult lower(OpT op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    args.push_back(s.constants.string(b, loc, op.getValue()));
    constexpr bool isBroadcast = std::is_same_v<OpT, BroadcastOp>;
    constexpr bool isReduce = std::is_same_v<OpT, ReduceMicrobatchOp>;
    if constexpr (std::is_same_v<OpT, AllReduceOp>)
      args.push_back(s.i32(b, loc, int32_t(op.getOrder())));
    if constexpr (isReduce)
      args.push_back(s.i64(b, loc, int64_t(op.getMicrobatch())));
    if constexpr (isBroadcast || isReduce)
      args.push_back(s.i64(b, loc, int64_t(op.getRoot())));
    args.push_back(s.i64(b, loc, int64_t(op.getRanks().size())));
    args.push_back(s.constants.i64Array(b, loc, op.getRanks()));
    llvm::append_range(args, s.type(b, loc, op.getType()));
    callee = isReduce      ? "pfrt_rank_reduce"
             : isBroadcast ? "pfrt_rank_broadcast"
                           : "pfrt_rank_all_reduce";
    return success();
  }
};

template <typename OpT>
struct OrderedCollectivePattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;
  LogicalResult lower(OpT op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    if constexpr (std::is_same_v<OpT, ClipGradientsOp>) {
      args.push_back(s.f64(b, loc, op.getMaxNorm().convertToDouble()));
      callee = "pfrt_rank_clip_gradients";
    } else {
      args.push_back(s.f64(b, loc, op.getKappa().convertToDouble()));
      callee = "pfrt_rank_kfac_kl_clip";
    }
    args.push_back(s.i64(b, loc, int64_t(op.getOrder().size())));
    args.push_back(s.constants.stringList(b, loc, op.getOrder()));
    return success();
  }
};

struct PromoteInversesPattern : RankCallPattern<KfacPromoteInversesOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(KfacPromoteInversesOp, ConversionPatternRewriter &,
                      SmallVectorImpl<Value> &, StringRef &callee) const override {
    callee = "pfrt_rank_kfac_promote_inverses";
    return success();
  }
};

/// Step 1: @pf_<program>(%host) -> i32 holding the program's ops, ending in
/// `return 0`.
func::FuncOp moveIntoFunction(RankProgramOp program, LoweringState &state) {
  OpBuilder b(program);
  MLIRContext *ctx = program.getContext();
  auto type = FunctionType::get(ctx, {LLVM::LLVMPointerType::get(ctx)}, {b.getI32Type()});
  auto func =
      func::FuncOp::create(b, program.getLoc(), ("pf_" + program.getSymName()).str(), type);
  Block *entry = func.addEntryBlock();
  Block &body = program.getBody().front();
  int64_t slots = 0;
  for (auto [index, op] : llvm::enumerate(body)) {
    state.opIndex[&op] = int64_t(index);
    for (Value result : op.getResults()) {
      int64_t slot = slots++;
      state.slot[result] = slot;
      // Released after its last user in the block (all of them are: the
      // body is one block), or at once when nothing reads it.
      Operation *last = &op;
      for (Operation *user : result.getUsers())
        if (last->isBeforeInBlock(user))
          last = user;
      state.releasedAfter[last].push_back(slot);
    }
  }
  entry->getOperations().splice(entry->end(), body.getOperations());
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, program.getLoc(), ValueRange{state.i32(b, program.getLoc(), 0)});
  program.erase();
  return func;
}

/// Step 3: after each rank call, a non-zero status returns it.
void returnOnFailure(func::FuncOp func) {
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) {
    if (call.getCallee().starts_with(kRankCallPrefix))
      calls.push_back(call);
  });
  if (calls.empty())
    return;
  OpBuilder b(func.getContext());
  Type i32 = b.getI32Type();
  auto *exit = new Block();
  func.getBody().push_back(exit);
  Value status = exit->addArgument(i32, func.getLoc());
  b.setInsertionPointToEnd(exit);
  func::ReturnOp::create(b, func.getLoc(), status);
  for (func::CallOp call : calls) {
    Block *before = call->getBlock();
    Block *after = before->splitBlock(call->getNextNode());
    b.setInsertionPointToEnd(before);
    Location loc = call.getLoc();
    Value result = call.getResult(0);
    Value zero = arith::ConstantIntOp::create(b, loc, 0, 32);
    Value failed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, result, zero);
    cf::CondBranchOp::create(b, loc, failed, exit, ValueRange{result}, after, ValueRange{});
  }
}

struct LowerRankProgramsPass
    : public mlir::pf::impl::PFLowerRankProgramsBase<LowerRankProgramsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<RankProgramOp> programs(module.getOps<RankProgramOp>());
    if (!programName.empty() && llvm::none_of(programs, [&](RankProgramOp p) {
          return p.getSymName() == programName;
        })) {
      module.emitError("pf-lower-rank-programs: no pf.rank_program @") << programName;
      return signalPassFailure();
    }
    LoweringState state(module);
    SmallVector<func::FuncOp> lowered;
    for (RankProgramOp program : programs) {
      if (!programName.empty() && program.getSymName() != programName) {
        program.erase();
        continue;
      }
      lowered.push_back(moveIntoFunction(program, state));
    }

    // A stage value becomes the i64 slot the host holds it in.
    TypeConverter slots;
    slots.addConversion([](Type type) { return type; });
    slots.addConversion(
        [](RankedTensorType type) -> Type { return IntegerType::get(type.getContext(), 64); });
    ConversionTarget target(getContext());
    target.addLegalDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect>();
    target.addIllegalOp<RunStageOp, SendActOp, RecvActOp, AllReduceOp, BroadcastOp,
                        ReduceMicrobatchOp, ClipGradientsOp, KfacKLClipOp, KfacPromoteInversesOp>();
    RewritePatternSet patterns(&getContext());
    patterns
        .add<RunStagePattern, TransferPattern<SendActOp>, TransferPattern<RecvActOp>,
             MemberCollectivePattern<AllReduceOp>, MemberCollectivePattern<BroadcastOp>,
             MemberCollectivePattern<ReduceMicrobatchOp>, OrderedCollectivePattern<ClipGradientsOp>,
             OrderedCollectivePattern<KfacKLClipOp>, PromoteInversesPattern>(slots, &getContext(),
                                                                              state);
    // The stage functions' pf ops are neither legal nor illegal: left as
    // they are (pf-lower-to-runtime lowers each of them).
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    for (func::FuncOp func : lowered)
      returnOnFailure(func);
  }
};
} // namespace
