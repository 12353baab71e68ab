//===- Grain.cpp - Blocks split into attention/FFN halves or linears ------===//
//
// The shares come from the analytic formulas of a BERT block (Analytic.cpp,
// docs/schedule.md "Cost model"), per linear of widths in -> out:
// forward, input and weight gradient 2bs·in·out each (the scores and
// context, 4bs²h forward and 8bs²h input gradient, go with the output
// projection that consumes them); curvature 2bs·in² (A) and 2bs·out² (B);
// inversion in³ and out³; preconditioning 2·in·out·(in + out). A measured
// profile keeps its totals; only their division among the units is modelled.
//
// Layer "costs" (docs/schedule.md): uses only CostModel.h.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Grain.h"
#include "pf/Schedule/Limits.h"

#include <algorithm>
#include <cctype>

namespace pf::sched {
namespace {

/// One linear of a block and the work around it, in the formulas' units
/// (FLOPs, elements, bytes / 2); only ratios within a block are used.
struct UnitWork {
  const char *name;
  double forward = 0, backwardInput = 0, backwardWeight = 0;
  double curvatureA = 0, curvatureB = 0, inversionA = 0, inversionB = 0;
  double precondition = 0;
  double activations = 0, parameters = 0, factorElements = 0;
  std::pair<double, double> linear;
};

UnitWork linearUnit(const char *name, double bs, double in, double out) {
  UnitWork u;
  u.name = name;
  u.forward = u.backwardInput = u.backwardWeight = 2 * bs * in * out;
  u.curvatureA = 2 * bs * in * in;
  u.curvatureB = 2 * bs * out * out;
  u.inversionA = in * in * in;
  u.inversionB = out * out * out;
  u.precondition = 2 * in * out * (in + out);
  u.parameters = in * out + out;
  u.factorElements = in * in + out * out;
  u.linear = {in, out};
  return u;
}

/// Q, K, V, output projection (with the scores), FFN1, FFN2. Saved
/// activations follow Megatron-LM's count per block, 34bsh + 5as²b: the
/// block input and Q (4bsh) with Q, K and V (2bsh each), the scores,
/// softmax, context, dropout masks and the first LayerNorm (5bsh + 5as²b)
/// with the output projection, FFN1's input and output (10bsh), FFN2's
/// dropout mask and the second LayerNorm (11bsh). The LayerNorms' weights
/// (2h each) go with the linear before them.
std::vector<UnitWork> blockUnits(const BlockShape &shape) {
  const double b = shape.microBatch, s = shape.seqLen, h = shape.hidden, a = shape.heads,
               bs = b * s;
  std::vector<UnitWork> units = {
      linearUnit("q", bs, h, h),        linearUnit("k", bs, h, h),
      linearUnit("v", bs, h, h),        linearUnit("attn_out", bs, h, h),
      linearUnit("ffn1", bs, h, 4 * h), linearUnit("ffn2", bs, 4 * h, h)};
  const double activations[] = {4 * bs * h,  2 * bs * h, 2 * bs * h, 5 * bs * h + 5 * a * s * s * b,
                                10 * bs * h, 11 * bs * h};
  for (size_t i = 0; i < units.size(); ++i)
    units[i].activations = activations[i];
  units[3].forward += 4 * bs * s * h;
  units[3].backwardInput += 8 * bs * s * h;
  units[3].parameters += 2 * h;
  units[5].parameters += 2 * h;
  return units;
}

struct Group {
  const char *name;
  std::vector<int> units;
};

std::vector<Group> groupsOf(PartitionGrain grain) {
  switch (grain) {
  case PartitionGrain::Block:
    return {{"", {0, 1, 2, 3, 4, 5}}};
  case PartitionGrain::Half:
    return {{"attn", {0, 1, 2, 3}}, {"ffn", {4, 5}}};
  case PartitionGrain::Linear:
    break;
  }
  std::vector<Group> groups;
  for (int u = 0; u < 6; ++u)
    groups.push_back({nullptr, {u}});
  return groups;
}

/// Share of `group` in the block's total of one kind of work.
double shareOf(const std::vector<UnitWork> &units, const Group &group, double UnitWork::*field) {
  double part = 0, total = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    total += units[u].*field;
    if (std::find(group.units.begin(), group.units.end(), static_cast<int>(u)) != group.units.end())
      part += units[u].*field;
  }
  return total > 0 ? part / total : 0;
}

LayerCost splitLayer(const LayerCost &block, const std::vector<UnitWork> &units,
                     const Group &group) {
  auto share = [&](double UnitWork::*field) { return shareOf(units, group, field); };
  LayerCost c;
  c.name = block.name + "." + (group.name ? group.name : units[group.units[0]].name);
  c.forward = block.forward * share(&UnitWork::forward);
  c.backwardInput = block.backwardInput * share(&UnitWork::backwardInput);
  c.backwardWeight = block.backwardWeight * share(&UnitWork::backwardWeight);
  c.curvatureA = block.curvatureA * share(&UnitWork::curvatureA);
  c.curvatureB = block.curvatureB * share(&UnitWork::curvatureB);
  c.inversionA = block.inversionA * share(&UnitWork::inversionA);
  c.inversionB = block.inversionB * share(&UnitWork::inversionB);
  c.precondition = block.precondition * share(&UnitWork::precondition);
  c.allreduce = block.allreduce * share(&UnitWork::parameters);
  c.factorAllreduce = block.factorAllreduce * share(&UnitWork::factorElements);
  c.memory.activationBytes = block.memory.activationBytes * share(&UnitWork::activations);
  c.memory.parameters = block.memory.parameters * share(&UnitWork::parameters);
  // The block's own shapes when it lists its 6 linears, else the shape's.
  const bool ownShapes = block.memory.kfacLinears.size() == units.size();
  for (int u : group.units)
    c.memory.kfacLinears.push_back(ownShapes ? block.memory.kfacLinears[u] : units[u].linear);
  return c;
}

} // namespace

