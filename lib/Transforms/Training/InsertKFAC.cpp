//===- InsertKFAC.cpp - K-FAC factors of the encoder blocks' linears --------===//
//
// layers=encoder-and-head adds the masked-LM head's transform, layer-norm the
// LayerNorms' scale and shift, embeddings the word (and position) embedding
// tables.
//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Regex.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFINSERTKFAC
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The masked-LM head's transform (the hidden-to-hidden linear before the
/// head's GELU and LayerNorm): by its weight's name, Hugging Face's
/// `cls.predictions.transform.dense`, else from the graph's structure, as the
/// linear reaching the decoder (the linear making the loss's logits, on its
/// gathered input with predictions=P) through a GELU and a LayerNorm. Never
/// the decoder itself, whose weight is the tied word embedding.
LinearOp findHeadTransform(func::FuncOp func) {
  static const llvm::Regex headName("(^|[._/])predictions[._]transform[._]dense[._]");
  LinearOp found;
  func.walk([&](LinearOp linear) {
    if (!found && headName.match(linear.getKFACWeightName()))
      found = linear;
  });
  if (found)
    return found;
  func.walk([&](SoftmaxCrossEntropyOp loss) {
    auto decoder = loss.getLogits().getDefiningOp<LinearOp>();
    if (!decoder)
      return;
    Value input = decoder.getInput();
    if (auto gather = input.getDefiningOp<GatherNDOp>())
      input = gather.getData();
    auto norm = input.getDefiningOp<LayerNormOp>();
    auto gelu = norm ? norm.getInput().getDefiningOp<GeluOp>() : GeluOp();
    if (auto linear = gelu ? gelu.getInput().getDefiningOp<LinearOp>() : LinearOp())
      found = linear;
  });
  return found;
}

/// The table a `pf.gather` looks rows up in: a named 2-D f32 parameter read
/// along axis 0 with static shapes (an embedding lookup), else null.
ParamRefOp lookupTable(GatherOp gather) {
  auto table = gather.getData().getDefiningOp<ParamRefOp>();
  auto type = dyn_cast<RankedTensorType>(gather.getData().getType());
  auto ids = dyn_cast<RankedTensorType>(gather.getIndices().getType());
  auto out = dyn_cast<RankedTensorType>(gather.getOutput().getType());
  if (!table || !type || !ids || !out || type.getRank() != 2 || !type.hasStaticShape() ||
      !ids.hasStaticShape() || !out.hasStaticShape() || !type.getElementType().isF32())
    return {};
  int64_t axis = int64_t(gather.getAxis());
  return axis == 0 || axis == -2 ? table : ParamRefOp();
}

/// The weight of the linear making the masked-LM loss's logits (the
/// decoder; with a tied embedding, the word embedding table), or "".
StringRef decoderWeight(func::FuncOp func) {
  StringRef name;
  func.walk([&](SoftmaxCrossEntropyOp loss) {
    if (auto decoder = loss.getLogits().getDefiningOp<LinearOp>())
      if (auto weight = decoder.getWeight().getDefiningOp<ParamRefOp>())
        name = weight.getName();
  });
  return name;
}

/// The embedding lookups of `kind` (word or position): the gathers of a
/// table whose name contains `word_embeddings` (`position_embeddings`);
/// without such a name, the word embedding is the table the decoder also
/// reads (tied) and the position embedding the one looked up at constant ids.
SmallVector<GatherOp> findEmbeddingLookups(func::FuncOp func, StringRef kind) {
  bool word = kind == "word";
  llvm::Regex byName(word ? "(^|[._/])word_embeddings([._]|$)"
                          : "(^|[._/])position_embeddings([._]|$)");
  SmallVector<GatherOp> named, structural;
  StringRef decoder = word ? decoderWeight(func) : StringRef();
  func.walk([&](GatherOp gather) {
    ParamRefOp table = lookupTable(gather);
    if (!table)
      return;
    if (byName.match(table.getName()))
      named.push_back(gather);
    else if (word ? (!decoder.empty() && table.getName() == decoder)
                  : matchPattern(gather.getIndices(), m_Constant()))
      structural.push_back(gather);
  });
  return named.empty() ? structural : named;
}

/// The value whose gradient is the per-token gradient of an embedding
/// lookup's rows: the gathered rows, or, when their one user is a pf.add
/// that broadcasts them (a position embedding [1, seq, h] added to every
/// sequence of the batch), that add's result; null when the rows are
/// broadcast by anything else.
Value perTokenRows(GatherOp gather) {
  Value rows = gather.getOutput();
  auto rowsType = cast<RankedTensorType>(rows.getType());
  if (!rows.hasOneUse())
    return rows;
  Operation *user = *rows.getUsers().begin();
  auto userType = user->getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(user->getResult(0).getType())
                      : RankedTensorType();
  if (!userType || !userType.hasStaticShape() ||
      userType.getNumElements() == rowsType.getNumElements())
    return rows;
  if (isa<AddOp>(user) && userType.getShape().back() == rowsType.getShape().back())
    return user->getResult(0);
  return {};
}

