//===- Kfac.h - K-FAC work placed into the bubbles (facade) -----*- C++ -*-===//
//
// K-FAC adds, per layer: curvature A and B per micro-batch (A piece i needs
// forward i of the layer, B piece i needs its backward i), inversion of A and
// of B (each needs that layer's curvature of the refresh), and preconditioning
// once per step (needs the layer's gradient). The inverses refresh every K
// steps; the work of one refresh is spread over a window of K steps, the
// bubbles of the pipeline first, the rest after the pipeline flush where it
// lengthens the step.
//
// Policies:
//  - pipefisher: the reference greedy (shared/reference/pipefisher.md).
//  - pf: our list scheduler (per-layer dependencies, priorities, splitting,
//    preconditioning inside bubbles, steady-state overlap, automatic K).
//
// This is the top of the K-FAC layers (see KfacProblem.h): it dispatches to
// the policies and turns their plan into a timeline; nothing below calls it.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_KFAC_H
#define PF_SCHEDULE_KFAC_H

#include "pf/Schedule/KfacProblem.h"

#include <string>

namespace pf::sched {

Expected<Policy> parsePolicy(const std::string &name);
const char *policyName(Policy policy);

/// Places the K-FAC work of `step` according to `options`.
Expected<KfacPlan> planKfac(const PipelineStep &step, const CostModel &costs,
                            const KfacOptions &options);

/// Builds the timeline of the whole refresh window.
Timeline assembleTimeline(const PipelineStep &step, const KfacPlan &plan);

/// Checks a window timeline: no two compute items overlap on a device, every
/// pipeline pass starts after its inputs, every K-FAC piece after its
/// dependencies, preconditioning inside its step, and all work is placed.
Status validateTimeline(const Timeline &timeline, const PipelineStep &step,
                        const CostModel &costs);

} // namespace pf::sched

#endif // PF_SCHEDULE_KFAC_H
