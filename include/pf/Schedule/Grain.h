//===- Grain.h - Finer partition units than a profile's blocks --*- C++ -*-===//
//
// A profile lists one transformer block per layer. When the pipeline's stages
// do not divide the blocks, whole blocks leave some stages with one block
// more than others; splitting every block into its attention and FFN halves,
// or into its single linears, lets the min-max partitioner balance them.
// The split divides each block's measured times, memory and communication by
// the shares the analytic FLOP formulas give (docs/schedule.md, "Cost
// model"), so every block's totals are kept.
//
// Layer "costs" (docs/schedule.md): uses only CostModel.h.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_GRAIN_H
#define PF_SCHEDULE_GRAIN_H

#include "pf/Schedule/CostModel.h"

#include <string>

namespace pf::sched {

enum class PartitionGrain {
  Block,  ///< the profile's layers as they are
  Half,   ///< attention (Q, K, V, scores, output projection) and FFN halves
  Linear, ///< Q, K, V, output projection with the scores, FFN1, FFN2
};

Expected<PartitionGrain> parsePartitionGrain(const std::string &name);
const char *partitionGrainName(PartitionGrain grain);

/// Units a block splits into at `grain` (1, 2 or 6).
int unitsPerBlock(PartitionGrain grain);

/// Every layer of `costs` (a block of the shape `costs.block`) split into the
/// units of `grain`, in model order, named "<block>.<unit>". Each unit gets
/// the block's forward, backward (input and weight parts), curvature,
/// inversion and preconditioning times, saved activations, parameters and
/// communication times in proportion to its share of the block's FLOPs
/// (bytes, parameters, factor bytes), and its own K-FAC linears. An error
/// when the shape is unknown or the split exceeds kMaxLayers.
Expected<CostModel> splitCostModel(const CostModel &costs, PartitionGrain grain);

} // namespace pf::sched

#endif // PF_SCHEDULE_GRAIN_H
