//===- PFStageValues.h - the names of a stage function's values -*- C++ -*-===//
//
// pf-split-stages names each argument and result of a stage function with a
// `pf.name`. The values handed from one stage call to another (the stage
// values) are SSA values of a pf.rank_program; their names remain only to
// bind a call's operands and results to the function's arguments and results,
// and for diagnostics, traces and the single-process stage runner. This
// header is the one list of those prefixes.
//
//===----------------------------------------------------------------------===//
#ifndef PF_DIALECT_PF_IR_PFSTAGEVALUES_H
#define PF_DIALECT_PF_IR_PFSTAGEVALUES_H

#include "pf/Support/StepNames.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace mlir::pf {

/// A forward's activation for the next stage.
inline constexpr llvm::StringLiteral kActivationPrefix = kActivationPrefixText;
/// A forward's activation kept for its own backward.
inline constexpr llvm::StringLiteral kSavedPrefix = kSavedPrefixText;
/// A backward's activation gradient for the previous stage.
inline constexpr llvm::StringLiteral kActivationGradientPrefix = kActivationGradientPrefixText;
/// A backward_input's value for its backward_weight half.
inline constexpr llvm::StringLiteral kWeightSavedPrefix = kWeightSavedPrefixText;
/// A pass's layer input for its K-FAC factor calls.
inline constexpr llvm::StringLiteral kKfacInputPrefix = kKfacInputPrefixText;

/// A forward's loss of its micro-batch (an f32 scalar), and its running
/// count-weighted sum, which the last stage's accumulate calls return where
/// one rank runs every micro-batch of that stage.
inline constexpr llvm::StringLiteral kLossName = kLossNameText;
inline constexpr llvm::StringLiteral kLossSumName = kLossSumNameText;

/// Not a stage value: the i32 result of a K-FAC refresh (the inverses that
/// needed more damping or kept the previous ones), which the host reads.
inline constexpr llvm::StringLiteral kKfacIssuesName = kKfacIssuesOutput;

/// A backward's gradient of a parameter, one piece per micro-batch:
/// `grad/<parameter>`.
inline constexpr llvm::StringLiteral kGradientPrefix = kGradientPrefixText;
/// The running count-weighted sum of a gradient's pieces that the
/// accumulate calls of pf-build-rank-programs return: `grad_sum/<parameter>`.
inline constexpr llvm::StringLiteral kGradientSumPrefix = kGradientSumPrefixText;
/// The first of two same-rank stages' pieces of one gradient (the V's tied
/// embedding), which the last stage's accumulate call adds:
/// `grad_part/<parameter>`.
inline constexpr llvm::StringLiteral kGradientPartPrefix = kGradientPartPrefixText;

/// Whether `name` is a stage value (StepNames.h: the one list, shared with
/// the LLVM-free rank runtime).
inline bool isStageValueName(llvm::StringRef name) {
  return isStageValueText(std::string_view(name.data(), name.size()));
}

/// A stage value that continues from one micro-batch's accumulate call to
/// the next (its operand is the previous call's result, not a value of the
/// call's own micro-batch).
inline bool isRunningSumName(llvm::StringRef name) {
  return name == kLossSumName || name.starts_with(kGradientSumPrefix);
}

/// What crosses ranks (pf.send_act / pf.recv_act).
inline bool isTransferredName(llvm::StringRef name) {
  return name.starts_with(kActivationPrefix) || name.starts_with(kActivationGradientPrefix);
}

/// An activation a forward keeps for its backward (a saved/*, or a
/// backward_input's wsaved/* for its weight half): what occupies a
/// micro-batch's activation slot.
inline bool isSavedActivationName(llvm::StringRef name) {
  return name.starts_with(kSavedPrefix) || name.starts_with(kWeightSavedPrefix);
}

/// `grad_sum/<p>` of `grad/<p>`.
inline std::string gradientSumName(llvm::StringRef gradient) {
  return (kGradientSumPrefix + gradient.drop_front(kGradientPrefix.size())).str();
}
/// The running sum an accumulate call returns for one of its pieces:
/// `grad_sum/<p>` of `grad/<p>`, `loss_sum` of `loss`.
inline std::string runningSumName(llvm::StringRef piece) {
  return piece == kLossName ? kLossSumName.str() : gradientSumName(piece);
}
/// The piece whose running sum `sum` is (runningSumName's inverse).
inline std::string pieceOfRunningSum(llvm::StringRef sum) {
  if (sum == kLossSumName)
    return kLossName.str();
  return (kGradientPrefix + sum.drop_front(kGradientSumPrefix.size())).str();
}
/// `grad_part/<p>` of `grad/<p>`.
inline std::string gradientPartName(llvm::StringRef gradient) {
  return (kGradientPartPrefix + gradient.drop_front(kGradientPrefix.size())).str();
}

} // namespace mlir::pf

#endif // PF_DIALECT_PF_IR_PFSTAGEVALUES_H
