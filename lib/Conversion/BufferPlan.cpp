//===- BufferPlan.cpp - static buffers of a pf function --------------------===//
#include "BufferPlan.h"

#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Dialect/PF/IR/PFOps.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::pf;

namespace {
constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

int64_t byteSize(RankedTensorType type) { return storageBytes(type); }

/// Places arena buffers, largest first, at the lowest offset that does not
/// overlap a placed buffer alive at the same time (greedy best-fit by size,
/// as TFLite's and ONNX Runtime's planners do).
void placeArena(BufferPlan &plan) {
  SmallVector<int64_t> order;
  for (auto [i, b] : llvm::enumerate(plan.buffers))
    if (b.kind == PlannedBuffer::Kind::Arena)
      order.push_back(i);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  SmallVector<int64_t> placed;
  for (int64_t i : order) {
    PlannedBuffer &buffer = plan.buffers[i];
    SmallVector<std::pair<int64_t, int64_t>> busy; // [offset, end) of live overlaps
    for (int64_t j : placed) {
      const PlannedBuffer &other = plan.buffers[j];
      if (other.lastUse < buffer.firstUse || buffer.lastUse < other.firstUse)
        continue;
      busy.push_back({other.offset, other.offset + alignUp(other.bytes)});
    }
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [start, end] : busy) {
      if (offset + buffer.bytes <= start)
        break;
      offset = std::max(offset, end);
    }
    buffer.offset = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + alignUp(buffer.bytes));
    placed.push_back(i);
  }
  // The lower bound any placement has to meet, for the report.
  int64_t lastTime = 0;
  for (const PlannedBuffer &b : plan.buffers)
    lastTime = std::max(lastTime, b.lastUse);
  for (int64_t t = 0; t <= lastTime; ++t) {
    int64_t live = 0;
    for (const PlannedBuffer &b : plan.buffers)
      if (b.kind == PlannedBuffer::Kind::Arena && b.firstUse <= t && t <= b.lastUse)
        live += b.bytes;
    plan.peakLiveBytes = std::max(plan.peakLiveBytes, live);
  }
}
} // namespace

FailureOr<BufferPlan> mlir::pf::planBuffers(func::FuncOp func) {
  BufferPlan plan;
  auto addBuffer = [&](PlannedBuffer buffer) {
    plan.buffers.push_back(buffer);
    return int64_t(plan.buffers.size()) - 1;
  };
  auto staticType = [&](Value v, Operation *where) -> FailureOr<RankedTensorType> {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return where->emitError("the runtime lowering needs static shapes, got ") << v.getType();
    return type;
  };

  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto type = staticType(arg, func);
    if (failed(type))
      return failure();
    PlannedBuffer buffer;
    buffer.kind = PlannedBuffer::Kind::Input;
    buffer.index = arg.getArgNumber();
    buffer.bytes = byteSize(*type);
    plan.tensorOf[arg] = plan.addTensor(addBuffer(buffer), *type);
  }

  llvm::StringMap<int64_t> paramBuffers;
  auto paramBuffer = [&](StringAttr name, RankedTensorType type) {
    auto [it, inserted] = paramBuffers.try_emplace(name.getValue(), 0);
    if (inserted) {
      PlannedBuffer b;
      b.kind = PlannedBuffer::Kind::Param;
      b.param = name;
      b.bytes = byteSize(type);
      it->second = addBuffer(b);
    }
    return it->second;
  };
  auto module = func->getParentOfType<ModuleOp>();
  int64_t time = 0;
  for (Operation &op : body) {
    ++time;
    // Parameters named by symbol (optimizer updates write them in place).
    for (NamedAttribute attr : op.getAttrs()) {
      auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
      if (!ref || isa<ParamRefOp>(op) || plan.paramTensor.count(ref.getValue()))
        continue;
      auto param = module ? module.lookupSymbol<ParamOp>(ref.getAttr()) : ParamOp();
      if (!param)
        continue;
      auto type = cast<RankedTensorType>(param.getType());
      plan.paramTensor[ref.getValue()] = plan.addTensor(paramBuffer(ref.getAttr(), type), type);
    }
    for (Value operand : op.getOperands())
      if (auto it = plan.tensorOf.find(operand); it != plan.tensorOf.end()) {
        PlannedBuffer &b = plan.buffers[plan.tensors[it->second].buffer];
        b.lastUse = std::max(b.lastUse, time);
      }
    if (isa<func::ReturnOp>(op))
      break;
    for (Value result : op.getResults()) {
      auto type = staticType(result, &op);
      if (failed(type))
        return failure();
      int64_t buffer;
      if (auto ref = dyn_cast<ParamRefOp>(op)) {
        buffer = paramBuffer(ref.getNameAttr().getAttr(), *type);
      } else if (auto constant = dyn_cast<ConstantOp>(op)) {
        PlannedBuffer b;
        b.kind = PlannedBuffer::Kind::Constant;
        b.value = constant.getValue();
        b.bytes = byteSize(*type);
        buffer = addBuffer(b);
      } else if (auto view = dyn_cast<ViewOpInterface>(op)) {
        buffer = plan.tensors[plan.tensorOf.lookup(view.getViewSource())].buffer;
      } else {
        PlannedBuffer b;
        b.bytes = byteSize(*type);
        b.firstUse = b.lastUse = time;
        b.producer = &op;
        buffer = addBuffer(b);
      }
      plan.tensorOf[result] = plan.addTensor(buffer, *type);
    }
  }

  // Results: an op writes straight into the host's output buffer when the
  // value lives in the arena and is returned once; otherwise it is copied.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    int64_t tensor = plan.tensorOf.lookup(v);
    PlannedBuffer &b = plan.buffers[plan.tensors[tensor].buffer];
    if (b.kind == PlannedBuffer::Kind::Arena) {
      b.kind = PlannedBuffer::Kind::Output;
      b.index = i;
      plan.outputTensors.push_back(tensor);
      continue;
    }
    PlannedBuffer out;
    out.kind = PlannedBuffer::Kind::Output;
    out.index = i;
    out.bytes = b.bytes;
    int64_t copy = plan.addTensor(addBuffer(out), plan.tensors[tensor].type);
    plan.outputCopies.push_back({tensor, copy});
    plan.outputTensors.push_back(copy);
  }
  placeArena(plan);
  return plan;
}
