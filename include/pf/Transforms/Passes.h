//===- Passes.h - pf graph passes -------------------------------*- C++ -*-===//
#ifndef PF_TRANSFORMS_PASSES_H
#define PF_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include <memory>

namespace mlir::pf {

#define GEN_PASS_DECL
#include "pf/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pf/Transforms/Passes.h.inc"

/// Options of the graph-optimization pipeline (`pf-graph-opt`).
struct GraphOptOptions {
  bool fuse = true;
  bool untie = true;
  bool requireStatic = false;
};

/// Shape inference, canonicalization, untying and the fusions, then DCE: what
/// the importer runs by default.
void buildGraphOptPipeline(OpPassManager &pm, const GraphOptOptions &options = {});

/// Registers `pf-graph-opt` with the pass registry.
void registerPFPipelines();

} // namespace mlir::pf

#endif // PF_TRANSFORMS_PASSES_H
