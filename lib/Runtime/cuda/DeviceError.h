//===- DeviceError.h - Errors kernels find, reported at the next host wait -*- C++ -*-===//
//
// Some argument checks need the data: gather's indices in range, integer
// divisors non-zero, a finite norm for gradient clipping, cross-entropy
// labels in range. The CPU backend
// checks before it writes; the CUDA backend doing the same would wait for
// the GPU in every such call. Instead the kernels note the first bad element
// in the context's DeviceError (one record in device memory), carry on
// without reading or writing out of bounds (the outputs of the failing call
// are then unspecified), and the next host wait of the context
// (pfrt_synchronize, pfrt_copy_to_host) reads the record and fails with the
// CPU backend's message and status, named after the kernel that found it.
// The first error in stream order wins; reading it clears it.
//
// The record and the message are plain C++ (CudaMathTest checks the
// messages against the CPU backend's); the device half is below.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_DEVICEERROR_H
#define PF_RUNTIME_CUDA_DEVICEERROR_H

#include "../common/Call.h"
#include "HostDevice.h"

namespace pfrt::cuda {

/// Which check failed (and so which message a DeviceError gives).
enum class DeviceCheck : int32_t {
  None,
  GatherIndex,         ///< pfrt_gather: element, value, axis, size
  GatherBackwardIndex, ///< pfrt_gather_backward: element, value, axis, size
  IntegerDivision,     ///< pfrt_div: element of b
  ClipNorm,            ///< pfrt_clip_by_global_norm: the norm in `real`
  CrossEntropyLabel,   ///< pfrt_softmax_cross_entropy: row (element), label
                       ///< (value), vocabulary (size), ignore_index (axis)
};

/// Zero-initialized = nothing recorded.
struct DeviceError {
  int32_t status; ///< a pfrt_status; PFRT_OK while nothing is recorded
  DeviceCheck check;
  int64_t element, value, axis, size;
  double real;
  /// The running check's first bad element as ~element (0: none), so that
  /// an atomic max keeps the smallest element, as the CPU's first-failure
  /// scan reports it.
  unsigned long long pending;
};

PFRT_HD unsigned long long pendingKey(int64_t element) {
  return ~static_cast<unsigned long long>(element);
}
PFRT_HD int64_t pendingElement(unsigned long long key) { return static_cast<int64_t>(~key); }

/// Turns the pending element into the record (unless an earlier error is
/// recorded) and clears it; `value` is the element's value where the
/// message shows it.
PFRT_HD void settlePending(DeviceError &e, int32_t status, DeviceCheck check, int64_t value,
                           int64_t axis, int64_t size) {
  if (e.pending == 0)
    return;
  if (e.status == PFRT_OK) {
    e.status = status;
    e.check = check;
    e.element = pendingElement(e.pending);
    e.value = value;
    e.axis = axis;
    e.size = size;
  }
  e.pending = 0;
}

/// Records a failure that carries a real number (unless an earlier error
/// is recorded).
PFRT_HD void recordReal(DeviceError &e, int32_t status, DeviceCheck check, double real) {
  if (e.status != PFRT_OK)
    return;
  e.status = status;
  e.check = check;
  e.real = real;
}

/// Fails with the CPU backend's status and message for the recorded error
/// (cpu/DataMovement.cpp, cpu/Backward.cpp, cpu/Elementwise.cpp,
/// cpu/Optimizer.cpp); PFRT_OK when nothing is recorded.
inline pfrt_status reportDeviceError(pfrt_context *ctx, const DeviceError &e) {
  const auto code = static_cast<pfrt_status>(e.status);
  const long long element = e.element, value = e.value, size = e.size;
  const int axis = static_cast<int>(e.axis);
  switch (e.check) {
  case DeviceCheck::GatherIndex:
    return Call(ctx, "pfrt_gather")
        .fail(code, "index %lld (element %lld of indices) is out of range for axis %d of size %lld",
              value, element, axis, size);
  case DeviceCheck::GatherBackwardIndex:
    return Call(ctx, "pfrt_gather_backward")
        .fail(code, "index %lld (element %lld) is out of range for axis %d of size %lld", value,
              element, axis, size);
  case DeviceCheck::IntegerDivision:
    return Call(ctx, "pfrt_div")
        .fail(code, "integer division by zero (element %lld of b)", element);
  case DeviceCheck::CrossEntropyLabel:
    return Call(ctx, "pfrt_softmax_cross_entropy")
        .fail(code, "label %lld (row %lld) is outside [0, %lld) and is not the ignore_index %lld",
              value, element, size, static_cast<long long>(e.axis));
  case DeviceCheck::ClipNorm:
    return Call(ctx, "pfrt_clip_by_global_norm")
        .fail(code, "the global gradient norm is %g; the gradients were left unscaled", e.real);
  case DeviceCheck::None:
    break;
  }
  if (code == PFRT_OK)
    return PFRT_OK;
  return Call(ctx, "pfrt_synchronize").fail(PFRT_INTERNAL, "a kernel recorded an unknown error");
}

#ifdef __CUDACC__
/// Notes element `element` as bad for the running check (any thread).
__device__ inline void noteBadElement(DeviceError *e, int64_t element) {
  atomicMax(&e->pending, pendingKey(element));
}

/// One thread: settles the pending element, reading its value from
/// `values` (may be null).
template <class I>
__global__ void settleCheckKernel(DeviceError *e, int32_t status, DeviceCheck check,
                                  const I *values, int64_t axis, int64_t size) {
  if (e->pending == 0)
    return;
  const int64_t value = values ? static_cast<int64_t>(values[pendingElement(e->pending)]) : 0;
  settlePending(*e, status, check, value, axis, size);
}
#endif

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_DEVICEERROR_H
