//===- Analytic.cpp - FLOP/byte cost model of transformer blocks ----------===//
//
// Roofline times from the BERT formulas of shared/reference/pipefisher.md and
// public datasheet numbers. The efficiencies are calibrated once on the
// P100 BERT-Large profile (forward, inversion and preconditioning land within
// about 10% of the measured times; backward and curvature within 30%).
//
// Layer "costs" (docs/schedule.md): uses only CostModel.h.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/CostModel.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace pf::sched {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// Seconds -> milliseconds for a roofline of compute and memory traffic.
double rooflineMs(double flops, double peakTflops, double efficiency,
                  double bytes, double memoryGBs, double memoryEfficiency) {
  double compute = flops / (peakTflops * 1e12 * efficiency);
  double memory = bytes / (memoryGBs * 1e9 * memoryEfficiency);
  return 1e3 * std::max(compute, memory);
}

double transferMs(double bytes, const DeviceSpec &device) {
  return 1e3 * bytes / (device.linkGBs * 1e9) + device.linkLatencyUs * 1e-3;
}

} // namespace

const std::vector<DeviceSpec> &knownDevices() {
  // Dense peaks (no sparsity) of the SXM parts; link = NVLink per direction.
  static const std::vector<DeviceSpec> devices = {
      // name   fp32  tf32   HBM   link  lat  gemm solver mem
      {"p100", 10.6, 0.0, 732, 80, 10, 0.6, 0.11, 0.8},
      {"v100", 15.7, 0.0, 900, 150, 8, 0.6, 0.11, 0.8},
      {"a100", 19.5, 156.0, 2039, 300, 5, 0.6, 0.11, 0.8},
      {"h100", 67.0, 494.7, 3350, 450, 5, 0.6, 0.11, 0.8},
      {"h200", 67.0, 494.7, 4800, 450, 5, 0.6, 0.11, 0.8},
  };
  return devices;
}

Expected<DeviceSpec> findDevice(const std::string &name) {
  std::string key = lower(name);
  for (const DeviceSpec &d : knownDevices())
    if (d.name == key)
      return d;
  std::string known;
  for (const DeviceSpec &d : knownDevices())
    known += (known.empty() ? "" : ", ") + d.name;
  return Status::error("unknown device '" + name + "' (known: " + known + ")");
}

Expected<TransformerSpec> findModel(const std::string &name) {
  std::string key = lower(name);
  // The reference setup: micro-batch 32, sequence length 128.
  if (key == "bert-base")
    return TransformerSpec{"bert-base", 12, 768, 12, 128, 32};
  if (key == "bert-large")
    return TransformerSpec{"bert-large", 24, 1024, 16, 128, 32};
  return Status::error("unknown model '" + name +
                       "' (known: bert-base, bert-large)");
}

Expected<Precision> parsePrecision(const std::string &name) {
  std::string key = lower(name);
  if (key == "fp32")
    return Precision::FP32;
  if (key == "tf32")
    return Precision::TF32;
  return Status::error("unknown precision '" + name + "' (known: fp32, tf32)");
}

