//===- Reduction.cpp - reduce_sum and reduce_mean over axis sets -----------===//
//
// The input is simplified first: unit dimensions are dropped and
// neighbouring dimensions that are both reduced or both kept are merged, so
// any axis set becomes alternating kept/reduced blocks. Then one of two
// loops applies, each with a contiguous, vectorizable innermost loop:
//  - the last block is reduced: every output is a sum of contiguous runs;
//  - the last block is kept: each output row accumulates whole input rows.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "Kernels.h"
#include "Parallel.h"

#include <limits>
#include <type_traits>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

/// Floating sums accumulate in double, integer sums in (wrapping) 64 bits.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <class T> T finish(Acc<T> acc, int64_t count, bool mean) {
  if (!mean)
    return static_cast<T>(acc);
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(acc / static_cast<double>(count));
  else // integer mean truncates; the mean of nothing is 0
    return count ? static_cast<T>(static_cast<int64_t>(acc) / count) : T(0);
}

/// The simplified problem: input offsets of the kept and reduced index
/// spaces; `lastReduced` says which one holds the unit-stride dimension,
/// whose length is `run` and which is not part of either map.
struct ReducePlan {
  StridedIndex kept, reduced;
  bool lastReduced = true;
  int64_t run = 1;
  int64_t reducedCount = 1; ///< elements summed into each output
};

ReducePlan planReduce(const Shape &x, const bool *isReduced) {
  int64_t strides[PFRT_MAX_RANK];
  contiguousStrides(x, strides);
  // Merge into blocks, outer to inner.
  int32_t rank = 0;
  int64_t dims[PFRT_MAX_RANK], blockStrides[PFRT_MAX_RANK];
  bool reduced[PFRT_MAX_RANK];
  for (int32_t i = 0; i < x.rank; ++i) {
    if (x.dims[i] == 1)
      continue;
    if (rank > 0 && reduced[rank - 1] == isReduced[i] &&
        blockStrides[rank - 1] == strides[i] * x.dims[i]) {
      dims[rank - 1] *= x.dims[i];
      blockStrides[rank - 1] = strides[i];
      continue;
    }
    dims[rank] = x.dims[i];
    blockStrides[rank] = strides[i];
    reduced[rank++] = isReduced[i];
  }
  ReducePlan plan;
  if (rank == 0) // one element
    return plan;
  plan.lastReduced = reduced[rank - 1];
  plan.run = dims[rank - 1];
  for (int32_t i = 0; i + 1 < rank; ++i)
    (reduced[i] ? plan.reduced : plan.kept).push(dims[i], blockStrides[i]);
  plan.reducedCount = plan.reduced.count() * (plan.lastReduced ? plan.run : 1);
  return plan;
}

/// Last block reduced: out[o] = sum of reduced.count() runs of `run`
/// contiguous elements.
template <class T, class Store>
void reduceRuns(const pfrt_context *ctx, const ReducePlan &plan, const T *x,
                Store store) {
  const int64_t outputs = plan.kept.count(), runs = plan.reduced.count();
  parallelFor(ctx, outputs, runs * plan.run, [&](int64_t o) {
    const T *base = x + plan.kept.offset(o);
    Acc<T> acc = 0;
    for (int64_t r = 0; r < runs; ++r) {
      const T *p = base + plan.reduced.offset(r);
      Acc<T> part = 0;
#pragma omp simd reduction(+ : part)
      for (int64_t j = 0; j < plan.run; ++j)
        part += static_cast<Acc<T>>(p[j]);
      acc += part;
    }
    store(o, acc);
  });
}

/// Columns of an output row accumulated together (a stack buffer).
constexpr int64_t kColumnTile = 2048;

