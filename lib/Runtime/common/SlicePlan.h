//===- SlicePlan.h - Slice and Transpose as strided views --------*- C++ -*-===//
//
// Backend-neutral: the CPU and CUDA slices and transposes both validate
// their arguments here and then copy out.shape elements from
// x.data + offset elements with the given per-dimension element strides.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_SLICEPLAN_H
#define PF_RUNTIME_COMMON_SLICEPLAN_H

#include "Call.h"

namespace pfrt {

/// Validates the slice arguments of pfrt_slice (pfrt.h) against x and
/// computes the result's shape, the element offset of its first element in
/// x and the element stride of each of its dimensions in x.
pfrt_status planSlice(const Call &call, const pfrt_tensor &x,
                      const int64_t *starts, const int64_t *ends,
                      const int64_t *axes, const int64_t *steps, int32_t n,
                      Shape &outShape, int64_t &offset,
                      int64_t strides[PFRT_MAX_RANK]);

/// Validates pfrt_transpose's permutation (none: the axes reversed) against
/// x and computes the result's shape and the element stride of each of its
/// dimensions in x.
pfrt_status planTranspose(const Call &call, const pfrt_tensor &x,
                          const int64_t *perm, int32_t numPerm,
                          Shape &outShape, int64_t strides[PFRT_MAX_RANK]);

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_SLICEPLAN_H
