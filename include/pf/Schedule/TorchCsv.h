//===- TorchCsv.h - Schedules exchanged with torch.distributed.pipelining -*- C++ -*-===//
//
// PyTorch's pipelining schedules dump and load a compute-only action list
// as CSV (PipelineScheduleMulti._dump_csv / _load_csv): one row per rank,
// one cell per step, a cell "<stage><F|B|I|W><micro-batch>" (B a whole
// backward, I its input gradient, W its weight gradient), an empty cell an
// idle step, and "(<F action>;<B action>)OVERLAP_F_B" an overlapped pair
// (DualPipeV). pf reads such files into a PipelineProgram and writes its
// single-pipeline programs in the same form (docs/schedule.md).
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_TORCHCSV_H
#define PF_SCHEDULE_TORCHCSV_H

#include "pf/Schedule/Pipeline.h"
#include "pf/Support/Status.h"

#include <string>
#include <vector>

namespace pf::sched {

/// A schedule read from a CSV file.
struct ImportedSchedule {
  /// kind Imported; D from the rows, stages and micro-batches from the
  /// largest indices, the placement from where the stages run; no layers.
  PipelineProgram program;
  /// steps[rank][i]: the CSV column of program.order[rank][i] (both passes
  /// of an overlapped pair share one).
  std::vector<std::vector<int>> steps;
};

/// Parses `text` (`source` names it in errors). Malformed cells, actions
/// that are not compute actions, stages that fit no placement and an empty
/// file are errors naming the line (rank) and column (step).
Expected<ImportedSchedule> parseTorchCsv(const std::string &text,
                                         const std::string &source);
Expected<ImportedSchedule> loadTorchCsv(const std::string &path);

/// The program as PyTorch's compute-only CSV (no idle cells). Two-pipeline
/// schedules (Chimera, DualPipe) have no such form and are refused.
Expected<std::string> programToTorchCsv(const PipelineProgram &program);

} // namespace pf::sched

#endif // PF_SCHEDULE_TORCHCSV_H
