//===- Pipelines.cpp - the pf-graph-opt pipeline --------------------------------===//
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::pf;

void mlir::pf::buildGraphOptPipeline(OpPassManager &pm, const GraphOptOptions &options) {
  // Untie first: shape folding would fold the Identity ops that carry the
  // de-duplicated names away.
  if (options.untie)
    pm.addPass(createPFUntieInitializers());
  pm.addPass(createPFInferShapes(PFInferShapesOptions{options.requireStatic}));
  pm.addPass(createCanonicalizerPass());
  if (options.fuse) {
    pm.addPass(createPFFuseLayerNorm());
    pm.addPass(createPFFuseGelu());
    pm.addPass(createPFFuseLinear());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createPFDeadCodeElimination());
}

void mlir::pf::buildPostImportPipeline(OpPassManager &pm, bool graphOpt, bool requireStatic) {
  if (graphOpt)
    buildGraphOptPipeline(pm, GraphOptOptions{true, true, requireStatic});
  else
    pm.addPass(createPFInferShapes(PFInferShapesOptions{requireStatic}));
}

namespace {
struct GraphOptPipelineOptions : public PassPipelineOptions<GraphOptPipelineOptions> {
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run the fusion passes"),
                    llvm::cl::init(true)};
  Option<bool> untie{*this, "untie", llvm::cl::desc("Untie de-duplicated initializers"),
                     llvm::cl::init(true)};
  Option<bool> requireStatic{*this, "require-static",
                             llvm::cl::desc("Fail when shapes stay dynamic"),
                             llvm::cl::init(false)};
};
} // namespace

void mlir::pf::registerGraphPipelines() {
  PassPipelineRegistration<GraphOptPipelineOptions>(
      "pf-graph-opt",
      "The ONNX Runtime-style graph passes the importer runs by default: shape "
      "inference and folding, untying, LayerNorm/GELU/linear fusion, DCE",
      [](OpPassManager &pm, const GraphOptPipelineOptions &opts) {
        buildGraphOptPipeline(pm, GraphOptOptions{opts.fuse, opts.untie, opts.requireStatic});
      });
}
