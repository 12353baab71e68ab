//===- Kernels.h - CPU helpers shared between kernel files -------*- C++ -*-===//

#ifndef PF_RUNTIME_CPU_KERNELS_H
#define PF_RUNTIME_CPU_KERNELS_H

#include "../common/Context.h"
#include "../common/Shape.h"

namespace pfrt::cpu {

/// Copies x, broadcast to `outShape`, into `outData` (x's dtype). The caller
/// has checked that x broadcasts to outShape and that the buffers are valid.
/// A copy of a buffer onto itself is skipped.
void broadcastCopy(const pfrt_context *ctx, const pfrt_tensor &x,
                   const Shape &outShape, void *outData);

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_KERNELS_H
