//===- PipelineModel.cpp - encoder blocks and their costs -----------------===//
#include "PipelineModel.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {
/// Raw position of a parameter in the model: 0 embeddings, b+1 encoder block
/// b, numBlocks+1 heads.
int64_t rawLayerOfParam(SymbolTable &symbols, StringRef name, int64_t numBlocks) {
  if (auto block = encoderBlockOfParam(symbols, name))
    return *block + 1;
  if (name.contains("embed"))
    return 0;
  return numBlocks + 1;
}
} // namespace

FailureOr<BlockAssignment> mlir::pf::assignBlocks(func::FuncOp func) {
  BlockAssignment result;
  int64_t maxBlock = -1;
  SymbolTable symbols(func->getParentOfType<ModuleOp>());
  func.walk([&](ParamRefOp ref) {
    if (auto block = encoderBlockOfParam(symbols, ref.getName()))
      maxBlock = std::max(maxBlock, *block);
  });
  if (maxBlock < 0)
    return func.emitError("no encoder blocks found: pipeline partitioning needs parameter "
                          "names such as 'encoder.layer.N.' or blocks found from the graph's "
                          "structure (pf-find-encoder-blocks; an imported BERT model)");
  int64_t numBlocks = maxBlock + 1;
  result.numBlocks = numBlocks;
  result.kfacLinears.resize(numBlocks);

  llvm::DenseMap<Value, int64_t> raw;
  for (Operation &op : func.getBody().front().without_terminator()) {
    int64_t layer = 0;
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      layer = rawLayerOfParam(symbols, ref.getName(), numBlocks);
    } else if (!isa<ConstantOp>(op)) {
      for (Value operand : op.getOperands()) {
        auto it = raw.find(operand);
        if (it != raw.end())
          layer = std::max(layer, it->second);
      }
      // A K-FAC factor update goes with the layer whose factor it writes (the
      // state lives there), not with the earlier block computing its input.
      if (auto update = dyn_cast<KFACUpdateFactorOp>(op))
        layer = std::max(layer, rawLayerOfParam(symbols, update.getFactor(), numBlocks));
    }
    for (Value res : op.getResults())
      raw[res] = layer;
    result.ops.push_back(&op);
    if (BlockAssignment::isFree(&op))
      continue;
    int64_t block = std::clamp<int64_t>(layer - 1, 0, numBlocks - 1);
    result.blockOf[&op] = block;
    // PipeFisher preconditions the linears of the encoder blocks only.
    if (auto linear = dyn_cast<LinearOp>(op); linear && layer >= 1 && layer <= numBlocks)
      result.kfacLinears[block].push_back(linear);
  }
  return result;
}

/// The encoder blocks each stage holds (its `blocks`, from pf-partition).
/// Together the stages hold blocks 0..N-1, each once, which bounds every
/// block number that follows.
static FailureOr<DenseMap<Operation *, ArrayRef<int64_t>>>
readStageBlockLists(PipelineOp pipeline, int64_t &numBlocks) {
  DenseMap<Operation *, ArrayRef<int64_t>> lists;
  numBlocks = 0;
  for (auto stage : pipeline.getBody().front().getOps<StageOp>()) {
    auto blocks = stage->getAttrOfType<DenseI64ArrayAttr>("blocks");
    if (!blocks)
      return stage.emitError("pf-schedule: stage has no 'blocks' attribute (made by pf-partition)");
    lists[stage] = blocks.asArrayRef();
    numBlocks += blocks.size();
  }
  llvm::BitVector listed(numBlocks);
  for (auto stage : pipeline.getBody().front().getOps<StageOp>()) {
    for (int64_t b : lists[stage]) {
      if (b < 0 || b >= numBlocks)
        return stage.emitError("pf-schedule: stage ")
               << stage.getIndex() << " lists encoder block " << b << ", but the stages hold "
               << numBlocks << " blocks";
      if (listed.test(b))
        return stage.emitError("pf-schedule: encoder block ")
               << b << " is listed by more than one stage";
      listed.set(b);
    }
  }
  return lists;
}

FailureOr<BlockAssignment> mlir::pf::readStageBlocks(PipelineOp pipeline) {
  BlockAssignment result;
  SymbolTable symbols(pipeline->getParentOfType<ModuleOp>());
  auto lists = readStageBlockLists(pipeline, result.numBlocks);
  if (failed(lists))
    return failure();
  result.kfacLinears.resize(result.numBlocks);
  for (auto stage : pipeline.getBody().front().getOps<StageOp>()) {
    ArrayRef<int64_t> stageBlocks = (*lists)[stage];
    for (Operation &op : stage.getBody().front().without_terminator()) {
      if (BlockAssignment::isFree(&op) || isa<SendOp, RecvOp>(op))
        continue;
      auto block = op.getAttrOfType<IntegerAttr>(kBlockAttrName);
      if (!block || block.getInt() < 0)
        return op.emitError("pf-schedule: op in a stage has no '")
               << kBlockAttrName << "' attribute (made by pf-partition)";
      int64_t b = block.getInt();
      if (!llvm::is_contained(stageBlocks, b))
        return op.emitError("pf-schedule: '")
               << op.getName() << "' has " << kBlockAttrName << " " << b << ", but its stage "
               << stage.getIndex() << " holds encoder blocks [" << stageBlocks << "] of "
               << result.numBlocks;
      result.ops.push_back(&op);
      result.blockOf[&op] = b;
      if (auto linear = dyn_cast<LinearOp>(op))
        if (auto ref = linear.getWeight().getDefiningOp<ParamRefOp>())
          if (encoderBlockOfParam(symbols, ref.getName()))
            result.kfacLinears[b].push_back(linear);
    }
  }
  return result;
}

