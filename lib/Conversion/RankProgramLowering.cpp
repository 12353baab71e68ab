//===- RankProgramLowering.cpp - pf-lower-rank-programs --------------------===//
//
// 1. Moves each selected pf.rank_program's ops into
//    func.func @pf_<program>(%host, %ctx, %comm, %slots, %arena, %groups,
//    %host_ctx, %world: !llvm.ptr) -> i32 (%groups: the communicators of
//    programCommGroups; %host_ctx and %world: where the clippings' f64
//    terms, host memory, are summed),
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
//    the operand where the plan put them apart), a broadcast into
//    pfrt_comm_broadcast on its result's slot, the clippings into pfrt_dot
//    of each term this rank counts, one exact all-reduce of the terms, their
//    sum in order, and pfrt_clip_to_norm /
//    pfrt_scale on the slots; the other ops into the func.call of their
//    pfrt_rank_abi.def function (constants for the scalars, constant
//    globals for names, slot lists, rank lists, shapes and orders, the op's
//    index first).
// 3. Returns the first non-zero status after each call, 0 at the end.
//
//===----------------------------------------------------------------------===//
#include "RuntimeABI.h"
#include "StepEndRules.h"
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
/// pfrt_abi.def's kernels and pfrt_rank_abi.def's host calls: each returns
/// a status.
constexpr llvm::StringLiteral kRuntimeCallPrefix = "pfrt_";
/// A call whose status goes into an or-ed status checked later, and that
/// status (returnOnFailure checks it instead of each call's).
constexpr llvm::StringLiteral kCheckedLater = "pf.checked_later";
constexpr llvm::StringLiteral kStatusToCheck = "pf.status_to_check";

/// The constant globals of the lowered programs, one per distinct content.
class RankConstants {
public:
  explicit RankConstants(ModuleOp module) : module(module) {}

  /// A NUL-terminated string.
  Value string(OpBuilder &b, Location loc, StringRef text) {
    std::string bytes = (text + llvm::Twine('\0')).str();
    LLVM::GlobalOp &global = strings[bytes];
    if (!global) {
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size());
      global = create(b, loc, type, b.getStringAttr(bytes), "str");
    }
    return LLVM::AddressOfOp::create(b, loc, global);
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
  /// Each posted op's array: its function's sends', recvs' or row sends'.
  DenseMap<Operation *, Value> requestArray;
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
  /// context and `args` (the call in `made`).
  LogicalResult kernel(OpBuilder &b, Operation *op, StringRef name, ArrayRef<Value> args,
                       func::CallOp *made = nullptr) {
    const abi::Kernel *callee = abi::lookupKernel(name);
    if (!callee)
      return op->emitOpError("pf-lower-rank-programs: '") << name << "' is not in pfrt_abi.def";
    return emitCall(b, op, name, abi::kernelType(b.getContext(), *callee),
                    functionArgument(op, 1), args, "pfrt_abi.def", made);
  }

  /// `name` of pfrt_abi.def on `context` instead of the program's.
  LogicalResult kernelOn(OpBuilder &b, Operation *op, StringRef name, Value context,
                         ArrayRef<Value> args) {
    const abi::Kernel *callee = abi::lookupKernel(name);
    if (!callee)
      return op->emitOpError("pf-lower-rank-programs: '") << name << "' is not in pfrt_abi.def";
    return emitCall(b, op, name, abi::kernelType(b.getContext(), *callee), context, args,
                    "pfrt_abi.def");
  }

