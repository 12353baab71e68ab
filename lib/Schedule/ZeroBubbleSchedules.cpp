//===- ZeroBubbleSchedules.cpp - ZB-V, DualPipe and DualPipeV orders ------===//
//
// Orders as published: ZB-V as Qi et al. hand-craft it (the order PyTorch's
// ScheduleZBVZeroBubble builds), DualPipe as DeepSeek's reference runs it,
// and DualPipeV as PyTorch's ScheduleDualPipeV folds it. The golden tests
// (unittests/Schedule/TorchCsvTest.cpp) compare them with PyTorch's orders.
//
// Layer "pipeline" (docs/schedule.md): data only, no costs.
//
//===----------------------------------------------------------------------===//

#include "ScheduleOrders.h"

#include <algorithm>
#include <array>
#include <deque>

namespace pf::sched::detail {
namespace {

/// One device's program, built pass by pass from per-chunk counters. Chunk
/// 0 is the device's "near" stage (early in its pipeline), chunk 1 the
/// "far" one.
class RankProgram {
public:
  RankProgram(std::vector<PipelineOp> &out, std::array<int, 2> stages,
              std::array<int, 2> firstMicro)
      : out_(out), stages_(stages), firstMicro_(firstMicro) {}

  void forward(int chunk, bool overlapped = false) {
    push(PassKind::Forward, chunk, forwards_[chunk]++, overlapped);
  }
  /// A backward: whole, or (zeroBubble) its input gradient with the weight
  /// gradient queued for weight().
  void backward(int chunk, bool zeroBubble, bool overlapped = false) {
    int index = backwards_[chunk]++;
    push(zeroBubble ? PassKind::BackwardInput : PassKind::Backward, chunk, index,
         overlapped);
    if (zeroBubble)
      pendingWeights_.push_back({chunk, index});
  }
  /// The oldest queued weight gradient, if any.
  void weight() {
    if (pendingWeights_.empty())
      return;
    auto [chunk, index] = pendingWeights_.front();
    pendingWeights_.pop_front();
    push(PassKind::BackwardWeight, chunk, index, false);
  }
  /// DualPipe's F&B pair: a forward of one chunk overlapped with a whole
  /// backward of the other.
  void forwardBackward(int forwardChunk, int backwardChunk) {
    forward(forwardChunk);
    backward(backwardChunk, false, /*overlapped=*/true);
  }

private:
  void push(PassKind pass, int chunk, int index, bool overlapped) {
    out_.push_back({pass, stages_[chunk], firstMicro_[chunk] + index, overlapped});
  }

