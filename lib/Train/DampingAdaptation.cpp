//===- DampingAdaptation.cpp - Levenberg-Marquardt K-FAC damping -----------===//
//
// The host side of pf-train --kfac-damping-schedule adaptive: K-FAC's
// quadratic model of the loss change along the step's update, in float64
// (the terms nearly cancel against the loss change they are compared with).
//
//===----------------------------------------------------------------------===//
#include "pf/Train/DampingAdaptation.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir::pf;
using namespace mlir::pf::train;
using ::pf::Status;

namespace {
Status modelError(const std::string &message) {
  return Status::error("K-FAC quadratic model: " + message);
}

/// A layer's tensors: before and after the step, and the raw gradient.
struct ParameterChange {
  FloatTensor before, after, gradient;
  int64_t elements = 0;

  double delta(int64_t i) const { return double(after.data[i]) - double(before.data[i]); }
};

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

::pf::Expected<ParameterChange> changeOf(const std::string &name, const FloatTensorLookup &before,
                                         const FloatTensorLookup &after,
                                         const FloatTensorLookup &gradients) {
  ParameterChange change{before(name), after(name), gradients(name)};
  if (!change.before.data || !change.after.data)
    return modelError("no f32 parameter '" + name + "' before or after the step");
  if (!change.gradient.data)
    return modelError("the step returned no raw gradient of '" + name +
                      "' (kfac/gradient/...: pf-kfac-precondition raw-gradients)");
  if (change.before.shape != change.after.shape || change.before.shape != change.gradient.shape)
    return modelError("'" + name + "' and its raw gradient differ in shape");
  change.elements = elementCount(change.before.shape);
  return change;
}

/// gᵀΔ and ‖Δ‖² of one parameter into `model`.
void addFirstOrder(const ParameterChange &change, QuadraticModel &model) {
  for (int64_t i = 0; i < change.elements; ++i) {
    const double d = change.delta(i);
    model.gradient += double(change.gradient.data[i]) * d;
    model.squaredNorm += d * d;
  }
}

/// A square f32 factor of size `size` as float64, or an error.
::pf::Expected<std::vector<double>> squareFactor(const std::string &name, int64_t size,
                                                 const FloatTensorLookup &state) {
  FloatTensor factor = state(name);
  if (!factor.data)
    return modelError("no f32 K-FAC factor '" + name + "'");
  if (factor.shape != std::vector<int64_t>{size, size})
    return modelError(::pf::formatText("factor '%s' is not %lldx%lld", name.c_str(),
                                       (long long)size, (long long)size));
  return std::vector<double>(factor.data, factor.data + size * size);
}

/// Δᵀ F Δ of an embedding table W [vocab, h] whose factor A is diagonal
/// ([vocab]: one-hot inputs, pf-insert-kfac embeddings=...): Σ_v A_v·Δ_vᵀ B Δ_v.
::pf::Expected<double> diagonalCurvature(const KfacModelLayer &layer, const ParameterChange &table,
                                         const FloatTensor &diagonal,
                                         const FloatTensorLookup &state) {
  const int64_t rows = diagonal.shape[0];
  if (table.before.shape.size() != 2 || table.before.shape[0] != rows)
    return modelError(::pf::formatText("diagonal factor '%s' has %lld entries; '%s' is no "
                                       "table of that many rows",
                                       layer.factorA.c_str(), (long long)rows,
                                       layer.weight.c_str()));
  const int64_t width = table.before.shape[1];
  auto factorB = squareFactor(layer.factorB, width, state);
  if (!factorB)
    return factorB.status();
  std::vector<double> d(size_t(rows * width)), db(d.size());
  for (int64_t i = 0; i < rows * width; ++i)
    d[i] = table.delta(i);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(width), int(width), 1.0,
              d.data(), int(width), factorB->data(), int(width), 0.0, db.data(), int(width));
  double curvature = 0;
  for (int64_t v = 0; v < rows; ++v) {
    double row = 0;
    for (int64_t j = 0; j < width; ++j)
      row += d[v * width + j] * db[v * width + j];
    curvature += double(diagonal.data[v]) * row;
  }
  return curvature;
}

