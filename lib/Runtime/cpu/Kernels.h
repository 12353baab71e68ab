//===- Kernels.h - CPU helpers shared between kernel files -------*- C++ -*-===//

#ifndef PF_RUNTIME_CPU_KERNELS_H
#define PF_RUNTIME_CPU_KERNELS_H

#include "../common/Call.h"
#include "../common/Context.h"
#include "../common/Shape.h"

#include <cstdint>
#include <cstdlib>

namespace pfrt::cpu {

/// Copies x, broadcast to `outShape`, into `outData` (x's dtype). The caller
/// has checked that x broadcasts to outShape and that the buffers are valid.
/// A copy of a buffer onto itself is skipped.
void broadcastCopy(const pfrt_context *ctx, const pfrt_tensor &x,
                   const Shape &outShape, void *outData);

/// out (x's shape without the reduced dimensions, contiguous, x's dtype,
/// f32 or f64) = (accumulate ? out : 0) + alpha * the sum of x over the
/// dimensions flagged in isReduced (x.rank entries). Sums accumulate in
/// double in a fixed order (independent of the thread count).
void reduceSumInto(const pfrt_context *ctx, const pfrt_tensor &x,
                   const bool *isReduced, void *out, double alpha,
                   bool accumulate);

/// A kernel's heap workspace (64-byte aligned), freed on scope exit.
template <class T> class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(ptr); }

  /// Allocates n elements (n >= 0); on failure records OUT_OF_MEMORY on
  /// the call and returns it.
  pfrt_status allocate(const Call &call, int64_t n) {
    std::free(ptr);
    ptr = nullptr;
    const int64_t bytes = (n > 0 ? n : 1) * static_cast<int64_t>(sizeof(T));
    void *p = nullptr;
    if (n > INT64_MAX / 16 / static_cast<int64_t>(sizeof(T)) ||
        posix_memalign(&p, 64, static_cast<size_t>(bytes)) != 0 || !p)
      return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a workspace of "
                       "%lld bytes", static_cast<long long>(bytes));
    ptr = static_cast<T *>(p);
    return PFRT_OK;
  }
  T *data() const { return ptr; }
  T &operator[](int64_t i) const { return ptr[i]; }

private:
  T *ptr = nullptr;
};

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_KERNELS_H
