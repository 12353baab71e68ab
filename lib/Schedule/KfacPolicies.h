//===- KfacPolicies.h - The K-FAC placement policies (private) --*- C++ -*-===//
//
// Layer 3 of the K-FAC code (see pf/Schedule/KfacProblem.h): each policy
// builds its window from the problem and placement layers and returns the
// finished plan. Only the facade (Kfac.cpp) dispatches to them; planPF also
// runs planPipeFisher as its reference.
//
//===----------------------------------------------------------------------===//

#ifndef PF_LIB_SCHEDULE_KFACPOLICIES_H
#define PF_LIB_SCHEDULE_KFACPOLICIES_H

#include "pf/Schedule/KfacProblem.h"

namespace pf::sched::detail {

/// Pipefisher: the reference greedy (PolicyPipeFisher.cpp).
KfacPlan planPipeFisher(const PipelineStep &step, const CostModel &costs,
                        const KfacOptions &options);

/// pf: our list scheduler with automatic K (PolicyPF.cpp).
KfacPlan planPF(const PipelineStep &step, const CostModel &costs,
                const KfacOptions &options);

} // namespace pf::sched::detail

#endif // PF_LIB_SCHEDULE_KFACPOLICIES_H