/// Last block kept: each output row of `run` elements is the sum of the
/// reduced input rows; columns are tiled so that the accumulator stays on
/// the stack and a single wide row still splits across threads.
template <class T, class Store>
void reduceRows(const pfrt_context *ctx, const ReducePlan &plan, const T *x,
                Store store) {
  const int64_t rows = plan.kept.count(), runs = plan.reduced.count();
  const int64_t tiles = (plan.run + kColumnTile - 1) / kColumnTile;
  parallelFor(ctx, rows * tiles, runs * kColumnTile, [&](int64_t task) {
    const int64_t row = task / tiles, c0 = (task % tiles) * kColumnTile;
    const int64_t width =
        plan.run - c0 < kColumnTile ? plan.run - c0 : kColumnTile;
    Acc<T> acc[kColumnTile] = {};
    const T *base = x + plan.kept.offset(row) + c0;
    for (int64_t r = 0; r < runs; ++r) {
      const T *p = base + plan.reduced.offset(r);
      for (int64_t j = 0; j < width; ++j)
        acc[j] += static_cast<Acc<T>>(p[j]);
    }
    for (int64_t j = 0; j < width; ++j)
      store(row * plan.run + c0 + j, acc[j]);
  });
}

enum class Reduce { Sum, Mean, Max, Min };

/// max/min that keep a NaN once seen (as numpy's max/min do).
template <class T> struct Extreme {
  bool max;
  T identity() const {
    if constexpr (std::is_floating_point_v<T>)
      return max ? -std::numeric_limits<T>::infinity()
                 : std::numeric_limits<T>::infinity();
    else if constexpr (std::is_same_v<T, uint8_t>) // bool: any / all
      return max ? 0 : 1;
    else
      return max ? std::numeric_limits<T>::lowest()
                 : std::numeric_limits<T>::max();
  }
  T operator()(T acc, T v) const {
    if constexpr (std::is_floating_point_v<T>)
      if (v != v)
        return v;
    return (max ? v > acc : v < acc) ? v : acc;
  }
};

/// Max/min over the plan: each output walks its reduced elements (runs are
/// contiguous when the last block is reduced).
template <class T>
void reduceExtreme(const pfrt_context *ctx, const ReducePlan &plan,
                   const T *x, T *out, Extreme<T> pick) {
  const int64_t runs = plan.reduced.count();
  if (plan.lastReduced) {
    parallelFor(ctx, plan.kept.count(), runs * plan.run, [&](int64_t o) {
      const T *base = x + plan.kept.offset(o);
      T acc = pick.identity();
      for (int64_t r = 0; r < runs; ++r) {
        const T *p = base + plan.reduced.offset(r);
        for (int64_t j = 0; j < plan.run; ++j)
          acc = pick(acc, p[j]);
      }
      out[o] = acc;
    });
    return;
  }
  parallelFor(ctx, plan.kept.count(), runs * plan.run, [&](int64_t row) {
    T *po = out + row * plan.run;
    const T *base = x + plan.kept.offset(row);
    for (int64_t j = 0; j < plan.run; ++j)
      po[j] = pick.identity();
    for (int64_t r = 0; r < runs; ++r) {
      const T *p = base + plan.reduced.offset(r);
      for (int64_t j = 0; j < plan.run; ++j)
        po[j] = pick(po[j], p[j]);
    }
  });
}

