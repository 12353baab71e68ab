//===- PFAttrNames.h - names of pf's discardable attributes -----*- C++ -*-===//
//
// The discardable `pf.*` attributes that pf writes or reads, by name (the
// runtime lowering's plan is `RuntimePlanAttr::kAttrName`, PFAttrs.td). The
// pf dialect verifies each of them (type, value
// range and which op may carry it) and rejects any other `pf.*` name, so a new
// attribute is added here and there together.
//
//===----------------------------------------------------------------------===//
#ifndef PF_DIALECT_PF_IR_PFATTRNAMES_H
#define PF_DIALECT_PF_IR_PFATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::pf {

/// The ONNX name of a value (non-empty string): on an op (its first result),
/// and on function arguments and results, which the host binds by it.
inline constexpr llvm::StringLiteral kNameAttrName = "pf.name";

/// Encoder block (non-negative i64) of an op that pf-partition placed in a
/// stage; pf-schedule reads it back.
inline constexpr llvm::StringLiteral kBlockAttrName = "pf.block";

/// Devices that run a `pf.stage` (non-negative i64 array, from pf-schedule).
inline constexpr llvm::StringLiteral kDevicesAttrName = "pf.devices";

/// On a `pf.param`: the encoder block it belongs to, when its name does not
/// say (non-negative i64, from pf-find-encoder-blocks).
inline constexpr llvm::StringLiteral kEncoderBlockAttrName = "pf.encoder_block";

/// On a `pf.param` that pf renamed (pf-name-weights): the initializer's name
/// in the ONNX file, which exports and messages may need.
inline constexpr llvm::StringLiteral kOnnxNameAttrName = "pf.onnx_name";
/// On a `pf.param`: the initializers of the ONNX file that held its
/// transpose and that pf-retie-weights tied back to it (string array).
inline constexpr llvm::StringLiteral kOnnxTransposedCopiesAttrName =
    "pf.onnx_transposed_copies";

/// On a K-FAC factor `pf.param`: the weight (and bias) parameter whose layer
/// the factor belongs to (pf-insert-kfac).
inline constexpr llvm::StringLiteral kKfacWeightAttrName = "pf.kfac_weight";
inline constexpr llvm::StringLiteral kKfacBiasAttrName = "pf.kfac_bias";
/// On a K-FAC factor `pf.param`: the layer reads its weight as [in, out]
/// (unit; absent: [out, in] through a transpose), so its gradient is
/// preconditioned in that layout.
inline constexpr llvm::StringLiteral kKfacWeightInOutAttrName = "pf.kfac_weight_in_out";
/// On a K-FAC inverse `pf.param` (`<weight>.kfac.A_inv_next`, `.B_inv_next`):
/// the inverse being computed in the bubbles for the next refresh window, the
/// inverse it replaces when `pf.kfac_promote_inverses` runs (unit). Not a
/// training state: checkpoints leave it out (it is recomputed on resume).
inline constexpr llvm::StringLiteral kKfacPendingAttrName = "pf.kfac_pending";

/// Module attributes of an imported model: the ONNX file, its opset and the
/// producer named in it.
inline constexpr llvm::StringLiteral kSourceAttrName = "pf.source";
inline constexpr llvm::StringLiteral kOnnxOpsetAttrName = "pf.onnx_opset";
inline constexpr llvm::StringLiteral kOnnxProducerAttrName = "pf.onnx_producer";

/// On a function: the micro-batches pf-split-microbatches split it into.
inline constexpr llvm::StringLiteral kMicrobatchesAttrName = "pf.microbatches";

/// On a scheduled `pf.pipeline`: pf-schedule's K-FAC policy, refresh window
/// (steps), simulated step time (ms) and device utilization.
inline constexpr llvm::StringLiteral kKfacPolicyAttrName = "pf.kfac_policy";
inline constexpr llvm::StringLiteral kRefreshStepsAttrName = "pf.refresh_steps";
inline constexpr llvm::StringLiteral kStepTimeMsAttrName = "pf.step_time_ms";
inline constexpr llvm::StringLiteral kUtilizationAttrName = "pf.utilization";

/// Tags of pf-build-gradients{tag-origin=true}, read by pf-split-stages: the
/// id (non-negative i64) of a differentiated forward op, the same id on each
/// op of its gradient rule, and the (unit) mark of a sum of partial gradients
/// of one value.
inline constexpr llvm::StringLiteral kGradIdAttrName = "pf.grad_id";
inline constexpr llvm::StringLiteral kGradOfAttrName = "pf.grad_of";
inline constexpr llvm::StringLiteral kGradSumAttrName = "pf.grad_sum";

/// On a stage function of pf-split-stages: its stage (non-negative i64) and
/// the encoder blocks it holds (non-empty i64 array; absent on a stage of the
/// embeddings or the head alone).
inline constexpr llvm::StringLiteral kStageAttrName = "pf.stage";
inline constexpr llvm::StringLiteral kStageBlocksAttrName = "pf.blocks";
/// On a stage function of pf-split-stages: the names of the units it holds
/// ("embeddings", "block<b>", "block<b>.attn", "block<b>.ffn", "head",
/// "head.transform", "head.decoder"; non-empty array of strings).
inline constexpr llvm::StringLiteral kStageUnitsAttrName = "pf.units";
/// On a K-FAC factor function of pf-outline-kfac-factors
/// (`stage<s>_kfac_factor_{a,b}_<l>`): the pass function (its name) whose
/// call of micro-batch m produces what the factor call of m reads; the
/// earliest point it may run.
inline constexpr llvm::StringLiteral kKfacAfterAttrName = "pf.kfac_after";
/// On a module split by pf-split-stages: the step's `grad/<param>` result
/// names in its result order (non-empty array of strings), the order of the
/// single-process global-norm sum.
inline constexpr llvm::StringLiteral kStepGradientsAttrName = "pf.step_gradients";
/// On a split module with pf-kfac-precondition's `stage<s>_precondition`
/// functions and KL-clipping: κ (a positive f64) and the K-FAC layers'
/// `grad/<param>` names in the single-process order of the KL-clip's
/// Σ⟨update, gradient⟩ (non-empty array of strings), which the per-rank
/// programs' pf.kfac_kl_clip repeats across ranks.
inline constexpr llvm::StringLiteral kKfacKLClipAttrName = "pf.kfac_kl_clip";
inline constexpr llvm::StringLiteral kKfacKLOrderAttrName = "pf.kfac_kl_order";

} // namespace mlir::pf

#endif // PF_DIALECT_PF_IR_PFATTRNAMES_H
