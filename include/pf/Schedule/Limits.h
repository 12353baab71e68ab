//===- Limits.h - The largest requests the scheduler accepts ----*- C++ -*-===//
//
// Each bound keeps a what-if request to seconds and to memory that fits
// (larger ones would run for minutes or abort in the allocator); each is far
// above any real pipeline. Errors name the limit and the value refused;
// docs/limits.md lists them.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_LIMITS_H
#define PF_SCHEDULE_LIMITS_H

#include "pf/Support/Status.h"

#include <string>

namespace pf::sched {

/// Layers of a cost model (profile entries; BERT-large has 24).
constexpr int kMaxLayers = 4096;
/// Pipeline stages (devices x chunks for interleaved) and devices.
constexpr int kMaxStages = 1024;
/// Micro-batches per step.
constexpr int kMaxMicrobatches = 1024;
/// Layers x micro-batches: the work items of one step (a step of 4096 layers
/// and 64 micro-batches schedules in about 3 s).
constexpr long long kMaxLayerMicrobatches = 1 << 18;
/// Steps per K-FAC inverse refresh (--refresh-steps).
constexpr int kMaxRefreshSteps = 1024;
/// Pieces a K-FAC task may be split into (--split-pieces).
constexpr int kMaxSplitPieces = 1024;
/// One duration in a profile, in ms (about 11.6 days): sums over every layer,
/// micro-batch and step of a window stay finite.
constexpr double kMaxProfileTimeMs = 1e9;
/// One memory figure in a profile (bytes, parameters, a K-FAC width): sums
/// and squares over every layer and micro-batch stay finite.
constexpr double kMaxProfileQuantity = 1e15;

/// Success, or "<what> <value> exceeds the limit of <limit> (<limitName>)".
inline Status checkLimit(const std::string &what, long long value, long long limit,
                         const char *limitName) {
  if (value <= limit)
    return Status::success();
  return Status::error(what + " " + std::to_string(value) + " exceeds the limit of " +
                       std::to_string(limit) + " (" + limitName + ")");
}

} // namespace pf::sched

#endif // PF_SCHEDULE_LIMITS_H
