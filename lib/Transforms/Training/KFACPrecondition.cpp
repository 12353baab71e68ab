//===- KFACPrecondition.cpp - precondition K-FAC layers' gradients ----------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Transforms/Utils.h"
#include "pf/Transforms/Training/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>

namespace mlir::pf {
#define GEN_PASS_DEF_PFKFACPRECONDITION
#include "pf/Transforms/Training/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
struct KFACPreconditionPass
    : public mlir::pf::impl::PFKFACPreconditionBase<KFACPreconditionPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  /// A K-FAC layer: its factor and inverse state and its parameters.
  struct Layer {
    Location loc; // the factor's: the ONNX initializer name of the weight
    std::string weight, bias; // bias empty when the layer has none
    bool weightInOut = false; // the weight (and its gradient) is [in, out]
  };

  /// The layer whose factor A `factorA` is (pf-insert-kfac's attributes).
  static Layer layerOf(ParamOp factorA) {
    auto biasName = factorA->getAttrOfType<StringAttr>(kKfacBiasAttrName);
    return {factorA.getLoc(),
            factorA->getAttrOfType<StringAttr>(kKfacWeightAttrName).str(),
            biasName ? biasName.str() : "", factorA->hasAttr(kKfacWeightInOutAttrName)};
  }

  /// An embedding's factor A (pf-insert-kfac embeddings=...): 1-D, the
  /// diagonal [vocab] of token counts.
  static bool isEmbeddingFactor(ParamOp factorA) {
    return cast<RankedTensorType>(factorA.getType()).getRank() == 1;
  }

  /// The linear layers (every `.kfac.A` but the embeddings').
  SmallVector<Layer> kfacLayers(ModuleOp module) {
    SmallVector<Layer> layers;
    for (auto factorA : module.getOps<ParamOp>())
      if (factorA.getSymName().ends_with(".kfac.A") && factorA->hasAttr(kKfacWeightAttrName) &&
          !isEmbeddingFactor(factorA))
        layers.push_back(layerOf(factorA));
    return layers;
  }

  /// The embedding tables pf-insert-kfac prepared.
  static SmallVector<Layer> embeddingLayers(ModuleOp module) {
    SmallVector<Layer> layers;
    for (auto factorA : module.getOps<ParamOp>())
      if (factorA.getSymName().ends_with(".kfac.A") && factorA->hasAttr(kKfacWeightAttrName) &&
          isEmbeddingFactor(factorA))
        layers.push_back(layerOf(factorA));
    return layers;
  }