BlockWork transformerBlockWork(const TransformerSpec &m) {
  const double b = m.microBatch, s = m.seqLen, h = m.hidden, a = m.heads;
  const double bs = b * s, h2 = h * h, h3 = h2 * h;
  BlockWork w;
  // Forward: QKV (6bsh^2) + output (2bsh^2) + FFN (16bsh^2) + scores and
  // context (4bs^2h).
  w.forwardFlops = 24 * bs * h2 + 4 * bs * s * h;
  // Backward = 2x forward: the linears' input and weight gradients are 24bsh^2
  // each; attention has no weights, so its 8bs^2h is input-gradient work.
  w.backwardInputFlops = 24 * bs * h2 + 8 * bs * s * h;
  w.backwardWeightFlops = 24 * bs * h2;
  // K-FAC factors of the 6 linears: A = x^T x over inputs of width h (Q, K,
  // V, output, FFN1) and 4h (FFN2); B over outputs h (4 of them, FFN2) and 4h
  // (FFN1). A full GEMM costs 2 * rows * width^2.
  const double factorWidths2 = 5 * h2 + 16 * h2;
  w.curvatureAFlops = 2 * bs * factorWidths2;
  w.curvatureBFlops = 2 * bs * factorWidths2;
  // Cholesky inverse (potrf + potri) ~ n^3 per factor.
  w.inversionAFlops = 5 * h3 + 64 * h3;
  w.inversionBFlops = 5 * h3 + 64 * h3;
  // B^-1 G A^-1 for G of shape out x in: 2 out^2 in + 2 out in^2.
  w.preconditionFlops = 4 * (4 * h3) + 2 * (2 * 16 * h3 + 2 * 4 * h3);
  const double weights = 12 * h2 + 13 * h;
  // fp32: weights read once; activations as Megatron-LM counts them for
  // 16-bit training (34 bsh + 5 a s^2 b bytes), doubled for 4-byte floats.
  w.savedActivationBytes = 2 * (34 * bs * h + 5 * a * s * s * b);
  w.forwardBytes = 4 * weights + w.savedActivationBytes;
  w.activationBytes = 4 * bs * h;
  w.parameterBytes = 4 * weights;
  w.factorBytes = 4 * 2 * factorWidths2;
  return w;
}

CostModel analyticCostModel(const DeviceSpec &device,
                            const TransformerSpec &model, Precision precision) {
  const BlockWork w = transformerBlockWork(model);
  const double gemmPeak = precision == Precision::TF32 && device.tf32Tflops > 0
                              ? device.tf32Tflops
                              : device.fp32Tflops;
  auto gemm = [&](double flops, double bytes) {
    return rooflineMs(flops, gemmPeak, device.gemmEfficiency, bytes,
                      device.memoryGBs, device.memoryEfficiency);
  };
  LayerCost block;
  block.forward = gemm(w.forwardFlops, w.forwardBytes);
  // The backward reads the saved activations and writes as many gradients.
  block.backwardInput = gemm(w.backwardInputFlops, w.forwardBytes);
  block.backwardWeight = gemm(w.backwardWeightFlops, w.forwardBytes);
  block.curvatureA = gemm(w.curvatureAFlops, 0);
  block.curvatureB = gemm(w.curvatureBFlops, 0);
  // Factorisations run in FP32 on the CUDA cores.
  block.inversionA = rooflineMs(w.inversionAFlops, device.fp32Tflops,
                                device.solverEfficiency, 0, device.memoryGBs,
                                device.memoryEfficiency);
  block.inversionB = rooflineMs(w.inversionBFlops, device.fp32Tflops,
                                device.solverEfficiency, 0, device.memoryGBs,
                                device.memoryEfficiency);
  block.precondition = gemm(w.preconditionFlops, w.factorBytes);
  block.allreduce = transferMs(w.parameterBytes, device);
  block.factorAllreduce = transferMs(w.factorBytes, device);

  block.memory.activationBytes = w.savedActivationBytes;
  block.memory.parameters = w.parameterBytes / 4; // fp32 weights
  // Q, K, V and the attention output are h x h, FFN1 h -> 4h, FFN2 4h -> h.
  const double h = model.hidden;
  block.memory.kfacLinears = {{h, h}, {h, h}, {h, h}, {h, h}, {h, 4 * h}, {4 * h, h}};

  CostModel costs;
  costs.hasMemory = true;
  costs.block = {model.hidden, model.heads, model.seqLen, model.microBatch};
  costs.linkGBs = device.linkGBs;
  std::ostringstream name;
  name << "analytic " << model.name << " on " << device.name << " ("
       << (precision == Precision::TF32 ? "tf32" : "fp32")
       << ", micro-batch " << model.microBatch << ", seq " << model.seqLen
       << ")";
  costs.name = name.str();
  costs.p2p = transferMs(w.activationBytes, device);
  for (int i = 0; i < model.layers; ++i) {
    LayerCost layer = block;
    layer.name = "block" + std::to_string(i);
    costs.layers.push_back(layer);
  }
  return costs;
}

} // namespace pf::sched