  Value comm(Operation *op) { return functionArgument(op, 2); }
  /// The host's context and the communicator of every rank on it.
  Value hostContext(Operation *op) { return functionArgument(op, 6); }
  Value world(Operation *op) { return functionArgument(op, 7); }
  /// The group rank of `rank` in the collective over `members`.
  static int32_t groupRank(ArrayRef<int64_t> members, int64_t rank) {
    SmallVector<int64_t> sorted(members);
    llvm::sort(sorted);
    return int32_t(llvm::find(sorted, rank) - sorted.begin());
  }
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
  /// `to` holds `from`'s value: a pfrt_copy only where the plan put them
  /// apart.
  LogicalResult copyIfApart(OpBuilder &b, Operation *op, Value from, Value to) {
    if (offset.lookup(from) == offset.lookup(to))
      return success();
    return kernel(b, op, "pfrt_copy",
                  {slotTensor(b, op, slot.lookup(from)), slotTensor(b, op, slot.lookup(to))});
  }
  /// The request word of a posted send or recv.
  Value requestOf(OpBuilder &b, Operation *transfer) {
    return LLVM::GEPOp::create(b, transfer->getLoc(), LLVM::LLVMPointerType::get(b.getContext()),
                               b.getI64Type(), requestArray.lookup(transfer),
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
                         Value first, ArrayRef<Value> args, StringRef table,
                         func::CallOp *made = nullptr) {
    SmallVector<Value> all{first};
    llvm::append_range(all, args);
    if (TypeRange(ValueRange(all)) != type.getInputs())
      return op->emitOpError("pf-lower-rank-programs: the arguments of '")
             << name << "' do not match " << table;
    declare(b, name, type);
    auto call = func::CallOp::create(b, op->getLoc(), name, type.getResults(), all);
    if (made)
      *made = call;
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

  /// An op the program runs itself, no host service: `body`'s calls between
  /// the host's timeline marks.
  LogicalResult ownCalls(OpBuilder &b, OpT op, StringRef &callee,
                         llvm::function_ref<LogicalResult()> body) const {
    callee = "";
    return failure(failed(state.mark(b, op, op, 0)) || failed(body()) ||
                   failed(state.mark(b, op, op, 1)));
  }

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

/// pf.all_reduce: the library's sum of a value is the program's own call; a
/// parameter summed in place by name (Chimera's K-FAC factors) the host's,
/// with the name, the member ranks and the type.
struct AllReducePattern : RankCallPattern<AllReduceOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(AllReduceOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    LoweringState &s = state;
    Location loc = op.getLoc();
    if (isProgramCollective(op))
      return ownCalls(b, op, callee, [&] {
        Value sum = op.getSum();
        return failure(failed(s.copyIfApart(b, op, op.getInputs().front(), sum)) ||
                       failed(s.kernel(b, op, "pfrt_comm_all_reduce_sum",
                                       {s.groupComm(b, op, op.getRanks()),
                                        s.slotTensor(b, op, s.slot.lookup(sum))})));
      });
    args.push_back(s.constants.string(b, loc, op.getValue()));
    args.push_back(s.i64(b, loc, int64_t(op.getRanks().size())));
    args.push_back(s.constants.i64Array(b, loc, op.getRanks()));
    llvm::append_range(args, s.type(b, loc, op.getType()));
    callee = "pfrt_rank_all_reduce_parameter";
    return success();
  }
};

/// pf.reduce_microbatch, the program's own: off the root, the piece's
/// non-zero rows posted to the root (pfrt_comm_isend_rows, completed at the
/// end, also with overlap=false: the root takes them where its schedule is
/// past that pass, maybe after this rank's next transfers); on the
/// root, the sum = its piece + the received rows (pfrt_comm_recv_add_rows),
/// every element one addition: the dense sum, which its accumulate call
/// weights as one process weights the micro-batch's a + b. The tag is
/// kReduceRowsTag + the micro-batch: the root takes each micro-batch's rows
/// by tag.
struct ReducePattern : RankCallPattern<ReduceMicrobatchOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(ReduceMicrobatchOp op, ConversionPatternRewriter &b,
                      SmallVectorImpl<Value> &, StringRef &callee) const override {
    LoweringState &s = state;
    Location loc = op.getLoc();
    ArrayRef<int64_t> members = op.getRanks();
    if (members.size() != 2)
      return op.emitOpError("pf-lower-rank-programs: a row-sparse sum needs two members, not ")
             << members.size();
    Value comm = s.groupComm(b, op, members);
    Value piece = s.slotTensor(b, op, s.slot.lookup(op.getPiece()));
    Value tag = s.i32(b, loc, kReduceRowsTag + int64_t(op.getMicrobatch()));
    return ownCalls(b, op, callee, [&]() -> LogicalResult {
      if (Value sum = op.getSum()) {
        int64_t other = members[0] == int64_t(op.getRoot()) ? members[1] : members[0];
        return s.kernel(b, op, "pfrt_comm_recv_add_rows",
                        {comm, piece, s.slotTensor(b, op, s.slot.lookup(sum)),
                         s.i32(b, loc, LoweringState::groupRank(members, other)), tag});
      }
      Value root = s.i32(b, loc, LoweringState::groupRank(members, int64_t(op.getRoot())));
      return s.kernel(b, op, "pfrt_comm_isend_rows", {comm, piece, root, tag, s.requestOf(b, op)});
    });
  }
};

/// pf.broadcast: the root's value (copied into its result's bytes where the
/// plan put them apart) becomes every member's by pfrt_comm_broadcast on the
/// result's slot, on the members' communicator.
struct BroadcastPattern : RankCallPattern<BroadcastOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(BroadcastOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &,
                      StringRef &callee) const override {
    LoweringState &s = state;
    Location loc = op.getLoc();
    Value out = s.slotTensor(b, op, s.slot.lookup(op.getResult()));
    return ownCalls(b, op, callee, [&] {
      Value input = op.getInput();
      int32_t root = LoweringState::groupRank(op.getRanks(), int64_t(op.getRoot()));
      return failure((input && failed(s.copyIfApart(b, op, input, op.getResult()))) ||
                     failed(s.kernel(b, op, "pfrt_comm_broadcast",
                                     {s.groupComm(b, op, op.getRanks()), out,
                                      s.i32(b, loc, root)})));
    });
  }
};

