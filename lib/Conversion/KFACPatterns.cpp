//===- KFACPatterns.cpp - K-FAC factors, inverses, preconditioning ---------===//
//
// The stateful K-FAC ops of a training step run on some steps only; their
// kernels are called inside scf.if on a condition computed from the step
// counter (lowered to cf after the conversion).
//
//===----------------------------------------------------------------------===//
#include "RuntimeLowering.h"
#include "StepEndRules.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::pf;

namespace {
/// (step - 1) mod every == 0: the steps 1, 1 + every, ...
Value isDueStep(RuntimeLowering &l, OpBuilder &b, Location loc, Value step, int64_t every) {
  Value sinceFirst = arith::SubIOp::create(b, loc, step, l.constI64(b, loc, 1));
  Value phase = arith::RemSIOp::create(b, loc, sinceFirst, l.constI64(b, loc, every));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, phase, l.constI64(b, loc, 0));
}

/// Whether the i64 scalar `source` (a host-decided `due`, descriptor
/// `entry`) is non-zero.
FailureOr<Value> isNonZero(RuntimeLowering &l, OpBuilder &b, Operation *op, Value source,
                           Value entry) {
  FailureOr<Value> value = l.readScalar(b, op, source, entry, b.getI64Type());
  if (failed(value))
    return failure();
  Location loc = op->getLoc();
  return Value(
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, *value, l.constI64(b, loc, 0)));
}

/// Whether a per-step K-FAC op runs this step: its host-decided `due`
/// (source `dueSource`, descriptor `dueEntry`) when it has one, else
/// (step - 1) mod every == 0.
FailureOr<Value> dueFlag(RuntimeLowering &l, OpBuilder &b, Operation *op, Value dueSource,
                         Value dueEntry, Value step, int64_t every) {
  if (dueEntry)
    return isNonZero(l, b, op, dueSource, dueEntry);
  return isDueStep(l, b, op->getLoc(), step, every);
}

/// Emits `body` (which emits calls) under `condition`.
template <typename Fn>
LogicalResult emitIf(OpBuilder &b, Location loc, Value condition, Fn &&body) {
  auto ifOp = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  return body();
}

/// Σᵢ ⟨lhsᵢ, rhsᵢ⟩ in f64, by pfrt_dot in operand order.
static FailureOr<Value> sumOfDots(RuntimeLowering &l, ConversionPatternRewriter &rewriter,
                                  Operation *op, ValueRange lhs, ValueRange rhs) {
  Location loc = op->getLoc();
  Type f64 = rewriter.getF64Type();
  Value slot = l.scratchF64(rewriter, loc);
  Value total = l.constF64(rewriter, loc, 0.0);
  for (auto [a, b] : llvm::zip(lhs, rhs)) {
    if (failed(l.call(rewriter, op, "pfrt_dot", {a, b, slot})))
      return failure();
    total = arith::AddFOp::create(rewriter, loc, total,
                                  LLVM::LoadOp::create(rewriter, loc, f64, slot));
  }
  return total;
}

/// Replaces `op` by `factor` · update for each update (pfrt_scale).
static LogicalResult replaceByScaled(RuntimeLowering &l, ConversionPatternRewriter &rewriter,
                                     Operation *op, ValueRange updates, Value factor) {
  SmallVector<Value> scaled = l.resultEntries(rewriter, op);
  for (auto [u, r] : llvm::zip(updates, scaled))
    if (failed(l.call(rewriter, op, "pfrt_scale", {u, factor, r})))
      return failure();
  rewriter.replaceOp(op, scaled);
  return success();
}

