//===- Passes.h - pf pipeline passes ----------------------------*- C++ -*-===//
//
// Pipeline parallelism: partition into stages by a cost model, schedule the
// step with the K-FAC work in the bubbles, and the `pf-pipeline` pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_PIPELINE_PASSES_H
#define PF_TRANSFORMS_PIPELINE_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Pipeline/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Pipeline/Passes.h.inc"

/// Registers `pf-pipeline`.
void registerPipelinePipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_PIPELINE_PASSES_H
