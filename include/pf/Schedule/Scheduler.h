//===- Scheduler.h - One call from costs to a scheduled window --*- C++ -*-===//
//
// The library's entry point, used by pf-sched and the pf-schedule pass:
// partition the layers (unless the caller did), build the pipeline program,
// simulate it, place the K-FAC work, assemble the window's timeline and
// report. Callers only read options and write results; the order of the
// steps and the checks between them live here.
//
// Top of the library's layers: it calls Partition, PipelineSchedules,
// Simulator, the K-FAC facade (Kfac.h), Validate and Report; nothing in the
// library calls it.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_SCHEDULER_H
#define PF_SCHEDULE_SCHEDULER_H

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Kfac.h"
#include "pf/Schedule/Memory.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Schedule/Report.h"
#include "pf/Schedule/Timeline.h"

#include <string>
#include <vector>

namespace pf::sched {

struct ScheduleRequest {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  /// Pipeline depth D (Chimera: both pipelines). With `stageLayers`, 0 derives
  /// it from the number of stages (interleaved: stages / chunks).
  int devices = 0;
  int microbatches = 0; ///< N per step (Chimera: N/2 per direction)
  int chunks = 2;       ///< interleaved: model chunks per device
  /// Layers per stage; 0 lets the min-max partitioner decide.
  int layersPerStage = 0;
  /// The layers of every stage when the caller has partitioned already
  /// (pf-partition); empty: the library partitions. Excludes layersPerStage.
  std::vector<std::vector<int>> stageLayers;
  /// kind Imported: the order to run (its layout gives D, N and the stages;
  /// devices and microbatches must be 0 or agree). Not owned.
  const PipelineProgram *imported = nullptr;
  KfacOptions kfac;
  /// Let devices that idle more run inversions of other devices' layers
  /// (KfacOffload.h; one-pipeline schedules). The moves are in
  /// ScheduleResult::step.kfacMoves.
  bool kfacOffload = false;
  /// Optimizer state and the per-device cap; whether K-FAC memory counts
  /// follows kfac.policy.
  MemoryOptions memory;
  /// Check the window timeline (validateTimeline); a failure is an error.
  bool validate = false;
};

struct ScheduleResult {
  PipelineProgram program; ///< its layout holds the stages' layers
  PipelineStep step;
  KfacPlan plan;
  Timeline timeline;
  Report report;
};

/// Schedules one refresh window of `costs` as `request` asks. Bad requests
/// (impossible shapes, conflicting options, invalid K-FAC options) come back
/// as errors naming what is wrong.
Expected<ScheduleResult> schedulePipeline(const CostModel &costs,
                                          const ScheduleRequest &request);

/// Files to write from a result; an empty path is not written.
struct ScheduleOutputs {
  std::string reportJson;
  std::string chromeTrace;
  std::string svg;
};

/// Writes the report JSON, the Chrome trace and the SVG, in that order;
/// stops at the first file that cannot be written.
Status writeScheduleOutputs(const ScheduleResult &result,
                            const ScheduleOutputs &outputs);

} // namespace pf::sched

#endif // PF_SCHEDULE_SCHEDULER_H
