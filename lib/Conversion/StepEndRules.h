//===- StepEndRules.h - formulas both step lowerings emit -------*- C++ -*-===//
//
// The step end's scalar formulas, emitted as arith ops by the single-process
// lowering (KFACPatterns.cpp) and by the rank-program lowering
// (RankProgramLowering.cpp), whose sums run over ranks: one copy of each.
//
//===----------------------------------------------------------------------===//

#ifndef PF_CONVERSION_STEPENDRULES_H
#define PF_CONVERSION_STEPENDRULES_H

#include "mlir/IR/Builders.h"

namespace mlir::pf {

/// K-FAC's KL-clip factor ν = min(1, sqrt(κ / (lr² Σ))) for Σ the sum of
/// ⟨update, gradient⟩, 1 when lr² Σ is not positive (f64 values; NaN
/// propagates through the minimum).
Value emitKLClipFactor(OpBuilder &b, Location loc, Value lr, Value sumOfDots, double kappa);

} // namespace mlir::pf

#endif // PF_CONVERSION_STEPENDRULES_H