/// s = sqrt(Σ ‖g‖² / Σ ‖u‖²) (1 when Σ ‖u‖² is 0), then each result = s ·
/// update.
struct GraftPattern : RuntimePattern<KFACGraftOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACGraftOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    FailureOr<Value> updates =
        sumOfDots(l, rewriter, op, adaptor.getUpdates(), adaptor.getUpdates());
    if (failed(updates))
      return failure();
    FailureOr<Value> gradients =
        sumOfDots(l, rewriter, op, adaptor.getGradients(), adaptor.getGradients());
    if (failed(gradients))
      return failure();
    Value root = LLVM::SqrtOp::create(
        rewriter, loc, arith::DivFOp::create(rewriter, loc, *gradients, *updates));
    // u = 0 would give 0/0; a NaN or Inf in u keeps s NaN or 0 and reaches
    // the result, where the step's guard sees it.
    Value zero = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OEQ, *updates,
                                       l.constF64(rewriter, loc, 0.0));
    Value scale =
        arith::SelectOp::create(rewriter, loc, zero, l.constF64(rewriter, loc, 1.0), root);
    return replaceByScaled(l, rewriter, op, adaptor.getUpdates(), scale);
  }
};

/// ν = min(1, sqrt(κ / (lr² Σ ⟨u, g⟩))) (1 when the sum is not positive),
/// then each result = ν · update.
struct KLClipPattern : RuntimePattern<KFACKLClipOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACKLClipOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Type f64 = rewriter.getF64Type();
    FailureOr<Value> total =
        sumOfDots(l, rewriter, op, adaptor.getUpdates(), adaptor.getGradients());
    if (failed(total))
      return failure();
    FailureOr<Value> lr = l.readScalar(rewriter, op, op.getLr(), adaptor.getLr(), f64);
    if (failed(lr))
      return failure();
    Value nu = emitKLClipFactor(rewriter, loc, *lr, *total, op.getKappa().convertToDouble());
    return replaceByScaled(l, rewriter, op, adaptor.getUpdates(), nu);
  }
};

/// At step 1 the factor starts from its first estimate, not from zero. With
/// several updates of one factor (micro-batches), the first one decays (or
/// overwrites) it and the others add their (1 − decay) share; each
/// contributes 1/updates of the new estimate. Runs every `every` steps.
/// Emits `callKernel(mode, scale)` under that condition: the rules of
/// pf.kfac.update_factor, which pf.kfac.update_layer_norm_factor shares.
template <class UpdateOp, class CallKernel>
LogicalResult emitFactorUpdate(RuntimeLowering &l, ConversionPatternRewriter &rewriter, UpdateOp op,
                               typename UpdateOp::Adaptor adaptor, CallKernel &&callKernel) {
  Location loc = op.getLoc();
  auto [rank, updates] = l.factorUpdates.lookup(op);
  // A per-call update (a pipeline stage function): the rank among the
  // step's updates is the micro-batch, known at run time.
  Value microbatch;
  if constexpr (std::is_same_v<UpdateOp, KFACUpdateFactorOp>) {
    microbatch = adaptor.getMicrobatch();
    if (microbatch)
      updates = int64_t(op.getUpdates());
  }
  double decay = op.getDecay().convertToDouble();
  FailureOr<Value> stepValue =
      l.readScalar(rewriter, op, op.getStep(), adaptor.getStep(), rewriter.getI64Type());
  if (failed(stepValue))
    return failure();
  Value step = *stepValue;
  Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, step,
                                      l.constI64(rewriter, loc, 1));
  Value firstMode =
      arith::SelectOp::create(rewriter, loc, first, l.constI32(rewriter, loc, PFRT_KFAC_OVERWRITE),
                              l.constI32(rewriter, loc, PFRT_KFAC_RUNNING_AVERAGE));
  Value laterMode = l.constI32(rewriter, loc, PFRT_KFAC_ACCUMULATE);
  double share = 1.0 / double(std::max<int64_t>(updates, 1));
  FailureOr<Value> due =
      dueFlag(l, rewriter, op, op.getDue(), adaptor.getDue(), step, int64_t(op.getEvery()));
  if (failed(due))
    return failure();
  double scale = op.getScale().convertToDouble() * share;
  Value firstScale = l.constF64(rewriter, loc, scale);
  // The same doubles as the updates after the first of one function.
  Value laterScale = arith::SelectOp::create(rewriter, loc, first, firstScale,
                                             l.constF64(rewriter, loc, scale * (1 - decay)));
  Value mode = rank == 0 ? firstMode : laterMode;
  Value scaleValue = rank == 0 ? firstScale : laterScale;
  if constexpr (std::is_same_v<UpdateOp, KFACUpdateFactorOp>) {
    if (microbatch) {
      FailureOr<Value> index =
          l.readScalar(rewriter, op, op.getMicrobatch(), microbatch, rewriter.getI64Type());
      if (failed(index))
        return failure();
      Value isFirstUpdate = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, *index,
                                                  l.constI64(rewriter, loc, 0));
      mode = arith::SelectOp::create(rewriter, loc, isFirstUpdate, firstMode, laterMode);
      scaleValue = arith::SelectOp::create(rewriter, loc, isFirstUpdate, firstScale, laterScale);
    }
  }
  // An embedding's factor A counts ids: no loss count.
  if constexpr (!std::is_same_v<UpdateOp, KFACUpdateEmbeddingFactorOp>) {
    if (Value countEntry = adaptor.getCount()) {
      // Gradients of a mean over `count` tokens: factor B needs count².
      // Read as the double pfrt_read_scalar gives (exact below 2^53).
      FailureOr<Value> count =
          l.readScalar(rewriter, op, op.getCount(), countEntry, rewriter.getF64Type());
      if (failed(count))
        return failure();
      scaleValue = arith::MulFOp::create(rewriter, loc, scaleValue,
                                         arith::MulFOp::create(rewriter, loc, *count, *count));
    }
  }
  if (failed(emitIf(rewriter, loc, *due, [&] { return callKernel(mode, scaleValue); })))
    return failure();
  rewriter.eraseOp(op);
  return success();
}