pfrt_status reduceEntry(pfrt_context *ctx, const char *fn, Reduce kind,
                        const pfrt_tensor *x, const int64_t *axes,
                        int32_t numAxes, int32_t keepdims,
                        const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  const bool extreme = kind == Reduce::Max || kind == Reduce::Min;
  if (extreme)
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32,
                                   PFRT_I64, PFRT_BOOL}));
  else
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  if (numAxes < 0 || numAxes > PFRT_MAX_RANK)
    return call.fail(PFRT_INVALID_ARGUMENT, "num_axes %d is out of range",
                     numAxes);
  if (numAxes > 0)
    PFRT_TRY(call.pointer("axes", axes));
  bool isReduced[PFRT_MAX_RANK] = {};
  for (int32_t i = 0; i < numAxes; ++i) {
    int32_t ax;
    PFRT_TRY(call.axis("axis", axes[i], x->rank, ax));
    if (isReduced[ax])
      return call.fail(PFRT_INVALID_ARGUMENT, "axis %d is repeated", ax);
    isReduced[ax] = true;
  }
  if (numAxes == 0)
    for (int32_t i = 0; i < x->rank; ++i)
      isReduced[i] = true;
  Shape xShape = Shape::of(*x), expected;
  for (int32_t i = 0; i < x->rank; ++i)
    if (!isReduced[i])
      expected.push(x->shape[i]);
    else if (keepdims)
      expected.push(1);
  PFRT_TRY(call.shapeIs("out", out, expected));
  if (expected.numel() == 0)
    return PFRT_OK;
  ReducePlan plan = planReduce(xShape, isReduced);
  if (extreme) {
    visitNumeric(x->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      Extreme<T> pick{kind == Reduce::Max};
      T *po = static_cast<T *>(out->data);
      if (xShape.numel() == 0) // every reduced set is empty
        for (int64_t i = 0; i < expected.numel(); ++i)
          po[i] = pick.identity();
      else
        reduceExtreme(ctx, plan, static_cast<const T *>(x->data), po, pick);
    });
    return PFRT_OK;
  }
  const bool mean = kind == Reduce::Mean;
  visitArith(x->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x->data);
    T *po = static_cast<T *>(out->data);
    if (xShape.numel() == 0) { // a reduced dimension is empty: sums of nothing
      for (int64_t i = 0; i < expected.numel(); ++i)
        po[i] = finish<T>(0, 0, mean);
    } else {
      const int64_t count = plan.reducedCount;
      auto store = [=](int64_t o, Acc<T> acc) {
        po[o] = finish<T>(acc, count, mean);
      };
      if (plan.lastReduced)
        reduceRuns(ctx, plan, px, store);
      else
        reduceRows(ctx, plan, px, store);
    }
  });
  return PFRT_OK;
}

} // namespace

void pfrt::cpu::reduceSumInto(const pfrt_context *ctx, const pfrt_tensor &x,
                              const bool *isReduced, void *out, double alpha,
                              bool accumulate) {
  const Shape xShape = Shape::of(x);
  int64_t outputs = 1;
  for (int32_t i = 0; i < x.rank; ++i)
    if (!isReduced[i])
      outputs *= x.shape[i];
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *po = static_cast<T *>(out);
    if (outputs == 0)
      return;
    if (xShape.numel() == 0) { // sums of nothing
      if (!accumulate)
        for (int64_t i = 0; i < outputs; ++i)
          po[i] = T(0);
      return;
    }
    auto store = [=](int64_t o, double acc) {
      po[o] = accumulate ? T(double(po[o]) + alpha * acc) : T(alpha * acc);
    };
    ReducePlan plan = planReduce(xShape, isReduced);
    if (plan.lastReduced)
      reduceRuns(ctx, plan, static_cast<const T *>(x.data), store);
    else
      reduceRows(ctx, plan, static_cast<const T *>(x.data), store);
  });
}

extern "C" {

pfrt_status pfrt_reduce_sum_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                const int64_t *axes, int32_t num_axes,
                                int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_sum", Reduce::Sum, x, axes, num_axes,
                     keepdims, out);
}

pfrt_status pfrt_reduce_mean_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                 const int64_t *axes, int32_t num_axes,
                                 int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_mean", Reduce::Mean, x, axes, num_axes,
                     keepdims, out);
}

pfrt_status pfrt_reduce_max_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                const int64_t *axes, int32_t num_axes,
                                int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_max", Reduce::Max, x, axes, num_axes,
                     keepdims, out);
}

pfrt_status pfrt_reduce_min_cpu(pfrt_context *ctx, const pfrt_tensor *x,
                                const int64_t *axes, int32_t num_axes,
                                int32_t keepdims, const pfrt_tensor *out) {
  return reduceEntry(ctx, "pfrt_reduce_min", Reduce::Min, x, axes, num_axes,
                     keepdims, out);
}

} // extern "C"
