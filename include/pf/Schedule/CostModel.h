//===- CostModel.h - Per-layer costs: measured profile or analytic -*- C++ -*-===//
//
// The scheduler only needs durations: per layer, the forward and backward
// passes (one micro-batch), the K-FAC curvature (one micro-batch), inversion
// (one refresh) and preconditioning (one step), plus communication costs.
// They come either from a measured profile (JSON, docs/profile-format.md) or
// from an analytic FLOP/byte model of a transformer block on a known device.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SCHEDULE_COSTMODEL_H
#define PF_SCHEDULE_COSTMODEL_H

#include "pf/Support/Status.h"

#include <string>
#include <utility>
#include <vector>

namespace pf::sched {

/// What a layer keeps in device memory (docs/profile-format.md). Zero where
/// the cost model does not say.
struct LayerMemory {
  /// Saved by the forward of one micro-batch until its backward (W for a
  /// split backward) has run.
  double activationBytes = 0;
  double parameters = 0; ///< weights, elements
  /// {in, out} of each K-FAC linear of the layer: factors A (in x in) and
  /// B (out x out).
  std::vector<std::pair<double, double>> kfacLinears;
};

/// Durations of one layer in milliseconds. A "layer" is the unit the profile
/// lists (for BERT a transformer block holding 6 K-FAC linear layers).
struct LayerCost {
  std::string name;
  double forward = 0;        ///< one micro-batch
  double backwardInput = 0;  ///< input-gradient part of the backward (ZB "B")
  double backwardWeight = 0; ///< weight-gradient part of the backward (ZB "W")
  double curvatureA = 0;     ///< A factor contribution of one micro-batch
  double curvatureB = 0;     ///< B factor contribution of one micro-batch
  double inversionA = 0;     ///< damped inverse of A, once per refresh
  double inversionB = 0;     ///< damped inverse of B, once per refresh
  double precondition = 0;   ///< B^-1 * grad * A^-1, once per step
  double allreduce = 0;      ///< gradient all-reduce between Chimera replicas
  double factorAllreduce = 0; ///< A/B factor all-reduce between replicas
  LayerMemory memory;         ///< bytes, not times

  double backward() const { return backwardInput + backwardWeight; }
  double curvature() const { return curvatureA + curvatureB; }
  double inversion() const { return inversionA + inversionB; }
};

/// The shape of the transformer block every layer is (profile key `block`,
/// docs/profile-format.md): what splitting a block into finer partition units
/// by the analytic FLOP shares needs (Grain.h). hidden 0: not given.
struct BlockShape {
  int hidden = 0;
  int heads = 0;
  int seqLen = 0;
  int microBatch = 0;
  /// The layers are already units of such blocks (Grain.h), not blocks.
  bool split = false;
  bool known() const { return hidden > 0 && heads > 0 && seqLen > 0 && microBatch > 0; }
};

struct CostModel {
  std::string name;
  std::vector<LayerCost> layers;
  double p2p = 0; ///< activation (or its gradient) sent between adjacent stages
  /// Chimera: when the replicas all-reduce a factor. false (the paper's
  /// model): right after its last curvature piece; true (pf's executor sums
  /// the factors with the gradients, after the flush): an inversion starts
  /// in the step after the curvature step at the earliest.
  bool replicaFactorsAfterFlush = false;
  /// Whether the layers' memory fields were given (profile keys
  /// activation_bytes, parameters, kfac_linears; the analytic model always).
  bool hasMemory = false;
  BlockShape block; ///< the layers' block shape, when known
  /// GPU-GPU bandwidth per direction in GB/s, for K-FAC factors sent to
  /// another device (KfacOffload.h); 0: not modelled.
  double linkGBs = 0;
  std::vector<std::string> warnings; ///< non-fatal remarks (e.g. unknown keys)
};

/// Parses a profile (format in docs/profile-format.md). `source` names the
/// input in error messages.
Expected<CostModel> parseProfile(const std::string &jsonText,
                                 const std::string &source);
/// Reads and parses a profile file.
Expected<CostModel> loadProfile(const std::string &path);
/// Serialises a cost model in the profile format (round-trips parseProfile).
std::string profileToJson(const CostModel &model);

//===----------------------------------------------------------------------===//
// Analytic model
//===----------------------------------------------------------------------===//

/// Public datasheet numbers of an accelerator plus the fraction of peak that
/// each kind of kernel reaches in practice.
struct DeviceSpec {
  std::string name;
  double fp32Tflops = 0;       ///< dense FP32 (CUDA cores)
  double tf32Tflops = 0;       ///< dense TF32 tensor cores; 0 when absent
  double memoryGBs = 0;        ///< HBM bandwidth
  double linkGBs = 0;          ///< per-direction GPU-GPU bandwidth
  double linkLatencyUs = 0;    ///< per message
  double gemmEfficiency = 0;   ///< achieved/peak for large GEMMs
  double solverEfficiency = 0; ///< achieved/peak for Cholesky inversion
  double memoryEfficiency = 0; ///< achieved/peak bandwidth
};

/// A BERT-like encoder (post-LN transformer blocks, FFN = 4h).
struct TransformerSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seqLen = 128;
  int microBatch = 32;
};

enum class Precision { FP32, TF32 };

/// FLOPs and bytes of one transformer block for one micro-batch (K-FAC
/// inversion: per refresh; preconditioning: per step).
struct BlockWork {
  double forwardFlops = 0, backwardInputFlops = 0, backwardWeightFlops = 0;
  double curvatureAFlops = 0, curvatureBFlops = 0;
  double inversionAFlops = 0, inversionBFlops = 0;
  double preconditionFlops = 0;
  double forwardBytes = 0;     ///< weights + activations touched by the forward
  double activationBytes = 0;  ///< block output sent to the next stage
  double savedActivationBytes = 0; ///< kept by the forward for the backward
  double parameterBytes = 0;   ///< gradient all-reduced between replicas
  double factorBytes = 0;      ///< A and B factors of the block
};

const std::vector<DeviceSpec> &knownDevices();
Expected<DeviceSpec> findDevice(const std::string &name);
Expected<TransformerSpec> findModel(const std::string &name);
Expected<Precision> parsePrecision(const std::string &name);

/// The BERT formulas of the reference (forward ~ 24bsh^2 + 4bs^2h, backward
/// twice that, K-FAC factor/inverse/precondition flops per block).
BlockWork transformerBlockWork(const TransformerSpec &model);

/// Roofline times of every block of `model` on `device`.
CostModel analyticCostModel(const DeviceSpec &device,
                            const TransformerSpec &model, Precision precision);

} // namespace pf::sched

#endif // PF_SCHEDULE_COSTMODEL_H
