//===- Passes.h - pf graph passes -------------------------------*- C++ -*-===//
//
// The ONNX Runtime-style graph passes: shape inference and folding, untying
// of de-duplicated initializers, LayerNorm / GELU / linear fusion, DCE, and
// the `pf-graph-opt` pipeline the importer runs.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_GRAPH_PASSES_H
#define PF_TRANSFORMS_GRAPH_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Graph/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Graph/Passes.h.inc"

/// Options of the graph-optimization pipeline (`pf-graph-opt`).
struct GraphOptOptions {
  bool fuse = true;
  bool untie = true;
  bool requireStatic = false;
  /// Tie exporters' folded transposed copies back to their parameter.
  bool retie = true;
};

/// Shape inference, canonicalization, untying and the fusions, then DCE: what
/// the importer runs by default.
void buildGraphOptPipeline(OpPassManager &pm, const GraphOptOptions &options = {});

/// What the tools and the C API run right after importing a model: the graph
/// passes (`graphOpt`) or only shape inference, failing on dynamic shapes when
/// `requireStatic`.
void buildPostImportPipeline(OpPassManager &pm, bool graphOpt, bool requireStatic,
                             bool retie = true);

/// The fusions for inference only (their ops have no gradient): attention's
/// scaled and masked softmax, transposes folded into the batched matmuls,
/// residual add + LayerNorm, linear + GELU. pf-run runs them on a forward
/// pass for the CPU.
void buildInferenceFusionPipeline(OpPassManager &pm);

/// Registers `pf-graph-opt` and `pf-inference-fusions`.
void registerGraphPipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_GRAPH_PASSES_H
