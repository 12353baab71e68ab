//===- KfacOffload.cpp - Inversions run by devices that idle more ---------===//
//
// Layer 1 of the K-FAC code (see pf/Schedule/KfacOffload.h): chooses and
// applies moves of inversion tasks; knows no policy and no placement.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/KfacOffload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace pf::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// The layer's K-FAC linears: its own, or a BERT block's of the model's
/// block shape (Q, K, V, output h x h, FFN h -> 4h -> h).
std::vector<std::pair<double, double>> linearsOf(const CostModel &costs, int layer) {
  const std::vector<std::pair<double, double>> &own = costs.layers[layer].memory.kfacLinears;
  if (!own.empty() || !costs.block.known())
    return own;
  const double h = costs.block.hidden;
  return {{h, h}, {h, h}, {h, h}, {h, h}, {h, 4 * h}, {4 * h, h}};
}

/// A device's refresh work over what a step leaves for it: the capacity
/// bound on K that device alone imposes.
double ratioOf(double work, double room) {
  if (work <= 0)
    return 0;
  return room > 0 ? work / room : kInf;
}

struct Balance {
  std::vector<double> work, room;

  double ratio(int d) const { return ratioOf(work[d], room[d]); }
  int busiest() const {
    int best = 0;
    for (int d = 1; d < static_cast<int>(work.size()); ++d)
      if (ratio(d) > ratio(best))
        best = d;
    return best;
  }
};

/// One factor of a layer that `from` owns: its inversion task and the
/// work of its curvature pieces.
struct Factor {
  int layer = 0;
  bool isA = true;
  int from = 0;
  double inversion = 0, curvature = 0;
  bool moved = false;
};

std::vector<Factor> factorsOf(const KfacProblem &one) {
  std::vector<Factor> factors;
  for (const KfacTask &t : one.tasks)
    if ((t.kind == ItemKind::InversionA || t.kind == ItemKind::InversionB) && t.duration > 0)
      factors.push_back({t.layer, t.kind == ItemKind::InversionA, t.device, t.duration, 0});
  for (const KfacTask &t : one.tasks) {
    if (t.kind != ItemKind::CurvatureA && t.kind != ItemKind::CurvatureB)
      continue;
    for (Factor &f : factors)
      if (f.layer == t.layer && f.isA == (t.kind == ItemKind::CurvatureA) && f.from == t.device)
        f.curvature += t.duration;
  }
  return factors;
}

struct Candidate {
  int factor = -1, to = -1;
  bool curvature = false;
  double largest = kInf;
};

/// The best move of one of `from`'s factors (its inversion, or its
/// curvature and inversion): to the device whose ratio it raises least,
/// judged on the pair alone. Where several devices share the largest ratio,
/// each move lowers one of them and the maximum falls once all have moved
/// work. Ties keep the curvature home (no activations to send).
Candidate bestMove(const std::vector<Factor> &factors, const Balance &b, int from,
                   bool curvatureMoves) {
  Candidate best;
  const int devices = static_cast<int>(b.work.size());
  for (size_t i = 0; i < factors.size(); ++i) {
    const Factor &f = factors[i];
    if (f.moved || f.from != from)
      continue;
    for (bool withCurvature : {false, true}) {
      if (withCurvature && (!curvatureMoves || f.curvature <= 0))
        continue;
      const double amount = f.inversion + (withCurvature ? f.curvature : 0);
      for (int e = 0; e < devices; ++e) {
        if (e == from)
          continue;
        double largest = std::max(ratioOf(b.work[e] + amount, b.room[e]),
                                  ratioOf(b.work[from] - amount, b.room[from]));
        if (largest < best.largest * (1 - 1e-9))
          best = {static_cast<int>(i), e, withCurvature, largest};
      }
    }
  }
  return best;
}

/// ms to send what one micro-batch's curvature of the factor reads: the
/// inputs (A) or output gradients (B) of the layer's linears, rows = the
/// block's micro-batch x sequence. Negative when the link is modelled but
/// the rows are unknown (the curvature cannot move then).
double activationTransferMs(const CostModel &costs, int layer, bool factorA) {
  if (costs.linkGBs <= 0)
    return 0;
  if (!costs.block.known())
    return -1;
  double widths = 0;
  for (const auto &[in, out] : linearsOf(costs, layer))
    widths += factorA ? in : out;
  const double rows = static_cast<double>(costs.block.microBatch) * costs.block.seqLen;
  return 1e3 * 4 * rows * widths / (costs.linkGBs * 1e9);
}

} // namespace

