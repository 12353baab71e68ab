//===- Partition.cpp - Contiguous min-max stage partitioning --------------===//
//
// Layer "pipeline" (docs/schedule.md): uses nothing else of the library.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Partition.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pf::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Prefix sums so that any stage's cost and memory is O(1).
struct Prefix {
  std::vector<double> cost, scaled, fixed;
  std::vector<double> perStageScaled, perStageFixed;
  explicit Prefix(const std::vector<double> &c, const StageMemoryModel &m)
      : cost(c.size() + 1, 0), scaled(c.size() + 1, 0), fixed(c.size() + 1, 0),
        perStageScaled(m.perStageScaled), perStageFixed(m.perStageFixed) {
    for (size_t i = 0; i < c.size(); ++i) {
      cost[i + 1] = cost[i] + c[i];
      scaled[i + 1] = scaled[i] + (m.scaled.empty() ? 0 : m.scaled[i]);
      fixed[i + 1] = fixed[i] + (m.fixed.empty() ? 0 : m.fixed[i]);
    }
  }
  double costOf(int first, int last) const { return cost[last] - cost[first]; }
  /// Memory of layers [first, last) as stage `stage` (0-based).
  double memoryOf(int stage, int first, int last) const {
    auto factor = [&](const std::vector<double> &f) {
      return f.empty() ? 1.0 : f[stage];
    };
    return factor(perStageScaled) * (scaled[last] - scaled[first]) +
           factor(perStageFixed) * (fixed[last] - fixed[first]);
  }
};

/// One layer of the DP: best[j] = the best cost of the first k stages
/// covering layers [0, j), from `prev` (k - 1 stages), by divide and conquer
/// over j. The smallest optimal start i of stage k never decreases as j grows
/// (for the maximum: prev is non-decreasing and a stage's cost non-increasing
/// in i, and it rises by the same amount for every i as j grows; for squared
/// costs: they satisfy the quadrangle inequality; the bound and the memory
/// cap forbid every i below a start that only grows with j). So the best i of
/// the middle j bounds the search on either side, and a layer costs
/// O(L log L) instead of O(L^2): 10^4 layers on hundreds of stages take
/// well under a second.
class LayerSolver {
public:
  LayerSolver(const Prefix &prefix, double memoryCap, double bound, int k,
              const std::vector<double> &prev, std::vector<double> &best,
              std::vector<int> &cut)
      : prefix(prefix), memoryCap(memoryCap), bound(bound),
        minimiseSquares(std::isfinite(bound)), k(k), prev(prev), best(best),
        cut(cut) {}

  /// Fills best[j] and cut[j] for j in [jlo, jhi], searching i in [ilo, ihi].
  void solve(int jlo, int jhi, int ilo, int ihi) {
    if (jlo > jhi)
      return;
    const int j = jlo + (jhi - jlo) / 2;
    double bestValue = kInf;
    int bestStart = -1;
    for (int i = std::max(ilo, k - 1); i <= std::min(ihi, j - 1); ++i) {
      double value = valueOf(i, j);
      if (value < bestValue) {
        bestValue = value;
        bestStart = i;
      }
    }
    best[j] = bestValue;
    cut[j] = bestStart;
    // The j that k stages can cover form an interval [k, J] (a stage that
    // fits still fits with its last layer removed): past an uncoverable j
    // every j is uncoverable, and the row there stays infinite.
    if (bestStart < 0) {
      solve(jlo, j - 1, ilo, ihi);
      return;
    }
    solve(jlo, j - 1, ilo, bestStart);
    solve(j + 1, jhi, bestStart, ihi);
  }

private:
  /// Stages [0, i) as before plus layers [i, j) as stage k.
  double valueOf(int i, int j) const {
    if (prev[i] == kInf || prefix.memoryOf(k - 1, i, j) > memoryCap)
      return kInf;
    double c = prefix.costOf(i, j);
    if (!minimiseSquares)
      return std::max(prev[i], c);
    return c > bound ? kInf : prev[i] + c * c;
  }

  const Prefix &prefix;
  double memoryCap, bound;
  bool minimiseSquares;
  int k;
  const std::vector<double> &prev;
  std::vector<double> &best;
  std::vector<int> &cut;
};

/// Exact DP over "first k stages cover layers [0, j)". With `bound` finite it
/// minimises the sum of squared stage costs among partitions whose stages all
/// cost at most `bound`; otherwise it minimises the maximum stage cost.
/// Returns the objective and fills `cut[k][j]` with the start of stage k-1.
double solve(const Prefix &prefix, int layers, int stages, double memoryCap,
             double bound, std::vector<std::vector<int>> &cut) {
  std::vector<double> prev(layers + 1, kInf), best(layers + 1, kInf);
  cut.assign(stages + 1, std::vector<int>(layers + 1, -1));
  prev[0] = 0;
  for (int k = 1; k <= stages; ++k) {
    std::fill(best.begin(), best.end(), kInf);
    // Every stage holds at least one layer: stage k ends at j >= k and leaves
    // at least one layer to each of the remaining stages.
    LayerSolver layer(prefix, memoryCap, bound, k, prev, best, cut[k]);
    layer.solve(k, layers - (stages - k), k - 1, layers - 1);
    std::swap(prev, best);
  }
  return prev[layers];
}

} // namespace

