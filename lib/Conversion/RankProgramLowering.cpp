//===- RankProgramLowering.cpp - pf-lower-rank-programs --------------------===//
//
// 1. Moves each selected pf.rank_program's ops into
//    func.func @pf_<program>(%host, %ctx, %comm, %slots, %arena, %groups:
//    !llvm.ptr) -> i32 (%groups: the communicators of programCommGroups),
//    and plans its values (planStageValues): each SSA stage value (a
//    pf.run_stage output, a pf.recv_act result) is a descriptor of %slots
//    pointing at its planned offset of %arena, which the program writes
//    right before the op making the value; posted transfers get request
//    words on the stack.
// 2. Converts every op (a dialect conversion; a value becomes its i64 slot):
//    a send or recv into pfrt_comm_* calls of pfrt_abi.def on the slot's
//    descriptor (posted, the recv waited for right before its first reader,
//    the sends at the end; or blocking), the library's all-reduce of a value
//    into pfrt_comm_all_reduce_sum on its result's slot (after pfrt_copy of
//    the operand where the plan put them apart), the other ops into the func.call of
//    their pfrt_rank_abi.def function (constants for the scalars, constant
//    globals for names, slot lists, rank lists, shapes and orders, the op's
//    index first).
// 3. Returns the first non-zero status after each call, 0 at the end.
//
//===----------------------------------------------------------------------===//
#include "RuntimeABI.h"
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Runtime/pfrt.h"

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
constexpr llvm::StringLiteral kCommCallPrefix = "pfrt_comm_";

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
    if (names.empty())
      return LLVM::ZeroOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()));
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
  /// Each value's byte offset in its program's arena.
  DenseMap<Value, int64_t> offset;

  SmallVector<int64_t> slotsOf(ValueRange values) const {
    SmallVector<int64_t> slots;
    for (Value value : values)
      slots.push_back(slot.lookup(value));
    return slots;
  }

  /// Posted transfers (overlap): each send's and recv's word in its
  /// program's request array, the arrays by program function, and per op
  /// the recvs to wait for right before it runs.
  bool overlap = true;
  DenseMap<Operation *, int64_t> requestIndex;
  DenseMap<Operation *, std::pair<Value, Value>> requestArrays; // (sends, recvs)
  DenseMap<Operation *, SmallVector<Operation *>> waitsBefore;
  Type tensorType;

  explicit LoweringState(ModuleOp module) : module(module), constants(module) {
    MLIRContext *ctx = module.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    // struct pfrt_tensor { void *data; int32_t dtype, rank; int64_t shape[MAX_RANK]; }
    tensorType = LLVM::LLVMStructType::getLiteral(
        ctx, {ptr, IntegerType::get(ctx, 32), IntegerType::get(ctx, 32),
              LLVM::LLVMArrayType::get(IntegerType::get(ctx, 64), PFRT_MAX_RANK)});
  }

  /// Calls `name` of pfrt_abi.def (a pfrt_comm_* kernel) with the program's
  /// context and `args`.
  LogicalResult kernel(OpBuilder &b, Operation *op, StringRef name, ArrayRef<Value> args) {
    const abi::Kernel *callee = abi::lookupKernel(name);
    if (!callee)
      return op->emitOpError("pf-lower-rank-programs: '") << name << "' is not in pfrt_abi.def";
    return emitCall(b, op, name, abi::kernelType(b.getContext(), *callee),
                    functionArgument(op, 1), args, "pfrt_abi.def");
  }

  Value comm(Operation *op) { return functionArgument(op, 2); }
  /// Each program function's member groups (programCommGroups).
  DenseMap<Operation *, SmallVector<SmallVector<int64_t>>> commGroups;
  /// The communicator of a collective over `members`: the program's own
  /// (every rank), else its entry of %groups.
  Value groupComm(OpBuilder &b, Operation *op, ArrayRef<int64_t> members) {
    SmallVector<int64_t> sorted(members);
    llvm::sort(sorted);
    const auto &groups = commGroups[op->getParentOfType<func::FuncOp>()];
    auto it = llvm::find(groups, sorted);
    if (it == groups.end())
      return comm(op);
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    Value entry = LLVM::GEPOp::create(b, op->getLoc(), ptr, ptr, functionArgument(op, 5),
                                      ArrayRef<LLVM::GEPArg>{int32_t(it - groups.begin())});
    return LLVM::LoadOp::create(b, op->getLoc(), ptr, entry);
  }
  /// The descriptor of `slot` in the program's %slots.
  Value slotTensor(OpBuilder &b, Operation *op, int64_t slot) {
    return LLVM::GEPOp::create(b, op->getLoc(), LLVM::LLVMPointerType::get(b.getContext()),
                               tensorType, functionArgument(op, 3),
                               ArrayRef<LLVM::GEPArg>{int32_t(slot)});
  }
  /// Points `value`'s descriptor at its planned bytes of the arena and
  /// writes its dtype, rank and shape: the program lays out its own values.
  void describe(OpBuilder &b, Operation *op, Value value) {
    Location loc = op->getLoc();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    auto type = cast<RankedTensorType>(value.getType());
    int64_t slot = this->slot.lookup(value);
    Value tensor = slotTensor(b, op, slot);
    auto field = [&](ArrayRef<LLVM::GEPArg> path) {
      return LLVM::GEPOp::create(b, loc, ptr, tensorType, tensor, path);
    };
    Value at = i64(b, loc, offset.lookup(value));
    Value data = LLVM::GEPOp::create(b, loc, ptr, b.getI8Type(), functionArgument(op, 4),
                                     ArrayRef<LLVM::GEPArg>{at});
    LLVM::StoreOp::create(b, loc, data, field({0, 0}));
    LLVM::StoreOp::create(b, loc, i32(b, loc, abi::dtypeCode(type.getElementType())),
                          field({0, 1}));
    LLVM::StoreOp::create(b, loc, i32(b, loc, type.getRank()), field({0, 2}));
    for (auto [i, dim] : llvm::enumerate(type.getShape()))
      LLVM::StoreOp::create(b, loc, i64(b, loc, dim), field({0, 3, int32_t(i)}));
  }
  /// The request word of a posted send or recv.
  Value requestOf(OpBuilder &b, Operation *transfer) {
    auto [sends, recvs] = requestArrays.lookup(transfer->getParentOfType<func::FuncOp>());
    return LLVM::GEPOp::create(b, transfer->getLoc(), LLVM::LLVMPointerType::get(b.getContext()),
                               b.getI64Type(), isa<SendActOp>(transfer) ? sends : recvs,
                               ArrayRef<LLVM::GEPArg>{int32_t(requestIndex.lookup(transfer))});
  }
  /// The host's timeline marks around a communication of op `transfer`.
  LogicalResult mark(OpBuilder &b, Operation *at, Operation *transfer, int32_t phase) {
    Location loc = at->getLoc();
    return call(b, at, "pfrt_rank_mark",
                {i64(b, loc, opIndex.lookup(transfer)), i32(b, loc, phase)});
  }
  /// Waits for the posted recv `recv` (emitted at `at`).
  LogicalResult waitFor(OpBuilder &b, Operation *at, Operation *recv) {
    Location loc = at->getLoc();
    if (failed(mark(b, at, recv, 0)))
      return failure();
    Value request = LLVM::LoadOp::create(b, loc, b.getI64Type(), requestOf(b, recv));
    if (failed(kernel(b, at, "pfrt_comm_wait", {comm(at), request})))
      return failure();
    return mark(b, at, recv, 1);
  }

  /// Calls `name` of pfrt_rank_abi.def with the host and `args`, declaring
  /// it on first use; fails when the table does not have it or the
  /// arguments' types differ from the table's.
  LogicalResult call(OpBuilder &b, Operation *op, StringRef name, ArrayRef<Value> args) {
    const abi::Kernel *callee = abi::lookupRankCall(name);
    if (!callee)
      return op->emitOpError("pf-lower-rank-programs: '") << name
                                                          << "' is not in pfrt_rank_abi.def";
    return emitCall(b, op, name, abi::rankCallType(b.getContext(), *callee), hostOf(op), args,
                    "pfrt_rank_abi.def");
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
  /// func.call of `name` (declared on first use) with `first` (the host or
  /// the context) and `args`, whose types must be the table's.
  LogicalResult emitCall(OpBuilder &b, Operation *op, StringRef name, FunctionType type,
                         Value first, ArrayRef<Value> args, StringRef table) {
    SmallVector<Value> all{first};
    llvm::append_range(all, args);
    if (TypeRange(ValueRange(all)) != type.getInputs())
      return op->emitOpError("pf-lower-rank-programs: the arguments of '")
             << name << "' do not match " << table;
    declare(b, name, type);
    func::CallOp::create(b, op->getLoc(), name, type.getResults(), all);
    return success();
  }
  static Value functionArgument(Operation *op, unsigned i) {
    auto func = dyn_cast<func::FuncOp>(op);
    return (func ? func : op->getParentOfType<func::FuncOp>()).getArgument(i);
  }
  static Value hostOf(Operation *op) { return functionArgument(op, 0); }
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
    // The posted recvs this op is the first reader of.
    for (Operation *recv : state.waitsBefore.lookup(op))
      if (failed(state.waitFor(rewriter, op, recv)))
        return failure();
    // The op's results get their places before it runs.
    for (Value result : op->getResults())
      state.describe(rewriter, op, result);
    SmallVector<Value> args{state.index(rewriter, op)};
    StringRef callee;
    if (failed(lower(op, rewriter, args, callee)))
      return failure();
    // An empty callee: `lower` emitted its calls itself.
    if (!callee.empty() && failed(state.call(rewriter, op, callee, args)))
      return failure();
    Location loc = op->getLoc();
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

/// pf.send_act and pf.recv_act: pfrt_comm_* on the value's slot, posted
/// (the recv waited for before its first reader, the send at the end) or
/// blocking.
template <typename OpT>
struct TransferPattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;
  LogicalResult lower(OpT op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    constexpr bool isSend = std::is_same_v<OpT, SendActOp>;
    int64_t slot = s.slot.lookup(op.getValue());
    Value tensor = s.slotTensor(b, op, slot);
    int64_t peer;
    if constexpr (isSend)
      peer = int64_t(op.getTo());
    else
      peer = int64_t(op.getFrom());
    SmallVector<Value> comm{s.comm(op), tensor, s.i32(b, loc, peer),
                            s.i32(b, loc, int64_t(op.getTag()))};
    StringRef kernel;
    if (s.overlap) {
      comm.push_back(s.requestOf(b, op));
      kernel = isSend ? "pfrt_comm_isend" : "pfrt_comm_irecv";
    } else {
      kernel = isSend ? "pfrt_comm_send" : "pfrt_comm_recv";
    }
    // A posted recv is on the timeline where it is waited for.
    bool timed = isSend || !s.overlap;
    if ((timed && failed(s.mark(b, op, op, 0))) || failed(s.kernel(b, op, kernel, comm)) ||
        (timed && failed(s.mark(b, op, op, 1))))
      return failure();
    callee = "";
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
    // The library's sum of a value: the program's own call on its slot.
    if constexpr (std::is_same_v<OpT, AllReduceOp>) {
      if (isProgramCollective(op)) {
        Value input = op.getInputs().front(), sum = op.getSum();
        if (failed(s.mark(b, op, op, 0)))
          return failure();
        Value out = s.slotTensor(b, op, s.slot.lookup(sum));
        if (s.offset.lookup(input) != s.offset.lookup(sum) &&
            failed(s.kernel(b, op, "pfrt_copy", {s.slotTensor(b, op, s.slot.lookup(input)), out})))
          return failure();
        if (failed(s.kernel(b, op, "pfrt_comm_all_reduce_sum",
                            {s.groupComm(b, op, op.getRanks()), out})) ||
            failed(s.mark(b, op, op, 1)))
          return failure();
        callee = "";
        return success();
      }
    }
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
    // Values of the program: the operands' slots and the result's (-1 for
    // none: a named value, a reduce's piece handed over, a broadcast's
    // operand off the root).
    auto slotOf = [&](Value value) { return s.i64(b, loc, value ? s.slot.lookup(value) : -1); };
    if constexpr (std::is_same_v<OpT, AllReduceOp>) {
      args.push_back(s.i64(b, loc, int64_t(op.getInputs().size())));
      args.push_back(s.constants.i64Array(b, loc, s.slotsOf(op.getInputs())));
      args.push_back(s.constants.i64Array(
          b, loc, op.getMicrobatches() ? *op.getMicrobatches() : ArrayRef<int64_t>()));
      args.push_back(slotOf(op.getSum()));
    }
    if constexpr (isBroadcast) {
      args.push_back(slotOf(op.getInput()));
      args.push_back(slotOf(op.getResult()));
    }
    if constexpr (isReduce) {
      args.push_back(slotOf(op.getPiece()));
      args.push_back(slotOf(op.getSum()));
    }
    callee = isReduce      ? "pfrt_rank_reduce"
             : isBroadcast ? "pfrt_rank_broadcast"
                           : "pfrt_rank_all_reduce";
    return success();
  }
};

