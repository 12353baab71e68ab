//===- Passes.h - every pf pass and pipeline --------------------*- C++ -*-===//
//
// The passes are grouped by phase, each group with its pipeline builder:
// graph (pf/Transforms/Graph), training (pf/Transforms/Training) and
// pipeline (pf/Transforms/Pipeline). Tools include this header to register
// them all.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_PASSES_H
#define PF_TRANSFORMS_PASSES_H

#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/Pipeline/Passes.h"
#include "pf/Transforms/Training/Passes.h"

namespace mlir::pf {

/// Registers every pf pass of the three groups.
inline void registerPFPasses() {
  registerPFGraphPasses();
  registerPFTrainingPasses();
  registerPFPipelinePasses();
}

/// Registers `pf-graph-opt`, `pf-training` and `pf-pipeline` with the pass
/// registry.
inline void registerPFPipelines() {
  registerGraphPipelines();
  registerTrainingPipelines();
  registerPipelinePipelines();
}

} // namespace mlir::pf

#endif // PF_TRANSFORMS_PASSES_H