double factorTransferMs(const CostModel &costs, int layer, bool factorA) {
  double mine = 0, both = 0;
  for (const auto &[in, out] : linearsOf(costs, layer)) {
    mine += factorA ? in * in : out * out;
    both += in * in + out * out;
  }
  if (costs.linkGBs > 0 && mine > 0)
    return 1e3 * 4 * mine / (costs.linkGBs * 1e9);
  const double share = both > 0 ? mine / both : 0.5;
  return costs.layers[layer].factorAllreduce * share;
}

std::vector<KfacMove> planKfacOffload(const PipelineStep &step, const CostModel &costs,
                                      bool curvature) {
  if (step.layout.pipes != 1 || step.layout.devices < 2)
    return {};
  // Without moves: the tasks as their stages own them.
  PipelineStep bare = step;
  bare.kfacMoves.clear();
  const KfacProblem one = buildKfacProblem(bare, costs, 1);
  const KfacCapacity capacity = kfacCapacity(bare, costs);
  Balance b;
  b.work = capacity.refreshWork;
  for (int d = 0; d < one.devices; ++d)
    b.room.push_back(capacity.bubblePerStep[d] - capacity.preconditionPerStep[d]);

  std::vector<Factor> factors = factorsOf(one);
  std::vector<KfacMove> moves;
  for (size_t round = 0; round < factors.size(); ++round) {
    const int from = b.busiest();
    const double current = b.ratio(from);
    Candidate c = bestMove(factors, b, from, curvature);
    if (c.factor < 0 || !(c.largest < current * (1 - 1e-3)))
      break;
    Factor &f = factors[c.factor];
    const double activationMs = c.curvature ? activationTransferMs(costs, f.layer, f.isA) : 0;
    if (activationMs < 0) { // the curvature cannot move: never again
      curvature = false;
      continue;
    }
    f.moved = true;
    const double amount = f.inversion + (c.curvature ? f.curvature : 0);
    b.work[from] -= amount;
    b.work[c.to] += amount;
    KfacMove m;
    m.layer = f.layer;
    m.factorA = f.isA;
    m.curvature = c.curvature;
    m.from = from;
    m.to = c.to;
    m.returnMs = factorTransferMs(costs, f.layer, f.isA);
    m.sendMs = c.curvature ? 0 : m.returnMs;
    m.activationMs = activationMs;
    moves.push_back(m);
  }
  return moves;
}

void applyKfacMoves(KfacProblem &problem, const std::vector<KfacMove> &moves) {
  for (const KfacMove &m : moves)
    for (KfacTask &t : problem.tasks) {
      const ItemKind curvature = m.factorA ? ItemKind::CurvatureA : ItemKind::CurvatureB;
      const ItemKind kind = m.factorA ? ItemKind::InversionA : ItemKind::InversionB;
      if (t.layer != m.layer || t.device != m.from)
        continue;
      if (m.curvature && t.kind == curvature) {
        t.device = m.to;
        t.release += m.activationMs;
        continue;
      }
      if (t.kind != kind)
        continue;
      t.device = m.to;
      t.depLatency += m.sendMs;
      // A factor without curvature tasks is complete at its release.
      if (t.deps.empty())
        t.release += m.sendMs;
    }
}

std::string describeKfacMoves(const std::vector<KfacMove> &moves, const CostModel &costs) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  for (const KfacMove &m : moves) {
    os << costs.layers[m.layer].name << (m.curvature ? " curvature and" : "") << " inversion "
       << (m.factorA ? "A" : "B") << ": device " << m.from << " -> device " << m.to << " (";
    if (m.curvature)
      os << "activations " << m.activationMs << " ms per micro-batch";
    else
      os << "factor " << m.sendMs << " ms";
    os << ", inverse " << m.returnMs << " ms back)\n";
  }
  return os.str();
}

} // namespace pf::sched