struct UpdateFactorPattern : RuntimePattern<KFACUpdateFactorOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACUpdateFactorOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    return emitFactorUpdate(l, rewriter, op, adaptor, [&](Value mode, Value scale) {
      return l.call(rewriter, op, "pfrt_kfac_factor",
                    {input, l.constI32(rewriter, loc, op.getBiasColumn()), scale, mode,
                     l.constF64(rewriter, loc, op.getDecay().convertToDouble()),
                     l.paramPtr(rewriter, loc, op.getFactorAttr())});
    });
  }
};

/// pfrt_kfac_layer_norm_factor under pf.kfac.update_factor's rules.
struct UpdateLayerNormFactorPattern : RuntimePattern<KFACUpdateLayerNormFactorOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACUpdateLayerNormFactorOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value input = adaptor.getInput(), outputGrad = adaptor.getOutputGrad();
    return emitFactorUpdate(l, rewriter, op, adaptor, [&](Value mode, Value scale) {
      return l.call(rewriter, op, "pfrt_kfac_layer_norm_factor",
                    {input, outputGrad,
                     l.constF64(rewriter, loc, op.getEpsilon().convertToDouble()), scale, mode,
                     l.constF64(rewriter, loc, op.getDecay().convertToDouble()),
                     l.paramPtr(rewriter, loc, op.getFactorAttr())});
    });
  }
};

/// pfrt_kfac_embedding_factor (token counts) under pf.kfac.update_factor's
/// rules.
struct UpdateEmbeddingFactorPattern : RuntimePattern<KFACUpdateEmbeddingFactorOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACUpdateEmbeddingFactorOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value ids = adaptor.getIds();
    return emitFactorUpdate(l, rewriter, op, adaptor, [&](Value mode, Value scale) {
      return l.call(rewriter, op, "pfrt_kfac_embedding_factor",
                    {ids, scale, mode, l.constF64(rewriter, loc, op.getDecay().convertToDouble()),
                     l.paramPtr(rewriter, loc, op.getFactorAttr())});
    });
  }
};

/// Rows scaled by A⁻¹'s diagonal, then B⁻¹: one call.
struct PreconditionEmbeddingPattern : RuntimePattern<KFACPreconditionEmbeddingOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACPreconditionEmbeddingOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    Value update = l.entryOf(rewriter, loc, op.getWeightUpdate());
    if (failed(l.call(rewriter, op, "pfrt_kfac_precondition_embedding",
                      {adaptor.getAInverse(), adaptor.getBInverse(), adaptor.getWeightGrad(),
                       l.constI32(rewriter, loc, 0) /*[vocab, h]*/, update})))
      return failure();
    replaceByEntries(rewriter, op, update);
    return success();
  }
};