  std::vector<PipelineOp> &out_;
  std::array<int, 2> stages_, firstMicro_;
  std::array<int, 2> forwards_{0, 0}, backwards_{0, 0};
  std::deque<std::pair<int, int>> pendingWeights_;
};

/// The eight phases of DualPipe for a device `h` places from the nearer end
/// of a pipeline of 2H devices, with `n` micro-batches per chunk.
void dualPipePhases(RankProgram &p, int halfRanks, int h, int n) {
  const int H = halfRanks;
  for (int i = 0; i < 2 * (H - h - 1); ++i)
    p.forward(0);
  for (int i = 0; i < h + 1; ++i) {
    p.forward(0);
    p.forward(1);
  }
  for (int i = 0; i < H - h - 1; ++i) {
    p.backward(1, /*zeroBubble=*/true);
    p.weight();
    p.forward(1);
  }
  for (int i = 0; i < n - 2 * H + h + 1; ++i) {
    // The middle devices do not overlap their first pair: the backward
    // would wait for the forward's neighbour.
    if (i == 0 && h == H - 1) {
      p.forward(0);
      p.backward(1, false);
    } else {
      p.forwardBackward(0, 1);
    }
    p.forwardBackward(1, 0);
  }
  for (int i = 0; i < H - h - 1; ++i) {
    p.backward(1, false);
    p.forwardBackward(1, 0);
  }
  // The drain: the second half of these backwards leave their weight
  // gradients for later (zero bubble).
  bool zeroBubble = false;
  const int drain = h + 1;
  for (int i = 0; i < drain; ++i) {
    if (i == drain / 2 && h % 2 == 1)
      zeroBubble = true;
    p.backward(1, zeroBubble);
    if (i == drain / 2 && h % 2 == 0)
      zeroBubble = true;
    p.backward(0, zeroBubble);
  }
  for (int i = 0; i < H - h - 1; ++i) {
    p.weight();
    p.backward(0, true);
  }
  for (int i = 0; i < h + 1; ++i)
    p.weight();
}

} // namespace

Order zbVOrder(const PipelineLayout &l) {
  const int D = l.devices, N = l.microbatches;
  // The hand-crafted order needs 2D-1 micro-batches to fill the V; with
  // fewer, the passes of the missing ones are dropped.
  const int n = std::max(2 * D - 1, N);
  Order order(D);
  for (int d = 0; d < D; ++d) {
    std::vector<PipelineOp> ops;
    const int near = d, far = 2 * D - 1 - d;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto add = [&](PassKind pass, int stage, int micro) {
      ops.push_back({pass, stage, micro});
    };
    auto backwardSplit = [&](int stage, int micro) {
      add(PassKind::BackwardInput, stage, micro);
      add(PassKind::BackwardWeight, stage, micro);
    };
    for (int i = 0; i < 2 * (D - d) - 1; ++i)
      add(PassKind::Forward, near, f0++);
    for (int i = 0; i < d; ++i) {
      add(PassKind::Forward, far, f1++);
      add(PassKind::Forward, near, f0++);
    }
    for (int i = 0; i < D - d; ++i) {
      add(PassKind::Forward, far, f1++);
      backwardSplit(far, b1++);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n)
        add(PassKind::Forward, near, f0++);
      backwardSplit(near, b0++);
      add(PassKind::Forward, far, f1++);
      backwardSplit(far, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < d; ++i) {
      add(PassKind::BackwardInput, near, b0++);
      add(PassKind::BackwardInput, far, b1++);
    }
    for (int i = 0; i < D - d; ++i) {
      add(PassKind::BackwardInput, near, b0++);
      add(PassKind::BackwardWeight, near, w0++);
    }
    while (w1 < b1)
      add(PassKind::BackwardWeight, far, w1++);
    while (w0 < b0)
      add(PassKind::BackwardWeight, near, w0++);
    for (const PipelineOp &op : ops)
      if (op.micro < N)
        order[d].push_back(op);
  }
  return order;
}

Order dualPipeOrder(const PipelineLayout &l) {
  const int D = l.devices, half = l.microbatches / 2;
  Order order(D);
  for (int d = 0; d < D; ++d) {
    // Chunk 0 is the pipe in which d is early: pipe 0 for the first half of
    // the devices (stage d), pipe 1 for the second (stage D-1-d).
    const bool firstHalf = d < D / 2;
    const int h = std::min(d, D - 1 - d);
    std::array<int, 2> stages = {h, D - 1 - h};
    std::array<int, 2> firstMicro = firstHalf ? std::array<int, 2>{0, half}
                                              : std::array<int, 2>{half, 0};
    RankProgram p(order[d], stages, firstMicro);
    dualPipePhases(p, D / 2, h, half);
  }
  return order;
}

Order dualPipeVOrder(const PipelineLayout &l) {
  const int D = l.devices;
  Order order(D);
  for (int d = 0; d < D; ++d) {
    RankProgram p(order[d], {d, 2 * D - 1 - d}, {0, 0});
    dualPipePhases(p, D, d, l.microbatches);
  }
  return order;
}

void markFullBackwards(PipelineLayout &layout, const Order &order) {
  layout.fullBackward.clear();
  if (!layout.splitBackward)
    return;
  std::vector<char> full(static_cast<size_t>(layout.stages) * layout.microbatches, 0);
  bool any = false;
  for (const auto &ops : order)
    for (const PipelineOp &op : ops)
      if (op.pass == PassKind::Backward && op.stage >= 0 &&
          op.stage < layout.stages && op.micro >= 0 &&
          op.micro < layout.microbatches) {
        full[op.stage * layout.microbatches + op.micro] = 1;
        any = true;
      }
  if (any)
    layout.fullBackward = std::move(full);
}

} // namespace pf::sched::detail
