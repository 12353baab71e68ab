//===- BroadcastLoop.h - Parallel runs over a BroadcastPlan ------*- C++ -*-===//

#ifndef PF_RUNTIME_CPU_BROADCASTLOOP_H
#define PF_RUNTIME_CPU_BROADCASTLOOP_H

#include "../common/Shape.h"
#include "Parallel.h"

namespace pfrt::cpu {

/// Longest run handed to one body call: long enough to vectorize well,
/// short enough that a flat (rank-1) plan still splits across threads.
constexpr int64_t kRunChunk = 16 * 1024;

/// Splits the plan's output into runs along its innermost dimension and
/// calls body(inputOffsets, outputOffset, length) for each, in parallel.
/// Offsets are in elements; within a run input k advances by
/// plan.strides[k][plan.rank - 1] (0 or 1) per element.
template <class Body>
void forEachRun(const pfrt_context *ctx, const BroadcastPlan &plan,
                Body &&body) {
  if (plan.numel == 0)
    return;
  const int32_t last = plan.rank - 1;
  const int64_t inner = plan.inner();
  const int64_t chunk = inner < kRunChunk ? inner : kRunChunk;
  const int64_t chunksPerRow = (inner + chunk - 1) / chunk;
  const int64_t rows = plan.numel / inner;
  parallelFor(ctx, rows * chunksPerRow, chunk, [&](int64_t task) {
    const int64_t row = task / chunksPerRow;
    const int64_t begin = (task % chunksPerRow) * chunk;
    const int64_t length = inner - begin < chunk ? inner - begin : chunk;
    int64_t offsets[BroadcastPlan::kMaxInputs] = {};
    int64_t rest = row;
    for (int32_t d = last - 1; d >= 0; --d) {
      const int64_t index = rest % plan.dims[d];
      rest /= plan.dims[d];
      for (int k = 0; k < plan.numInputs; ++k)
        offsets[k] += index * plan.strides[k][d];
    }
    for (int k = 0; k < plan.numInputs; ++k)
      offsets[k] += begin * plan.strides[k][last];
    body(offsets, row * inner + begin, length);
  });
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_BROADCASTLOOP_H
