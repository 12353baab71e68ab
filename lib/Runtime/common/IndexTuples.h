//===- IndexTuples.h - GatherND / ScatterND geometry, shared -----*- C++ -*-===//
//
// Both backends check pfrt_gather_nd's and pfrt_scatter_nd's arguments and
// turn the index tuples into flat slice offsets the same way, with the same
// messages; only where the indices are read differs (the CUDA backend copies
// them to the host first).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_INDEXTUPLES_H
#define PF_RUNTIME_COMMON_INDEXTUPLES_H

#include "Call.h"

#include <vector>

namespace pfrt {

/// pfrt_gather_nd: out slice t is data slice `offsets[t]` (elements, within
/// its batch) of batch t / perBatch.
struct GatherNdPlan {
  std::vector<int64_t> offsets;
  int64_t batchSize = 0; ///< elements of data per batch
  int64_t perBatch = 0;  ///< tuples per batch
  int64_t slice = 0;     ///< elements per slice
};

/// Checks the arguments (the shapes, dtypes and batch_dims of pfrt.h) and
/// reads the tuples from `hostIndices`, the indices' elements in host
/// memory (indices->data itself on the CPU).
pfrt_status planGatherNd(const Call &call, const pfrt_tensor *data, const pfrt_tensor *indices,
                         const void *hostIndices, int64_t batch_dims, const pfrt_tensor *out,
                         GatherNdPlan &plan);

/// pfrt_scatter_nd: update slice t goes to (or is combined into) out at
/// `offsets[t]` elements, in tuple order.
struct ScatterNdPlan {
  std::vector<int64_t> offsets;
  int64_t slice = 0; ///< elements per slice
};

pfrt_status planScatterNd(const Call &call, const pfrt_tensor *data, const pfrt_tensor *indices,
                          const void *hostIndices, const pfrt_tensor *updates, int32_t reduction,
                          const pfrt_tensor *out, ScatterNdPlan &plan);

/// pfrt_cumsum's checks: an f32/f64/i32/i64 x of rank >= 1 and an out like
/// it; `ax` the normalized axis.
pfrt_status checkCumsum(const Call &call, const pfrt_tensor *x, int64_t axis,
                        const pfrt_tensor *out, int32_t &ax);

/// pfrt_trilu's checks: x of rank >= 2 and an out like it.
pfrt_status checkTrilu(const Call &call, const pfrt_tensor *x, const pfrt_tensor *out);

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_INDEXTUPLES_H
