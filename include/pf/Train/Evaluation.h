//===- Evaluation.h - Held-out evaluation -----------------------*- C++ -*-===//
//
// --eval-every: the masked-LM loss of the current weights on the corpus'
// held-out rows, with fixed masks, by a forward-only model of its own (the
// same for both kinds of run: a pipelined run gathers the weights on rank
// 0). The adaptive damping schedule reuses the model for its forward pass.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRAIN_EVALUATION_H
#define PF_TRAIN_EVALUATION_H

#include "pf/Support/Model.h"
#include "pf/Train/Masking.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace mlir::pf::train {

/// The current weights by name: data and bytes ({nullptr, 0}: none such).
using WeightLookup = std::function<std::pair<const void *, int64_t>(const std::string &)>;

/// Loads the weights `current` names into the evaluation model.
::pf::Status loadEvaluationWeights(const WeightLookup &current, driver::Model &eval);

/// Loads the current weights into the evaluation model (the forward pass
/// and masked-LM loss at batch --batch) and returns the mean loss over the
/// held-out tokens.
::pf::Expected<double> evaluateHeldOut(const BatchMaker &batches, const WeightLookup &current,
                                       driver::Model &eval);

} // namespace mlir::pf::train

#endif // PF_TRAIN_EVALUATION_H