/// What pf.clip_gradients and pf.kfac_kl_clip share: Σ over `order` of
/// ⟨a, b⟩ as one process forms it. Each term this rank counts by pfrt_dot
/// (a deterministic sum) into its position of an f64 array, zero elsewhere;
/// the array all-reduced over every rank on the host's context (each
/// position has one non-zero contribution, so the sum is exact whatever the
/// library's association); then added in order from 0.
template <typename OpT>
struct OrderedSumPattern : RankCallPattern<OpT> {
  using RankCallPattern<OpT>::RankCallPattern;

  FailureOr<Value> orderedSum(ConversionPatternRewriter &b, OpT op, ValueRange lhs,
                              ValueRange rhs) const {
    LoweringState &s = this->state;
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Type ptr = LLVM::LLVMPointerType::get(ctx), f64 = b.getF64Type();
    ArrayAttr order = op.getOrder();
    int64_t n = int64_t(order.size());
    Value terms = LLVM::AllocaOp::create(b, loc, ptr, f64, s.i64(b, loc, std::max<int64_t>(n, 1)));
    auto term = [&](int64_t i) {
      return LLVM::GEPOp::create(b, loc, ptr, f64, terms, ArrayRef<LLVM::GEPArg>{int32_t(i)});
    };
    Value zero = s.f64(b, loc, 0.0);
    for (int64_t i = 0; i < n; ++i)
      LLVM::StoreOp::create(b, loc, zero, term(i));
    // The terms' statuses are or-ed and checked once (a block per call
    // would make the program slow to compile), the first failure's message
    // kept by its context.
    Value statuses;
    for (auto [name, counts, x, y] : llvm::zip_equal(op.getNames(), op.getCounted(), lhs, rhs)) {
      auto at = llvm::find(order, name);
      if (at == order.end())
        return op.emitOpError("pf-lower-rank-programs: '")
               << cast<StringAttr>(name).getValue() << "' is not in the order";
      if (!counts)
        continue;
      func::CallOp dot;
      if (failed(s.kernel(b, op, "pfrt_dot",
                          {s.slotTensor(b, op, s.slot.lookup(x)),
                           s.slotTensor(b, op, s.slot.lookup(y)), term(at - order.begin())},
                          &dot)))
        return failure();
      dot->setAttr(kCheckedLater, b.getUnitAttr());
      statuses = statuses ? arith::OrIOp::create(b, loc, statuses, dot.getResult(0))
                          : dot.getResult(0);
    }
    if (statuses) {
      Operation *check = arith::OrIOp::create(b, loc, statuses, s.i32(b, loc, 0));
      check->setAttr(kStatusToCheck, b.getUnitAttr());
    }
    // The array's descriptor: f64[n] in host memory.
    Value tensor = LLVM::AllocaOp::create(b, loc, ptr, s.tensorType, s.i64(b, loc, 1));
    auto field = [&](ArrayRef<LLVM::GEPArg> path) {
      return LLVM::GEPOp::create(b, loc, ptr, s.tensorType, tensor, path);
    };
    LLVM::StoreOp::create(b, loc, terms, field({0, 0}));
    LLVM::StoreOp::create(b, loc, s.i32(b, loc, PFRT_F64), field({0, 1}));
    LLVM::StoreOp::create(b, loc, s.i32(b, loc, 1), field({0, 2}));
    LLVM::StoreOp::create(b, loc, s.i64(b, loc, n), field({0, 3, 0}));
    if (failed(s.kernelOn(b, op, "pfrt_comm_all_reduce_sum", s.hostContext(op),
                          {s.world(op), tensor})))
      return failure();
    Value total = zero;
    for (int64_t i = 0; i < n; ++i)
      total = arith::AddFOp::create(b, loc, total, LLVM::LoadOp::create(b, loc, f64, term(i)));
    return total;
  }
};

