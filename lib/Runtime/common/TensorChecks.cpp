//===- TensorChecks.cpp - Argument checks shared by the backends ----------===//

#include "TensorChecks.h"

#include <climits>
#include <cmath>

namespace pfrt {

pfrt_status floatLike(const Call &call, const char *name, const pfrt_tensor *t,
                      int32_t dtype, const Shape &shape) {
  PFRT_TRY(call.tensor(name, t));
  PFRT_TRY(call.dtypeIs(name, t, dtype));
  return call.shapeIs(name, t, shape);
}

pfrt_status checkLayerNormStatistic(const Call &call, const char *name, const pfrt_tensor *stat,
                                    const pfrt_tensor &x, int32_t axis) {
  PFRT_TRY(call.tensor(name, stat));
  PFRT_TRY(call.dtypeIs(name, stat, x.dtype));
  Shape lead;
  for (int32_t i = 0; i < axis; ++i)
    lead.push(x.shape[i]);
  Shape onnx = lead;
  for (int32_t i = axis; i < x.rank; ++i)
    onnx.push(1);
  const Shape actual = Shape::of(*stat);
  if (actual == lead || actual == onnx)
    return PFRT_OK;
  return call.fail(PFRT_INVALID_ARGUMENT, "%s has shape %s, expected %s or %s", name,
                   ShapeStr(actual).c_str(), ShapeStr(onnx).c_str(), ShapeStr(lead).c_str());
}

namespace {

/// x f32/f64 of rank >= 1 and its blocks around `axis`.
pfrt_status normBlocks(const Call &call, const pfrt_tensor *x, int64_t axis, int32_t &ax,
                       NormBlocks &blocks) {
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(call.axis("axis", axis, x->rank, ax));
  blocks.normalized = Shape();
  for (int32_t i = ax; i < x->rank; ++i)
    blocks.normalized.push(x->shape[i]);
  blocks.rows = product(Shape::of(*x), 0, ax);
  blocks.cols = blocks.normalized.numel();
  return PFRT_OK;
}

pfrt_status checkEpsilon(const Call &call, double epsilon) {
  if (!(epsilon >= 0))
    return call.fail(PFRT_INVALID_ARGUMENT, "epsilon %g is negative or NaN", epsilon);
  return PFRT_OK;
}

} // namespace

pfrt_status checkLayerNorm(const Call &call, const pfrt_tensor *x, const pfrt_tensor *residual,
                           const pfrt_tensor *scale, const pfrt_tensor *bias, int64_t axis,
                           double epsilon, const pfrt_tensor *out, const pfrt_tensor *mean,
                           const pfrt_tensor *inv_std_dev, NormBlocks &blocks) {
  PFRT_TRY(call.tensor("x", x));
  if (residual)
    PFRT_TRY(call.tensor("residual", residual));
  PFRT_TRY(call.tensor("scale", scale));
  PFRT_TRY(call.optionalTensor("bias", bias));
  PFRT_TRY(call.tensor("out", out));
  int32_t ax;
  PFRT_TRY(normBlocks(call, x, axis, ax, blocks));
  PFRT_TRY(checkEpsilon(call, epsilon));
  const Shape xShape = Shape::of(*x);
  if (residual)
    PFRT_TRY(floatLike(call, "residual", residual, x->dtype, xShape));
  PFRT_TRY(floatLike(call, "scale", scale, x->dtype, blocks.normalized));
  if (bias)
    PFRT_TRY(floatLike(call, "bias", bias, x->dtype, blocks.normalized));
  PFRT_TRY(floatLike(call, "out", out, x->dtype, xShape));
  if (mean)
    PFRT_TRY(checkLayerNormStatistic(call, "mean", mean, *x, ax));
  if (inv_std_dev)
    PFRT_TRY(checkLayerNormStatistic(call, "inv_std_dev", inv_std_dev, *x, ax));
  return PFRT_OK;
}

pfrt_status checkLayerNormBackward(const Call &call, const pfrt_tensor *x, const pfrt_tensor *scale,
                                   const pfrt_tensor *mean, const pfrt_tensor *inv_std_dev,
                                   const pfrt_tensor *grad_out, int64_t axis, double epsilon,
                                   const pfrt_tensor *grad_x, const pfrt_tensor *grad_scale,
                                   const pfrt_tensor *grad_bias, NormBlocks &blocks) {
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("scale", scale));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  int32_t ax;
  PFRT_TRY(normBlocks(call, x, axis, ax, blocks));
  const Shape xShape = Shape::of(*x);
  PFRT_TRY(floatLike(call, "scale", scale, x->dtype, blocks.normalized));
  PFRT_TRY(floatLike(call, "grad_out", grad_out, x->dtype, xShape));
  if ((mean == nullptr) != (inv_std_dev == nullptr))
    return call.fail(PFRT_INVALID_ARGUMENT, "mean and inv_std_dev must both "
                                            "be given or both be NULL");
  if (mean) {
    PFRT_TRY(checkLayerNormStatistic(call, "mean", mean, *x, ax));
    PFRT_TRY(checkLayerNormStatistic(call, "inv_std_dev", inv_std_dev, *x, ax));
  } else {
    PFRT_TRY(checkEpsilon(call, epsilon));
  }
  if (grad_x)
    PFRT_TRY(floatLike(call, "grad_x", grad_x, x->dtype, xShape));
  if (grad_scale)
    PFRT_TRY(floatLike(call, "grad_scale", grad_scale, x->dtype, blocks.normalized));
  if (grad_bias)
    PFRT_TRY(floatLike(call, "grad_bias", grad_bias, x->dtype, blocks.normalized));
  return PFRT_OK;
}

