//===- Shape.h - Shapes, broadcasting and axis helpers -----------*- C++ -*-===//
//
// Backend-neutral shape logic shared by all kernels: the CPU loops and a
// future CUDA backend consume the same plans.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_SHAPE_H
#define PF_RUNTIME_COMMON_SHAPE_H

#include "pf/Runtime/pfrt.h"

#include <cstdint>

namespace pfrt {

struct Shape {
  int32_t rank = 0;
  int64_t dims[PFRT_MAX_RANK] = {};

  static Shape of(const pfrt_tensor &t);
  int64_t numel() const;
  /// Appends a dimension; the caller has checked rank < PFRT_MAX_RANK.
  void push(int64_t d) { dims[rank++] = d; }
  bool operator==(const Shape &o) const;
  bool operator!=(const Shape &o) const { return !(*this == o); }
};

/// "[2, 3, 4]" for messages; fixed storage (room for 8 full-width int64
/// dimensions) so formatting cannot fail.
struct ShapeStr {
  char text[22 * PFRT_MAX_RANK + 4];
  explicit ShapeStr(const Shape &s);
  const char *c_str() const { return text; }
};

/// NumPy broadcast of a and b into out; false if some pair of dimensions is
/// neither equal nor contains a 1.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &out);
/// Whether `from` broadcasts to exactly `to` (unidirectional broadcasting).
bool broadcastsTo(const Shape &from, const Shape &to);

/// Row-major element strides of a shape.
void contiguousStrides(const Shape &s, int64_t strides[PFRT_MAX_RANK]);

/// Iteration plan of an output over up to three broadcast inputs. Output
/// dimensions of size 1 are dropped and neighbours that every input walks
/// contiguously are merged, so a same-shape add becomes one flat loop and
/// [B,S,H] + [H] becomes rows x H. The innermost input stride is always 0
/// (broadcast) or 1.
struct BroadcastPlan {
  static constexpr int kMaxInputs = 3;
  int32_t rank = 1; ///< >= 1
  int32_t numInputs = 0;
  int64_t dims[PFRT_MAX_RANK] = {};
  int64_t strides[kMaxInputs][PFRT_MAX_RANK] = {};
  int64_t numel = 0;

  int64_t inner() const { return dims[rank - 1]; }
};

/// Precondition: every input broadcasts to out.
BroadcastPlan planBroadcast(const Shape &out, const Shape *inputs,
                            int numInputs);

/// Linear index -> element offset over a row-major index space whose
/// dimensions have arbitrary strides (a sub-space of some tensor).
struct StridedIndex {
  int32_t rank = 0;
  int64_t dims[PFRT_MAX_RANK] = {};
  int64_t strides[PFRT_MAX_RANK] = {};

  void push(int64_t dim, int64_t stride) {
    dims[rank] = dim;
    strides[rank++] = stride;
  }
  int64_t count() const {
    int64_t n = 1;
    for (int32_t d = 0; d < rank; ++d)
      n *= dims[d];
    return n;
  }
  int64_t offset(int64_t linear) const {
    int64_t off = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      off += (linear % dims[d]) * strides[d];
      linear /= dims[d];
    }
    return off;
  }
};

/// Maps a possibly negative axis into [0, rank); false if out of range.
bool normalizeAxis(int64_t axis, int32_t rank, int32_t &out);

/// Product of dims[begin, end).
int64_t product(const Shape &s, int32_t begin, int32_t end);

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_SHAPE_H
