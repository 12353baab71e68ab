//===- AddMaskedLMLoss.cpp - masked-LM cross-entropy as the objective -------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFADDMASKEDLMLOSS
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct AddMaskedLMLossPass
    : public mlir::pf::impl::PFAddMaskedLMLossBase<AddMaskedLMLossPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    if (predictions < 0)
      return getOperation().emitError("pf-add-masked-lm-loss: predictions must be >= 0, got ")
             << int64_t(predictions);
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func)
      return getOperation().emitError("pf-add-masked-lm-loss: no function with a body");
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int64_t index = -1;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName); name && name == output)
        index = i;
    if (index < 0)
      return func.emitError("pf-add-masked-lm-loss: the function has no result named '")
             << output.getValue() << "'";
    Value logits = ret.getOperand(index);
    auto type = dyn_cast<RankedTensorType>(logits.getType());
    if (!type || !type.hasStaticShape() || type.getRank() < 2 ||
        !isa<FloatType>(type.getElementType()))
      return func.emitError("pf-add-masked-lm-loss: logits must be a static float tensor "
                            "[..., vocabulary], got ")
             << logits.getType();

    OpBuilder builder(ret);
    Block &block = func.getBody().front();
    LinearOp fullDecoder;
    if (predictions > 0) {
      FailureOr<Value> gathered = gatherPredictions(func, logits, block);
      if (failed(gathered))
        return failure();
      fullDecoder = logits.getDefiningOp<LinearOp>();
      logits = *gathered;
      type = cast<RankedTensorType>(logits.getType());
    }
    auto labelsType = RankedTensorType::get(type.getShape().drop_back(), builder.getI64Type());
    Value labels = block.addArgument(labelsType, func.getLoc());
    auto loss = SoftmaxCrossEntropyOp::create(builder, func.getLoc(), logits, labels,
                                              builder.getI64IntegerAttr(ignoreIndex));

    SmallVector<Value> results{loss.getLoss()};
    SmallVector<Attribute> names{builder.getStringAttr("loss")};
    if (keepOutputs)
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        results.push_back(ret.getOperand(i));
        auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
        names.push_back(name ? name : builder.getStringAttr("output" + std::to_string(i)));
      }
    ret->setOperands(results);
    func.setType(builder.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    func.setArgAttr(cast<BlockArgument>(labels).getArgNumber(), kNameAttrName,
                    builder.getStringAttr("labels"));
    for (auto [i, name] : llvm::enumerate(names))
      func.setResultAttr(i, kNameAttrName, name);
    if (positionsArgument >= 0)
      func.setArgAttr(unsigned(positionsArgument), kNameAttrName,
                      builder.getStringAttr("mlm_positions"));
    if (fullDecoder && fullDecoder->use_empty())
      fullDecoder->erase();
    return success();
  }

  /// predictions=P: the decoder (the pf.linear making the logits [batch,
  /// sequence, vocabulary]) applied only to its input at the `mlm_positions`
  /// argument [batch, P] (pf.gather_nd, batch_dims 1), as NVIDIA's BERT
  /// pre-training does: the logits become [batch, P, vocabulary]. Positions
  /// beyond a sequence's masked tokens are padding, their labels ignored.
  /// The index of the `mlm_positions` argument gatherPredictions added (-1:
  /// none); named once the function's type has it.
  int64_t positionsArgument = -1;

  FailureOr<Value> gatherPredictions(func::FuncOp func, Value logits, Block &block) {
    auto fail = [&]() {
      return func.emitError("pf-add-masked-lm-loss: ");
    };
    if (keepOutputs) {
      fail() << "predictions=" << int64_t(predictions)
             << " does not go with keep-outputs (the full logits are not computed)";
      return failure();
    }
    auto decoder = logits.getDefiningOp<LinearOp>();
    auto input = decoder ? dyn_cast<RankedTensorType>(decoder.getInput().getType())
                         : RankedTensorType();
    if (!decoder || !input || !input.hasStaticShape() || input.getRank() != 3) {
      fail() << "predictions=" << int64_t(predictions)
             << " needs logits [batch, sequence, vocabulary] made by a pf.linear (the "
                "decoder) of a [batch, sequence, hidden] input";
      return failure();
    }
    int64_t batch = input.getDimSize(0), sequence = input.getDimSize(1);
    if (predictions > sequence) {
      fail() << "predictions=" << int64_t(predictions) << " exceeds the sequence length "
             << sequence;
      return failure();
    }
    OpBuilder b(decoder);
    Location loc = decoder.getLoc();
    auto positionsType = RankedTensorType::get({batch, predictions}, b.getI64Type());
    Value positions = block.addArgument(positionsType, func.getLoc());
    positionsArgument = block.getNumArguments() - 1;
    auto tuplesType = RankedTensorType::get({batch, predictions, 1}, b.getI64Type());
    Value tuples = UnsqueezeOp::create(b, loc, tuplesType, positions, b.getDenseI64ArrayAttr({2}));
    auto rowsType = RankedTensorType::get({batch, predictions, input.getDimSize(2)},
                                          input.getElementType());
    Value rows = GatherNDOp::create(b, loc, rowsType, decoder.getInput(), tuples, 1);
    auto logitsType = cast<RankedTensorType>(logits.getType());
    auto gatheredType = RankedTensorType::get(
        {batch, predictions, logitsType.getDimSize(2)}, logitsType.getElementType());
    return LinearOp::create(b, loc, gatheredType, rows, decoder.getWeight(), decoder.getBias(),
                            decoder.getTransposeWeight())
        .getResult();
  }
};
} // namespace