/// pf.clip_gradients and pf.kfac_kl_clip: the scalar, the order, the
/// operands' names, which of them this rank counts (1/0), their slots (a
/// KL-clip's updates, then their gradients), the results' slots.
template <typename OpT>
struct OrderedCollectivePattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;
  LogicalResult lower(OpT op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    constexpr bool isClip = std::is_same_v<OpT, ClipGradientsOp>;
    if constexpr (isClip) {
      args.push_back(s.f64(b, loc, op.getMaxNorm().convertToDouble()));
      callee = "pfrt_rank_clip_gradients";
    } else {
      args.push_back(s.f64(b, loc, op.getKappa().convertToDouble()));
      callee = "pfrt_rank_kfac_kl_clip";
    }
    args.push_back(s.i64(b, loc, int64_t(op.getOrder().size())));
    args.push_back(s.constants.stringList(b, loc, op.getOrder()));
    args.push_back(s.i64(b, loc, int64_t(op.getNames().size())));
    args.push_back(s.constants.stringList(b, loc, op.getNames()));
    SmallVector<int64_t> counted(op.getCounted().begin(), op.getCounted().end());
    args.push_back(s.constants.i64Array(b, loc, counted));
    if constexpr (isClip) {
      args.push_back(s.constants.i64Array(b, loc, s.slotsOf(op.getGradients())));
    } else {
      args.push_back(s.constants.i64Array(b, loc, s.slotsOf(op.getUpdates())));
      args.push_back(s.constants.i64Array(b, loc, s.slotsOf(op.getGradients())));
    }
    args.push_back(s.constants.i64Array(b, loc, s.slotsOf(op.getClipped())));
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

/// pf.step_result: the name, the micro-batch (-1: the step's) and the
/// value's slot, which the host reads after the step.
struct StepResultPattern : RankCallPattern<StepResultOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(StepResultOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    Location loc = op.getLoc();
    args.push_back(state.constants.string(b, loc, op.getName()));
    args.push_back(state.i64(b, loc, op.getMicrobatch() ? int64_t(*op.getMicrobatch()) : -1));
    args.push_back(state.i64(b, loc, state.slot.lookup(op.getValue())));
    callee = "pfrt_rank_step_result";
    return success();
  }
};