pfrt_status checkReadScalar(const Call &call, const pfrt_tensor *x) {
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL}));
  if (Shape::of(*x).numel() != 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "x %s has %lld elements; a scalar has one",
                     ShapeStr(Shape::of(*x)).c_str(),
                     static_cast<long long>(Shape::of(*x).numel()));
  return PFRT_OK;
}

pfrt_status checkSquare(const Call &call, const char *name,
                        const pfrt_tensor *t, int32_t dtype) {
  PFRT_TRY(call.tensor(name, t));
  if (dtype)
    PFRT_TRY(call.dtypeIs(name, t, dtype));
  else
    PFRT_TRY(call.dtypeIn(name, t, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn(name, t, 2, 2));
  if (t->shape[0] != t->shape[1])
    return call.fail(PFRT_INVALID_ARGUMENT, "%s has shape %s, which is not "
                     "square", name, ShapeStr(Shape::of(*t)).c_str());
  if (t->shape[0] > INT32_MAX)
    return call.fail(PFRT_UNSUPPORTED, "%s of dimension %lld exceeds the "
                     "BLAS/LAPACK int range", name,
                     static_cast<long long>(t->shape[0]));
  return PFRT_OK;
}

pfrt_status checkPrecondition(const Call &call, const pfrt_tensor *a_inv,
                              const pfrt_tensor *b_inv,
                              const pfrt_tensor *grad_w,
                              const pfrt_tensor *grad_b, int32_t w_transposed,
                              const pfrt_tensor *out_w,
                              const pfrt_tensor *out_b, PreconditionDims &dims,
                              const char *aName, const char *bName) {
  PFRT_TRY(checkSquare(call, aName, a_inv, 0));
  const int32_t dtype = a_inv->dtype;
  PFRT_TRY(checkSquare(call, bName, b_inv, dtype));
  PFRT_TRY(call.tensor("grad_w", grad_w));
  PFRT_TRY(call.dtypeIs("grad_w", grad_w, dtype));
  PFRT_TRY(call.rankIn("grad_w", grad_w, 2, 2));
  const bool transposed = w_transposed != 0;
  const int64_t out = grad_w->shape[transposed ? 0 : 1];
  const int64_t in = grad_w->shape[transposed ? 1 : 0];
  const int64_t ia = a_inv->shape[0];
  const char *layout = transposed ? "[out, in]" : "[in, out]";
  if (b_inv->shape[0] != out)
    return call.fail(PFRT_INVALID_ARGUMENT, "%s is %lld x %lld but grad_w "
                     "%s (%s) has %lld outputs", bName,
                     static_cast<long long>(b_inv->shape[0]),
                     static_cast<long long>(b_inv->shape[0]),
                     ShapeStr(Shape::of(*grad_w)).c_str(), layout,
                     static_cast<long long>(out));
  if (ia != in && ia != in + 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "%s is %lld x %lld but grad_w "
                     "%s (%s) has %lld inputs (expected %lld, or %lld with "
                     "a bias column)", aName, static_cast<long long>(ia),
                     static_cast<long long>(ia),
                     ShapeStr(Shape::of(*grad_w)).c_str(), layout,
                     static_cast<long long>(in), static_cast<long long>(in),
                     static_cast<long long>(in + 1));
  const bool joint = ia == in + 1;
  PFRT_TRY(floatLike(call, "out_w", out_w, dtype, Shape::of(*grad_w)));
  if (joint && !grad_b)
    return call.fail(PFRT_INVALID_ARGUMENT, "%s has a bias column, so "
                     "grad_b and out_b are required", aName);
  if ((grad_b == nullptr) != (out_b == nullptr))
    return call.fail(PFRT_INVALID_ARGUMENT, "grad_b and out_b must both be "
                     "given or both be NULL");
  if (grad_b) {
    Shape biasShape;
    biasShape.push(out);
    PFRT_TRY(floatLike(call, "grad_b", grad_b, dtype, biasShape));
    PFRT_TRY(floatLike(call, "out_b", out_b, dtype, biasShape));
  }
  dims.transposed = transposed;
  dims.joint = joint;
  dims.out = out;
  dims.in = in;
  dims.ia = ia;
  dims.dtype = dtype;
  return PFRT_OK;
}

pfrt_status checkEigen(const Call &call, const pfrt_tensor *factor,
                       const pfrt_tensor *vectors, const pfrt_tensor *values) {
  PFRT_TRY(checkSquare(call, "factor", factor, 0));
  PFRT_TRY(floatLike(call, "vectors", vectors, factor->dtype, Shape::of(*factor)));
  Shape valuesShape;
  valuesShape.push(factor->shape[0]);
  return floatLike(call, "values", values, factor->dtype, valuesShape);
}

pfrt_status checkPreconditionEigen(
    const Call &call, const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
    const pfrt_tensor *b_vectors, const pfrt_tensor *b_values, double damping,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_b, int32_t w_transposed,
    const pfrt_tensor *out_w, const pfrt_tensor *out_b, PreconditionDims &dims) {
  PFRT_TRY(checkPrecondition(call, a_vectors, b_vectors, grad_w, grad_b, w_transposed, out_w,
                             out_b, dims, "a_vectors", "b_vectors"));
  Shape aShape, bShape;
  aShape.push(dims.ia);
  bShape.push(dims.out);
  PFRT_TRY(floatLike(call, "a_values", a_values, dims.dtype, aShape));
  PFRT_TRY(floatLike(call, "b_values", b_values, dims.dtype, bShape));
  if (!(damping > 0) || !std::isfinite(damping))
    return call.fail(PFRT_INVALID_ARGUMENT, "damping %g must be finite and > 0", damping);
  return PFRT_OK;
}

/// A [h, 3] or [h, 2] f32/f64 LayerNorm factor (of `dtype` unless it is 0).
static pfrt_status checkLayerNormFactorShape(const Call &call, const pfrt_tensor *factor,
                                             int32_t dtype) {
  PFRT_TRY(call.tensor("factor", factor));
  if (dtype)
    PFRT_TRY(call.dtypeIs("factor", factor, dtype));
  else
    PFRT_TRY(call.dtypeIn("factor", factor, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("factor", factor, 2, 2));
  if (factor->shape[1] != 2 && factor->shape[1] != 3)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "factor has shape %s; a LayerNorm factor is "
                     "[h, 3] (2x2 blocks) or [h, 2] (their diagonal)",
                     ShapeStr(Shape::of(*factor)).c_str());
  return PFRT_OK;
}

pfrt_status checkLayerNormFactor(const Call &call, const pfrt_tensor *x, const pfrt_tensor *dy,
                                 double epsilon, double scale, int32_t mode, double decay,
                                 const pfrt_tensor *factor, LayerNormFactorDims &dims) {
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("x", x, 1, PFRT_MAX_RANK));
  PFRT_TRY(floatLike(call, "dy", dy, x->dtype, Shape::of(*x)));
  PFRT_TRY(checkLayerNormFactorShape(call, factor, x->dtype));
  const int64_t h = x->shape[x->rank - 1];
  if (factor->shape[0] != h)
    return call.fail(PFRT_INVALID_ARGUMENT, "factor has shape %s but x %s has %lld features",
                     ShapeStr(Shape::of(*factor)).c_str(), ShapeStr(Shape::of(*x)).c_str(),
                     static_cast<long long>(h));
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return call.fail(PFRT_INVALID_ARGUMENT, "epsilon %g must be finite and >= 0", epsilon);
  if (!std::isfinite(scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "scale %g is not finite", scale);
  if (mode < PFRT_KFAC_OVERWRITE || mode > PFRT_KFAC_RUNNING_AVERAGE)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown mode %d", mode);
  if (mode == PFRT_KFAC_RUNNING_AVERAGE && !(decay >= 0 && decay <= 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "decay %g is outside [0, 1]", decay);
  dims.width = h;
  dims.rows = product(Shape::of(*x), 0, x->rank - 1);
  dims.columns = factor->shape[1];
  return PFRT_OK;
}

pfrt_status checkLayerNormPrecondition(const Call &call, const pfrt_tensor *factor, double damping,
                                       const pfrt_tensor *grad_scale, const pfrt_tensor *grad_bias,
                                       const pfrt_tensor *out_scale, const pfrt_tensor *out_bias) {
  PFRT_TRY(checkLayerNormFactorShape(call, factor, 0));
  Shape width;
  width.push(factor->shape[0]);
  PFRT_TRY(floatLike(call, "grad_scale", grad_scale, factor->dtype, width));
  PFRT_TRY(floatLike(call, "grad_bias", grad_bias, factor->dtype, width));
  PFRT_TRY(floatLike(call, "out_scale", out_scale, factor->dtype, width));
  PFRT_TRY(floatLike(call, "out_bias", out_bias, factor->dtype, width));
  if (!(damping >= 0) || !std::isfinite(damping))
    return call.fail(PFRT_INVALID_ARGUMENT, "damping %g must be finite and >= 0", damping);
  return PFRT_OK;
}

//===--- Embeddings ---------------------------------------------------------===//

/// A known factor-update mode, a finite scale and a decay in [0, 1] for a
/// running average (pfrt_kfac_factor's rules).
static pfrt_status checkFactorUpdate(const Call &call, double scale, int32_t mode, double decay) {
  if (!std::isfinite(scale))
    return call.fail(PFRT_INVALID_ARGUMENT, "scale %g is not finite", scale);
  if (mode < PFRT_KFAC_OVERWRITE || mode > PFRT_KFAC_RUNNING_AVERAGE)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown mode %d", mode);
  if (mode == PFRT_KFAC_RUNNING_AVERAGE && !(decay >= 0 && decay <= 1))
    return call.fail(PFRT_INVALID_ARGUMENT, "decay %g is outside [0, 1]", decay);
  return PFRT_OK;
}

pfrt_status checkEmbeddingFactor(const Call &call, const pfrt_tensor *ids, double scale,
                                 int32_t mode, double decay, const pfrt_tensor *factor,
                                 EmbeddingFactorDims &dims) {
  PFRT_TRY(call.tensor("ids", ids));
  PFRT_TRY(call.dtypeIn("ids", ids, {PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.tensor("factor", factor));
  PFRT_TRY(call.dtypeIn("factor", factor, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("factor", factor, 1, 1));
  PFRT_TRY(checkFactorUpdate(call, scale, mode, decay));
  dims.ids = Shape::of(*ids).numel();
  dims.vocab = factor->shape[0];
  return PFRT_OK;
}

pfrt_status checkEmbeddingInverses(const Call &call, const pfrt_tensor *a, const pfrt_tensor *b,
                                   double damping, int32_t retries, const pfrt_tensor *a_inv,
                                   const pfrt_tensor *b_inv) {
  if (!(damping >= 0) || !std::isfinite(damping) || retries < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "damping must be finite and >= 0 and retries >= 0");
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("a", a, 1, 1));
  PFRT_TRY(floatLike(call, "a_inv", a_inv, a->dtype, Shape::of(*a)));
  PFRT_TRY(checkSquare(call, "b", b, a->dtype));
  return floatLike(call, "b_inv", b_inv, b->dtype, Shape::of(*b));
}

pfrt_status checkEmbeddingPrecondition(const Call &call, const pfrt_tensor *a_inv,
                                       const pfrt_tensor *b_inv, const pfrt_tensor *grad_w,
                                       int32_t w_transposed, const pfrt_tensor *out_w) {
  PFRT_TRY(call.tensor("a_inv", a_inv));
  PFRT_TRY(call.dtypeIn("a_inv", a_inv, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.rankIn("a_inv", a_inv, 1, 1));
  PFRT_TRY(checkSquare(call, "b_inv", b_inv, a_inv->dtype));
  PFRT_TRY(call.tensor("grad_w", grad_w));
  PFRT_TRY(call.dtypeIs("grad_w", grad_w, a_inv->dtype));
  PFRT_TRY(call.rankIn("grad_w", grad_w, 2, 2));
  const bool transposed = w_transposed != 0;
  const int64_t vocab = grad_w->shape[transposed ? 1 : 0], h = grad_w->shape[transposed ? 0 : 1];
  if (vocab != a_inv->shape[0] || h != b_inv->shape[0])
    return call.fail(PFRT_INVALID_ARGUMENT, "grad_w %s (%s) does not match a_inv %s and b_inv %s",
                     ShapeStr(Shape::of(*grad_w)).c_str(), transposed ? "[h, vocab]" : "[vocab, h]",
                     ShapeStr(Shape::of(*a_inv)).c_str(), ShapeStr(Shape::of(*b_inv)).c_str());
  if (vocab > INT32_MAX)
    return call.fail(PFRT_UNSUPPORTED, "a vocabulary of %lld rows exceeds the BLAS int range",
                     static_cast<long long>(vocab));
  return floatLike(call, "out_w", out_w, grad_w->dtype, Shape::of(*grad_w));
}

pfrt_status checkBinaryBackward(const Call &call, int32_t kind, const pfrt_tensor *a,
                                const pfrt_tensor *b, const pfrt_tensor *grad_out,
                                const pfrt_tensor *grad_a, const pfrt_tensor *grad_b) {
  if (kind < PFRT_BINARY_ADD || kind > PFRT_BINARY_POW)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown kind %d", kind);
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.optionalTensor("grad_a", grad_a));
  PFRT_TRY(call.optionalTensor("grad_b", grad_b));
  PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, a->dtype));
  Shape full;
  if (!broadcastShapes(Shape::of(*a), Shape::of(*b), full))
    return call.fail(PFRT_INVALID_ARGUMENT, "shapes %s and %s do not broadcast",
                     ShapeStr(Shape::of(*a)).c_str(), ShapeStr(Shape::of(*b)).c_str());
  PFRT_TRY(call.shapeIs("grad_out", grad_out, full));
  if (grad_a)
    PFRT_TRY(floatLike(call, "grad_a", grad_a, a->dtype, Shape::of(*a)));
  if (grad_b)
    PFRT_TRY(floatLike(call, "grad_b", grad_b, a->dtype, Shape::of(*b)));
  return PFRT_OK;
}

} // namespace pfrt
