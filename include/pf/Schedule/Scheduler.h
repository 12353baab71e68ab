//===- Scheduler.h - One call from costs to a scheduled window --*- C++ -*-===//
//
// The entry point used by pf-sched and, later, the pf-schedule pass:
// partition the layers, build the pipeline program, simulate it, place the
// K-FAC work and report.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_SCHEDULER_H
#define PF_SCHEDULE_SCHEDULER_H

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Kfac.h"
#include "pf/Schedule/Partition.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Schedule/Report.h"
#include "pf/Schedule/Timeline.h"

namespace pf::sched {

struct ScheduleRequest {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int devices = 0;      ///< pipeline depth D (Chimera: both pipelines)
  int microbatches = 0; ///< N per step (Chimera: N/2 per direction)
  int chunks = 2;       ///< interleaved: model chunks per device
  /// Layers per stage; 0 lets the min-max partitioner decide.
  int layersPerStage = 0;
  KfacOptions kfac;
};

struct ScheduleResult {
  Partition partition;
  PipelineProgram program;
  PipelineStep step;
  KfacPlan plan;
  Timeline timeline;
  Report report;
};

Expected<ScheduleResult> runSchedule(const CostModel &costs,
                                     const ScheduleRequest &request);

} // namespace pf::sched

#endif // PF_SCHEDULE_SCHEDULER_H
