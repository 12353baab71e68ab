//===- Report.h - Figures, trace and picture of a schedule ------*- C++ -*-===//
//
// Turns a refresh-window timeline into the numbers the paper reports
// (utilization without and with K-FAC, bubble share, steps per refresh, work
// outside the bubbles), a Chrome-trace / Perfetto JSON and an SVG timeline in
// the style of the PipeFisher figure.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_REPORT_H
#define PF_SCHEDULE_REPORT_H

#include "pf/Schedule/Kfac.h"
#include "pf/Schedule/Memory.h"
#include "pf/Support/Status.h"
#include "pf/Schedule/Timeline.h"

#include <limits>
#include <string>
#include <vector>

namespace pf::sched {

struct DeviceReport {
  int device = 0;
  double pipelineBusyMs = 0; ///< per step
  double kfacBusyMs = 0;     ///< per window
  double kfacOutsideMs = 0;  ///< per window, placed after the flush
  double utilizationWithoutKfac = 0;
  double utilizationWithKfac = 0;
  DeviceMemory memory; ///< peak of one step (Memory.h)
};

struct Report {
  /// Replaces the composed title of the SVG and the trace's process name
  /// when set (measured timelines: "measured gpipe, ...").
  std::string title;
  std::string schedule;
  std::string policy;
  std::string costModel;
  int devices = 0;
  int stages = 0;
  int microbatches = 0;
  int layers = 0;
  int chunks = 1;
  std::vector<int> layersPerStage;

  double pipelineStepMs = 0; ///< T_pipe, the bare pipeline
  /// PipelineStep::steadyStep; 0 where unknown (measured runs).
  double pipelineSteadyStepMs = 0;
  double stepTimeMs = 0;     ///< mean step of the window with K-FAC
  double utilizationWithoutKfac = 0;
  double utilizationWithKfac = 0;
  double bubbleFraction = 0; ///< idle share of the bare pipeline step
  int refreshSteps = 0;      ///< K (0 without K-FAC)
  double overheadMs = 0;     ///< mean step lengthening by K-FAC work
  double overheadFraction = 0; ///< overheadMs / T_pipe
  double kfacWorkMs = 0;     ///< all devices, per window
  double kfacInBubblesMs = 0;
  double kfacOutsideMs = 0;
  double steadyStateMs = 0;  ///< inversion work of the previous refresh
  /// Lower bound on K from capacity: K-FAC work / bubble time of the busiest
  /// device (the reference's analytic bound).
  double refreshLowerBound = 0;
  /// What no placement can move (KfacPlan::unmovable), ms per step, and the
  /// mean step beyond T_pipe + it (ms; fraction of T_pipe + unmovable).
  double unmovableMs = 0;
  double overheadBeyondMs = 0;
  double overheadBeyondFraction = 0;
  /// The highest utilization with K-FAC a refresh common to all layers can
  /// reach within maxOverheadBeyond of the step T_pipe + unmovable: the
  /// busiest device's bubbles and flush time bound the refresh rate, the
  /// others idle the rest; and the mean refresh interval at that rate at
  /// T_pipe + unmovable.
  double utilizationLimit = 0;
  double refreshIntervalLimit = 0;
  double maxOverheadBeyond = 0;           ///< KfacOptions::maxOverheadBeyond
  std::string refreshChoice = "interval"; ///< KfacOptions::refresh
  /// Staggered refresh (RefreshShape): the window is the period; per layer
  /// the steps that start its refreshes. Mean interval = layers x period /
  /// refreshes (K when not staggered).
  bool staggered = false;
  double meanRefreshInterval = 0;
  std::vector<std::vector<int>> layerRefreshSteps;
  /// Chimera's preconditioning split in use, per layer (empty: default).
  std::vector<double> preconditionDownShare;
  double schedulerSeconds = 0;
  int windowsTried = 0; ///< K-FAC windows the policy evaluated
  bool usedReference = false; ///< pf adopted the reference greedy's window
  /// Whether the cost model gives bytes; without, only the in-flight counts
  /// of DeviceReport::memory mean something.
  bool memoryModelled = false;
  double optimizerStates = 0; ///< MemoryOptions::optimizerStates
  double memoryCapBytes = std::numeric_limits<double>::infinity(); ///< per device
  /// Set when the min-max partition exceeded the cap and a memory-aware one
  /// was used instead: what the excluded partition needed.
  std::string partitionNote;
  std::vector<DeviceReport> perDevice;
};

Report computeReport(const PipelineStep &step, const Timeline &timeline,
                     const KfacPlan &plan, const CostModel &costs,
                     const KfacOptions &options);

std::string reportToText(const Report &report);
std::string reportToJson(const Report &report);

/// Chrome trace event format (chrome://tracing, ui.perfetto.dev); times in us.
std::string timelineToChromeTrace(const Timeline &timeline,
                                  const Report &report);
/// One row per device (compute) with a thin communication lane below it.
std::string timelineToSvg(const Timeline &timeline, const Report &report);

/// Writes `text` to `path` atomically: into a new file next to it, renamed
/// over `path` once complete, so a failure leaves an existing file as it was.
Status writeTextFile(const std::string &path, const std::string &text);

} // namespace pf::sched

#endif // PF_SCHEDULE_REPORT_H
