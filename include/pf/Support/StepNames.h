//===- StepNames.h - Names of a step's results the host reads ---*- C++ -*-===//
//
// The results of a compiled step that host code reads by name, for both the
// compiler (pf/Dialect/PF/IR/PFStageValues.h) and the LLVM-free training
// loop and trainer.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_STEPNAMES_H
#define PF_SUPPORT_STEPNAMES_H

#include <string_view>

namespace mlir::pf {

/// The i32 result of a K-FAC refresh: the inverses that needed more damping
/// or kept the previous ones.
inline constexpr char kKfacIssuesOutput[] = "kfac/issues";

/// The prefixes and names of the stage values (PFStageValues.h says what
/// each is; its StringLiterals are these).
inline constexpr char kActivationPrefixText[] = "act/";
inline constexpr char kSavedPrefixText[] = "saved/";
inline constexpr char kActivationGradientPrefixText[] = "grad_act/";
inline constexpr char kWeightSavedPrefixText[] = "wsaved/";
inline constexpr char kKfacInputPrefixText[] = "kfac_in/";
inline constexpr char kLossNameText[] = "loss";
inline constexpr char kLossSumNameText[] = "loss_sum";
inline constexpr char kGradientPrefixText[] = "grad/";
inline constexpr char kGradientSumPrefixText[] = "grad_sum/";
inline constexpr char kGradientPartPrefixText[] = "grad_part/";

/// Whether `name` is a stage value: an operand or result of a per-micro-batch
/// pf.run_stage (forward, backward, accumulate, K-FAC factors). The once-per-
/// step calls (update, precondition, kfac_inverse) take the step's gradients
/// from the host, which they reach by pf.step_result.
inline bool isStageValueText(std::string_view name) {
  auto startsWith = [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; };
  return startsWith(kActivationPrefixText) || startsWith(kSavedPrefixText) ||
         startsWith(kActivationGradientPrefixText) || startsWith(kWeightSavedPrefixText) ||
         startsWith(kKfacInputPrefixText) || name == kLossNameText || name == kLossSumNameText ||
         startsWith(kGradientPrefixText) || startsWith(kGradientSumPrefixText) ||
         startsWith(kGradientPartPrefixText);
}

} // namespace mlir::pf

#endif // PF_SUPPORT_STEPNAMES_H
