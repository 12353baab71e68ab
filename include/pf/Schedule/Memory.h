//===- Memory.h - Peak memory of every device under a schedule --*- C++ -*-===//
//
// What a device holds at its peak in one training step: the activations its
// forwards saved for backwards that have not run yet (in-flight micro-batches
// times the saved bytes of its stages), and, for every stage copy it holds,
// parameters, gradients, optimizer state and the K-FAC factors and inverses.
// The in-flight count comes from the schedule's own order, so every schedule
// (and an imported one) is measured the same way.
//
// Layer "pipeline" (docs/schedule.md): uses CostModel.h and Pipeline.h.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_MEMORY_H
#define PF_SCHEDULE_MEMORY_H

#include "pf/Schedule/CostModel.h"
#include "pf/Schedule/Pipeline.h"
#include "pf/Support/Status.h"

#include <limits>
#include <string>
#include <vector>

namespace pf::sched {

/// fp32 everywhere (pf trains in fp32; K-FAC factors must stay fp32).
constexpr double kBytesPerElement = 4;

struct MemoryOptions {
  /// Optimizer state per parameter, in parameter copies (AdamW: m and v = 2;
  /// SGD with momentum 1; plain SGD 0).
  double optimizerStates = 2;
  /// Count the K-FAC factors and their inverses (false without K-FAC).
  bool kfac = true;
  /// Bytes per device; a schedule whose peak exceeds it on any device is
  /// refused (schedulePipeline). Infinite: no cap.
  double capBytes = std::numeric_limits<double>::infinity();
};

/// Peak memory of one device, bytes.
struct DeviceMemory {
  int device = 0;
  /// Peak over the step of the micro-batches whose activations the device
  /// holds, counting a micro-batch that has passed through k of the device's
  /// n stages of its pipe as k/n (interleaved, V: n > 1).
  double inFlightMicrobatches = 0;
  /// Peak of stage passes holding activations (forwards whose backward, or
  /// W for a split backward, has not run), whatever their stage.
  int inFlightPasses = 0;
  double activationBytes = 0; ///< at the peak, not the sum of the peaks
  double parameterBytes = 0;  ///< every stage copy held (Chimera, DualPipe: two)
  double gradientBytes = 0;   ///< one fp32 gradient per parameter
  double optimizerBytes = 0;  ///< MemoryOptions::optimizerStates x parameters
  double kfacBytes = 0;       ///< factors A, B and their inverses

  double totalBytes() const {
    return activationBytes + parameterBytes + gradientBytes + optimizerBytes +
           kfacBytes;
  }
};

/// Peak in-flight counts and bytes of every device of `program`. Without
/// memory fields in the cost model (CostModel::hasMemory) the bytes are 0 and
/// the in-flight counts are still exact.
std::vector<DeviceMemory> computeMemory(const PipelineProgram &program,
                                        const CostModel &costs,
                                        const MemoryOptions &options);

/// Peak number of micro-batches each stage holds activations for, the
/// largest over its copies (Chimera, DualPipe: one per pipe).
std::vector<int> stageInFlightPeaks(const PipelineProgram &program);

/// Bytes of the K-FAC factors and inverses of one layer: 2 x (A + B), fp32.
double kfacBytesOf(const LayerMemory &layer);

/// An error naming the schedule, every device over `options.capBytes`, what
/// it needs and by how much it exceeds the cap; success when all fit.
Status checkMemoryCap(const std::vector<DeviceMemory> &memory,
                      const MemoryOptions &options, const std::string &schedule);

/// "12.35 GB" (GB = 1e9 bytes), for messages and reports.
std::string formatGigabytes(double bytes);

} // namespace pf::sched

#endif // PF_SCHEDULE_MEMORY_H
