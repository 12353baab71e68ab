//===- Verify.h - Checks of a pipeline program before it runs ----*- C++ -*-===//
//
// verifyProgram checks any program, generated or imported, without costs:
// every pass on the device that holds its stage, in the form the layout
// says (whole or split backward), every micro-batch's forward and backward
// (input and weight gradient) exactly once per stage, and an order that
// respects the dependencies and cannot deadlock: the ranks' action lists are
// run as blocking programs with asynchronous sends (how PyTorch lowers the
// compute-only format), and some rank must always be able to proceed.
// Errors name the rank, the step and the action (PyTorch's notation).
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_VERIFY_H
#define PF_SCHEDULE_VERIFY_H

#include "pf/Schedule/Pipeline.h"
#include "pf/Support/Status.h"

#include <string>
#include <vector>

namespace pf::sched {

/// `steps[rank][i]`, when given, is the step reported for order[rank][i]
/// (an imported file's column); otherwise the index i.
Status verifyProgram(const PipelineProgram &program,
                     const std::vector<std::vector<int>> *steps = nullptr);

/// PyTorch's name of a pass: "3F1", "0I2", "5W0", "2B7".
std::string actionName(const PipelineOp &op);

} // namespace pf::sched

#endif // PF_SCHEDULE_VERIFY_H