/// Step 1: @pf_<program>(%host, %ctx, %comm, %slots, %arena, %groups) -> i32
/// holding the program's ops and the plan of their values, ending (with
/// posted transfers) in the waits for the sends and the recvs nobody read,
/// and `return 0`.
FailureOr<func::FuncOp> moveIntoFunction(RankProgramOp program, LoweringState &state) {
  OpBuilder b(program);
  MLIRContext *ctx = program.getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Location loc = program.getLoc();
  auto type = FunctionType::get(ctx, {ptr, ptr, ptr, ptr, ptr, ptr}, {b.getI32Type()});
  auto func = func::FuncOp::create(b, loc, ("pf_" + program.getSymName()).str(), type);
  Block *entry = func.addEntryBlock();
  state.commGroups[func] = programCommGroups(program);
  Block &body = program.getBody().front();
  StageValuePlan plan = planStageValues(program, state.overlap);
  for (auto [value, slot] : plan.slot) {
    state.slot[value] = slot;
    state.offset[value] = plan.offset[slot];
  }
  int64_t sends = 0, recvs = 0;
  // Posted: a recv nobody reads is waited for at the end.
  SmallVector<Operation *> unreadRecvs;
  for (auto [index, op] : llvm::enumerate(body)) {
    state.opIndex[&op] = int64_t(index);
    if (isa<SendActOp>(op))
      state.requestIndex[&op] = sends++;
    if (auto recv = dyn_cast<RecvActOp>(op)) {
      state.requestIndex[&op] = recvs++;
      Operation *first = nullptr;
      for (Operation *user : recv.getValue().getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      if (state.overlap && first)
        state.waitsBefore[first].push_back(recv);
      else if (state.overlap)
        unreadRecvs.push_back(recv);
    }
  }
  entry->getOperations().splice(entry->end(), body.getOperations());
  // The request words, one per posted send and recv.
  OpBuilder start = OpBuilder::atBlockBegin(entry);
  auto words = [&](int64_t count) -> Value {
    if (!state.overlap || count == 0)
      return Value();
    return LLVM::AllocaOp::create(start, loc, ptr, start.getI64Type(),
                                  state.i64(start, loc, count));
  };
  state.requestArrays[func] = {words(sends), words(recvs)};
  b.setInsertionPointToEnd(entry);
  auto end = func::ReturnOp::create(b, loc, ValueRange{state.i32(b, loc, 0)});
  b.setInsertionPoint(end);
  for (Operation *recv : unreadRecvs)
    if (failed(state.waitFor(b, end, recv)))
      return failure();
  if (sends > 0 && state.overlap) {
    Value requests = state.requestArrays[func].first;
    if (failed(state.kernel(b, end, "pfrt_comm_wait_all",
                            {state.comm(end), requests, state.i32(b, loc, sends)})))
      return failure();
  }
  program.erase();
  return func;
}

/// Step 3: after each rank call, a non-zero status returns it.
void returnOnFailure(func::FuncOp func) {
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) {
    if (call.getCallee().starts_with(kRankCallPrefix) ||
        call.getCallee().starts_with(kCommCallPrefix))
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
    state.overlap = overlap;
    SmallVector<func::FuncOp> lowered;
    for (RankProgramOp program : programs) {
      if (!programName.empty() && program.getSymName() != programName) {
        program.erase();
        continue;
      }
      FailureOr<func::FuncOp> func = moveIntoFunction(program, state);
      if (failed(func))
        return signalPassFailure();
      lowered.push_back(*func);
    }

    // A stage value becomes the i64 slot the host holds it in.
    TypeConverter slots;
    slots.addConversion([](Type type) { return type; });
    slots.addConversion(
        [](RankedTensorType type) -> Type { return IntegerType::get(type.getContext(), 64); });
    ConversionTarget target(getContext());
    target.addLegalDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect>();
    target.addIllegalOp<RunStageOp, SendActOp, RecvActOp, AllReduceOp, BroadcastOp,
                        ReduceMicrobatchOp, ClipGradientsOp, KfacKLClipOp, KfacPromoteInversesOp,
                        StepResultOp>();
    RewritePatternSet patterns(&getContext());
    patterns
        .add<RunStagePattern, TransferPattern<SendActOp>, TransferPattern<RecvActOp>,
             MemberCollectivePattern<AllReduceOp>, MemberCollectivePattern<BroadcastOp>,
             MemberCollectivePattern<ReduceMicrobatchOp>, OrderedCollectivePattern<ClipGradientsOp>,
             OrderedCollectivePattern<KfacKLClipOp>, PromoteInversesPattern, StepResultPattern>(
            slots, &getContext(), state);
    // The stage functions' pf ops are neither legal nor illegal: left as
    // they are (pf-lower-to-runtime lowers each of them).
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    for (func::FuncOp func : lowered)
      returnOnFailure(func);
  }
};
} // namespace
