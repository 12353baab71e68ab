//===- PipelineModel.cpp - encoder blocks and their costs -----------------===//
#include "PipelineModel.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::pf;
namespace sched = ::pf::sched;

namespace {
bool isForwardOp(Operation *op) {
  return !op->hasAttr(kGradOfAttrName) && !op->hasAttr(kGradSumAttrName);
}

/// Raw position of each parameter of a function in the model, for placing
/// the ops that read it: b+1 for a parameter of encoder block b (its
/// `pf.encoder_block`, or a name such as `encoder.layer.N.`), numBlocks+1 for
/// a parameter of the heads, 0 for the rest.
///
/// Only the blocks come from names. Whether a parameter without a block is
/// the heads' comes from where it is read: an exporter names a parameter
/// after its module (`tok.weight`, `wte`, `ln_emb.bias` of a plain
/// PyTorch model), after nothing (`onnx::MatMul_N`: the folded weight of a
/// linear without a bias, a folded constant), so a name that lacks
/// `embed` does not make a head. A parameter without a block is the heads'
/// when the first forward op that reads it comes after every forward op
/// that reads a block's parameter (program order is the graph's); any other
/// one (the embeddings' tables, a weight inside the blocks that no name or
/// structure placed) adds nothing to its readers' position, which their
/// inputs give. Taking such a parameter for the heads would pull its readers
/// and everything computed from them to the end of the model: the
/// embeddings (and the blocks after the parameter) would leave the first
/// stages with only the parameter-free ops (the attention mask, the position
/// ids), a stage without a parameter to update.
class ParamPositions {
public:
  ParamPositions(func::FuncOp func, SymbolTable &symbols, int64_t numBlocks)
      : symbols(symbols), numBlocks(numBlocks) {
    int64_t index = 0, lastBlockReader = -1;
    llvm::StringMap<int64_t> firstReader;
    for (Operation &op : func.getBody().front().without_terminator()) {
      ++index;
      if (BlockAssignment::isFree(&op) || !isForwardOp(&op))
        continue;
      for (Value operand : op.getOperands()) {
        auto ref = operand.getDefiningOp<ParamRefOp>();
        if (!ref)
          continue;
        if (encoderBlockOfParam(symbols, ref.getName()))
          lastBlockReader = index;
        else
          firstReader.try_emplace(ref.getName(), index);
      }
    }
    for (auto &entry : firstReader)
      if (lastBlockReader >= 0 && entry.second > lastBlockReader)
        heads.insert(entry.first());
  }

  int64_t operator()(StringRef name) const {
    if (auto block = encoderBlockOfParam(symbols, name))
      return *block + 1;
    return heads.contains(name) ? numBlocks + 1 : 0;
  }

private:
  SymbolTable &symbols;
  int64_t numBlocks;
  llvm::StringSet<> heads;
};
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
  ParamPositions rawLayerOf(func, symbols, numBlocks);
  result.kfacLinears.resize(numBlocks);

