//===- OpGraph.h - Dependencies between pipeline passes (private) -*- C++ -*-===//
//
// The data dependencies of one training step, shared by the simulator, the
// greedy order generator and the validator: a forward needs the previous
// stage's forward of the same micro-batch, a backward needs its own forward
// and the next stage's backward, a weight-gradient pass its input-gradient.
// A backward is whole or split per (stage, micro-batch) (PipelineLayout::
// splitsBackward); both forms share one id, so neighbours need not agree.
//
//===----------------------------------------------------------------------===//

#ifndef PF_LIB_SCHEDULE_OPGRAPH_H
#define PF_LIB_SCHEDULE_OPGRAPH_H

#include "pf/Schedule/Pipeline.h"

#include <vector>

namespace pf::sched::detail {

class OpGraph {
public:
  explicit OpGraph(const PipelineLayout &layout) : layout_(layout) {}

  /// Dense id of a pass: [slot][stage][micro], slot 0 forward, 1 backward
  /// (full or input-gradient), 2 weight-gradient.
  int numIds() const { return 3 * layout_.stages * layout_.microbatches; }
  int id(const PipelineOp &op) const {
    return (slot(op.pass) * layout_.stages + op.stage) * layout_.microbatches +
           op.micro;
  }
  int device(const PipelineOp &op) const {
    return layout_.deviceOf(layout_.pipeOf(op.micro), op.stage);
  }

  /// Passes `op` consumes.
  void producers(const PipelineOp &op, std::vector<PipelineOp> &out) const {
    out.clear();
    switch (op.pass) {
    case PassKind::Forward:
      if (op.stage > 0)
        out.push_back({PassKind::Forward, op.stage - 1, op.micro});
      break;
    case PassKind::Backward:
    case PassKind::BackwardInput:
      out.push_back({PassKind::Forward, op.stage, op.micro});
      if (op.stage + 1 < layout_.stages)
        out.push_back({op.pass, op.stage + 1, op.micro});
      break;
    case PassKind::BackwardWeight:
      out.push_back({PassKind::BackwardInput, op.stage, op.micro});
      break;
    }
  }

  /// Passes that consume `op`.
  void consumers(const PipelineOp &op, std::vector<PipelineOp> &out) const {
    out.clear();
    const PassKind back = layout_.splitsBackward(op.stage, op.micro)
                              ? PassKind::BackwardInput
                              : PassKind::Backward;
    switch (op.pass) {
    case PassKind::Forward:
      if (op.stage + 1 < layout_.stages)
        out.push_back({PassKind::Forward, op.stage + 1, op.micro});
      out.push_back({back, op.stage, op.micro});
      break;
    case PassKind::Backward:
    case PassKind::BackwardInput:
      if (op.stage > 0)
        out.push_back({op.pass, op.stage - 1, op.micro});
      if (op.pass == PassKind::BackwardInput)
        out.push_back({PassKind::BackwardWeight, op.stage, op.micro});
      break;
    case PassKind::BackwardWeight:
      break;
    }
  }

  /// Transfer time on the edge producer -> consumer: activations and their
  /// gradients cross devices between adjacent stages.
  double latency(const PipelineOp &producer, const PipelineOp &consumer,
                 double p2p) const {
    if (producer.stage == consumer.stage)
      return 0;
    return device(producer) == device(consumer) ? 0 : p2p;
  }

  /// Every pass of the step.
  std::vector<PipelineOp> allOps() const {
    std::vector<PipelineOp> ops;
    for (int s = 0; s < layout_.stages; ++s)
      for (int m = 0; m < layout_.microbatches; ++m) {
        ops.push_back({PassKind::Forward, s, m});
        if (layout_.splitsBackward(s, m)) {
          ops.push_back({PassKind::BackwardInput, s, m});
          ops.push_back({PassKind::BackwardWeight, s, m});
        } else {
          ops.push_back({PassKind::Backward, s, m});
        }
      }
    return ops;
  }

private:
  static int slot(PassKind pass) {
    switch (pass) {
    case PassKind::Forward:
      return 0;
    case PassKind::Backward:
    case PassKind::BackwardInput:
      return 1;
    case PassKind::BackwardWeight:
      return 2;
    }
    return 0;
  }

  const PipelineLayout &layout_;
};

} // namespace pf::sched::detail

#endif // PF_LIB_SCHEDULE_OPGRAPH_H
