//===- KfacReports.cpp - Lines about K-FAC's inverse refreshes ------------===//
#include "pf/Train/KfacReports.h"

#include "pf/Runtime/pfrt.h"

#include "pf/Support/Status.h"
#include "pf/Support/StepNames.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

void train::printKfacIssues(int64_t step, const std::vector<double> &issuesOfRank) {
  int64_t total = 0;
  std::string ranks;
  for (size_t rank = 0; rank < issuesOfRank.size(); ++rank)
    if (int64_t issues = int64_t(issuesOfRank[rank]); issues != 0) {
      total += issues;
      ranks += ::pf::formatText("%srank %zu: %lld", ranks.empty() ? "" : ", ", rank,
                                (long long)issues);
    }
  if (total == 0)
    return;
  // One write: under mpirun other ranks' lines interleave by write.
  std::fputs(::pf::formatText("step %lld: K-FAC: %lld inverse refresh(es) needed more damping "
                              "or kept the previous inverse (%s)\n",
                              (long long)step, (long long)total, ranks.c_str())
                 .c_str(),
             stdout);
  std::fflush(stdout);
}

/// Whether the f32/f64 parameter `p` holds a NaN or Inf.
static bool holdsNonFinite(const drv::ModelParameter &p) {
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

::pf::Status train::reportStepKfacIssues(int64_t step, const Batch &outputs,
                                         driver::Model &model, std::set<std::string> &reported) {
  auto issues = outputs.find(kKfacIssuesOutput);
  if (issues == outputs.end())
    return ::pf::Status::success();
  int32_t count;
  std::memcpy(&count, issues->second.data.data(), sizeof(count));
  if (count == 0)
    return ::pf::Status::success();
  std::fputs(::pf::formatText("step %lld: K-FAC: %d inverse refresh(es) needed more damping or "
                              "kept the previous inverse\n",
                              (long long)step, int(count))
                 .c_str(),
             stdout);
  if (auto status = model.copyParametersToHost(); !status.ok())
    return status;
  reportNonFiniteFactors(step, model.parameters(), reported);
  return ::pf::Status::success();
}

void train::reportNonFiniteFactors(int64_t step, const Parameters &parameters,
                                   std::set<std::string> &reported, const std::string &where) {
  for (const auto &p : parameters) {
    const std::string &name = p.name;
    auto endsWith = [&](const char *suffix) {
      size_t n = std::strlen(suffix);
      return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
    };
    bool factor = endsWith(".kfac.A") || endsWith(".kfac.B");
    if (!factor || reported.count(p.name) || !holdsNonFinite(p))
      continue;
    reported.insert(p.name);
    std::fputs(::pf::formatText("%sstep %lld: K-FAC: factor %c of layer '%s' holds NaN or Inf; "
                                "the layer keeps its last good inverse from now on (lower "
                                "--lr, or resume from an earlier checkpoint)\n",
                                where.c_str(), (long long)step, name.back(),
                                name.substr(0, name.size() - 7).c_str())
                   .c_str(),
               stdout); // one write: other ranks' lines interleave by write
  }
  std::fflush(stdout);
}