namespace pf::sched {
namespace {

bool isInversionOf(const TimelineItem &it, const KfacMove &m) {
  const ItemKind kind = m.factorA ? ItemKind::InversionA : ItemKind::InversionB;
  return it.kind == kind && it.layer == m.layer && it.device == m.to;
}

/// The refreshes of the move's inversion in the window (several for a
/// staggered refresh), ascending.
std::vector<int> refreshesOf(const std::vector<TimelineItem> &items, const KfacMove &m) {
  std::vector<int> refreshes;
  for (const TimelineItem &it : items)
    if (isInversionOf(it, m) &&
        std::find(refreshes.begin(), refreshes.end(), it.refresh) == refreshes.end())
      refreshes.push_back(it.refresh);
  std::sort(refreshes.begin(), refreshes.end());
  return refreshes;
}

/// When the helper's last piece of one refresh of the move's inversion ends,
/// in the time of the window the refresh started in (pieces of the previous
/// refresh, refresh lag 1, end one window later), and that lag; -1 without
/// pieces.
std::pair<double, int> lastInversionEnd(const Timeline &tl, const std::vector<TimelineItem> &items,
                                        const KfacMove &m, int refresh) {
  const double window = tl.windowTime();
  double end = -1;
  int lag = 0;
  for (const TimelineItem &it : items)
    if (isInversionOf(it, m) && it.refresh == refresh && it.end + it.refreshLag * window > end) {
      end = it.end + it.refreshLag * window;
      lag = it.refreshLag;
    }
  return {end, lag};
}

/// Draws one refresh's inverse going back from `t` (window time, beyond the
/// window for a later one).
void appendReturn(const Timeline &tl, const KfacMove &m, int refresh, double t,
                  std::vector<TimelineItem> &added) {
  const double window = tl.windowTime();
  // The transfer runs beside compute; it is drawn in the steps it spans,
  // wrapping to the window's start (a later window: refresh lag) at its end.
  // Times are tens of seconds in ms: a tolerance relative to the window, or
  // a step boundary computed in another order could stall the walk.
  const double eps = 1e-12 * std::max(1.0, window);
  double left = m.returnMs;
  for (int guard = 0; left > eps && guard < 4 * tl.steps + 4; ++guard) {
    const int lag = static_cast<int>(t / window + 1e-12);
    const double inWindow = t - lag * window;
    int k = 0;
    while (k + 1 < tl.steps && tl.stepStart[k + 1] <= inWindow + eps)
      ++k;
    const double stepEnd = tl.stepStart[k] + tl.stepTime[k];
    const double length = std::min(left, stepEnd - inWindow);
    if (length <= eps) {
      // At a step's end (rounding): on to the next step, or the next window.
      t = k + 1 < tl.steps ? lag * window + tl.stepStart[k + 1] : (lag + 1) * window;
      continue;
    }
    TimelineItem it;
    it.kind = ItemKind::FactorSync;
    it.lane = Lane::Comm;
    it.device = m.to;
    it.step = k;
    it.layer = m.layer;
    it.start = inWindow;
    it.end = inWindow + length;
    it.refreshLag = lag;
    it.refresh = refresh;
    added.push_back(it);
    left -= length;
    t += length;
  }
}

} // namespace

void appendInverseReturns(Timeline &tl, const PipelineStep &step) {
  const double window = tl.windowTime();
  if (!(window > 0))
    return;
  std::vector<TimelineItem> added;
  for (const KfacMove &m : step.kfacMoves) {
    if (m.returnMs <= 0)
      continue;
    for (int refresh : refreshesOf(tl.kfacItems, m))
      appendReturn(tl, m, refresh, lastInversionEnd(tl, tl.kfacItems, m, refresh).first, added);
  }
  tl.kfacItems.insert(tl.kfacItems.end(), added.begin(), added.end());
}

Status checkInverseReturns(const Timeline &tl, const std::vector<TimelineItem> &items,
                           const PipelineStep &step) {
  const double window = tl.windowTime();
  for (const KfacMove &m : step.kfacMoves) {
    // The owner's first preconditioning of the layer that uses the refresh.
    double use = -1;
    for (const TimelineItem &it : items)
      if (it.kind == ItemKind::Precondition && it.layer == m.layer && it.step == 0 &&
          it.device == m.from && (use < 0 || it.start < use))
        use = it.start;
    double returned = 0;
    for (const TimelineItem &it : items)
      if (it.kind == ItemKind::FactorSync && it.lane == Lane::Comm && it.device == m.to &&
          it.layer == m.layer)
        returned += it.duration();
    double expected = 0;
    for (const KfacMove &other : step.kfacMoves)
      if (other.to == m.to && other.layer == m.layer)
        expected += other.returnMs * refreshesOf(items, other).size();
    if (std::fabs(returned - expected) > 1e-6 * std::max(1.0, expected))
      return Status::error("the inverses of layer " + std::to_string(m.layer) +
                           " sent back from device " + std::to_string(m.to) + " take " +
                           std::to_string(returned) + " ms on its link, expected " +
                           std::to_string(expected));
    if (use < 0)
      continue;
    for (int refresh : refreshesOf(items, m)) {
      auto [end, lag] = lastInversionEnd(tl, items, m, refresh);
      const double arrival = end + m.returnMs, due = (1 + lag) * window + use;
      if (arrival > due + 1e-6)
        return Status::error(
            std::string("the inverse ") + (m.factorA ? "A" : "B") + " of layer " +
            std::to_string(m.layer) + ", inverted on device " + std::to_string(m.to) +
            ", is back on device " + std::to_string(m.from) + " at " + std::to_string(arrival) +
            " ms, after the preconditioning that uses it (" + std::to_string(due) + " ms)");
    }
  }
  return Status::success();
}

} // namespace pf::sched