  /// The type of `func`'s result named `name` (pf.name), or null.
  static Type resultType(func::FuncOp func, StringRef name) {
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto attr = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
          attr && attr.getValue() == name)
        return func.getResultTypes()[i];
    return {};
  }

  static bool returns(func::FuncOp func, StringRef name) {
    return bool(resultType(func, name));
  }

  bool eigen() const { return basis == KfacBasis::Eigen; }

  /// `gradient` as autodiff made it: pf.clip_by_global_norm's operand for
  /// its result, else the value itself. The host's quadratic model of the
  /// loss (raw-gradients) needs the true gradient, not the clipped one.
  static Value unclipped(Value gradient) {
    auto clip = gradient.getDefiningOp<ClipByGlobalNormOp>();
    if (!clip)
      return gradient;
    return clip.getGradients()[cast<OpResult>(gradient).getResultNumber()];
  }

  /// The state export-factors returns per layer (kfac/<suffix>/<weight>).
  SmallVector<StringRef> exportedState() const {
    if (eigen())
      return {"A", "B", "A_vectors", "A_values", "B_vectors", "B_values"};
    return {"A", "B", "A_inv", "B_inv"};
  }

  /// The suffix of a side's ("A" or "B") matrix state: its inverse, or its
  /// eigenvectors in the eigenbasis (whose eigenvalues are `<side>_values`).
  std::string matrixSuffix(StringRef side) const {
    return (side + (eigen() ? "_vectors" : "_inv")).str();
  }

  /// The eigenbasis replaces pf-insert-kfac's `<w>.kfac.A_inv`/`.B_inv` by
  /// `.A_vectors`/`.B_vectors` (square, as the inverses) and `.A_values`/
  /// `.B_values` (1-D), zero until the first refresh as the inverses are.
  LogicalResult prepareEigenState(ModuleOp module, SymbolTable &symbols) {
    OpBuilder builder(module.getContext());
    for (const Layer &layer : kfacLayers(module)) {
      std::string prefix = layer.weight + ".kfac.";
      for (StringRef side : {"A", "B"}) {
        auto inverse = symbols.lookup<ParamOp>(prefix + side.str() + "_inv");
        if (!inverse)
          continue; // prepared already (or a module without inverses)
        if (!SymbolTable::symbolKnownUseEmpty(inverse, module))
          return inverse.emitError("pf-kfac-precondition: basis=eigen, but '")
                 << inverse.getSymName() << "' is in use (the module was preconditioned "
                 << "with basis=inverse already)";
        builder.setInsertionPointAfter(inverse);
        auto vectors = cast<ParamOp>(builder.clone(*inverse));
        vectors.setSymName(prefix + matrixSuffix(side));
        auto matrixType = cast<RankedTensorType>(inverse.getType());
        auto valuesType =
            RankedTensorType::get({matrixType.getDimSize(0)}, matrixType.getElementType());
        auto values = cast<ParamOp>(builder.clone(*inverse));
        values.setSymName(prefix + side.str() + "_values");
        values.setType(valuesType);
        values.setValueAttr(DenseElementsAttr::get(
            valuesType, builder.getZeroAttr(matrixType.getElementType())));
        symbols.erase(inverse);
        symbols.insert(vectors);
        symbols.insert(values);
      }
    }
    return success();
  }

  /// On a split module: one `stage<s>_kfac_precondition_<l>(grad/W, [grad/b],
  /// step)` per K-FAC layer l of stage s (l indexes every layer of the model,
  /// as the inverse functions do), returning the preconditioned gradients
  /// and, when the inverses refresh there, `kfac/issues`; the rank program
  /// calls each once per step after clipping. The KL-clip needs
  /// Σ⟨update, gradient⟩ over every rank's layers, so it is not in these
  /// functions: the module records κ and the single-process order of the sum
  /// (pf.kfac_kl_clip, pf.kfac_kl_order) for the rank programs.
  LogicalResult runOnStages(ModuleOp module, ArrayRef<func::FuncOp> gradientFunctions) {
    if (exportFactors)
      return module.emitError("pf-kfac-precondition: export-factors does not apply to a split "
                              "module (the factors are parameters: read them from a "
                              "checkpoint)");
    SmallVector<Layer> layers = kfacLayers(module);
    // The stage returning each layer's weight gradient (-1: none).
    SmallVector<int64_t> stageOf(layers.size(), -1);
    SmallVector<Attribute> klOrder;
    OpBuilder builder(module.getContext());
    for (auto [index, layer] : llvm::enumerate(layers)) {
      std::string weightGrad = "grad/" + layer.weight;
      int64_t stage = -1;
      for (auto [s, candidate] : llvm::enumerate(gradientFunctions))
        if (func::FuncOp func = candidate; returns(func, weightGrad)) {
          if (stage >= 0)
            return func.emitError("pf-kfac-precondition: '")
                   << weightGrad << "' is returned by stages " << stage << " and " << s
                   << "; a K-FAC layer must live on one stage";
          stage = int64_t(s);
        }
      if (stage < 0)
        continue;
      stageOf[index] = stage;
      klOrder.push_back(builder.getStringAttr(weightGrad));
      if (!layer.bias.empty() && returns(gradientFunctions[stage], "grad/" + layer.bias))
        klOrder.push_back(builder.getStringAttr("grad/" + layer.bias));
    }
    if (klOrder.empty())
      return module.emitError("pf-kfac-precondition: no stage returns the grad/<weight> of a "
                              "layer pf-insert-kfac prepared");
    SymbolTable symbols(module);
    // Each lands right after its stage's gradient function: the last first,
    // so that they read in layer order.
    for (int64_t index = int64_t(layers.size()) - 1; index >= 0; --index)
      if (stageOf[index] >= 0)
        buildLayerPrecondition(symbols, gradientFunctions[stageOf[index]], layers[index],
                               index);
    if (curvatureInput && !bubbles)
      gateFactorUpdates(module);
    if (bubbles) {
      gateFactorUpdates(module);
      for (auto [index, layer] : llvm::enumerate(layers))
        if (stageOf[index] >= 0)
          buildStageInverse(symbols, gradientFunctions[stageOf[index]], layer, int64_t(index));
    }
    if (klClip > 0) {
      module->setAttr(kKfacKLClipAttrName, builder.getF64FloatAttr(klClip));
      module->setAttr(kKfacKLOrderAttrName, builder.getArrayAttr(klOrder));
    }
    return success();
  }

  /// `@stage<s>_kfac_precondition_<index>`: B⁻¹∇W·A⁻¹ (and B⁻¹∇b) of one
  /// layer, preceded in step mode by the refresh of its inverses.
  void buildLayerPrecondition(SymbolTable &symbols, func::FuncOp gradients, const Layer &layer,
                              int64_t index) {
    OpBuilder builder(gradients.getContext());
    SmallVector<std::string> gradNames{"grad/" + layer.weight};
    if (!layer.bias.empty() && returns(gradients, "grad/" + layer.bias))
      gradNames.push_back("grad/" + layer.bias);
    SmallVector<Type> argTypes;
    for (const std::string &name : gradNames)
      argTypes.push_back(resultType(gradients, name));
    SmallVector<Type> resultTypes(argTypes);
    argTypes.push_back(RankedTensorType::get({}, builder.getI64Type()));
    if (dampingInput) // before the body: dampingArgument finds it by name
      argTypes.push_back(RankedTensorType::get({}, builder.getF64Type()));
    if (refreshInput) // likewise for emitLayer's due flag
      argTypes.push_back(RankedTensorType::get({}, builder.getI64Type()));
    if (!bubbles) // the refresh outcomes come from the inverse functions
      resultTypes.push_back(RankedTensorType::get({}, builder.getI32Type()));

    int64_t stage = gradients->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
    builder.setInsertionPointAfter(gradients);
    auto func = func::FuncOp::create(
        builder, layer.loc,
        "stage" + std::to_string(stage) + "_kfac_precondition_" + std::to_string(index),
        builder.getFunctionType(argTypes, resultTypes));
    func->setAttr(kStageAttrName, gradients->getAttr(kStageAttrName));
    if (Attribute blocks = gradients->getAttr(kStageBlocksAttrName))
      func->setAttr(kStageBlocksAttrName, blocks);
    for (auto [i, name] : llvm::enumerate(gradNames)) {
      func.setArgAttr(i, kNameAttrName, builder.getStringAttr(name));
      func.setResultAttr(i, kNameAttrName, builder.getStringAttr(name));
    }
    func.setArgAttr(gradNames.size(), kNameAttrName, builder.getStringAttr("step"));
    if (dampingInput)
      func.setArgAttr(gradNames.size() + 1, kNameAttrName, builder.getStringAttr("kfac_damping"));
    if (refreshInput)
      func.setArgAttr(gradNames.size() + 1 + unsigned(dampingInput), kNameAttrName,
                      builder.getStringAttr("kfac_refresh_due"));
    if (!bubbles)
      func.setResultAttr(gradNames.size(), kNameAttrName, builder.getStringAttr(kKfacIssuesName));
    Block *entry = func.addEntryBlock();
    builder.setInsertionPointToEnd(entry);
    Value gradW = entry->getArgument(0);
    Value gradB = gradNames.size() > 1 ? entry->getArgument(1) : Value();
    Value step = entry->getArgument(gradNames.size());
    auto [outcome, weightUpdate, biasUpdate] =
        emitLayer(builder, symbols, layer, step, gradW, gradB, /*refresh=*/!bubbles);
    SmallVector<Value> results{weightUpdate};
    if (gradB)
      results.push_back(biasUpdate);
    if (outcome)
      results.push_back(outcome);
    func::ReturnOp::create(builder, layer.loc, results);
    symbols.insert(func);
  }

  /// A pf.param_ref of the K-FAC state parameter `name`.
  static Value factorRef(OpBuilder &builder, SymbolTable &symbols, Location loc,
                         StringRef name) {
    auto param = symbols.lookup<ParamOp>(name);
    return ParamRefOp::create(builder, loc, param.getType(), param.getSymName());
  }

  /// The host's per-step λ (`kfac_damping`, an argument of the function
  /// `builder` inserts into) with damping-input, else null.
  Value dampingArgument(OpBuilder &builder) {
    if (!dampingInput)
      return {};
    auto func = builder.getInsertionBlock()->getParent()->getParentOfType<func::FuncOp>();
    return getOrAddScalarArgument(func, "kfac_damping", builder.getF64Type());
  }

  /// λ as a value for pf.kfac.precondition_eigen: the host's, or a constant.
  Value dampingValue(OpBuilder &builder, Location loc) {
    if (Value input = dampingArgument(builder))
      return input;
    auto type = RankedTensorType::get({}, builder.getF64Type());
    return ConstantOp::create(builder, loc,
                              DenseElementsAttr::get(type, builder.getF64FloatAttr(damping)))
        .getOutput();
  }

  /// One layer's refresh and preconditioning: (outcome, ΔW, Δb).
  std::tuple<Value, Value, Value> emitLayer(OpBuilder &builder, SymbolTable &symbols,
                                            const Layer &layer, Value step, Value gradW,
                                            Value gradB, bool refresh = true) {
    std::string prefix = layer.weight + ".kfac.";
    Location loc = layer.loc;
    auto state = [&](StringRef suffix) {
      return factorRef(builder, symbols, loc, prefix + suffix.str());
    };
    Value outcome;
    if (refresh) {
      // In the bubbles' arithmetic the end-of-step refresh is the warm-up's only.
      int64_t every = bubbles ? std::numeric_limits<int64_t>::max() : int64_t(refreshEvery);
      // The host decides the steps (an interval schedule).
      Value due;
      if (refreshInput) {
        auto func = builder.getInsertionBlock()->getParent()->getParentOfType<func::FuncOp>();
        due = getOrAddScalarArgument(func, "kfac_refresh_due", builder.getI64Type());
      }
      outcome = emitRefresh(builder, layer, step, due, "", every, refreshWarmup);
    }
    Value weightUpdate, biasUpdate;
    if (eigen()) {
      auto precondition = KFACPreconditionEigenOp::create(
          builder, loc, gradW, state("A_vectors"), state("A_values"), state("B_vectors"),
          state("B_values"), dampingValue(builder, loc), gradB,
          layer.weightInOut ? builder.getUnitAttr() : UnitAttr());
      weightUpdate = precondition.getWeightUpdate();
      biasUpdate = gradB ? precondition.getBiasUpdate() : Value();
    } else {
      auto precondition = KFACPreconditionOp::create(builder, loc, gradW, state("A_inv"),
                                                     state("B_inv"), gradB, layer.weightInOut);
      weightUpdate = precondition.getWeightUpdate();
      biasUpdate = gradB ? precondition.getBiasUpdate() : Value();
    }
    if (graft == KfacGraft::None)
      return {outcome, weightUpdate, biasUpdate};
    SmallVector<Value> updates{weightUpdate}, gradients{gradW};
    if (gradB) {
      updates.push_back(biasUpdate);
      gradients.push_back(gradB);
    }
    auto grafted =
        KFACGraftOp::create(builder, loc, ValueRange(updates).getTypes(), updates, gradients);
    return {outcome, grafted.getGrafted()[0], gradB ? grafted.getGrafted()[1] : Value()};
  }

  /// A refresh of `layer`'s inverses (or eigendecompositions) from its
  /// factors into the state in use (`pending` empty) or the pending one
  /// ("_next"), run when `due` is non-zero, or without `due` at steps
  /// 1..`warmup` and every `every` steps.
  Value emitRefresh(OpBuilder &builder, const Layer &layer, Value step, Value due,
                    StringRef pending, int64_t every = 1, int64_t warmup = 0) {
    std::string prefix = layer.weight + ".kfac.";
    auto sym = [&](const std::string &suffix) {
      return FlatSymbolRefAttr::get(builder.getContext(), prefix + suffix);
    };
    // The eigendecomposition takes no damping (the preconditioning adds it).
    Value hostDamping = eigen() ? Value() : dampingArgument(builder);
    return KFACRefreshInversesOp::create(
               builder, layer.loc, RankedTensorType::get({}, builder.getI32Type()), step, due,
               hostDamping, sym("A"), sym("B"), sym(matrixSuffix("A") + pending.str()),
               sym(matrixSuffix("B") + pending.str()), builder.getF64FloatAttr(damping),
               builder.getI64IntegerAttr(every), builder.getI64IntegerAttr(retries),
               builder.getI64IntegerAttr(warmup),
               eigen() ? sym("A_values" + pending.str()) : FlatSymbolRefAttr(),
               eigen() ? sym("B_values" + pending.str()) : FlatSymbolRefAttr())
        .getOutcome();
  }

  /// Bubbles: the host decides which steps gather curvature (graph input
  /// `kfac_curvature` of every function with a factor update).
  static void gateFactorUpdates(ModuleOp module) {
    module.walk([](func::FuncOp func) {
      SmallVector<KFACUpdateFactorOp> updates(func.getOps<KFACUpdateFactorOp>());
      func.walk([&](KFACUpdateFactorOp update) {
        if (!llvm::is_contained(updates, update))
          updates.push_back(update);
      });
      SmallVector<KFACUpdateLayerNormFactorOp> normUpdates;
      func.walk([&](KFACUpdateLayerNormFactorOp update) { normUpdates.push_back(update); });
      SmallVector<KFACUpdateEmbeddingFactorOp> embeddingUpdates;
      func.walk([&](KFACUpdateEmbeddingFactorOp update) { embeddingUpdates.push_back(update); });
      if (updates.empty() && normUpdates.empty() && embeddingUpdates.empty())
        return;
      Value due = getOrAddScalarArgument(func, "kfac_curvature",
                                         IntegerType::get(func.getContext(), 64));
      for (KFACUpdateFactorOp update : updates)
        update.getDueMutable().assign(due);
      for (KFACUpdateLayerNormFactorOp update : normUpdates)
        update.getDueMutable().assign(due);
      for (KFACUpdateEmbeddingFactorOp update : embeddingUpdates)
        update.getDueMutable().assign(due);
    });
  }

  /// The LayerNorm factors pf-insert-kfac made (`<scale>.kfac.F`).
  static SmallVector<ParamOp> layerNormFactors(ModuleOp module) {
    SmallVector<ParamOp> factors;
    for (auto factor : module.getOps<ParamOp>())
      if (factor.getSymName().ends_with(".kfac.F") && factor->hasAttr(kKfacWeightAttrName))
        factors.push_back(factor);
    return factors;
  }

  /// One LayerNorm's update: (F_j + λI)⁻¹ (∇γ_j, ∇β_j) per feature, then
  /// grafted as a linear layer's (both parameters together).
  std::pair<Value, Value> emitLayerNorm(OpBuilder &builder, SymbolTable &symbols, ParamOp factor,
                                        Value gradScale, Value gradBias) {
    Location loc = factor.getLoc();
    auto precondition = KFACPreconditionLayerNormOp::create(
        builder, loc, factorRef(builder, symbols, loc, factor.getSymName()),
        dampingValue(builder, loc), gradScale, gradBias);
    Value scaleUpdate = precondition.getScaleUpdate(), biasUpdate = precondition.getBiasUpdate();
    if (graft == KfacGraft::None)
      return {scaleUpdate, biasUpdate};
    SmallVector<Value> updates{scaleUpdate, biasUpdate}, gradients{gradScale, gradBias};
    auto grafted =
        KFACGraftOp::create(builder, loc, ValueRange(updates).getTypes(), updates, gradients);
    return {grafted.getGrafted()[0], grafted.getGrafted()[1]};
  }

  /// One embedding table's refresh and update: (outcome, ΔW). Its A is
  /// diagonal, so both bases use the damped inverses (an eigenbasis of a
  /// diagonal factor is the identity): A⁻¹ = 1 / (A + √λ·π), B⁻¹ as a
  /// linear layer's, refreshed at the same steps; ΔW = diag(A⁻¹)·∇W·B⁻¹,
  /// then grafted.
  std::pair<Value, Value> emitEmbedding(OpBuilder &builder, SymbolTable &symbols,
                                        const Layer &layer, Value step, Value gradW) {
    std::string prefix = layer.weight + ".kfac.";
    Location loc = layer.loc;
    auto sym = [&](StringRef suffix) {
      return FlatSymbolRefAttr::get(builder.getContext(), prefix + suffix.str());
    };
    Value due;
    if (refreshInput) {
      auto func = builder.getInsertionBlock()->getParent()->getParentOfType<func::FuncOp>();
      due = getOrAddScalarArgument(func, "kfac_refresh_due", builder.getI64Type());
    }
    Value outcome =
        KFACRefreshInversesOp::create(
            builder, loc, RankedTensorType::get({}, builder.getI32Type()), step, due,
            dampingArgument(builder), sym("A"), sym("B"), sym("A_inv"), sym("B_inv"),
            builder.getF64FloatAttr(damping), builder.getI64IntegerAttr(refreshEvery),
            builder.getI64IntegerAttr(retries), builder.getI64IntegerAttr(refreshWarmup),
            FlatSymbolRefAttr(), FlatSymbolRefAttr())
            .getOutcome();
    Value update = KFACPreconditionEmbeddingOp::create(
                       builder, loc, gradW, factorRef(builder, symbols, loc, prefix + "A_inv"),
                       factorRef(builder, symbols, loc, prefix + "B_inv"))
                       .getWeightUpdate();
    if (graft == KfacGraft::None)
      return {outcome, update};
    SmallVector<Value> updates{update}, gradients{gradW};
    auto grafted =
        KFACGraftOp::create(builder, loc, ValueRange(updates).getTypes(), updates, gradients);
    return {outcome, grafted.getGrafted()[0]};
  }

  /// Bubbles: `@stage<s>_kfac_inverse_<index>(step) -> kfac/issues`, the
  /// layer's damped inverses into pending parameters `<weight>.kfac.A_inv_next`
  /// and `.B_inv_next` (pf.kfac_pending), which pf.kfac_promote_inverses
  /// copies over the inverses in use.
  void buildStageInverse(SymbolTable &symbols, func::FuncOp gradients, const Layer &layer,
                         int64_t index) {
    MLIRContext *ctx = gradients.getContext();
    OpBuilder builder(ctx);
    std::string prefix = layer.weight + ".kfac.";
    SmallVector<std::string> inUse{matrixSuffix("A"), matrixSuffix("B")};
    if (eigen())
      inUse.append({"A_values", "B_values"});
    for (const std::string &suffix : inUse) {
      auto current = symbols.lookup<ParamOp>(prefix + suffix);
      builder.setInsertionPointAfter(current);
      auto pending = cast<ParamOp>(builder.clone(*current));
      pending.setSymName(prefix + suffix + "_next");
      pending->setAttr(kKfacPendingAttrName, builder.getUnitAttr());
      symbols.insert(pending);
    }
    int64_t stage = gradients->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
    auto i64 = RankedTensorType::get({}, builder.getI64Type());
    auto i32 = RankedTensorType::get({}, builder.getI32Type());
    SmallVector<Type> argTypes{i64};
    if (dampingInput)
      argTypes.push_back(RankedTensorType::get({}, builder.getF64Type()));
    builder.setInsertionPointAfter(gradients);
    auto func = func::FuncOp::create(
        builder, layer.loc,
        "stage" + std::to_string(stage) + "_kfac_inverse_" + std::to_string(index),
        builder.getFunctionType(argTypes, {i32}));
    func->setAttr(kStageAttrName, gradients->getAttr(kStageAttrName));
    func.setArgAttr(0, kNameAttrName, builder.getStringAttr("step"));
    if (dampingInput) // before the body: dampingArgument finds it by name
      func.setArgAttr(1, kNameAttrName, builder.getStringAttr("kfac_damping"));
    func.setResultAttr(0, kNameAttrName, builder.getStringAttr(kKfacIssuesName));
    Block *entry = func.addEntryBlock();
    builder.setInsertionPointToEnd(entry);
    Value outcome = emitRefresh(builder, layer, entry->getArgument(0), Value(), "_next");
    func::ReturnOp::create(builder, layer.loc, outcome);
    symbols.insert(func);
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    if (refreshInput && bubbles)
      return module.emitError("pf-kfac-precondition: refresh-input and bubbles both decide "
                              "the refreshes: take one");
    if (eigen()) {
      if (damping <= 0 && !dampingInput)
        return module.emitError("pf-kfac-precondition: basis=eigen needs damping > 0 (the "
                                "Kronecker product's eigenvalues may be 0)");
      SymbolTable symbols(module);
      if (failed(prepareEigenState(module, symbols)))
        return failure();
    }
    SmallVector<func::FuncOp> stageFunctions = stageGradientFunctions(module);
    if (!layerNormFactors(module).empty() && (!stageFunctions.empty() || bubbles))
      return module.emitError("pf-kfac-precondition: LayerNorm factors (pf-insert-kfac "
                              "layer-norm=...) are single-process K-FAC for now: not on a split "
                              "module nor with bubbles=true (--kfac-window)");
    if (!embeddingLayers(module).empty() && (!stageFunctions.empty() || bubbles))
      return module.emitError("pf-kfac-precondition: embedding factors (pf-insert-kfac "
                              "embeddings=...) are single-process K-FAC for now: not on a split "
                              "module nor with bubbles=true (--kfac-window)");
    if (!stageFunctions.empty() && rawGradients)
      return module.emitError("pf-kfac-precondition: raw-gradients is single-process K-FAC "
                              "(the host's quadratic model of the loss): not on a split module");
    if (!stageFunctions.empty()) {
      if (refreshEvery < 1 || retries < 0 || damping < 0 || refreshWarmup < 0 || klClip < 0)
        return module.emitError("pf-kfac-precondition: refresh-every must be >= 1, retries, "
                                "refresh-warmup, damping and kl-clip >= 0");
      return runOnStages(module, stageFunctions);
    }
    func::FuncOp func = getEntryFunction(module);
    if (!func)
      return module.emitError("pf-kfac-precondition: no function with a body");
    if (refreshEvery < 1 || retries < 0 || damping < 0 || refreshWarmup < 0)
      return func.emitError("pf-kfac-precondition: refresh-every must be >= 1, retries, "
                            "refresh-warmup and damping >= 0");
    SymbolTable symbols(module);
    Block &block = func.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value step;
    for (unsigned i = 0; i < block.getNumArguments(); ++i)
      if (auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttrName); name && name == "step")
        step = block.getArgument(i);
    if (!step)
      return func.emitError("pf-kfac-precondition: no 'step' argument; run pf-insert-kfac first");

    llvm::StringMap<unsigned> resultOf;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName))
        resultOf[name.getValue()] = i;

    OpBuilder builder(ret);
    SmallVector<Value> results(ret.getOperands());
    Value issues;
    if (curvatureInput && !bubbles)
      gateFactorUpdates(module);
    if (bubbles) {
      // The arithmetic of the pipeline's bubbles: the previous window's
      // factors are inverted before this step's curvature updates them.
      gateFactorUpdates(module);
      Value due = getOrAddScalarArgument(func, "kfac_refresh", builder.getI64Type());
      OpBuilder start = OpBuilder::atBlockBegin(&block);
      for (const Layer &layer : kfacLayers(module)) {
        if (!resultOf.count("grad/" + layer.weight))
          continue;
        Value outcome = emitRefresh(start, layer, step, due, "");
        issues = issues ? AddOp::create(start, layer.loc, issues, outcome).getResult() : outcome;
      }
    }
    int64_t layers = 0;
    // For KL-clipping: (result position, preconditioned update, raw gradient).
    SmallVector<std::tuple<unsigned, Value, Value>> updates;
    SmallVector<std::pair<std::string, Value>> exported;
    // raw-gradients: kfac/gradient/<parameter> of every K-FAC layer.
    SmallVector<std::pair<std::string, Value>> rawResults;
    auto keepRaw = [&](StringRef parameter, Value gradient) {
      if (rawGradients)
        rawResults.push_back({("kfac/gradient/" + parameter).str(), unclipped(gradient)});
    };
    for (auto factorA : module.getOps<ParamOp>()) {
      if (!factorA.getSymName().ends_with(".kfac.A"))
        continue;
      auto weightName = factorA->getAttrOfType<StringAttr>(kKfacWeightAttrName);
      auto biasName = factorA->getAttrOfType<StringAttr>(kKfacBiasAttrName);
      if (!weightName || isEmbeddingFactor(factorA))
        continue;
      auto weightGrad = resultOf.find(("grad/" + weightName.getValue()).str());
      if (weightGrad == resultOf.end())
        continue;
      Value gradW = results[weightGrad->second];
      Value gradB;
      auto biasGrad = biasName ? resultOf.find(("grad/" + biasName.getValue()).str())
                               : resultOf.end();
      if (biasGrad != resultOf.end())
        gradB = results[biasGrad->second];
      // The layer's ops carry its weight's location (the ONNX initializer
      // name), so profiles attribute them to the right block.
      Layer layer = layerOf(factorA);
      keepRaw(layer.weight, gradW);
      if (gradB)
        keepRaw(layer.bias, gradB);
      auto [outcome, weightUpdate, biasUpdate] =
          emitLayer(builder, symbols, layer, step, gradW, gradB);
      if (issues) {
        // Right after the refresh: the step's order of the issue count.
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointAfter(outcome.getDefiningOp());
        issues = AddOp::create(builder, layer.loc, issues, outcome).getResult();
      } else {
        issues = outcome;
      }
      results[weightGrad->second] = weightUpdate;
      updates.push_back({weightGrad->second, weightUpdate, gradW});
      if (exportFactors)
        for (StringRef suffix : exportedState())
          exported.push_back(
              {("kfac/" + suffix + "/" + weightName.getValue()).str(),
               factorRef(builder, symbols, layer.loc, layer.weight + ".kfac." + suffix.str())});
      if (gradB) {
        results[biasGrad->second] = biasUpdate;
        updates.push_back({biasGrad->second, biasUpdate, gradB});
      }
      ++layers;
    }
    for (const Layer &layer : embeddingLayers(module)) {
      auto weightGrad = resultOf.find("grad/" + layer.weight);
      if (weightGrad == resultOf.end())
        continue;
      Value gradW = results[weightGrad->second];
      keepRaw(layer.weight, gradW);
      auto [outcome, update] = emitEmbedding(builder, symbols, layer, step, gradW);
      issues = issues ? AddOp::create(builder, layer.loc, issues, outcome).getResult() : outcome;
      results[weightGrad->second] = update;
      updates.push_back({weightGrad->second, update, gradW});
      if (exportFactors)
        for (StringRef suffix : {"A", "B", "A_inv", "B_inv"})
          exported.push_back(
              {("kfac/" + suffix + "/" + layer.weight).str(),
               factorRef(builder, symbols, layer.loc, layer.weight + ".kfac." + suffix.str())});
      ++layers;
    }
    for (ParamOp factor : layerNormFactors(module)) {
      auto scaleName = factor->getAttrOfType<StringAttr>(kKfacWeightAttrName);
      auto biasName = factor->getAttrOfType<StringAttr>(kKfacBiasAttrName);
      auto scaleGrad = resultOf.find(("grad/" + scaleName.getValue()).str());
      auto biasGrad =
          biasName ? resultOf.find(("grad/" + biasName.getValue()).str()) : resultOf.end();
      if (scaleGrad == resultOf.end() || biasGrad == resultOf.end())
        continue;
      Value gradScale = results[scaleGrad->second], gradBias = results[biasGrad->second];
      keepRaw(scaleName.getValue(), gradScale);
      keepRaw(biasName.getValue(), gradBias);
      auto [scaleUpdate, biasUpdate] = emitLayerNorm(builder, symbols, factor, gradScale, gradBias);
      results[scaleGrad->second] = scaleUpdate;
      results[biasGrad->second] = biasUpdate;
      updates.push_back({scaleGrad->second, scaleUpdate, gradScale});
      updates.push_back({biasGrad->second, biasUpdate, gradBias});
      if (exportFactors)
        exported.push_back({("kfac/F/" + scaleName.getValue()).str(),
                            factorRef(builder, symbols, factor.getLoc(), factor.getSymName())});
      ++layers;
    }
    if (layers == 0)
      return func.emitError("pf-kfac-precondition: no grad/<weight> result of a layer "
                            "pf-insert-kfac prepared; run pf-insert-kfac and "
                            "pf-build-gradients first");
    if (klClip < 0)
      return func.emitError("pf-kfac-precondition: kl-clip must be >= 0");
    if (klClip > 0) {
      Value lr = getOrAddScalarArgument(func, "lr", builder.getF64Type());
      SmallVector<Value> u, g;
      for (auto &[position, update, grad] : updates) {
        u.push_back(update);
        g.push_back(grad);
      }
      auto clip = KFACKLClipOp::create(builder, func.getLoc(), ValueRange(u).getTypes(), lr, u, g,
                                       builder.getF64FloatAttr(klClip));
      for (auto [entry, clipped] : llvm::zip(updates, clip.getClipped()))
        results[std::get<0>(entry)] = clipped;
    }
    results.push_back(issues);
    unsigned first = results.size() - 1;
    exported.append(rawResults.begin(), rawResults.end());
    for (auto &[name, value] : exported)
      results.push_back(value);
    ret->setOperands(results);
    func.setType(builder.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    func.setResultAttr(first, kNameAttrName, builder.getStringAttr(kKfacIssuesName));
    for (auto [i, entry] : llvm::enumerate(exported))
      func.setResultAttr(first + 1 + i, kNameAttrName, builder.getStringAttr(entry.first));
    return success();
  }
};
} // namespace