namespace {
double flopsOf(Operation *op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getForwardFlops();
  return 0;
}

double bytesOf(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(v.getType());
  for (Value v : op->getResults())
    bytes += tensorBytes(v.getType());
  return bytes;
}

/// Tokens (rows) of a linear's input.
double rowsOf(LinearOp linear) {
  auto type = dyn_cast<RankedTensorType>(linear.getInput().getType());
  if (!type || !type.hasStaticShape() || type.getRank() == 0)
    return 0;
  return double(type.getNumElements()) / type.getShape().back();
}

/// Roofline: compute-bound ops at the GEMM efficiency, the rest memory-bound.
sched::CostModel analyticCosts(const BlockAssignment &blocks, const sched::DeviceSpec &dev) {
  double flopRate = dev.fp32Tflops * 1e12 * dev.gemmEfficiency;     // FLOP/s
  double solverRate = dev.fp32Tflops * 1e12 * dev.solverEfficiency; // FLOP/s
  double byteRate = dev.memoryGBs * 1e9 * dev.memoryEfficiency;     // B/s
  auto ms = [](double seconds) { return seconds * 1e3; };

  sched::CostModel model;
  model.name = "analytic " + dev.name + " (fp32, from the IR)";
  model.layers.resize(blocks.numBlocks);
  std::vector<double> paramBytes(blocks.numBlocks, 0);
  for (Operation *op : blocks.ops) {
    auto it = blocks.blockOf.find(op);
    if (it == blocks.blockOf.end())
      continue;
    sched::LayerCost &layer = model.layers[it->second];
    double flops = flopsOf(op);
    double seconds = flops > 0 ? flops / flopRate : bytesOf(op) / byteRate;
    layer.forward += ms(seconds);
    // Backward: input gradient and weight gradient each cost about a forward.
    layer.backwardInput += ms(seconds);
    layer.backwardWeight += ms(flops > 0 ? seconds : 0);
    for (Value operand : op->getOperands())
      if (operand.getDefiningOp<ParamRefOp>())
        paramBytes[it->second] += tensorBytes(operand.getType());
  }
  double maxActivation = 0;
  for (auto [b, linears] : llvm::enumerate(blocks.kfacLinears)) {
    sched::LayerCost &layer = model.layers[b];
    layer.name = "block" + std::to_string(b);
    double factorBytes = 0;
    for (LinearOp linear : linears) {
      double n = rowsOf(linear);
      double in = linear.getInFeatures(), out = linear.getOutFeatures();
      layer.curvatureA += ms(2 * n * in * in / flopRate);
      layer.curvatureB += ms(2 * n * out * out / flopRate);
      layer.inversionA += ms(in * in * in / solverRate);
      layer.inversionB += ms(out * out * out / solverRate);
      layer.precondition += ms(2 * out * in * (in + out) / flopRate);
      factorBytes += 4 * (in * in + out * out);
      maxActivation = std::max(maxActivation, tensorBytes(linear.getInput().getType()));
    }
    double link = dev.linkGBs * 1e9;
    layer.allreduce = ms(paramBytes[b] / link) + dev.linkLatencyUs * 1e-3;
    layer.factorAllreduce = ms(factorBytes / link) + dev.linkLatencyUs * 1e-3;
  }
  model.p2p = ms(maxActivation / (dev.linkGBs * 1e9)) + dev.linkLatencyUs * 1e-3;
  return model;
}
} // namespace

FailureOr<sched::CostModel> mlir::pf::buildCostModel(func::FuncOp func,
                                                     const BlockAssignment &blocks,
                                                     CostSource cost, StringRef profilePath,
                                                     StringRef device) {
  if (cost == CostSource::Analytic) {
    auto dev = sched::findDevice(device.str());
    if (!dev)
      return func.emitError() << dev.error(); // names the device and the known ones
    return analyticCosts(blocks, *dev);
  }
  auto profile = sched::loadProfile(profilePath.str());
  if (!profile)
    return func.emitError("cannot use profile '") << profilePath << "': " << profile.error();
  if (int64_t(profile->layers.size()) != blocks.numBlocks)
    return func.emitError("profile '")
           << profilePath << "' has " << profile->layers.size() << " layers but the model has "
           << blocks.numBlocks << " encoder blocks";
  return profile.take();
}

LogicalResult mlir::pf::verifyCostOptions(Operation *op, StringRef pass, CostSource cost,
                                          StringRef profilePath) {
  if (cost == CostSource::Profile && profilePath.empty())
    return op->emitError() << pass << ": cost=profile needs profile=PATH";
  if (cost == CostSource::Analytic && !profilePath.empty())
    return op->emitError() << pass << ": profile='" << profilePath
                           << "' is only read with cost=profile";
  return success();
}
