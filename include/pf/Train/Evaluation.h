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

#include "pf/Driver/Runner.h"
#include "pf/Train/Masking.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mlir::pf::train {

struct TrainConfig;

/// The current weights by name: data and bytes ({nullptr, 0}: none such).
using WeightLookup = std::function<std::pair<const void *, int64_t>(const std::string &)>;

/// The forward pass and masked-LM loss at batch --batch over sequences of
/// `seqLen`, with its own copy of the weights.
llvm::Expected<std::unique_ptr<driver::CompiledModel>>
compileEvaluation(MLIRContext &context, const TrainConfig &config, int64_t seqLen);

/// Loads the weights `current` names into the evaluation model.
llvm::Error loadEvaluationWeights(const WeightLookup &current, driver::CompiledModel &eval);

/// Loads the current weights into the evaluation model and returns the mean
/// loss over the held-out tokens.
llvm::Expected<double> evaluateHeldOut(const BatchMaker &batches, const WeightLookup &current,
                                       driver::CompiledModel &eval);

} // namespace mlir::pf::train

#endif // PF_TRAIN_EVALUATION_H
