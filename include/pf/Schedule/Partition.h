//===- Partition.h - Contiguous min-max stage partitioning ------*- C++ -*-===//
//
// Cuts L layers, in order, into p contiguous stages so that the most expensive
// stage is as cheap as possible (the pipeline's steady state runs at the pace
// of its slowest stage). Exact dynamic programming with divide-and-conquer
// rows, O(p * L log L).
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_PARTITION_H
#define PF_SCHEDULE_PARTITION_H

#include "pf/Support/Status.h"

#include <limits>
#include <vector>

namespace pf::sched {

struct Partition {
  /// Stage s holds layers [firstLayer[s], firstLayer[s+1]); size p+1.
  std::vector<int> firstLayer;
  std::vector<double> stageCost;
  double maxStageCost = 0;

  int numStages() const { return static_cast<int>(firstLayer.size()) - 1; }
  /// Layers of each stage, ready for PipelineConfig::stageLayers.
  std::vector<std::vector<int>> stageLayers() const;
};

/// Min-max partition of `cost` into `stages` non-empty contiguous stages.
/// When `memory` is given (one entry per layer), every stage must also keep
/// the sum of its layers' memory at or below `memoryCap`. Among partitions with
/// the same maximum, the one with the smallest sum of squared stage costs is
/// returned, so ties spread the load evenly and the result is deterministic.
Expected<Partition>
partitionMinMax(const std::vector<double> &cost, int stages,
                const std::vector<double> &memory = {},
                double memoryCap = std::numeric_limits<double>::infinity());

/// Memory of stage k over layers [i, j): perStageScaled[k] x sum of scaled
/// + perStageFixed[k] x sum of fixed (a schedule's in-flight micro-batches
/// times activations, plus weights and state times the copies on a device).
struct StageMemoryModel {
  std::vector<double> scaled, fixed;                 ///< per layer
  std::vector<double> perStageScaled, perStageFixed; ///< per stage
  double cap = std::numeric_limits<double>::infinity();
};

/// Min-max partition whose every stage keeps its memory (above) <= cap.
Expected<Partition> partitionMinMax(const std::vector<double> &cost, int stages,
                                    const StageMemoryModel &memory);

/// Splits the layers into `stages` stages of exactly `layersPerStage` each;
/// an error when stages * layersPerStage differs from the number of layers.
Expected<Partition> partitionUniform(const std::vector<double> &cost,
                                     int stages, int layersPerStage);

} // namespace pf::sched

#endif // PF_SCHEDULE_PARTITION_H
