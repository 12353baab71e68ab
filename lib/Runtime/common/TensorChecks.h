//===- TensorChecks.h - Argument checks shared by the backends ---*- C++ -*-===//
//
// The CPU and CUDA kernels validate the same ABI arguments (pfrt.h) with the
// same messages; the checks that go beyond one Call method live here so the
// backends cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_TENSORCHECKS_H
#define PF_RUNTIME_COMMON_TENSORCHECKS_H

#include "Call.h"

namespace pfrt {

/// A tensor of `dtype` with exactly `shape`.
pfrt_status floatLike(const Call &call, const char *name, const pfrt_tensor *t,
                      int32_t dtype, const Shape &shape);

/// pfrt_binary_backward's arguments after Call::begin: the kind, the
/// tensors, f32/f64 alike, grad_out of the operands' broadcast shape and each
/// requested gradient of its operand's shape.
pfrt_status checkBinaryBackward(const Call &call, int32_t kind, const pfrt_tensor *a,
                                const pfrt_tensor *b, const pfrt_tensor *grad_out,
                                const pfrt_tensor *grad_a, const pfrt_tensor *grad_b);

/// A LayerNorm's rows (x's dimensions before `axis`) and the normalized
/// block (x's dimensions from `axis` on: the scale's and bias' shape).
struct NormBlocks {
  int64_t rows = 0, cols = 0;
  Shape normalized;
};

/// pfrt_layer_norm's arguments after Call::begin, and pfrt_add_layer_norm's
/// with its residual (nullptr for pfrt_layer_norm): f32/f64 alike, a valid
/// axis, epsilon >= 0, scale and the optional bias of the normalized shape,
/// out and the residual of x's shape, the optional statistics as
/// checkLayerNormStatistic.
pfrt_status checkLayerNorm(const Call &call, const pfrt_tensor *x, const pfrt_tensor *residual,
                           const pfrt_tensor *scale, const pfrt_tensor *bias, int64_t axis,
                           double epsilon, const pfrt_tensor *out, const pfrt_tensor *mean,
                           const pfrt_tensor *inv_std_dev, NormBlocks &blocks);

/// pfrt_layer_norm_backward's arguments after Call::begin: as the forward,
/// mean and inv_std_dev given together (else epsilon >= 0 to recompute
/// them), each requested gradient of its operand's shape.
pfrt_status checkLayerNormBackward(const Call &call, const pfrt_tensor *x, const pfrt_tensor *scale,
                                   const pfrt_tensor *mean, const pfrt_tensor *inv_std_dev,
                                   const pfrt_tensor *grad_out, int64_t axis, double epsilon,
                                   const pfrt_tensor *grad_x, const pfrt_tensor *grad_scale,
                                   const pfrt_tensor *grad_bias, NormBlocks &blocks);

/// A LayerNorm statistic (mean, inv_std_dev) of x's dtype, shaped
/// x.shape[:axis] + ones (ONNX) or x.shape[:axis].
pfrt_status checkLayerNormStatistic(const Call &call, const char *name, const pfrt_tensor *stat,
                                    const pfrt_tensor &x, int32_t axis);

/// pfrt_read_scalar's tensor: one element of f32, f64, i8, i32, i64 or bool.
pfrt_status checkReadScalar(const Call &call, const pfrt_tensor *x);

/// A square rank-2 f32/f64 matrix (of `dtype` unless it is 0) whose
/// dimension fits the BLAS/LAPACK (and cuSOLVER) int.
pfrt_status checkSquare(const Call &call, const char *name,
                        const pfrt_tensor *t, int32_t dtype);

/// pfrt_kfac_precondition's dimensions once its arguments are checked.
struct PreconditionDims {
  bool transposed = false; ///< grad_w is [out, in] (else [in, out])
  bool joint = false;      ///< a_inv has the bias column (ia == in + 1)
  int64_t out = 0, in = 0, ia = 0;
  int32_t dtype = 0;
};

/// Checks pfrt_kfac_precondition's arguments: square inverses of one float
/// dtype matching grad_w's outputs and inputs (with or without the bias
/// column), out_w like grad_w, grad_b and out_b both given or both NULL.
/// Messages name the A and B side `aName` and `bName`.
pfrt_status checkPrecondition(const Call &call, const pfrt_tensor *a_inv,
                              const pfrt_tensor *b_inv,
                              const pfrt_tensor *grad_w,
                              const pfrt_tensor *grad_b, int32_t w_transposed,
                              const pfrt_tensor *out_w,
                              const pfrt_tensor *out_b, PreconditionDims &dims,
                              const char *aName = "a_inv",
                              const char *bName = "b_inv");

/// Checks pfrt_kfac_eigen's arguments: a square f32/f64 factor [d, d],
/// vectors of its dtype and shape, values [d].
pfrt_status checkEigen(const Call &call, const pfrt_tensor *factor,
                       const pfrt_tensor *vectors, const pfrt_tensor *values);

/// Checks pfrt_kfac_precondition_eigen's arguments: checkPrecondition's on
/// the eigenvectors, eigenvalues [i'] and [out] of their dtype, damping
/// finite and > 0.
pfrt_status checkPreconditionEigen(
    const Call &call, const pfrt_tensor *a_vectors, const pfrt_tensor *a_values,
    const pfrt_tensor *b_vectors, const pfrt_tensor *b_values, double damping,
    const pfrt_tensor *grad_w, const pfrt_tensor *grad_b, int32_t w_transposed,
    const pfrt_tensor *out_w, const pfrt_tensor *out_b, PreconditionDims &dims);

/// The coefficients of a K-FAC factor update over `rows` rows: the new
/// factor is alpha·(its sum over the rows) + beta·(the old one), for every
/// mode of pfrt_kfac_factor and pfrt_kfac_layer_norm_factor (both backends).
struct FactorUpdateCoefficients {
  double alpha = 0, beta = 0;
};
inline FactorUpdateCoefficients factorUpdateCoefficients(int64_t rows, double scale, int32_t mode,
                                                         double decay) {
  FactorUpdateCoefficients c;
  c.alpha = rows ? scale / double(rows) : 0.0;
  if (mode == PFRT_KFAC_ACCUMULATE) {
    c.beta = 1;
  } else if (mode == PFRT_KFAC_RUNNING_AVERAGE) {
    c.beta = decay;
    c.alpha *= 1 - decay;
  }
  return c;
}

/// pfrt_kfac_layer_norm_factor's dimensions once its arguments are checked.
struct LayerNormFactorDims {
  int64_t rows = 0, width = 0;
  int64_t columns = 0; ///< 3: (γγ, γβ, ββ) per feature; 2: the diagonal (γγ, ββ)
};

/// Checks pfrt_kfac_layer_norm_factor's arguments: x and dy f32/f64 of one
/// shape [..., h], factor [h, 3] or [h, 2] of their dtype, epsilon >= 0 and
/// scale finite, a known mode, decay in [0, 1] for a running average.
pfrt_status checkLayerNormFactor(const Call &call, const pfrt_tensor *x, const pfrt_tensor *dy,
                                 double epsilon, double scale, int32_t mode, double decay,
                                 const pfrt_tensor *factor, LayerNormFactorDims &dims);

/// Checks pfrt_kfac_precondition_layer_norm's arguments: factor [h, 3] or
/// [h, 2] (f32/f64), the gradients and outputs [h] of its dtype, damping
/// finite and >= 0.
pfrt_status checkLayerNormPrecondition(const Call &call, const pfrt_tensor *factor, double damping,
                                       const pfrt_tensor *grad_scale, const pfrt_tensor *grad_bias,
                                       const pfrt_tensor *out_scale, const pfrt_tensor *out_bias);

/// pfrt_kfac_embedding_factor's dimensions once its arguments are checked.
struct EmbeddingFactorDims {
  int64_t ids = 0, vocab = 0;
};

/// Checks pfrt_kfac_embedding_factor's arguments: ids i32/i64, factor 1-D
/// f32/f64, scale finite, a known mode, decay in [0, 1] for a running
/// average. The ids' range is the kernel's to check (it reads them).
pfrt_status checkEmbeddingFactor(const Call &call, const pfrt_tensor *ids, double scale,
                                 int32_t mode, double decay, const pfrt_tensor *factor,
                                 EmbeddingFactorDims &dims);

/// The row an embedding id picks in a table of `vocab` rows (an id in
/// [-vocab, 0) counts from the end), or -1 when it is outside [-vocab, vocab).
inline int64_t embeddingRow(int64_t id, int64_t vocab) {
  const int64_t row = id < 0 ? id + vocab : id;
  return row >= 0 && row < vocab ? row : -1;
}

/// Checks pfrt_kfac_embedding_inverses' arguments: a 1-D f32/f64, a_inv
/// like a, b square of a's dtype, b_inv like b, damping finite and >= 0,
/// retries >= 0.
pfrt_status checkEmbeddingInverses(const Call &call, const pfrt_tensor *a, const pfrt_tensor *b,
                                   double damping, int32_t retries, const pfrt_tensor *a_inv,
                                   const pfrt_tensor *b_inv);

/// Checks pfrt_kfac_precondition_embedding's arguments: a_inv [vocab], b_inv
/// [h, h] of its dtype, grad_w [vocab, h] (or [h, vocab] with w_transposed)
/// and out_w like grad_w.
pfrt_status checkEmbeddingPrecondition(const Call &call, const pfrt_tensor *a_inv,
                                       const pfrt_tensor *b_inv, const pfrt_tensor *grad_w,
                                       int32_t w_transposed, const pfrt_tensor *out_w);

} // namespace pfrt

#endif // PF_RUNTIME_COMMON_TENSORCHECKS_H