/// Each feature's damped 2x2 (or diagonal) solve, one call.
struct PreconditionLayerNormPattern : RuntimePattern<KFACPreconditionLayerNormOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACPreconditionLayerNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    FailureOr<Value> damping =
        l.readScalar(rewriter, op, op.getDamping(), adaptor.getDamping(), rewriter.getF64Type());
    if (failed(damping))
      return failure();
    Value scaleUpdate = l.entryOf(rewriter, loc, op.getScaleUpdate());
    Value biasUpdate = l.entryOf(rewriter, loc, op.getBiasUpdate());
    if (failed(l.call(rewriter, op, "pfrt_kfac_precondition_layer_norm",
                      {adaptor.getFactor(), *damping, adaptor.getScaleGrad(), adaptor.getBiasGrad(),
                       scaleUpdate, biasUpdate})))
      return failure();
    replaceByEntries(rewriter, op, {scaleUpdate, biasUpdate});
    return success();
  }
};

/// Damped inverses every `every` steps and on each of the first `warmup`
/// steps; the outcome tensor holds PFRT_KFAC_INVERTED on the others.
struct RefreshInversesPattern : RuntimePattern<KFACRefreshInversesOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult matchAndRewrite(KFACRefreshInversesOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = lowering;
    Location loc = op.getLoc();
    FailureOr<Value> stepValue =
        l.readScalar(rewriter, op, op.getStep(), adaptor.getStep(), rewriter.getI64Type());
    if (failed(stepValue))
      return failure();
    Value step = *stepValue;
    FailureOr<Value> dueValue =
        dueFlag(l, rewriter, op, op.getDue(), adaptor.getDue(), step, int64_t(op.getEvery()));
    if (failed(dueValue))
      return failure();
    Value due = *dueValue;
    if (int64_t warmup = op.getWarmup(); !adaptor.getDue() && warmup > 0) {
      Value early = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sle, step,
                                          l.constI64(rewriter, loc, warmup));
      due = arith::OrIOp::create(rewriter, loc, due, early);
    }
    // The kernels report the outcome into host memory; the outcome tensor
    // (which may be device memory) gets it by pfrt_fill after the branch.
    Value outcomeEntry = l.entryOf(rewriter, loc, op.getOutcome());
    Value outcome = l.scratchI32(rewriter, loc);
    LLVM::StoreOp::create(rewriter, loc, l.constI32(rewriter, loc, PFRT_KFAC_INVERTED), outcome);
    if (failed(emitIf(rewriter, loc, due, [&] {
          if (op.getAValuesAttr())
            return l.call(rewriter, op, "pfrt_kfac_eigen_refresh",
                          {l.paramPtr(rewriter, loc, op.getFactorAAttr()),
                           l.paramPtr(rewriter, loc, op.getFactorBAttr()),
                           l.paramPtr(rewriter, loc, op.getAInverseAttr()),
                           l.paramPtr(rewriter, loc, op.getAValuesAttr()),
                           l.paramPtr(rewriter, loc, op.getBInverseAttr()),
                           l.paramPtr(rewriter, loc, op.getBValuesAttr()), outcome});
          // λ: the host's per-step value (a damping schedule) or the attribute.
          Value damping = l.constF64(rewriter, loc, op.getDamping().convertToDouble());
          if (adaptor.getDampingValue()) {
            FailureOr<Value> given = l.readScalar(rewriter, op, op.getDampingValue(),
                                                  adaptor.getDampingValue(), rewriter.getF64Type());
            if (failed(given))
              return failure();
            damping = *given;
          }
          // A 1-D factor A is an embedding's diagonal.
          int64_t factorA = l.plan.paramTensor.lookup(op.getFactorA());
          bool diagonal = l.plan.tensors[factorA].type.getRank() == 1;
          return l.call(rewriter, op,
                        diagonal ? "pfrt_kfac_embedding_inverses" : "pfrt_kfac_damped_inverses",
                        {l.paramPtr(rewriter, loc, op.getFactorAAttr()),
                         l.paramPtr(rewriter, loc, op.getFactorBAttr()), damping,
                         l.constI32(rewriter, loc, int64_t(op.getRetries())),
                         l.paramPtr(rewriter, loc, op.getAInverseAttr()),
                         l.paramPtr(rewriter, loc, op.getBInverseAttr()), outcome});
        })))
      return failure();
    Value reported = arith::SIToFPOp::create(
        rewriter, loc, rewriter.getF64Type(),
        LLVM::LoadOp::create(rewriter, loc, rewriter.getI32Type(), outcome));
    if (failed(l.call(rewriter, op, "pfrt_fill", {outcomeEntry, reported})))
      return failure();
    replaceByEntries(rewriter, op, outcomeEntry);
    return success();
  }
};

