//===- CheckSharedBiases.cpp - biases shared without their weights ---------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFCHECKSHAREDBIASES
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The parameter read by `value` (a pf.param_ref), or null.
ParamRefOp paramRef(Value value) {
  return value ? value.getDefiningOp<ParamRefOp>() : ParamRefOp();
}

struct CheckSharedBiasesPass
    : public mlir::pf::impl::PFCheckSharedBiasesBase<CheckSharedBiasesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Bias parameter -> the weights of the linears it is added in.
    llvm::MapVector<StringRef, llvm::SetVector<StringRef>> weightsOfBias;
    llvm::DenseMap<StringRef, ParamRefOp> firstRead;
    module.walk([&](LinearOp linear) {
      ParamRefOp bias = paramRef(linear.getBias());
      ParamRefOp weight = paramRef(linear.getWeight());
      if (!bias || !weight)
        return;
      weightsOfBias[bias.getName()].insert(weight.getName());
      firstRead.try_emplace(bias.getName(), bias);
    });
    for (auto &[bias, weights] : weightsOfBias) {
      if (weights.size() < 2)
        continue;
      InFlightDiagnostic warning = firstRead.lookup(bias).emitWarning();
      warning << "pf-check-shared-biases: '" << bias << "' is the bias of " << weights.size()
              << " linear layers with different weights ('" << weights.front() << "', '"
              << weights[1] << "'" << (weights.size() > 2 ? ", ..." : "")
              << "), so they train it as one parameter; an exporter that stores equal "
                 "initializers once (torch.onnx.export(dynamo=True) with optimize=True on an "
                 "untrained model) merges biases that PyTorch trains apart: export with "
                 "optimize=False or the TorchScript exporter to keep them";
    }
  }
};
} // namespace
