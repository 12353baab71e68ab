//===- Loss.cpp - Fused softmax cross-entropy with ignored labels ----------===//
//
// The masked-LM loss: one pass per row computes the max-shifted
// log-sum-exp, the row's loss and (optionally) its gradient, threaded over
// rows. Row losses go to a double workspace and are summed in row order,
// so the loss does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "../common/Call.h"
#include "../common/Dtype.h"
#include "FastMath.h"
#include "Kernels.h"
#include "Parallel.h"
#include "Training.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace pfrt;
using namespace pfrt::cpu;

namespace {

template <class L> int64_t labelAt(const void *p, int64_t i) {
  return static_cast<int64_t>(static_cast<const L *>(p)[i]);
}

struct CrossEntropy {
  int64_t rows = 0, vocab = 0;
  int64_t ignoreIndex = -100;
  double gradScale = 1; ///< grad_scale / count
};

/// One row: returns its loss; writes the gradient row when g != nullptr
/// (g may be x: every x[i] is read before g[i] is written).
template <class T>
double crossEntropyRow(const CrossEntropy &ce, const T *x, int64_t label,
                       T *g) {
  const int64_t n = ce.vocab;
  if (label == ce.ignoreIndex) {
    if (g)
      std::memset(g, 0, sizeof(T) * n);
    return 0.0;
  }
  const double target = double(x[label]);
  T maximum = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : maximum)
  for (int64_t i = 0; i < n; ++i)
    maximum = x[i] > maximum ? x[i] : maximum;
  // Fixed-order sums (Training.h): the loss is bitwise the same for every
  // thread count.
  double sum;
  if (g) {
    sum = laneSum(0, n, [&](int64_t i) {
      const T e = expOf(x[i] - maximum);
      g[i] = e;
      return double(e);
    });
  } else {
    sum = laneSum(0, n, [&](int64_t i) { return double(expOf(x[i] - maximum)); });
  }
  const double lse = double(maximum) + std::log(sum);
  if (g) {
    const T factor = T(ce.gradScale / sum);
    for (int64_t i = 0; i < n; ++i)
      g[i] *= factor;
    g[label] -= T(ce.gradScale);
  }
  return lse - target;
}

} // namespace

extern "C" {

pfrt_status pfrt_softmax_cross_entropy_cpu(pfrt_context *ctx,
                                           const pfrt_tensor *logits,
                                           const pfrt_tensor *labels,
                                           int64_t ignore_index, double grad_scale,
                                           const pfrt_tensor *loss,
                                           const pfrt_tensor *grad_logits,
                                           const pfrt_tensor *count_out) {
  Call call(ctx, "pfrt_softmax_cross_entropy");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.tensor("logits", logits));
  PFRT_TRY(call.tensor("labels", labels));
  PFRT_TRY(call.tensor("loss", loss));
  PFRT_TRY(call.optionalTensor("grad_logits", grad_logits));
  PFRT_TRY(call.optionalTensor("count", count_out));
  PFRT_TRY(call.dtypeIn("logits", logits, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIn("labels", labels, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.rankIn("logits", logits, 1, PFRT_MAX_RANK));
  const Shape shape = Shape::of(*logits);
  Shape rowShape = shape;
  rowShape.rank -= 1;
  PFRT_TRY(call.shapeIs("labels", labels, rowShape));
  PFRT_TRY(floatLike(call, "loss", loss, logits->dtype, Shape()));
  if (grad_logits)
    PFRT_TRY(floatLike(call, "grad_logits", grad_logits, logits->dtype,
                       shape));
  if (count_out) {
    PFRT_TRY(call.dtypeIs("count", count_out, PFRT_I64));
    PFRT_TRY(call.shapeIs("count", count_out, Shape()));
  }
  if (!std::isfinite(grad_scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "grad_scale %g is not finite",
                     grad_scale);
  CrossEntropy ce;
  ce.rows = rowShape.numel();
  ce.vocab = shape.dims[shape.rank - 1];
  ce.ignoreIndex = ignore_index;
  // Validate every label (nothing is written before) and count them.
  int64_t count = 0;
  for (int64_t r = 0; r < ce.rows; ++r) {
    const int64_t label = labels->dtype == PFRT_I32
                              ? labelAt<int32_t>(labels->data, r)
                              : labelAt<int64_t>(labels->data, r);
    if (label == ignore_index)
      continue;
    if (label < 0 || label >= ce.vocab)
      return call.fail(PFRT_INVALID_ARGUMENT, "label %lld (row %lld) is "
                       "outside [0, %lld) and is not the ignore_index %lld",
                       static_cast<long long>(label), static_cast<long long>(r),
                       static_cast<long long>(ce.vocab),
                       static_cast<long long>(ignore_index));
    ++count;
  }
  ce.gradScale = count ? grad_scale / double(count) : 0.0;
  Scratch<double> rowLoss;
  PFRT_TRY(rowLoss.allocate(call, ce.rows));
  double total = 0;
  visitFloat(logits->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = static_cast<const T *>(logits->data);
    T *g = grad_logits ? static_cast<T *>(grad_logits->data) : nullptr;
    parallelFor(ctx, ce.rows, 3 * ce.vocab, [&](int64_t r) {
      const int64_t label = labels->dtype == PFRT_I32
                                ? labelAt<int32_t>(labels->data, r)
                                : labelAt<int64_t>(labels->data, r);
      rowLoss[r] = crossEntropyRow(ce, x + r * ce.vocab, label,
                                   g ? g + r * ce.vocab : nullptr);
    });
    for (int64_t r = 0; r < ce.rows; ++r)
      total += rowLoss[r];
    *static_cast<T *>(loss->data) = T(count ? total / double(count) : 0.0);
  });
  if (count_out)
    *static_cast<int64_t *>(count_out->data) = count;
  return PFRT_OK;
}

} // extern "C"
