//===- KfacReports.h - Lines about K-FAC's inverse refreshes ----*- C++ -*-===//
#ifndef PF_TRAIN_KFACREPORTS_H
#define PF_TRAIN_KFACREPORTS_H

#include "pf/Support/Model.h"
#include "pf/Train/Checkpoint.h"

#include <vector>
#include <cstdint>
#include <set>
#include <string>

namespace mlir::pf::train {

/// A pipeline's line about K-FAC refreshes that needed more damping or kept
/// the previous inverse, with the ranks they happened on (`issuesOfRank`).
void printKfacIssues(int64_t step, const std::vector<double> &issuesOfRank);

/// After a single-process step: the line about its K-FAC refreshes that
/// needed more damping or kept the previous inverse (the step's kfac/issues
/// output), then reportNonFiniteFactors on `model`'s parameters.
::pf::Status reportStepKfacIssues(int64_t step, const Batch &outputs, driver::Model &model,
                                  std::set<std::string> &reported);

/// After a step whose K-FAC refreshes reported issues: names each factor
/// (`<w>.kfac.A`, `.B`) that holds NaN or Inf, once (`reported`). Its
/// layer's refreshes keep the last good inverse from then on, since a
/// running average that took in a NaN stays NaN; `where` prefixes the line
/// ("rank 1: ").
void reportNonFiniteFactors(int64_t step, const Parameters &parameters,
                            std::set<std::string> &reported, const std::string &where = "");

} // namespace mlir::pf::train

#endif // PF_TRAIN_KFACREPORTS_H