  llvm::DenseMap<Value, int64_t> raw;
  for (Operation &op : func.getBody().front().without_terminator()) {
    int64_t layer = 0;
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      layer = rawLayerOf(ref.getName());
    } else if (!isa<ConstantOp>(op)) {
      for (Value operand : op.getOperands()) {
        auto it = raw.find(operand);
        if (it != raw.end())
          layer = std::max(layer, it->second);
      }
      // A K-FAC factor update goes with the layer whose factor it writes (the
      // state lives there), not with the earlier block computing its input.
      if (auto update = dyn_cast<KFACUpdateFactorOp>(op))
        layer = std::max(layer, rawLayerOf(update.getFactor()));
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

namespace {
/// The op whose result ends a block's attention half (or the head's
/// transform): its first LayerNorm.
bool endsHalf(Operation *op) {
  return isa<LayerNormOp, AddLayerNormOp, LayerNormalizationOp>(op) &&
         !op->hasAttr(kGradOfAttrName) && !op->hasAttr(kGradSumAttrName);
}
} // namespace

FailureOr<UnitAssignment> mlir::pf::assignUnits(func::FuncOp func, StageGrain grain) {
  auto blocks = assignBlocks(func);
  if (failed(blocks))
    return failure();
  UnitAssignment result;
  const int64_t n = result.numBlocks = blocks->numBlocks;
  if (grain == StageGrain::Block) {
    result.ops = std::move(*blocks);
    for (int64_t b = 0; b < n; ++b)
      result.units.push_back({"block" + std::to_string(b), b});
    return result;
  }
  // Fine position of every op: 0 the embeddings, 2b+1 and 2b+2 the attention
  // and FFN halves of block b, 2n+1 and 2n+2 the head's transform and
  // decoder. Like assignBlocks, an op goes to the latest position among its
  // inputs and parameters; the result of an attention half's (or the head
  // transform's) first LayerNorm starts the next position.
  SymbolTable symbols(func->getParentOfType<ModuleOp>());
  ParamPositions rawLayerOf(func, symbols, n);
  auto fineOfParam = [&](StringRef name) {
    int64_t raw = rawLayerOf(name);
    return raw == 0 ? int64_t(0) : 2 * raw - 1;
  };
  llvm::DenseMap<Value, int64_t> fineOfValue;
  llvm::DenseMap<Operation *, int64_t> fineOfOp;
  for (Operation &op : func.getBody().front().without_terminator()) {
    int64_t fine = 0;
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      fine = fineOfParam(ref.getName());
    } else if (!isa<ConstantOp>(op)) {
      for (Value operand : op.getOperands())
        fine = std::max(fine, fineOfValue.lookup(operand));
      if (auto update = dyn_cast<KFACUpdateFactorOp>(op))
        fine = std::max(fine, fineOfParam(update.getFactor()));
    }
    fineOfOp[&op] = fine;
    int64_t out = fine;
    if (grain == StageGrain::Half && fine % 2 == 1 && endsHalf(&op))
      out = fine + 1;
    for (Value res : op.getResults())
      fineOfValue[res] = out;
  }
  // Fine positions to the grain's units, then the units that hold ops.
  const int64_t positions = 2 * n + 3;
  auto coarse = [&](int64_t fine) -> int64_t {
    if (grain == StageGrain::Half)
      return fine;
    if (fine == 0)
      return 0;
    return fine >= 2 * n + 1 ? n + 1 : 1 + (fine - 1) / 2;
  };
  SmallVector<int64_t> unitOfCoarse(positions, -1);
  SmallVector<bool> used(positions, false);
  for (Operation *op : blocks->ops)
    if (!BlockAssignment::isFree(op))
      used[coarse(fineOfOp[op])] = true;
  // A block (or head) that was not cut, having no LayerNorm (say, one
  // decomposed into its arithmetic), keeps its whole name.
  auto nameOf = [&](int64_t fine) -> StageUnit {
    if (fine == 0)
      return {"embeddings", -1};
    bool half = grain == StageGrain::Half;
    bool cut = half && (fine % 2 == 0 || used[fine + 1]);
    if (fine >= 2 * n + 1)
      return {cut ? (fine == 2 * n + 1 ? "head.transform" : "head.decoder") : "head", -1};
    int64_t b = (fine - 1) / 2;
    std::string name = "block" + std::to_string(b);
    if (cut)
      name += fine % 2 == 1 ? ".attn" : ".ffn";
    return {name, b};
  };
  for (int64_t fine = 0; fine < positions; ++fine) {
    int64_t c = coarse(fine);
    if (!used[c] || unitOfCoarse[c] >= 0)
      continue;
    unitOfCoarse[c] = result.units.size();
    result.units.push_back(nameOf(fine));
  }
  result.ops.numBlocks = result.units.size();
  result.ops.kfacLinears.resize(result.units.size());
  for (Operation *op : blocks->ops) {
    result.ops.ops.push_back(op);
    if (BlockAssignment::isFree(op))
      continue;
    int64_t fine = fineOfOp[op];
    int64_t unit = unitOfCoarse[coarse(fine)];
    result.ops.blockOf[op] = unit;
    // PipeFisher preconditions the linears of the encoder blocks only.
    if (auto linear = dyn_cast<LinearOp>(op); linear && fine >= 1 && fine <= 2 * n)
      result.ops.kfacLinears[unit].push_back(linear);
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
/// `rowGathers`: a gather (pf.gather, pf.gather_nd) reads the rows it
/// gathers, not its whole table, and its gradient writes the table (zeroed,
/// then scattered into); otherwise both count every operand and result.
/// The measured per-block costs of `profilePath`, one layer per encoder
/// block of the model (`numBlocks`).
FailureOr<sched::CostModel> loadBlockProfile(func::FuncOp func, StringRef profilePath,
                                             int64_t numBlocks) {
  auto profile = sched::loadProfile(profilePath.str());
  if (!profile)
    return func.emitError("cannot use profile '") << profilePath << "': " << profile.error();
  if (int64_t(profile->layers.size()) != numBlocks)
    return func.emitError("profile '")
           << profilePath << "' has " << profile->layers.size() << " layers but the model has "
           << numBlocks << " encoder blocks";
  return profile.take();
}

sched::CostModel analyticCosts(const BlockAssignment &blocks, const sched::DeviceSpec &dev,
                               bool rowGathers = false) {
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
    if (rowGathers && isa<GatherOp, GatherNDOp>(op)) {
      double out = tensorBytes(op->getResult(0).getType());
      double indices = tensorBytes(op->getOperand(1).getType());
      double table = tensorBytes(op->getOperand(0).getType());
      layer.forward += ms((2 * out + indices) / byteRate);
      layer.backwardWeight += ms((table + out + indices) / byteRate);
      for (Value operand : op->getOperands())
        if (operand.getDefiningOp<ParamRefOp>())
          paramBytes[it->second] += tensorBytes(operand.getType());
      continue;
    }
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
  return loadBlockProfile(func, profilePath, blocks.numBlocks);
}

namespace {
/// The work a stage does per parameter besides its passes, spread over the
/// micro-batches (in backwardWeight, after the passes): each micro-batch adds
/// its weighted gradient to the step's sum (pf-build-rank-programs'
/// `stage<s>_accumulate_*`: a multiply, 2 tensors of traffic, and an add, 3),
/// and the step's update reads and writes the parameter and two moments
/// (AdamW: 7 tensors) once. A parameter read by several units (the tied word embedding in the
/// embeddings and the decoder) is held and updated by each; its gradient
/// pieces are summed on the stage of its last reader (pf-build-rank-programs'
/// tied-per-microbatch), which adds the piece it receives too.
void addParameterWork(sched::CostModel &model, ModuleOp module, const UnitAssignment &units,
                      const sched::DeviceSpec &dev, int64_t microbatches) {
  double byteRate = dev.memoryGBs * 1e9 * dev.memoryEfficiency;
  llvm::MapVector<Operation *, SmallVector<int64_t>> readers; // pf.param -> units
  llvm::DenseMap<Operation *, double> bytes;
  SymbolTable symbols(module);
  for (Operation *op : units.ops.ops) {
    auto it = units.ops.blockOf.find(op);
    if (it == units.ops.blockOf.end())
      continue;
    for (Value operand : op->getOperands())
      if (auto ref = operand.getDefiningOp<ParamRefOp>()) {
        Operation *param = symbols.lookup(ref.getName());
        if (!param)
          continue;
        SmallVector<int64_t> &list = readers[param];
        if (!llvm::is_contained(list, it->second))
          list.push_back(it->second);
        bytes[param] = tensorBytes(operand.getType());
      }
  }
  double n = double(std::max<int64_t>(microbatches, 1));
  for (auto &[param, list] : readers) {
    double b = bytes[param];
    int64_t first = *llvm::min_element(list), last = *llvm::max_element(list);
    bool tied = first != last;
    // Accumulation on the last reader (twice when tied: its own piece and
    // the one it receives), the update on the first and the last reader.
    model.layers[last].backwardWeight += 1e3 * (tied ? 10 : 5) * b / byteRate;
    model.layers[last].backwardWeight += 1e3 * 7 * b / byteRate / n;
    if (tied)
      model.layers[first].backwardWeight += 1e3 * 7 * b / byteRate / n;
  }
}
} // namespace

FailureOr<sched::CostModel> mlir::pf::buildUnitCostModel(func::FuncOp func,
                                                         const UnitAssignment &units,
                                                         CostSource cost, StringRef profilePath,
                                                         StringRef device, int64_t microbatches) {
  auto dev = sched::findDevice(device.str());
  if (!dev)
    return func.emitError() << dev.error(); // names the device and the known ones
  sched::CostModel analytic = analyticCosts(units.ops, *dev, /*rowGathers=*/true);
  for (auto [u, unit] : llvm::enumerate(units.units))
    analytic.layers[u].name = unit.name;
  addParameterWork(analytic, func->getParentOfType<ModuleOp>(), units, *dev, microbatches);
  if (cost == CostSource::Analytic)
    return analytic;
  FailureOr<sched::CostModel> profile = loadBlockProfile(func, profilePath, units.numBlocks);
  if (failed(profile))
    return failure();
  // Each unit's profiled block: the embeddings count in block 0, the head in
  // the last block (as pipefisher.profile_convert sums an op profile).
  SmallVector<int64_t> blockOfUnit;
  for (const StageUnit &unit : units.units)
    blockOfUnit.push_back(unit.block >= 0               ? unit.block
                          : unit.name == "embeddings" ? 0
                                                      : units.numBlocks - 1);
  using Field = double sched::LayerCost::*;
  static constexpr Field fields[] = {
      &sched::LayerCost::forward,      &sched::LayerCost::backwardInput,
      &sched::LayerCost::backwardWeight, &sched::LayerCost::curvatureA,
      &sched::LayerCost::curvatureB,   &sched::LayerCost::inversionA,
      &sched::LayerCost::inversionB,   &sched::LayerCost::precondition,
      &sched::LayerCost::allreduce,    &sched::LayerCost::factorAllreduce};
  sched::CostModel model = *profile;
  model.layers.clear();
  for (size_t u = 0; u < units.units.size(); ++u) {
    int64_t b = blockOfUnit[u];
    const sched::LayerCost &block = profile->layers[b];
    sched::LayerCost layer;
    layer.name = units.units[u].name;
    auto shareOf = [&](Field field) -> double {
      double part = analytic.layers[u].*field, total = 0;
      int64_t members = 0;
      for (size_t v = 0; v < units.units.size(); ++v)
        if (blockOfUnit[v] == b) {
          total += analytic.layers[v].*field;
          ++members;
        }
      if (members == 1)
        return 1;
      return total > 0 ? part / total : 0;
    };
    for (Field field : fields)
      layer.*field = block.*field * shareOf(field);
    model.layers.push_back(layer);
  }
  model.name = profile->name + " (per unit, divided by the analytic " + dev->name + " model)";
  return model;
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