struct InsertKFACPass : public mlir::pf::impl::PFInsertKFACBase<InsertKFACPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  FlatSymbolRefAttr addFactor(SymbolTable &symbols, ParamOp weight, StringRef suffix,
                              int64_t size, StringRef bias, bool weightInOut) {
    return addState(symbols, weight, suffix, {size, size}, bias, weightInOut);
  }

  /// A zero K-FAC state parameter `<weight>.kfac.<suffix>` of `shape` (f32).
  FlatSymbolRefAttr addState(SymbolTable &symbols, ParamOp weight, StringRef suffix,
                             ArrayRef<int64_t> shape, StringRef bias, bool weightInOut) {
    OpBuilder builder(weight);
    builder.setInsertionPointAfter(weight);
    auto type = RankedTensorType::get(shape, builder.getF32Type());
    auto zero = DenseElementsAttr::get(type, builder.getZeroAttr(builder.getF32Type()));
    auto param = ParamOp::create(builder, weight.getLoc(),
                                 (weight.getSymName() + ".kfac." + suffix).str(), type, zero);
    param->setAttr(kKfacWeightAttrName, builder.getStringAttr(weight.getSymName()));
    if (!bias.empty())
      param->setAttr(kKfacBiasAttrName, builder.getStringAttr(bias));
    if (weightInOut)
      param->setAttr(kKfacWeightInOutAttrName, builder.getUnitAttr());
    // The state lives with its layer's block (partitioning reads it).
    if (Attribute block = weight->getAttr(kEncoderBlockAttrName))
      param->setAttr(kEncoderBlockAttrName, block);
    symbols.insert(param, builder.getInsertionPoint());
    return FlatSymbolRefAttr::get(param.getSymNameAttr());
  }

  /// layer-norm=blocks|diagonal: each pf.layer_norm over the last dimension
  /// whose scale and shift are named f32 parameters gets `<scale>.kfac.F`
  /// ([h, 3] or [h, 2]) and a pf.kfac.capture_layer_norm on its output.
  LogicalResult insertLayerNorms(func::FuncOp func, SymbolTable &symbols, Value step, bool hasLoss,
                                 const llvm::Regex &skipPattern) {
    SmallVector<LayerNormOp> norms;
    func.walk([&](LayerNormOp norm) {
      auto scale = norm.getScale().getDefiningOp<ParamRefOp>();
      auto bias = norm.getBias() ? norm.getBias().getDefiningOp<ParamRefOp>() : ParamRefOp();
      auto type = dyn_cast<RankedTensorType>(norm.getInput().getType());
      if (!scale || !bias || !type || !type.hasStaticShape() || type.getRank() < 1 ||
          !type.getElementType().isF32())
        return;
      // The axis is stored as a signed i64 (ONNX's default is -1).
      std::optional<int64_t> axis = normalizeAxis(int64_t(norm.getAxis()), type.getRank());
      if (axis == type.getRank() - 1 && (skip.empty() || !skipPattern.match(scale.getName())))
        norms.push_back(norm);
    });
    if (norms.empty())
      return func.emitError("pf-insert-kfac: layer-norm=")
             << (layerNorm == KfacLayerNorm::Diagonal ? "diagonal" : "blocks")
             << ", but no pf.layer_norm normalizes the last dimension with a named f32 scale "
                "and shift parameter";
    int64_t columns = layerNorm == KfacLayerNorm::Diagonal ? 2 : 3;
    // A LayerNorm applied several times shares one factor, as a linear does.
    llvm::StringMap<FlatSymbolRefAttr> factorOf;
    for (LayerNormOp norm : norms) {
      auto scaleName = norm.getScale().getDefiningOp<ParamRefOp>().getName();
      auto biasName = norm.getBias().getDefiningOp<ParamRefOp>().getName();
      auto type = cast<RankedTensorType>(norm.getInput().getType());
      int64_t h = type.getShape().back();
      auto [known, isNew] = factorOf.try_emplace(scaleName);
      if (isNew)
        known->second = addState(symbols, symbols.lookup<ParamOp>(scaleName), "F", {h, columns},
                                 biasName, /*weightInOut=*/false);
      // B's scale: the per-token gradients of the summed loss (see below).
      double rows = double(type.getNumElements()) / double(h);
      OpBuilder builder(norm);
      builder.setInsertionPointAfter(norm);
      auto capture = KFACCaptureLayerNormOp::create(
          builder, norm.getLoc(), norm.getOutput().getType(), norm.getOutput(), norm.getInput(),
          step, known->second, builder.getF64FloatAttr(norm.getEpsilon().convertToDouble()),
          builder.getF64FloatAttr(hasLoss ? 1.0 : rows * rows), builder.getF64FloatAttr(decay),
          builder.getI64IntegerAttr(factorEvery), hasLoss ? builder.getUnitAttr() : UnitAttr());
      norm.getOutput().replaceAllUsesExcept(capture.getResult(), capture);
    }
    return success();
  }

  /// embeddings=word|word-and-position: each table found gets `.kfac.A`
  /// [vocab] (token counts, updated from the ids before the lookup), `.kfac.B`
  /// [h, h] (a pf.kfac.capture_output on the per-token rows) and their
  /// inverses. Returns whether any table was taken.
  FailureOr<bool> insertEmbeddings(func::FuncOp func, SymbolTable &symbols, Value step,
                                   bool hasLoss, const llvm::Regex &skipPattern) {
    SmallVector<StringRef> kinds{"word"};
    if (embeddings == KfacEmbeddings::WordAndPosition)
      kinds.push_back("position");
    // A table looked up several times shares one set of factors.
    llvm::StringMap<std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>> factorsOf;
    bool taken = false;
    for (StringRef kind : kinds) {
      SmallVector<GatherOp> lookups = findEmbeddingLookups(func, kind);
      if (lookups.empty())
        return func.emitError("pf-insert-kfac: embeddings=")
               << (embeddings == KfacEmbeddings::Word ? "word" : "word-and-position")
               << ", but no pf.gather looks up rows (axis 0, static shapes) of a 2-D f32 "
                  "parameter named '*"
               << kind << "_embeddings*'"
               << (kind == "word" ? " or of the tied decoder's weight" : " or at constant ids");
      for (GatherOp gather : lookups) {
        StringRef name = lookupTable(gather).getName();
        if (!skip.empty() && skipPattern.match(name))
          continue;
        Value rows = perTokenRows(gather);
        if (!rows)
          return gather.emitError("pf-insert-kfac: the rows of '")
                 << name << "' are broadcast by "
                 << (*gather.getOutput().getUsers().begin())->getName()
                 << ", not a pf.add: their per-token gradient (factor B) is not available";
        auto tableType = cast<RankedTensorType>(gather.getData().getType());
        int64_t vocab = tableType.getDimSize(0), h = tableType.getDimSize(1);
        auto [known, isNew] = factorsOf.try_emplace(name);
        if (isNew) {
          auto table = symbols.lookup<ParamOp>(name);
          known->second = {addState(symbols, table, "A", {vocab}, "", false),
                           addFactor(symbols, table, "B", h, "", false)};
          addState(symbols, table, "A_inv", {vocab}, "", false);
          addFactor(symbols, table, "B_inv", h, "", false);
        }
        auto [a, b] = known->second;
        OpBuilder builder(gather);
        Location loc = gather.getLoc();
        auto decayAttr = builder.getF64FloatAttr(decay);
        auto everyAttr = builder.getI64IntegerAttr(factorEvery);
        KFACUpdateEmbeddingFactorOp::create(builder, loc, gather.getIndices(), step, Value(), a,
                                            builder.getF64FloatAttr(1.0), decayAttr, everyAttr);
        // B as a linear layer's: per-token gradients of the summed loss.
        auto rowsType = cast<RankedTensorType>(rows.getType());
        double tokens = double(rowsType.getNumElements()) / double(h);
        builder.setInsertionPointAfterValue(rows);
        auto capture = KFACCaptureOutputOp::create(
            builder, loc, rows, step, b, builder.getF64FloatAttr(hasLoss ? 1.0 : tokens * tokens),
            decayAttr, everyAttr, hasLoss ? builder.getUnitAttr() : UnitAttr());
        rows.replaceAllUsesExcept(capture.getOutput(), capture);
        taken = true;
      }
    }
    return taken;
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-insert-kfac: no function with a body");
    if (!(decay >= 0 && decay < 1))
      return func.emitError("pf-insert-kfac: decay must be in [0, 1), got ") << decay.getValue();
    if (factorEvery < 1)
      return func.emitError("pf-insert-kfac: factor-every must be >= 1");
    llvm::Regex skipPattern(skip);
    std::string regexError;
    if (!skip.empty() && !skipPattern.isValid(regexError))
      return func.emitError("pf-insert-kfac: skip is not a valid regular expression: ")
             << regexError;
    SymbolTable symbols(module);
    SmallVector<LinearOp> chosen;
    func.walk([&](LinearOp linear) {
      StringRef name = linear.getKFACWeightName();
      if (!name.empty() && encoderBlockOfParam(symbols, name) &&
          (skip.empty() || !skipPattern.match(name)))
        chosen.push_back(linear);
    });
    if (layers == KfacLayers::EncoderAndHead) {
      LinearOp head = findHeadTransform(func);
      StringRef name = head ? head.getKFACWeightName() : StringRef();
      if (name.empty())
        return func.emitError("pf-insert-kfac: layers=encoder-and-head, but the model has no "
                              "masked-LM head transform (a linear whose weight is named "
                              "'*predictions.transform.dense*', or a linear feeding the "
                              "decoder through a GELU and a LayerNorm)");
      if (!encoderBlockOfParam(symbols, name) && (skip.empty() || !skipPattern.match(name)))
        chosen.push_back(head);
    }
    if (chosen.empty() && embeddings == KfacEmbeddings::None)
      return func.emitError("pf-insert-kfac: no linear layer of an encoder block to precondition "
                            "(blocks come from weight names like 'layer.<i>.' or 'h.<i>.', or "
                            "from the graph's structure: pf-find-encoder-blocks)");
    Value step = getOrAddScalarArgument(func, "step", IntegerType::get(&getContext(), 64));
    // With a masked-LM loss, B is scaled by its token count at run time.
    bool hasLoss = false;
    func.walk([&](SoftmaxCrossEntropyOp) { hasLoss = true; });
    // A weight used several times (micro-batches of one step) has one set of
    // factors that every use updates.
    llvm::StringMap<std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>> factorsOf;
    for (LinearOp linear : chosen) {
      auto weight = symbols.lookup<ParamOp>(linear.getKFACWeightName());
      StringRef bias;
      if (auto ref = linear.getBias() ? linear.getBias().getDefiningOp<ParamRefOp>() : ParamRefOp())
        bias = ref.getName();
      bool column = biasColumn && !bias.empty();
      int64_t aSize = linear.getInFeatures() + (column ? 1 : 0);
      // The gradient is preconditioned in the layout the parameter has.
      bool weightInOut = !linear.getTransposeWeight();
      auto [known, isNew] = factorsOf.try_emplace(weight.getSymName());
      if (isNew) {
        int64_t bSize = linear.getOutFeatures();
        known->second = {addFactor(symbols, weight, "A", aSize, bias, weightInOut),
                         addFactor(symbols, weight, "B", bSize, bias, weightInOut)};
        addFactor(symbols, weight, "A_inv", aSize, bias, weightInOut);
        addFactor(symbols, weight, "B_inv", bSize, bias, weightInOut);
      } else if (weightInOut != symbols.lookup<ParamOp>(known->second.first.getValue())
                                    ->hasAttr(kKfacWeightInOutAttrName)) {
        return linear.emitError("pf-insert-kfac: '")
               << weight.getSymName() << "' is read as [in, out] by one linear layer and as "
               << "[out, in] by another; K-FAC needs one layout per weight";
      }
      auto [a, b] = known->second;

      OpBuilder builder(linear);
      Location loc = linear.getLoc();
      auto decayAttr = builder.getF64FloatAttr(decay);
      auto everyAttr = builder.getI64IntegerAttr(factorEvery);
      KFACUpdateFactorOp::create(builder, loc, linear.getInput(), step, Value(), Value(), Value(), a,
                                 column ? builder.getUnitAttr() : UnitAttr(),
                                 builder.getF64FloatAttr(1.0), decayAttr, everyAttr,
                                 builder.getI64IntegerAttr(1));
      // B = E[g gᵀ] of the per-token gradients of the summed loss. The
      // backward pass carries gradients of a mean over the counted tokens of
      // the masked-LM loss (scale by count², read at run time), or, without
      // such a loss, of a mean over all rows (scale by rows²).
      auto outType = cast<RankedTensorType>(linear.getType());
      double rows = double(outType.getNumElements()) / outType.getShape().back();
      double scale = hasLoss ? 1.0 : rows * rows;
      builder.setInsertionPointAfter(linear);
      auto capture = KFACCaptureOutputOp::create(builder, loc, linear.getOutput(), step, b,
                                                 builder.getF64FloatAttr(scale), decayAttr,
                                                 everyAttr,
                                                 hasLoss ? builder.getUnitAttr() : UnitAttr());
      linear.getOutput().replaceAllUsesExcept(capture.getOutput(), capture);
    }
    if (embeddings != KfacEmbeddings::None) {
      FailureOr<bool> taken = insertEmbeddings(func, symbols, step, hasLoss, skipPattern);
      if (failed(taken))
        return failure();
      if (!*taken && chosen.empty())
        return func.emitError("pf-insert-kfac: no layer to precondition: every embedding "
                              "table matches skip and no encoder block has a linear layer");
    }
    if (layerNorm != KfacLayerNorm::None)
      return insertLayerNorms(func, symbols, step, hasLoss, skipPattern);
    return success();
  }
};
} // namespace