std::vector<std::vector<int>> Partition::stageLayers() const {
  std::vector<std::vector<int>> out;
  for (int s = 0; s < numStages(); ++s) {
    std::vector<int> layers;
    for (int l = firstLayer[s]; l < firstLayer[s + 1]; ++l)
      layers.push_back(l);
    out.push_back(std::move(layers));
  }
  return out;
}

Expected<Partition> partitionMinMax(const std::vector<double> &cost, int stages,
                                    const std::vector<double> &memory,
                                    double memoryCap) {
  StageMemoryModel model;
  model.fixed = memory;
  model.cap = memoryCap;
  return partitionMinMax(cost, stages, model);
}

Expected<Partition> partitionMinMax(const std::vector<double> &cost, int stages,
                                    const StageMemoryModel &model) {
  const std::vector<double> &memory = model.fixed;
  const double memoryCap = model.cap;
  const int layers = static_cast<int>(cost.size());
  if (stages < 1)
    return Status::error("the number of stages must be positive (got " +
                         std::to_string(stages) + ")");
  if (stages > layers)
    return Status::error("more stages (" + std::to_string(stages) +
                         ") than layers (" + std::to_string(layers) + ")");
  if (!memory.empty() && memory.size() != cost.size())
    return Status::error("memory has " + std::to_string(memory.size()) +
                         " entries but there are " + std::to_string(layers) +
                         " layers");
  if (!model.scaled.empty() && model.scaled.size() != cost.size())
    return Status::error("scaled memory has " + std::to_string(model.scaled.size()) +
                         " entries but there are " + std::to_string(layers) +
                         " layers");
  for (const std::vector<double> *perStage : {&model.perStageScaled, &model.perStageFixed})
    if (!perStage->empty() && perStage->size() != static_cast<size_t>(stages))
      return Status::error("a per-stage memory factor has " +
                           std::to_string(perStage->size()) + " entries but there are " +
                           std::to_string(stages) + " stages");
  for (int i = 0; i < layers; ++i)
    if (!(cost[i] >= 0) || (!memory.empty() && !(memory[i] >= 0)) ||
        (!model.scaled.empty() && !(model.scaled[i] >= 0)))
      return Status::error("layer " + std::to_string(i) +
                           " has a negative or invalid cost or memory");

  Prefix prefix(cost, model);
  std::vector<std::vector<int>> cut;
  double maxCost = solve(prefix, layers, stages, memoryCap, kInf, cut);
  if (maxCost == kInf) {
    std::ostringstream os;
    os << "no partition of " << layers << " layers into " << stages
       << " stages keeps every stage within the memory cap of " << memoryCap;
    return Status::error(os.str());
  }
  // Second pass: among min-max partitions prefer even loads (a tiny slack
  // absorbs rounding in the prefix sums).
  double bound = maxCost * (1 + 1e-12) + 1e-12;
  if (solve(prefix, layers, stages, memoryCap, bound, cut) == kInf)
    solve(prefix, layers, stages, memoryCap, kInf, cut);

  Partition p;
  p.firstLayer.assign(stages + 1, 0);
  p.firstLayer[stages] = layers;
  for (int k = stages, j = layers; k > 0; --k) {
    j = cut[k][j];
    p.firstLayer[k - 1] = j;
  }
  for (int s = 0; s < stages; ++s) {
    p.stageCost.push_back(prefix.costOf(p.firstLayer[s], p.firstLayer[s + 1]));
    p.maxStageCost = std::max(p.maxStageCost, p.stageCost.back());
  }
  return p;
}

Expected<Partition> partitionUniform(const std::vector<double> &cost,
                                     int stages, int layersPerStage) {
  const int layers = static_cast<int>(cost.size());
  if (stages < 1 || layersPerStage < 1)
    return Status::error("stages and layers per stage must be positive");
  if (stages > layers)
    return Status::error("more stages (" + std::to_string(stages) +
                         ") than layers (" + std::to_string(layers) + ")");
  const int needed = stages * layersPerStage;
  if (needed > layers) {
    std::ostringstream os;
    os << stages << " stages x " << layersPerStage
       << " layers per stage need " << needed << " layers, but the cost model"
       << " has only " << layers << " (is a layer missing from the profile?)";
    return Status::error(os.str());
  }
  if (needed < layers) {
    std::ostringstream os;
    os << stages << " stages x " << layersPerStage << " layers per stage = "
       << needed << " layers, but the model has " << layers
       << ": the stages do not divide the layers as asked";
    return Status::error(os.str());
  }
  Partition p;
  for (int s = 0; s <= stages; ++s)
    p.firstLayer.push_back(s * layersPerStage);
  for (int s = 0; s < stages; ++s) {
    double c = 0;
    for (int l = p.firstLayer[s]; l < p.firstLayer[s + 1]; ++l)
      c += cost[l];
    p.stageCost.push_back(c);
    p.maxStageCost = std::max(p.maxStageCost, c);
  }
  return p;
}

} // namespace pf::sched