/// The runtime call of each preconditioning op and its arguments before the
/// gradients: the inverses, or the eigenbases and the damping.
StringRef calleeOf(KFACPreconditionOp) { return "pfrt_kfac_precondition"; }
StringRef calleeOf(KFACPreconditionEigenOp) { return "pfrt_kfac_precondition_eigen"; }
FailureOr<SmallVector<Value>> leadingArguments(RuntimeLowering &, OpBuilder &, KFACPreconditionOp,
                                               KFACPreconditionOp::Adaptor adaptor) {
  return SmallVector<Value>{adaptor.getAInverse(), adaptor.getBInverse()};
}
FailureOr<SmallVector<Value>> leadingArguments(RuntimeLowering &l, OpBuilder &b,
                                               KFACPreconditionEigenOp op,
                                               KFACPreconditionEigenOp::Adaptor adaptor) {
  FailureOr<Value> damping =
      l.readScalar(b, op, op.getDamping(), adaptor.getDamping(), b.getF64Type());
  if (failed(damping))
    return failure();
  return SmallVector<Value>{adaptor.getAVectors(), adaptor.getAValues(), adaptor.getBVectors(),
                            adaptor.getBValues(), *damping};
}

/// pf.kfac.precondition and pf.kfac.precondition_eigen: one call writing
/// the weight (and bias) update: (leading..., grad_w, grad_b, layout, out_w,
/// out_b).
template <class PreconditionOp>
struct PreconditionPattern : RuntimePattern<PreconditionOp> {
  using RuntimePattern<PreconditionOp>::RuntimePattern;
  LogicalResult matchAndRewrite(PreconditionOp op, typename PreconditionOp::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RuntimeLowering &l = this->lowering;
    Location loc = op.getLoc();
    Value weightUpdate = l.entryOf(rewriter, loc, op.getWeightUpdate());
    Value biasUpdate = l.entryOf(rewriter, loc, op.getBiasUpdate());
    FailureOr<SmallVector<Value>> leading = leadingArguments(l, rewriter, op, adaptor);
    if (failed(leading))
      return failure();
    SmallVector<Value> arguments = std::move(*leading);
    arguments.append({adaptor.getWeightGrad(), l.orNull(rewriter, loc, adaptor.getBiasGrad()),
                      l.constI32(rewriter, loc, op.getWeightInOut() ? 0 : 1) /*1: [out, in]*/,
                      weightUpdate, biasUpdate});
    if (failed(l.call(rewriter, op, calleeOf(op), arguments)))
      return failure();
    SmallVector<Value> results{weightUpdate};
    if (op.getBiasUpdate())
      results.push_back(biasUpdate);
    this->replaceByEntries(rewriter, op, results);
    return success();
  }
};
} // namespace

void mlir::pf::populateKFACPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                    RewritePatternSet &patterns) {
  // pf.kfac.capture_output and pf.kfac.capture_layer_norm are views
  // (DataMovementPatterns.cpp).
  patterns.add<GraftPattern, KLClipPattern, UpdateFactorPattern, UpdateLayerNormFactorPattern,
               RefreshInversesPattern, PreconditionPattern<KFACPreconditionOp>,
               PreconditionPattern<KFACPreconditionEigenOp>, PreconditionLayerNormPattern,
               UpdateEmbeddingFactorPattern, PreconditionEmbeddingPattern>(
      converter, patterns.getContext(), lowering);
}