Expected<PartitionGrain> parsePartitionGrain(const std::string &name) {
  std::string key;
  for (char c : name)
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key == "block")
    return PartitionGrain::Block;
  if (key == "half")
    return PartitionGrain::Half;
  if (key == "linear")
    return PartitionGrain::Linear;
  return Status::error("unknown partition grain '" + name + "' (known: block, half, linear)");
}

const char *partitionGrainName(PartitionGrain grain) {
  switch (grain) {
  case PartitionGrain::Block:
    return "block";
  case PartitionGrain::Half:
    return "half";
  case PartitionGrain::Linear:
    return "linear";
  }
  return "?";
}

int unitsPerBlock(PartitionGrain grain) { return static_cast<int>(groupsOf(grain).size()); }

Expected<CostModel> splitCostModel(const CostModel &costs, PartitionGrain grain) {
  if (grain == PartitionGrain::Block)
    return costs;
  if (!costs.block.known())
    return Status::error(
        std::string("partition grain '") + partitionGrainName(grain) +
        "' splits every layer as a transformer block and needs its shape, which the cost "
        "model '" +
        costs.name +
        "' does not give (profile key 'block': hidden, heads, "
        "seq_len, micro_batch; docs/profile-format.md)");
  if (costs.block.split)
    return Status::error(std::string("partition grain '") + partitionGrainName(grain) +
                         "': the layers of '" + costs.name + "' are split already");
  const std::vector<Group> groups = groupsOf(grain);
  const size_t layers = costs.layers.size() * groups.size();
  if (layers > static_cast<size_t>(kMaxLayers))
    return Status::error(std::to_string(costs.layers.size()) + " blocks at grain '" +
                         partitionGrainName(grain) + "' make " + std::to_string(layers) +
                         " layers, over the limit of " + std::to_string(kMaxLayers) +
                         " (kMaxLayers)");
  const std::vector<UnitWork> units = blockUnits(costs.block);
  CostModel split = costs;
  split.layers.clear();
  // The units are no longer blocks: splitting them again would be wrong.
  split.block.split = true;
  for (const LayerCost &block : costs.layers)
    for (const Group &group : groups)
      split.layers.push_back(splitLayer(block, units, group));
  return split;
}

} // namespace pf::sched
