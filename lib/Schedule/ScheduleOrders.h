//===- ScheduleOrders.h - Per-device orders of the newer schedules (private) -===//
//
// ZB-V and DualPipe(V) have closed-form orders built rank by rank
// (ZeroBubbleSchedules.cpp); PipelineSchedules.cpp dispatches to them.
//
//===----------------------------------------------------------------------===//

#ifndef PF_LIB_SCHEDULE_SCHEDULEORDERS_H
#define PF_LIB_SCHEDULE_SCHEDULEORDERS_H

#include "pf/Schedule/Pipeline.h"

#include <vector>

namespace pf::sched::detail {

using Order = std::vector<std::vector<PipelineOp>>;

/// ZB-V (Qi et al., section 6): device d holds stages d and 2D-1-d.
Order zbVOrder(const PipelineLayout &layout);
/// DualPipe (DeepSeek-V3): two replicas in opposite directions.
Order dualPipeOrder(const PipelineLayout &layout);
/// DualPipeV: DualPipe folded into one V-shaped pipeline.
Order dualPipeVOrder(const PipelineLayout &layout);

/// Sets layout.fullBackward from the Backward passes of a split order.
void markFullBackwards(PipelineLayout &layout, const Order &order);

} // namespace pf::sched::detail

#endif // PF_LIB_SCHEDULE_SCHEDULEORDERS_H
