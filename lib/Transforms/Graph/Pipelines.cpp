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
  // Before linear fusion, so a retied decoder fuses as [out, in] through the
  // transpose, like a decoder exported without folding.
  if (options.retie)
    pm.addPass(createPFRetieWeights());
  pm.addPass(createPFInferShapes(PFInferShapesOptions{options.requireStatic}));
  pm.addPass(createCanonicalizerPass());
  if (options.fuse) {
    pm.addPass(createPFFuseLayerNorm());
    pm.addPass(createPFFuseGelu());
    pm.addPass(createPFFuseLinear());
    pm.addPass(createPFNameWeights());
    pm.addPass(createPFCheckSharedBiases());
    pm.addPass(createPFFindEncoderBlocks());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createPFDeadCodeElimination());
}

void mlir::pf::buildPostImportPipeline(OpPassManager &pm, bool graphOpt, bool requireStatic,
                                       bool retie) {
  if (graphOpt)
    buildGraphOptPipeline(pm, GraphOptOptions{true, true, requireStatic, retie});
  else
    pm.addPass(createPFInferShapes(PFInferShapesOptions{requireStatic}));
}

void mlir::pf::buildInferenceFusionPipeline(OpPassManager &pm) {
  pm.addPass(createPFFoldMatmulTransposes());
  pm.addPass(createPFFuseAttentionSoftmax());
  pm.addPass(createPFFuseAddLayerNorm());
  pm.addPass(createPFFuseLinearGelu());
  // The transposes, scalings and sums the fused ops read past.
  pm.addPass(createPFDeadCodeElimination());
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
  Option<bool> retie{*this, "retie",
                     llvm::cl::desc("Tie exporters' folded transposed copies of a parameter "
                                    "back to it"),
                     llvm::cl::init(true)};
};
} // namespace

void mlir::pf::registerGraphPipelines() {
  PassPipelineRegistration<GraphOptPipelineOptions>(
      "pf-graph-opt",
      "The ONNX Runtime-style graph passes the importer runs by default: shape "
      "inference and folding, untying, retying, LayerNorm/GELU/linear fusion, "
      "weight naming, DCE",
      [](OpPassManager &pm, const GraphOptPipelineOptions &opts) {
        buildGraphOptPipeline(pm, GraphOptOptions{opts.fuse, opts.untie, opts.requireStatic, opts.retie});
      });
  PassPipelineRegistration<>(
      "pf-inference-fusions",
      "The fusions for a forward pass only (no gradients): attention's scaled and masked "
      "softmax, the head transposes folded into the batched matmuls, residual add + LayerNorm, "
      "linear + GELU",
      [](OpPassManager &pm) { buildInferenceFusionPipeline(pm); });
}
