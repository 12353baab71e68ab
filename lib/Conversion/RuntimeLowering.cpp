//===- RuntimeLowering.cpp - shared state of the pf -> pfrt patterns -------===//
#include "RuntimeLowering.h"
#include "RuntimeABI.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::pf;

RuntimeTypeConverter::RuntimeTypeConverter(MLIRContext *ctx) {
  addConversion([](Type type) { return type; });
  addConversion([ctx](TensorType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
}

RuntimeLowering::RuntimeLowering(ModuleOp module, BufferPlan &plan, Block &entry)
    : plan(plan), module(module), context(entry.getArgument(0)), table(entry.getArgument(1)) {
  MLIRContext *ctx = module.getContext();
  ptrType = LLVM::LLVMPointerType::get(ctx);
  Type i64 = IntegerType::get(ctx, 64);
  // struct pfrt_tensor { void *data; int32_t dtype, rank; int64_t shape[MAX_RANK]; }
  tensorType = LLVM::LLVMStructType::getLiteral(
      ctx, {ptrType, IntegerType::get(ctx, 32), IntegerType::get(ctx, 32),
            LLVM::LLVMArrayType::get(i64, PFRT_MAX_RANK)});
}

Value RuntimeLowering::tensorPtr(OpBuilder &b, Location loc, int64_t tensor) const {
  return LLVM::GEPOp::create(b, loc, ptrType, tensorType, table,
                             ArrayRef<LLVM::GEPArg>{int32_t(tensor)});
}

Value RuntimeLowering::entryOf(OpBuilder &b, Location loc, Value value) const {
  if (!value)
    return nullPtr(b, loc);
  return tensorPtr(b, loc, plan.tensorOf.lookup(value));
}

SmallVector<Value> RuntimeLowering::resultEntries(OpBuilder &b, Operation *op) const {
  SmallVector<Value> entries;
  for (Value result : op->getResults())
    entries.push_back(entryOf(b, op->getLoc(), result));
  return entries;
}

Value RuntimeLowering::orNull(OpBuilder &b, Location loc, Value converted) const {
  return converted ? converted : nullPtr(b, loc);
}

Value RuntimeLowering::nullPtr(OpBuilder &b, Location loc) const {
  return LLVM::ZeroOp::create(b, loc, ptrType);
}

Value RuntimeLowering::paramPtr(OpBuilder &b, Location loc, FlatSymbolRefAttr name) const {
  if (!name)
    return nullPtr(b, loc);
  return tensorPtr(b, loc, plan.paramTensor.lookup(name.getValue()));
}

Value RuntimeLowering::constI32(OpBuilder &b, Location loc, int64_t v) const {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}
Value RuntimeLowering::constI64(OpBuilder &b, Location loc, int64_t v) const {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
}
Value RuntimeLowering::constF64(OpBuilder &b, Location loc, double v) const {
  return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
}

Value RuntimeLowering::intArray(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  if (values.empty())
    return nullPtr(b, loc);
  // One global per distinct array (every block repeats its permutations).
  std::string &name = intArrays[std::vector<int64_t>(values.begin(), values.end())];
  if (name.empty()) {
    name = "__pf_ints_" + std::to_string(globals++);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto type = LLVM::LLVMArrayType::get(b.getI64Type(), values.size());
    LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal, name,
                           b.getI64TensorAttr(values));
  }
  return LLVM::AddressOfOp::create(b, loc, ptrType, name);
}

FailureOr<Value> RuntimeLowering::readScalar(OpBuilder &b, Operation *op, Value source,
                                             Value entry, Type type) {
  Location loc = op->getLoc();
  Value value = scalarReads.lookup(source);
  if (!value) {
    Value slot = scratchF64(b, loc);
    OpBuilder::InsertionGuard guard(b);
    bool argument = arguments.contains(source);
    if (argument)
      b.setInsertionPointAfterValue(entry);
    if (failed(call(b, op, "pfrt_read_scalar", {entry, slot})))
      return failure();
    value = LLVM::LoadOp::create(b, loc, b.getF64Type(), slot);
    // A read at the top level of pf_main dominates every later use; one
    // inside a branch does not.
    if (argument || b.getInsertionBlock() == cast<BlockArgument>(context).getOwner())
      scalarReads[source] = value;
  }
  if (type.isF64())
    return value;
  return Value(arith::FPToSIOp::create(b, loc, type, value));
}

/// An alloca at the start of pf_main (whose arguments are ctx and table).
static Value entryBlockSlot(OpBuilder &b, Location loc, Value context, Type ptrType, Type element) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(cast<BlockArgument>(context).getOwner());
  Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
  return LLVM::AllocaOp::create(b, loc, ptrType, element, one);
}

Value RuntimeLowering::scratchF64(OpBuilder &b, Location loc) {
  if (!f64Slot)
    f64Slot = entryBlockSlot(b, loc, context, ptrType, b.getF64Type());
  return f64Slot;
}

Value RuntimeLowering::scratchI32(OpBuilder &b, Location loc) {
  if (!i32Slot)
    i32Slot = entryBlockSlot(b, loc, context, ptrType, b.getI32Type());
  return i32Slot;
}

int64_t RuntimeLowering::addContiguousViews(ValueRange values) {
  int64_t first = int64_t(plan.tensors.size());
  for (Value v : values) {
    PlannedTensor view = plan.tensors[plan.tensorOf.lookup(v)];
    plan.addTensor(view.buffer, view.type);
  }
  return first;
}

LogicalResult RuntimeLowering::call(OpBuilder &b, Operation *op, StringRef name,
                                    ArrayRef<Value> args) {
  return emitCall(b, op->getLoc(), op, name, args, opIndex.lookup(op));
}

LogicalResult RuntimeLowering::callOutputCopy(OpBuilder &b, Location loc, int64_t from,
                                              int64_t to) {
  return emitCall(b, loc, nullptr, "pfrt_copy", {tensorPtr(b, loc, from), tensorPtr(b, loc, to)},
                  -1);
}

LogicalResult RuntimeLowering::emitCall(OpBuilder &b, Location loc, Operation *diagnosticOp,
                                        StringRef name, ArrayRef<Value> args, int64_t index) {
  auto fail = [&]() {
    return diagnosticOp ? diagnosticOp->emitError() : mlir::emitError(loc);
  };
  const abi::Kernel *kernel = abi::lookupKernel(name);
  if (!kernel)
    return fail() << "pf-lower-to-runtime: '" << name << "' is not in pfrt_abi.def";
  MLIRContext *ctx = module.getContext();
  FunctionType type = abi::kernelType(ctx, *kernel);
  SmallVector<Value> all{context};
  all.append(args.begin(), args.end());
  if (TypeRange(ValueRange(all)) != type.getInputs())
    return fail() << "pf-lower-to-runtime: the arguments built for '" << name << "' ("
                  << TypeRange(ValueRange(all)) << ") do not match pfrt_abi.def ("
                  << type.getInputs() << ")";
  if (!module.lookupSymbol(name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    auto decl = func::FuncOp::create(b, loc, name, type);
    decl.setPrivate();
  }
  auto callOp = func::CallOp::create(b, loc, name, type.getResults(), all);
  calls.push_back({callOp, index});
  return success();
}
