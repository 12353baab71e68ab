//===- Memory.cpp - Peak memory of every device under a schedule ----------===//
//
// Layer "pipeline" (docs/schedule.md): uses CostModel.h and Pipeline.h only.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Memory.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace pf::sched {
namespace {

/// Sums of the layers of every stage.
struct StageMemory {
  double activationBytes = 0;
  double parameters = 0;
  double kfacBytes = 0;
};

std::vector<StageMemory> stageMemory(const PipelineLayout &layout,
                                     const CostModel &costs) {
  std::vector<StageMemory> stages(layout.stages);
  for (int s = 0; s < layout.stages && s < static_cast<int>(layout.stageLayers.size());
       ++s)
    for (int layer : layout.stageLayers[s]) {
      if (layer < 0 || layer >= static_cast<int>(costs.layers.size()))
        continue; // the program's verifier reports such layers
      const LayerMemory &m = costs.layers[layer].memory;
      stages[s].activationBytes += m.activationBytes;
      stages[s].parameters += m.parameters;
      stages[s].kfacBytes += kfacBytesOf(m);
    }
  return stages;
}

/// Whether `op` frees the activations its forward saved: the whole backward,
/// or W where the backward is split (W still reads the saved inputs).
bool releasesActivations(const PipelineOp &op) {
  return op.pass == PassKind::Backward || op.pass == PassKind::BackwardWeight;
}

/// Walks device d's order and records the peaks of what its forwards hold.
void measureInFlight(const PipelineProgram &program,
                     const std::vector<StageMemory> &stages, int d,
                     DeviceMemory &out) {
  const PipelineLayout &l = program.layout;
  // A micro-batch of pipe p passes through every stage of p on this device;
  // each such stage holds that share of the micro-batch's activations here.
  std::vector<int> stagesOfPipe(l.pipes, 0);
  for (int p = 0; p < l.pipes; ++p)
    for (int s = 0; s < l.stages; ++s)
      stagesOfPipe[p] += l.deviceOf(p, s) == d;

  int passes = 0;
  double share = 0, bytes = 0;
  for (const PipelineOp &op : program.order[d]) {
    if (op.stage < 0 || op.stage >= l.stages)
      continue;
    const int pipe = l.pipeOf(op.micro);
    const double shareOfPass = 1.0 / std::max(1, stagesOfPipe[pipe]);
    const double bytesOfPass = stages[op.stage].activationBytes;
    if (op.pass == PassKind::Forward) {
      ++passes;
      share += shareOfPass;
      bytes += bytesOfPass;
    } else if (releasesActivations(op)) {
      --passes;
      share -= shareOfPass;
      bytes -= bytesOfPass;
    }
    out.inFlightPasses = std::max(out.inFlightPasses, passes);
    out.inFlightMicrobatches = std::max(out.inFlightMicrobatches, share);
    out.activationBytes = std::max(out.activationBytes, bytes);
  }
}

/// Parameters, gradients, optimizer state and K-FAC of every stage copy the
/// device holds: both replicas' stages for Chimera and DualPipe.
void addStageCopies(const PipelineLayout &l, const std::vector<StageMemory> &stages,
                    const MemoryOptions &options, int d, DeviceMemory &out) {
  for (int p = 0; p < l.pipes; ++p)
    for (int s = 0; s < l.stages; ++s) {
      if (l.deviceOf(p, s) != d)
        continue;
      const double parameterBytes = kBytesPerElement * stages[s].parameters;
      out.parameterBytes += parameterBytes;
      out.gradientBytes += parameterBytes;
      out.optimizerBytes += options.optimizerStates * parameterBytes;
      if (options.kfac)
        out.kfacBytes += stages[s].kfacBytes;
    }
}

} // namespace

double kfacBytesOf(const LayerMemory &layer) {
  double factorElements = 0;
  for (const auto &[in, out] : layer.kfacLinears)
    factorElements += in * in + out * out;
  // The factors and their inverses have the same shapes.
  return 2 * kBytesPerElement * factorElements;
}

std::vector<DeviceMemory> computeMemory(const PipelineProgram &program,
                                        const CostModel &costs,
                                        const MemoryOptions &options) {
  const PipelineLayout &l = program.layout;
  const std::vector<StageMemory> stages = stageMemory(l, costs);
  std::vector<DeviceMemory> memory(l.devices);
  for (int d = 0; d < l.devices; ++d) {
    memory[d].device = d;
    if (d < static_cast<int>(program.order.size()))
      measureInFlight(program, stages, d, memory[d]);
    addStageCopies(l, stages, options, d, memory[d]);
  }
  return memory;
}

std::vector<int> stageInFlightPeaks(const PipelineProgram &program) {
  const PipelineLayout &l = program.layout;
  std::vector<int> peak(l.stages, 0);
  std::vector<int> live(static_cast<size_t>(l.pipes) * l.stages, 0);
  for (const auto &order : program.order)
    for (const PipelineOp &op : order) {
      if (op.stage < 0 || op.stage >= l.stages)
        continue;
      int &n = live[static_cast<size_t>(l.pipeOf(op.micro)) * l.stages + op.stage];
      n += op.pass == PassKind::Forward;
      n -= releasesActivations(op);
      peak[op.stage] = std::max(peak[op.stage], n);
    }
  return peak;
}

std::string formatGigabytes(double bytes) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f GB", bytes / 1e9);
  return buffer;
}

Status checkMemoryCap(const std::vector<DeviceMemory> &memory,
                      const MemoryOptions &options, const std::string &schedule) {
  std::ostringstream over;
  int devicesOver = 0;
  for (const DeviceMemory &m : memory) {
    if (m.totalBytes() <= options.capBytes)
      continue;
    char inFlight[32];
    std::snprintf(inFlight, sizeof inFlight, "%g", m.inFlightMicrobatches);
    over << (devicesOver++ ? "; " : "") << "device " << m.device << " needs "
         << formatGigabytes(m.totalBytes()) << ", "
         << formatGigabytes(m.totalBytes() - options.capBytes)
         << " over (activations " << formatGigabytes(m.activationBytes) << " for "
         << inFlight << " micro-batches in flight, weights with gradients and "
         << "optimizer state "
         << formatGigabytes(m.parameterBytes + m.gradientBytes + m.optimizerBytes)
         << ", K-FAC " << formatGigabytes(m.kfacBytes) << ")";
  }
  if (devicesOver == 0)
    return Status::success();
  return Status::error("schedule " + schedule + " exceeds the memory cap of " +
                       formatGigabytes(options.capBytes) + " per device on " +
                       std::to_string(devicesOver) + " of " +
                       std::to_string(memory.size()) + " devices: " + over.str());
}

} // namespace pf::sched
