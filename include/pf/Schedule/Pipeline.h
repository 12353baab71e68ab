//===- Pipeline.h - Pipeline schedules as per-device programs ---*- C++ -*-===//
//
// A pipeline schedule is data: for every device, the ordered list of passes
// (forward / backward / input-gradient / weight-gradient of a stage and a
// micro-batch) it runs in one training step. The simulator (Timeline.h) turns
// such a program plus durations into start and end times.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_PIPELINE_H
#define PF_SCHEDULE_PIPELINE_H

#include "pf/Schedule/CostModel.h"
#include "pf/Support/Status.h"

#include <string>
#include <vector>

namespace pf::sched {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved,
  Chimera,
  ZBH1,
  ZBH2,      ///< zero bubble with more warm-up forwards, W passes in the tail
  ZBV,       ///< zero bubble, two chunks per device in a V
  DualPipe,  ///< DeepSeek's bidirectional pipeline (two replicas, like Chimera)
  DualPipeV, ///< DualPipe folded into a V: one pipeline, two chunks per device
  Imported,  ///< read from a schedule file (pf-sched --schedule-csv)
};

/// Where the stages of a pipeline live.
enum class Placement : unsigned char {
  Linear, ///< stage s on device s (pipe 1 of two: on device D-1-s)
  Looped, ///< stage s on device s mod D (interleaved)
  VShape, ///< stage s < D on device s, stage s >= D on device 2D-1-s
};

Expected<ScheduleKind> parseScheduleKind(const std::string &name);
const char *scheduleKindName(ScheduleKind kind);
/// All schedule names accepted by parseScheduleKind, for help texts.
std::string scheduleKindNames();

enum class PassKind : unsigned char {
  Forward,
  Backward,       ///< full backward (input and weight gradients)
  BackwardInput,  ///< zero-bubble "B": gradient w.r.t. the stage input
  BackwardWeight, ///< zero-bubble "W": gradient w.r.t. the stage weights
};

/// One pass of one pipeline stage over one micro-batch.
struct PipelineOp {
  PassKind pass;
  int stage;
  int micro;
  /// DualPipe: runs overlapped with the previous pass of the device (an F&B
  /// pair). The simulator runs the pair back to back; the flag keeps the
  /// pairing for export (PyTorch's OVERLAP_F_B).
  bool overlapsPrevious = false;
};

/// Where stages and micro-batches live.
struct PipelineLayout {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int devices = 0;
  /// Pipeline stages of one pipeline (D, or D*chunks for interleaved).
  int stages = 0;
  /// 1, or 2 for Chimera (pipe 0 runs "down" from device 0, pipe 1 "up").
  int pipes = 1;
  int microbatches = 0;
  int chunks = 1;
  Placement placement = Placement::Linear;
  /// Backward split into BackwardInput + BackwardWeight (zero-bubble kinds).
  bool splitBackward = false;
  /// Split layouts only: [stage * microbatches + micro] is 1 where the
  /// schedule runs that backward whole (DualPipe's backwards outside its
  /// zero-bubble phases); empty: every backward is split.
  std::vector<char> fullBackward;
  /// Layers (indices into the cost model) of each stage, shared by both pipes.
  std::vector<std::vector<int>> stageLayers;

  /// Pipe of a micro-batch: Chimera sends the first half down, the rest up.
  int pipeOf(int micro) const {
    return pipes == 2 && micro >= microbatches / 2 ? 1 : 0;
  }
  /// Device that runs `stage` of `pipe`.
  int deviceOf(int pipe, int stage) const {
    if (placement == Placement::Looped)
      return stage % devices;
    if (placement == Placement::VShape)
      return stage < devices ? stage : 2 * devices - 1 - stage;
    return pipe == 1 ? devices - 1 - stage : stage;
  }
  /// Whether the backward of (stage, micro) runs as BackwardInput +
  /// BackwardWeight.
  bool splitsBackward(int stage, int micro) const {
    return splitBackward &&
           (fullBackward.empty() || !fullBackward[stage * microbatches + micro]);
  }
  int numLayers() const;
  /// Stage holding `layer`.
  int stageOfLayer(int layer) const;
};

struct PipelineProgram {
  PipelineLayout layout;
  /// order[d]: the passes device d runs, in order.
  std::vector<std::vector<PipelineOp>> order;
};

struct PipelineConfig {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int devices = 0;
  int microbatches = 0;
  int chunks = 2; ///< interleaved only: model chunks (virtual stages) per device
  /// Imported only: the order read from a file (its layout's kind, devices,
  /// stages, micro-batches, placement and split); stageLayers come from here.
  const PipelineProgram *imported = nullptr;
  std::vector<std::vector<int>> stageLayers;
};

/// Number of pipeline stages a schedule uses on `devices` devices (ZB-V and
/// DualPipeV: two per device).
int stagesFor(ScheduleKind kind, int devices, int chunks);
/// Placement of a schedule's stages.
Placement placementOf(ScheduleKind kind);
/// Whether a schedule runs each backward as its input and weight halves (the
/// zero-bubble kinds and DualPipe(V)).
bool splitsBackward(ScheduleKind kind);

/// Checks what a schedule needs of D, N and the chunks (Chimera: even D and N;
/// interleaved: N a multiple of D; DualPipe: even D and N >= 2D, N even;
/// DualPipeV: N >= 2D), before any layer is assigned.
Status checkScheduleShape(ScheduleKind kind, int devices, int microbatches,
                          int chunks);

/// Checks the configuration (Chimera needs even D and N, interleaved needs
/// N divisible by D, ...) and builds each device's program. Chimera's order is
/// derived from the costs (see lib/Schedule/PipelineSchedules.cpp).
Expected<PipelineProgram> buildPipeline(const PipelineConfig &config,
                                        const CostModel &costs);

/// The order pf's pipelined executor runs (pf-build-rank-programs builds its
/// rank programs from it before anything is measured): `config` with one
/// layer per stage (its stageLayers are set here) and uniform passes, F = B =
/// W = 1 per stage. Only ZB-H2's list scheduling depends on the durations;
/// the measured-vs-simulated report replays this order for it.
Expected<PipelineProgram> buildUniformPipeline(PipelineConfig config);

} // namespace pf::sched

#endif // PF_SCHEDULE_PIPELINE_H