/// pf.clip_gradients: the global norm over every rank (the ordered sum of
/// the squares), then pfrt_clip_to_norm on the
/// results (each a copy of its gradient where the plan put them apart):
/// pfrt_clip_by_global_norm's rule with the norm given.
struct ClipGradientsPattern : OrderedSumPattern<ClipGradientsOp> {
  using OrderedSumPattern::OrderedSumPattern;
  LogicalResult lower(ClipGradientsOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &,
                      StringRef &callee) const override {
    LoweringState &s = state;
    Location loc = op.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext());
    return ownCalls(b, op, callee, [&]() -> LogicalResult {
      FailureOr<Value> squares = orderedSum(b, op, op.getGradients(), op.getGradients());
      if (failed(squares))
        return failure();
      Value norm = LLVM::SqrtOp::create(b, loc, *squares);
      // The results' descriptors, consecutive for the kernel.
      int64_t n = int64_t(op.getGradients().size());
      Value list = LLVM::AllocaOp::create(b, loc, ptr, s.tensorType,
                                          s.i64(b, loc, std::max<int64_t>(n, 1)));
      for (auto [i, gradient, clipped] : llvm::enumerate(op.getGradients(), op.getClipped())) {
        Value out = s.slotTensor(b, op, s.slot.lookup(clipped));
        if (failed(s.copyIfApart(b, op, gradient, clipped)))
          return failure();
        Value entry = LLVM::GEPOp::create(b, loc, ptr, s.tensorType, list,
                                          ArrayRef<LLVM::GEPArg>{int32_t(i)});
        LLVM::StoreOp::create(b, loc, LLVM::LoadOp::create(b, loc, s.tensorType, out), entry);
      }
      return s.kernel(b, op, "pfrt_clip_to_norm",
                      {list, s.i32(b, loc, n), s.f64(b, loc, op.getMaxNorm().convertToDouble()),
                       norm});
    });
  }
};

