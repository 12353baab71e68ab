//===- RankStep.cpp - The training step as one rank of a pipeline ---------===//
#include "pf/Train/RankStep.h"

#include "pf/Support/StopSignals.h"
#include "pf/Train/KfacReports.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;
using ::pf::formatText;
using ::pf::Status;

namespace {
Status error(const std::string &message) { return Status::error(message); }

/// One write per line or block: mpirun interleaves the ranks' output by
/// write.
void printAtOnce(const std::string &text) {
  std::cout << std::flush;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

bool isOptimizerState(const std::string &name) {
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return endsWith(".exp_avg") || endsWith(".exp_avg_sq") || endsWith(".momentum");
}

/// Bytes of this rank's state by kind: parameters, optimizer state, K-FAC
/// factors and inverses.
struct StateBytes {
  int64_t parameters = 0, optimizer = 0, kfac = 0, parameterCount = 0;
};

StateBytes stateBytes(const drv::StagePrograms &program) {
  StateBytes bytes;
  for (const auto &p : program.parameters()) {
    if (isOptimizerState(p.name)) {
      bytes.optimizer += p.bytes;
    } else if (p.name.find(".kfac.") != std::string::npos) {
      bytes.kfac += p.bytes;
    } else {
      bytes.parameters += p.bytes;
      ++bytes.parameterCount;
    }
  }
  return bytes;
}

std::string spaced(const std::vector<int64_t> &values) {
  std::string text;
  for (int64_t v : values)
    text += (text.empty() ? "" : " ") + std::to_string(v);
  return text;
}
} // namespace

//===--- The job ------------------------------------------------------------===//

Status RankJob::start() {
  ctx = pfrt_context_create(nullptr);
  if (!ctx)
    return error("cannot create a runtime context");
  if (pfrt_comm_create(ctx, nullptr, &world) != PFRT_OK)
    return error(std::string("--pipeline: ") + pfrt_last_error(ctx));
  rank = pfrt_comm_rank(world);
  size = pfrt_comm_size(world);
  return Status::success();
}

int RankJob::fail(const std::string &message) const {
  std::cout << std::flush;
  std::fflush(stdout);
  std::string line = formatText("%s: rank %d: error: ", tool, rank) + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  pfrt_comm_abort(ctx, world, 1);
  return 1;
}

Status RankJob::sum(std::vector<double> &values) const {
  pfrt_tensor t{};
  t.data = values.data();
  t.dtype = PFRT_F64;
  t.rank = 1;
  t.shape[0] = int64_t(values.size());
  if (pfrt_comm_all_reduce_sum(ctx, world, &t) != PFRT_OK)
    return error(std::string("all-reducing the step's figures: ") + pfrt_last_error(ctx));
  return Status::success();
}

int RankJob::end(int code) {
  pfrt_comm_destroy(world);
  if (pfrt_comm_finalize(ctx) != PFRT_OK) {
    std::string line =
        formatText("%s: rank %d: ", tool, rank) + pfrt_last_error(ctx) + std::string("\n");
    std::fwrite(line.data(), 1, line.size(), stderr);
    code = 1;
  }
  pfrt_context_destroy(ctx);
  return code;
}

Status train::chooseRankDevice(const RunConfig &config, RankJob &job) {
  const bool onCuda = config.device == "cuda";
  job.onBackendMemory = onCuda || config.deviceBuffers;
  if (!job.onBackendMemory)
    return Status::success();
  job.backend = onCuda ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  job.transferBackend = PFRT_COMM_MPI_STAGED;
  if (onCuda) {
    // Its place among the ranks of its host.
    int32_t localRank = 0, localSize = 0;
    if (pfrt_comm_local_rank(job.ctx, job.world, &localRank, &localSize) != PFRT_OK)
      return error(std::string("--device cuda: ") + pfrt_last_error(job.ctx));
    int32_t gpus = pfrt_backend_device_count(PFRT_BACKEND_CUDA);
    if (gpus < 1)
      return error("--device cuda: no CUDA device on this rank's host");
    job.device = localRank % gpus;
    std::vector<double> shared{localSize > gpus ? 1.0 : 0.0};
    if (Status s = job.sum(shared); !s.ok())
      return s;
    bool ownGpus = shared[0] == 0;
    job.transferBackend =
        config.comm == CommChoice::Nccl || (config.comm == CommChoice::Auto && ownGpus)
            ? PFRT_COMM_NCCL
            : PFRT_COMM_MPI;
  }
  std::string how = "NCCL";
  if (job.transferBackend != PFRT_COMM_NCCL)
    how = onCuda ? "MPI, staged through host memory"
                 : "MPI, staged through host buffers (the CPU check of that path)";
  std::string where = onCuda ? "GPU " + std::to_string(job.device) : "CPU backend memory";
  printAtOnce(formatText("rank %d: stage functions on %s, stage values over %s\n", job.rank,
                         where.c_str(), how.c_str()));
  return Status::success();
}

void Digest::add(const std::string &bytes) {
  for (unsigned char c : bytes)
    h = (h ^ c) * 1099511628211ULL;
  h = (h ^ 0xff) * 1099511628211ULL; // separator
}

void Digest::addFile(const std::string &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    add("<unreadable>");
    return;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  add(bytes.str());
}

Status train::checkSameOnEveryRank(const RankJob &job, uint64_t hash, const std::string &problem,
                                   const std::string &fix) {
  // The slots are exchanged as 32-bit halves in doubles (exact).
  std::vector<double> slots(2 * job.size, 0.0);
  slots[2 * job.rank] = double(hash >> 32);
  slots[2 * job.rank + 1] = double(hash & 0xffffffffULL);
  if (Status s = job.sum(slots); !s.ok())
    return s;
  auto hashOf = [&](int r) {
    return (uint64_t(slots[2 * r]) << 32) | uint64_t(slots[2 * r + 1]);
  };
  std::string differing;
  for (int r = 1; r < job.size; ++r)
    if (hashOf(r) != hashOf(0))
      differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (differing.empty())
    return Status::success();
  return error("rank(s) " + differing + " " + problem + ": " + fix);
}

Status train::checkSameResume(const RankJob &job, const std::string &resumeFile) {
  Digest digest;
  digest.addFile(resumeFile);
  return checkSameOnEveryRank(
      job, digest.h,
      "resumed from another checkpoint than rank 0 (the digests of " + resumeFile + " differ)",
      "give every rank the same checkpoint");
}

::pf::Expected<Batch> train::gatherState(const RankJob &job, drv::StagePrograms &program) {
  if (Status s = program.copyParametersToHost(); !s.ok())
    return s;
  Batch mine = stateArrays(program.parameters());
  if (job.rank != 0) {
    if (Status s = drv::sendValues(job.ctx, job.world, mine, 0); !s.ok())
      return s;
    return Batch{};
  }
  for (int32_t from = 1; from < job.size; ++from) {
    Batch theirs;
    if (Status s = drv::receiveValues(job.ctx, job.world, from, theirs); !s.ok())
      return s;
    for (auto &[name, value] : theirs) {
      auto it = mine.find(name);
      if (it == mine.end()) {
        mine.emplace(name, std::move(value));
        continue;
      }
      if (it->second.shape != value.shape || it->second.data != value.data)
        return error("'" + name + "' differs between rank " + std::to_string(from) +
                     " and a lower rank holding it: the replicas diverged");
    }
  }
  return mine;
}

//===--- The step -----------------------------------------------------------===//

void RankStep::adoptRunner(drv::RankRunner &rankRunner) {
  runner = &rankRunner;
  StateBytes bytes = stateBytes(runner->stages());
  drv::RankRunner::ActivationFigures planned = runner->plannedActivations();
  printAtOnce(formatText("rank %d: stage %s (encoder blocks %s), %lld parameter tensors (%lld "
                         "bytes), optimizer state %lld bytes, K-FAC state %lld bytes\n",
                         job.rank, spaced(runner->plan().stages).c_str(),
                         spaced(runner->plan().blocks).c_str(), (long long)bytes.parameterCount,
                         (long long)bytes.parameters, (long long)bytes.optimizer,
                         (long long)bytes.kfac));
  printAtOnce(formatText("rank %d: activations: up to %lld micro-batches' saved activations in "
                         "flight, at most %lld bytes live (the step's received, computed and "
                         "in-flight values), laid out in an arena of %lld bytes\n",
                         job.rank, (long long)planned.slots, (long long)planned.bytes,
                         (long long)planned.arenaBytes));
}

::pf::Expected<StepResult> RankStep::run(int64_t step, Batch &inputs) {
  Batch outputs;
  if (Status s = runner->runStep(inputs, outputs, step); !s.ok())
    return s;
  // The loss (from the last stage), whether any rank was asked to stop and
  // whether by SIGTERM: every rank learns them, so all stop after the same
  // step and rank 0 names the signal another rank received.
  // Then one slot per rank: its K-FAC refreshes that needed more damping
  // or kept the previous inverse (kfac/issues), so rank 0 can name it.
  figures = {0.0, drv::stopRequested() ? 1.0 : 0.0, drv::stopSignal() == SIGTERM ? 1.0 : 0.0};
  figures.resize(3 + job.size, 0.0);
  figures[3 + job.rank] = double(runner->lastKfacIssues());
  // Exactly one rank reports the loss (the last stage's; Chimera: the
  // lowest holding it).
  if (auto reported = outputs.find("loss"); reported != outputs.end()) {
    float loss;
    std::memcpy(&loss, reported->second.data.data(), sizeof(float));
    figures[0] = double(loss);
  }
  if (Status s = job.sum(figures); !s.ok())
    return s;
  if (runner->lastKfacIssues() != 0) {
    if (Status s = runner->stages().copyParametersToHost(); !s.ok())
      return s;
    reportNonFiniteFactors(step, runner->stages().parameters(), nonFiniteFactors,
                           formatText("rank %d: ", job.rank));
  }
  StepResult result;
  result.loss = figures[0];
  result.stop = figures[1] > 0;
  result.stopBySigterm = figures[2] > 0;
  return result;
}

Status RankStep::reportStep(int64_t step, const StepResult &) {
  if (job.rank == 0)
    printKfacIssues(step, std::vector<double>(figures.begin() + 3, figures.end()));
  return Status::success();
}

Status RankStep::withCurrentWeights(const std::function<Status(const WeightLookup &)> &use) {
  auto state = gatherState(job, runner->stages());
  if (!state)
    return state.status();
  if (job.rank != 0)
    return Status::success();
  WeightLookup fromRanks = [&](const std::string &name) -> std::pair<const void *, int64_t> {
    auto it = state->find("param/" + name);
    if (it == state->end())
      return {nullptr, 0};
    return {it->second.data.data(), int64_t(it->second.data.size())};
  };
  return use(fromRanks);
}

::pf::Expected<std::optional<Batch>> RankStep::checkpointState() {
  auto state = gatherState(job, runner->stages());
  if (!state)
    return state.status();
  if (job.rank != 0)
    return std::optional<Batch>();
  return std::optional<Batch>(state.take());
}

Status RankStep::finish(int64_t last, bool stopped, bool bySigterm) {
  drv::RankRunner::ActivationFigures planned = runner->plannedActivations(); // with the windows
  std::string lines =
      formatText("rank %d: activations of every program run: up to %lld micro-batches' saved "
                 "activations in flight, at most %lld bytes live, in one arena of %lld bytes\n",
                 job.rank, (long long)planned.slots, (long long)planned.bytes,
                 (long long)planned.arenaBytes) +
      formatText("rank %d: gradients held at most: %lld bytes (by the host: the step's results "
                 "it reads out; the gradients are values of the program, in its arena)\n",
                 job.rank, (long long)runner->measuredGradientBytes());
  lines += formatText("rank %d: stage-value bytes read by host code in the steps: %lld, of "
                      "them the step's results: %lld\n",
                      job.rank, (long long)runner->hostStageValueBytes(),
                      (long long)runner->resultBytes());
  if (runner->onBackendMemory())
    lines += formatText("rank %d: stage values copied between host and backend memory by the "
                        "stage calls: %lld\n",
                        job.rank, (long long)runner->stageValueCopies());
  printAtOnce(lines);
  if (job.rank == 0 && stopped)
    printAtOnce(formatText("stopped by %s on a rank after step %lld\n",
                           bySigterm ? "SIGTERM" : "SIGINT", (long long)last));
  return Status::success();
}
