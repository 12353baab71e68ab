//===- KfacOffload.h - Inversions run by devices that idle more -*- C++ -*-===//
//
// When the stages' K-FAC work is uneven (stages of 1 and 2 blocks, or an
// FFN half holding most of a block's inversion), the busiest device sets the
// refresh interval while others idle. Distributed K-FAC systems assign
// inversions to workers; here a device with more idle time takes the
// inversion of another device's layer: the factor is sent to it after the
// layer's curvature, and the inverse sent back before the owner
// preconditions with it. Curvature stays with the activations it reads and
// preconditioning with the gradient.
//
// Part of layer 1 of the K-FAC code (KfacProblem.h): planKfacOffload chooses
// the moves (PipelineStep::kfacMoves) before any policy runs, and
// buildKfacProblem applies them to the tasks, so every policy places the
// moved inversions and the validator checks them like any other task.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_KFACOFFLOAD_H
#define PF_SCHEDULE_KFACOFFLOAD_H

#include "pf/Schedule/KfacProblem.h"

#include <string>
#include <vector>

namespace pf::sched {

/// ms to send one factor (A: in x in of every K-FAC linear of the layer, B:
/// out x out; 4 bytes an element) over the cost model's link (linkGBs), or,
/// without a link, its share of the layer's factor_allreduce; 0 when the
/// cost model models neither.
double factorTransferMs(const CostModel &costs, int layer, bool factorA);

/// Greedy balancing of the capacity bound: while the device with the largest
/// (curvature + inversion) / (bubble - preconditioning) of a step has a
/// factor whose inversion (with `curvature`: or its curvature and inversion)
/// lowers, moved to another device, the larger ratio of the two below that
/// largest ratio (by 0.1% at least), move the best such. One-pipeline
/// schedules only (Chimera and DualPipe already split inversions between
/// their replicas): empty otherwise.
std::vector<KfacMove> planKfacOffload(const PipelineStep &step, const CostModel &costs,
                                      bool curvature = true);

/// Moves the inversion tasks of `moves` to their helpers: each waits for
/// the factor transfer after its curvature (depLatency, drawn as a factor
/// sync on the owner's communication lane).
void applyKfacMoves(KfacProblem &problem, const std::vector<KfacMove> &moves);

/// Draws the inverses' way back: after the last piece of each moved
/// inversion, a factor sync of returnMs on the helper's communication lane
/// (split at step ends, wrapping to the window's start with a refresh lag).
void appendInverseReturns(Timeline &timeline, const PipelineStep &step);

/// Checks the way back of every moved inversion against a timeline: its
/// transfers take returnMs in all, and the inverse is back on the owner
/// before the first preconditioning of the layer that uses it (the next
/// window's, or the one after for an inversion finished as the previous
/// refresh). Transfers to the helper are checked as task dependencies.
Status checkInverseReturns(const Timeline &timeline, const std::vector<TimelineItem> &items,
                           const PipelineStep &step);

/// "block3.ffn inversion B: device 1 -> device 0 (factor 0.84 ms, inverse
/// 0.84 ms back)", one line per move.
std::string describeKfacMoves(const std::vector<KfacMove> &moves, const CostModel &costs);

} // namespace pf::sched

#endif // PF_SCHEDULE_KFACOFFLOAD_H