/// pf.kfac_kl_clip: ν of the single-process lowering (emitKLClipFactor) from
/// the ordered sum over every rank of ⟨update, gradient⟩ and the step's
/// `lr`, each update scaled into its result by
/// pfrt_scale.
struct KLClipPattern : OrderedSumPattern<KfacKLClipOp> {
  using OrderedSumPattern::OrderedSumPattern;
  LogicalResult lower(KfacKLClipOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &,
                      StringRef &callee) const override {
    LoweringState &s = state;
    Location loc = op.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(b.getContext()), f64 = b.getF64Type();
    return ownCalls(b, op, callee, [&]() -> LogicalResult {
      FailureOr<Value> total = orderedSum(b, op, op.getUpdates(), op.getGradients());
      if (failed(total))
        return failure();
      Value lrSlot = LLVM::AllocaOp::create(b, loc, ptr, f64, s.i64(b, loc, 1));
      if (failed(s.call(b, op, "pfrt_rank_step_scalar",
                        {s.index(b, op), s.constants.string(b, loc, "lr"), lrSlot})))
        return failure();
      Value lr = LLVM::LoadOp::create(b, loc, f64, lrSlot);
      Value nu = emitKLClipFactor(b, loc, lr, *total, op.getKappa().convertToDouble());
      for (auto [update, clipped] : llvm::zip_equal(op.getUpdates(), op.getClipped()))
        if (failed(s.kernel(b, op, "pfrt_scale",
                            {s.slotTensor(b, op, s.slot.lookup(update)), nu,
                             s.slotTensor(b, op, s.slot.lookup(clipped))})))
          return failure();
      return success();
    });
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

/// pf.step_result: the name and the value's slot, which the host reads
/// after the step.
struct StepResultPattern : RankCallPattern<StepResultOp> {
  using RankCallPattern::RankCallPattern;
  LogicalResult lower(StepResultOp op, ConversionPatternRewriter &b, SmallVectorImpl<Value> &args,
                      StringRef &callee) const override {
    Location loc = op.getLoc();
    args.push_back(state.constants.string(b, loc, op.getName()));
    args.push_back(state.i64(b, loc, state.slot.lookup(op.getValue())));
    callee = "pfrt_rank_step_result";
    return success();
  }
};

/// Step 1: @pf_<program>(%host, %ctx, %comm, %slots, %arena, %groups,
/// %host_ctx, %world) -> i32
/// holding the program's ops and the plan of their values, ending (with
/// posted transfers) in the waits for the sends and the recvs nobody read,
/// and `return 0`.
FailureOr<func::FuncOp> moveIntoFunction(RankProgramOp program, LoweringState &state) {
  OpBuilder b(program);
  MLIRContext *ctx = program.getContext();
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Location loc = program.getLoc();
  auto type = FunctionType::get(ctx, SmallVector<Type>(8, ptr), {b.getI32Type()});
  auto func = func::FuncOp::create(b, loc, ("pf_" + program.getSymName()).str(), type);
  Block *entry = func.addEntryBlock();
  state.commGroups[func] = programCommGroups(program);
  Block &body = program.getBody().front();
  StageValuePlan plan = planStageValues(program, state.overlap);
  for (auto [value, slot] : plan.slot) {
    state.slot[value] = slot;
    state.offset[value] = plan.offset[slot];
  }
  // Posted: a recv nobody reads is waited for at the end, as every send
  // is (an activation's on the program's communicator, all at once; a
  // row-sparse sum's rows on its members', posted also with overlap=false).
  SmallVector<Operation *> sends, recvs, rowSends, unreadRecvs;
  for (auto [index, op] : llvm::enumerate(body)) {
    state.opIndex[&op] = int64_t(index);
    if (isa<SendActOp>(op)) {
      state.requestIndex[&op] = int64_t(sends.size());
      sends.push_back(&op);
    }
    if (auto reduce = dyn_cast<ReduceMicrobatchOp>(op); reduce && !reduce.getSum()) {
      state.requestIndex[&op] = int64_t(rowSends.size());
      rowSends.push_back(&op);
    }
    if (auto recv = dyn_cast<RecvActOp>(op)) {
      state.requestIndex[&op] = int64_t(recvs.size());
      recvs.push_back(&op);
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
  auto words = [&](ArrayRef<Operation *> ops, bool posted) -> Value {
    if (!posted || ops.empty())
      return Value();
    Value array = LLVM::AllocaOp::create(start, loc, ptr, start.getI64Type(),
                                         state.i64(start, loc, int64_t(ops.size())));
    for (Operation *op : ops)
      state.requestArray[op] = array;
    return array;
  };
  Value sendWords = words(sends, state.overlap);
  words(recvs, state.overlap);
  words(rowSends, /*posted=*/true);
  b.setInsertionPointToEnd(entry);
  auto end = func::ReturnOp::create(b, loc, ValueRange{state.i32(b, loc, 0)});
  b.setInsertionPoint(end);
  for (Operation *recv : unreadRecvs)
    if (failed(state.waitFor(b, end, recv)))
      return failure();
  if (!sends.empty() && state.overlap) {
    Value count = state.i32(b, loc, int64_t(sends.size()));
    if (failed(state.kernel(b, end, "pfrt_comm_wait_all", {state.comm(end), sendWords, count})))
      return failure();
  }
  for (Operation *send : rowSends) {
    Value request = LLVM::LoadOp::create(b, loc, b.getI64Type(), state.requestOf(b, send));
    if (failed(state.kernel(b, end, "pfrt_comm_wait",
                            {state.groupComm(b, end, cast<ReduceMicrobatchOp>(send).getRanks()),
                             request})))
      return failure();
  }
  program.erase();
  return func;
}

/// Step 3: after each call of the runtime or the host (or an or-ed status of
/// several), a non-zero status returns it.
void returnOnFailure(func::FuncOp func) {
  SmallVector<Operation *> calls;
  func.walk([&](Operation *op) {
    auto call = dyn_cast<func::CallOp>(op);
    if (call && call->removeAttr(kCheckedLater))
      return;
    if ((call && call.getCallee().starts_with(kRuntimeCallPrefix)) || op->hasAttr(kStatusToCheck))
      calls.push_back(op);
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
  for (Operation *call : calls) {
    call->removeAttr(kStatusToCheck);
    Block *before = call->getBlock();
    Block *after = before->splitBlock(call->getNextNode());
    b.setInsertionPointToEnd(before);
    Location loc = call->getLoc();
    Value result = call->getResult(0);
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
             AllReducePattern, BroadcastPattern, ReducePattern, ClipGradientsPattern, KLClipPattern,
             PromoteInversesPattern, StepResultPattern>(
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
