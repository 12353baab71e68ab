//===- KfacReports.cpp - Lines about K-FAC's inverse refreshes ------------===//
#include "pf/Train/KfacReports.h"

#include "pf/Runtime/pfrt.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <vector>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

void train::printKfacIssues(int64_t step, llvm::ArrayRef<double> issuesOfRank) {
  int64_t total = 0;
  std::vector<std::string> ranks;
  for (auto [rank, issues] : llvm::enumerate(issuesOfRank))
    if (issues != 0) {
      total += int64_t(issues);
      ranks.push_back(llvm::formatv("rank {0}: {1}", rank, int64_t(issues)).str());
    }
  if (total == 0)
    return;
  // One write: under mpirun other ranks' lines interleave by write.
  llvm::outs().flush();
  llvm::outs() << llvm::formatv("step {0}: K-FAC: {1} inverse refresh(es) needed more damping "
                                "or kept the previous inverse ({2})\n",
                                step, total, llvm::join(ranks, ", "))
                      .str();
  llvm::outs().flush();
}

/// Whether the f32/f64 parameter `p` holds a NaN or Inf.
static bool holdsNonFinite(const drv::CompiledModel::Parameter &p) {
  auto scan = [&](auto *values) {
    for (int64_t i = 0, n = p.bytes / int64_t(sizeof(*values)); i < n; ++i)
      if (!std::isfinite(values[i]))
        return true;
    return false;
  };
  if (p.dtype == PFRT_F32)
    return scan(static_cast<const float *>(p.data));
  if (p.dtype == PFRT_F64)
    return scan(static_cast<const double *>(p.data));
  return false;
}

void train::reportNonFiniteFactors(int64_t step, const Parameters &parameters,
                                   std::set<std::string> &reported, const std::string &where) {
  for (const auto &p : parameters) {
    llvm::StringRef name(p.name);
    bool factor = name.ends_with(".kfac.A") || name.ends_with(".kfac.B");
    if (!factor || reported.count(p.name) || !holdsNonFinite(p))
      continue;
    reported.insert(p.name);
    llvm::outs() << llvm::formatv("{0}step {1}: K-FAC: factor {2} of layer '{3}' holds NaN or "
                                  "Inf; the layer keeps its last good inverse from now on "
                                  "(lower --lr, or resume from an earlier checkpoint)\n",
                                  where, step, name.back(), name.drop_back(7))
                        .str(); // one write: other ranks' lines interleave by write
  }
  llvm::outs().flush();
}