/// Δᵀ F Δ of a linear layer: tr(Dᵀ B D A) = Σ (B·D) ⊙ (D·A) with D the
/// [out, a] change (the weight's in [out, in] layout, the bias as A's last
/// column when A has one); a bias outside A adds Δbᵀ B Δb (its input is 1).
::pf::Expected<double> linearCurvature(const KfacModelLayer &layer, const ParameterChange &weight,
                                       const ParameterChange *bias,
                                       const FloatTensorLookup &state) {
  if (weight.before.shape.size() != 2)
    return modelError("weight '" + layer.weight + "' is not a matrix");
  FloatTensor a = state(layer.factorA);
  if (a.data && a.shape.size() == 1 && !bias)
    return diagonalCurvature(layer, weight, a, state);
  const int64_t out = weight.before.shape[layer.weightInOut ? 1 : 0];
  const int64_t in = weight.before.shape[layer.weightInOut ? 0 : 1];
  if (!a.data || a.shape.size() != 2)
    return modelError("no f32 K-FAC factor '" + layer.factorA + "'");
  const int64_t columns = a.shape[0];
  const bool biasColumn = columns == in + 1;
  if (columns != in && !(biasColumn && bias))
    return modelError(::pf::formatText("factor '%s' is %lldx%lld; weight '%s' has %lld inputs",
                                       layer.factorA.c_str(), (long long)columns,
                                       (long long)columns, layer.weight.c_str(), (long long)in));
  if (bias && bias->elements != out)
    return modelError("bias '" + layer.bias + "' does not match the outputs of '" + layer.weight +
                      "'");
  auto factorA = squareFactor(layer.factorA, columns, state);
  if (!factorA)
    return factorA.status();
  auto factorB = squareFactor(layer.factorB, out, state);
  if (!factorB)
    return factorB.status();
  std::vector<double> d(size_t(out * columns), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i)
      d[o * columns + i] = weight.delta(layer.weightInOut ? i * out + o : o * in + i);
    if (biasColumn)
      d[o * columns + in] = bias->delta(o);
  }
  std::vector<double> bd(d.size()), da(d.size());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(out), int(columns), int(out), 1.0,
              factorB->data(), int(out), d.data(), int(columns), 0.0, bd.data(), int(columns));
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(out), int(columns), int(columns), 1.0,
              d.data(), int(columns), factorA->data(), int(columns), 0.0, da.data(), int(columns));
  double curvature = 0;
  for (size_t k = 0; k < d.size(); ++k)
    curvature += bd[k] * da[k];
  if (bias && !biasColumn)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t p = 0; p < out; ++p)
        curvature += bias->delta(o) * (*factorB)[o * out + p] * bias->delta(p);
  return curvature;
}

/// Σ_j (Δγ_j, Δβ_j) F_j (Δγ_j, Δβ_j)ᵀ of a LayerNorm layer: F is [h, 3]
/// (γγ, γβ, ββ) or, diagonal, [h, 2] (γγ, ββ).
::pf::Expected<double> layerNormCurvature(const KfacModelLayer &layer, const ParameterChange &scale,
                                          const ParameterChange &shift,
                                          const FloatTensorLookup &state) {
  FloatTensor factor = state(layer.factorA);
  const int64_t h = scale.elements;
  if (!factor.data || factor.shape.size() != 2 || factor.shape[0] != h ||
      (factor.shape[1] != 2 && factor.shape[1] != 3) || shift.elements != h)
    return modelError("LayerNorm factor '" + layer.factorA + "' does not fit '" + layer.weight +
                      "' and '" + layer.bias + "'");
  const int64_t columns = factor.shape[1];
  double curvature = 0;
  for (int64_t j = 0; j < h; ++j) {
    const float *row = factor.data + j * columns;
    const double ss = row[0], sb = columns == 3 ? double(row[1]) : 0.0, bb = row[columns - 1];
    const double dg = scale.delta(j), db = shift.delta(j);
    curvature += ss * dg * dg + 2 * sb * dg * db + bb * db * db;
  }
  return curvature;
}
} // namespace

::pf::Expected<QuadraticModel> mlir::pf::train::evaluateQuadraticModel(
    const std::vector<KfacModelLayer> &layers, const FloatTensorLookup &before,
    const FloatTensorLookup &after, const FloatTensorLookup &gradients,
    const FloatTensorLookup &state) {
  QuadraticModel model;
  for (const KfacModelLayer &layer : layers) {
    auto weight = changeOf(layer.weight, before, after, gradients);
    if (!weight)
      return weight.status();
    std::optional<ParameterChange> bias;
    if (!layer.bias.empty()) {
      auto change = changeOf(layer.bias, before, after, gradients);
      if (!change)
        return change.status();
      bias = *change;
    }
    addFirstOrder(*weight, model);
    if (bias)
      addFirstOrder(*bias, model);
    ::pf::Expected<double> curvature =
        layer.kind == KfacModelLayer::Kind::Linear
            ? linearCurvature(layer, *weight, bias ? &*bias : nullptr, state)
            : (bias ? layerNormCurvature(layer, *weight, *bias, state)
                    : ::pf::Expected<double>(
                          modelError("LayerNorm layer '" + layer.weight + "' has no shift")));
    if (!curvature)
      return curvature.status();
    model.curvature += *curvature;
  }
  return model;
}
