//===- RankExecutor.cpp - run a module's per-rank programs on MPI ranks ----===//
#include "pf/PipelineRuntime/RankExecutor.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFRankProgram.h"
#include "pf/Dialect/PF/IR/PFStageValues.h"
#include "pf/Conversion/Passes.h"
#include "pf/PipelineRuntime/StageProgram.h"
#include "pf/Runtime/pfrt_rank.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::pf::driver;

namespace {
llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// A tensor type as the lowered program passes it (pfrt dtype, shape).
struct ValueType {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
};

/// The bytes of a dense value of `type`.
int64_t valueBytes(const ValueType &type) {
  int64_t elements = 1;
  for (int64_t d : type.shape)
    elements *= d;
  return elements * dtypeBytes(type.dtype);
}

ValueType valueType(int32_t dtype, int64_t rank, const int64_t *shape) {
  return {dtype, std::vector<int64_t>(shape, shape + std::max<int64_t>(rank, 0))};
}

std::string typeText(int32_t dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + " " + shapeText(shape);
}

llvm::Expected<pfrt_tensor> descriptor(NpyArray &array) {
  pfrt_tensor t{};
  if (array.shape.size() > size_t(PFRT_MAX_RANK))
    return error(llvm::formatv("a tensor of rank {0} (at most {1})", array.shape.size(),
                               PFRT_MAX_RANK));
  t.data = array.data.empty() ? nullptr : array.data.data();
  t.dtype = array.dtype;
  t.rank = int32_t(array.shape.size());
  for (auto [i, d] : llvm::enumerate(array.shape))
    t.shape[i] = d;
  return t;
}

/// "[0, 3]".
std::string listText(llvm::ArrayRef<int64_t> values) {
  std::string text;
  for (int64_t v : values)
    text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

NpyArray zeros(int32_t dtype, std::vector<int64_t> shape) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.assign(size_t(a.numElements() * dtypeBytes(dtype)), 0);
  return a;
}

} // namespace

/// What a lowered rank program (pf-lower-rank-programs) calls through
/// pfrt_rank.h: the services of one run of the program.
struct pfrt_rank_host {
  virtual ~pfrt_rank_host() = default;
  virtual int32_t runStage(int64_t op, mlir::pf::StageTaskKind kind, const char *function,
                           int64_t microbatch, int64_t layer, std::vector<int64_t> inputs,
                           std::vector<int64_t> outputs) = 0;
  virtual int32_t mark(int64_t op, int32_t phase) = 0;
  virtual int32_t allReduceParameter(int64_t op, const char *name, std::vector<int64_t> ranks,
                                     ValueType type) = 0;
  virtual int32_t stepScalar(int64_t op, const char *name, double *value) = 0;
  virtual int32_t promoteInverses(int64_t op) = 0;
  virtual int32_t stepResult(int64_t op, const char *name, int64_t slot) = 0;
};

extern "C" {
int32_t pfrt_rank_run_stage(pfrt_rank_host *host, int64_t op, int32_t kind,
                            const char *function, int64_t microbatch, int64_t layer,
                            int64_t input_count, const int64_t *inputs, int64_t output_count,
                            const int64_t *outputs) {
  return host->runStage(op, mlir::pf::StageTaskKind(kind), function, microbatch, layer,
                        std::vector<int64_t>(inputs, inputs + input_count),
                        std::vector<int64_t>(outputs, outputs + output_count));
}
int32_t pfrt_rank_mark(pfrt_rank_host *host, int64_t op, int32_t phase) {
  return host->mark(op, phase);
}
int32_t pfrt_rank_all_reduce_parameter(pfrt_rank_host *host, int64_t op, const char *name,
                                       int64_t count, const int64_t *ranks, int32_t dtype,
                                       int64_t rank, const int64_t *shape) {
  return host->allReduceParameter(op, name, std::vector<int64_t>(ranks, ranks + count),
                                  valueType(dtype, rank, shape));
}
int32_t pfrt_rank_step_scalar(pfrt_rank_host *host, int64_t op, const char *name,
                              double *value) {
  return host->stepScalar(op, name, value);
}
int32_t pfrt_rank_kfac_promote_inverses(pfrt_rank_host *host, int64_t op) {
  return host->promoteInverses(op);
}
int32_t pfrt_rank_step_result(pfrt_rank_host *host, int64_t op, const char *name, int64_t slot) {
  return host->stepResult(op, name, slot);
}
}

namespace {

} // namespace

/// The state of one run of the program: its slots' descriptors and what the
/// program hands over (pf.step_result).
class RankRunner::Step : public pfrt_rank_host {
public:
  Step(RankRunner &runner, const Values &graph, int64_t step)
      : r(runner), program(*runner.compiledProgram), graph(graph), stepIndex(step),
        M(runner.microbatches()) {}

  /// Runs the step's lowered program (each op calls back into the services
  /// below).
  llvm::Error run() {
    mlir::Operation *programOp = r.programForStep(stepIndex);
    if (auto err = r.startReplicaFactors(graph, programOp))
      return err;
    findKfacReports(cast<mlir::pf::RankProgramOp>(programOp));
    auto function = r.loweredPrograms.find(programOp);
    if (function == r.loweredPrograms.end())
      return error("the rank program was not compiled");
    // The program's stage values: one descriptor per slot, which the program
    // writes (pointing into the arena) before the op making the value.
    descriptors.assign(r.slotCounts.lookup(programOp), pfrt_tensor{});
    std::vector<pfrt_comm *> &groups = r.programGroups[programOp];
    int32_t status = function->second(this, transferContext(), transferComm(),
                                      descriptors.data(), r.arena, groups.data(), r.ctx, r.world);
    if (failure)
      return std::move(failure);
    if (status != 0)
      return error(llvm::formatv("the rank program's call after op {0} failed: {1} ({2})",
                                 currentOp, pfrt_last_error(transferContext()),
                                 pfrt_status_string(status)));
    return llvm::Error::success();
  }

  // pfrt_rank_host: each service runs one op of the program.
  int32_t runStage(int64_t op, mlir::pf::StageTaskKind kind, const char *function, int64_t microbatch,
                   int64_t layer, std::vector<int64_t> inputs,
                   std::vector<int64_t> outputs) override {
    std::optional<int64_t> m;
    if (microbatch >= 0)
      m = microbatch;
    return execute(op, "pf.run_stage",
                   [&] { return runStageOp(op, kind, function, m, inputs, outputs); });
  }
  /// The program's own communication, timed between its marks.
  int32_t mark(int64_t op, int32_t phase) override {
    currentOp = op;
    if (!r.options.recordTimes)
      return 0;
    if (phase == 0) {
      markStart = now();
    } else {
      r.executedOps.push_back({stepIndex, op, r.windowStepOf(stepIndex), markStart, now()});
    }
    return 0;
  }
  int32_t allReduceParameter(int64_t op, const char *name, std::vector<int64_t> ranks,
                             ValueType type) override {
    return execute(op, "pf.all_reduce",
                   [&]() -> llvm::Error { return sumParameter(name, ranks, type); });
  }
  /// The step's scalar input `name` for op `op` (not timed: the op is, by
  /// its marks).
  int32_t stepScalar(int64_t op, const char *name, double *value) override {
    currentOp = op;
    auto input = graph.find(name);
    if (input == graph.end() || input->second.dtype != PFRT_F64 ||
        input->second.numElements() != 1) {
      failure = error(llvm::formatv("op {0}: the program reads the step's f64 scalar '{1}', "
                                    "which the step does not give",
                                    op, name));
      return int32_t(PFRT_INTERNAL);
    }
    std::memcpy(value, input->second.data.data(), sizeof(double));
    return 0;
  }

  int32_t promoteInverses(int64_t op) override {
    return execute(op, "pf.kfac_promote_inverses",
                   [&] { return r.promoteInverses(); });
  }
  int32_t stepResult(int64_t op, const char *name, int64_t slot) override {
    return execute(op, "pf.step_result", [&] { return takeStepResult(name, slot); });
  }

  /// `loss` (on the rank holding the last stage) and the `grad/*` this rank
  /// reports, combined over the micro-batches as runStages does: moved out
  /// of the finished step (a copy was a pass over every gradient per step,
  /// between the steps, for a caller that mostly reads the loss).
  Values takeResults() {
    Values out;
    if (!loss.data.empty())
      out["loss"] = std::move(loss);
    for (auto &[name, value] : combined)
      out[name] = std::move(value);
    combined.clear();
    return out;
  }

private:
  /// The first failure of the program's ops; the program returns at once.
  llvm::Error failure = llvm::Error::success();

  /// One op: `body` runs, timed. A failure is kept, named by op index.
  int32_t execute(int64_t index, llvm::StringRef opName, llvm::function_ref<llvm::Error()> body) {
    currentOp = index;
    auto fail = [&](llvm::Error err) {
      failure = error(llvm::formatv("op {0} ({1}): {2}", index, opName,
                                    llvm::toString(std::move(err))));
      return int32_t(PFRT_INTERNAL);
    };
    double start = r.options.recordTimes ? now() : 0;
    if (auto err = body())
      return fail(std::move(err));
    if (r.options.recordTimes)
      r.executedOps.push_back({stepIndex, index, r.windowStepOf(stepIndex), start, now()});
    noteGradients();
    return 0;
  }

  RankRunner &r;
  CompiledProgram &program;
  const Values &graph;
  int64_t stepIndex, M;
  /// The program's stage values: the descriptors it writes into (pointing
  /// into the runner's arena) by the slot the lowering gave each value.
  std::vector<pfrt_tensor> descriptors;
  double markStart = 0;
  /// The loss over the whole step and each gradient of the step the program
  /// hands over (pf.step_result).
  NpyArray loss;
  Values combined;
  int64_t currentOp = 0;

  //===--- Stage values in backend memory ---------------------------------===//
  // On backend memory (RankRunner::Options::deviceBuffers, CUDA) the slots
  // are blocks of the stage functions' context, sent and received on the
  // transfer communicator of that context.

  pfrt_context *transferContext() const { return r.transferComm ? r.transferContext : r.ctx; }
  pfrt_comm *transferComm() const { return r.transferComm ? r.transferComm : r.world; }
  llvm::Error transferError(const llvm::Twine &what) {
    return error(what + ": " + pfrt_last_error(transferContext()));
  }

  /// c_m of each micro-batch (M > 1), once counted.
  std::vector<int64_t> tokenCounts;

  double now() {
    double t = 0;
    pfrt_comm_wall_time(r.ctx, r.world, &t);
    return t;
  }

  /// Which precondition calls report their refresh issues here: a layer
  /// both replicas precondition (Chimera) on the lowest member of its
  /// gradient's sum; one only its owner preconditions (and broadcasts), on
  /// the owner.
  void findKfacReports(mlir::pf::RankProgramOp rankProgram) {
    auto lowest = [&](ArrayRef<int64_t> ranks) {
      return r.rankIndex == *llvm::min_element(ranks);
    };
    for (Operation &op : rankProgram.getBody().front()) {
      if (auto sum = dyn_cast<mlir::pf::AllReduceOp>(op);
          sum && sum.getSum() && StringRef(sum.getValue()).starts_with(mlir::pf::kGradientPrefix) &&
          !lowest(sum.getRanks()))
        summedElsewhere.insert(sum.getValue().str());
      auto broadcast = dyn_cast<mlir::pf::BroadcastOp>(op);
      if (!broadcast)
        continue;
      auto call = broadcast.getInput() ? broadcast.getInput().getDefiningOp<mlir::pf::RunStageOp>()
                                       : mlir::pf::RunStageOp();
      if (call && call.getKind() == mlir::pf::StageTaskKind::Precondition)
        broadcastHere.insert(broadcast.getValue().str());
      else if (!lowest(broadcast.getRanks())) // the tied gradient's sum
        summedElsewhere.insert(broadcast.getValue().str());
    }
  }

  /// Gradients this rank sums with lower members (the lowest counts them),
  /// and the preconditioned gradients it broadcasts to the other replica
  /// (the layers whose preconditioning it owns).
  std::set<std::string> summedElsewhere, broadcastHere;

  /// Updates the runner's measured peak of gradient bytes (the stage
  /// values' bytes are the program's plan, planStageValues).
  void noteGradients() {
    int64_t gradientBytes = 0;
    for (const auto &[name, value] : combined)
      gradientBytes += int64_t(value.data.size());
    r.gradientPeakBytes = std::max(r.gradientPeakBytes, gradientBytes);
  }

  llvm::Expected<int64_t> microbatchOf(std::optional<int64_t> m, llvm::StringRef function) {
    if (!m)
      return error("'" + function + "' has no micro-batch");
    if (int64_t(*m) >= M)
      return error(llvm::formatv("micro-batch {0} of '{1}' but the step has {2}", *m, function,
                                 M));
    return int64_t(*m);
  }

  /// A view of the value in `slot` for a stage call, checked against the
  /// function's `spec` (the program wrote the descriptor before the op).
  llvm::Expected<TensorView> viewOf(int64_t slot, const TensorSpec &spec) const {
    auto t = slotTensor(slot, spec.dtype, spec.shape, spec.name);
    if (!t)
      return t.takeError();
    const pfrt_tensor &held = **t;
    return TensorView{spec.name, held.dtype,
                      llvm::ArrayRef<int64_t>(held.shape, size_t(std::max(held.rank, 0))),
                      held.data, program.onBackendMemory()};
  }

  /// The descriptor of the value in `slot` (named `name`), checked to hold a
  /// value of `dtype` and `shape`.
  llvm::Expected<const pfrt_tensor *> slotTensor(int64_t slot, int32_t dtype,
                                                 llvm::ArrayRef<int64_t> shape,
                                                 llvm::StringRef name) const {
    if (slot < 0 || slot >= int64_t(descriptors.size()) || !descriptors[size_t(slot)].data)
      return error(llvm::formatv("slot {0} ('{1}') holds no value", slot, name));
    const pfrt_tensor &t = descriptors[size_t(slot)];
    llvm::ArrayRef<int64_t> held(t.shape, size_t(std::max(t.rank, 0)));
    if (t.dtype != dtype || held != shape)
      return error(llvm::formatv("slot {0} is {1} but '{2}' is {3}", slot,
                                 typeText(t.dtype, held.vec()), name,
                                 typeText(dtype, shape.vec())));
    return &t;
  }

  /// A call's stage-value arguments or results (`what`) bind to its `slots`
  /// in order (the verifier checked them against the function's signature),
  /// in place; `other` takes the rest.
  llvm::Error bindSlots(const std::string &function, const std::vector<TensorSpec> &specs,
                        const std::vector<int64_t> &slots, const char *what,
                        std::vector<TensorView> &views,
                        llvm::function_ref<llvm::Error(const TensorSpec &)> other) const {
    size_t count = 0;
    for (const TensorSpec &spec : specs) {
      if (!isStageValue(spec.name)) {
        if (auto err = other(spec))
          return err;
        continue;
      }
      if (count++ >= slots.size())
        continue; // counted for the error below
      auto view = viewOf(slots[count - 1], spec);
      if (!view)
        return view.takeError();
      views.push_back(*view);
    }
    if (count != slots.size())
      return error(llvm::formatv("'{0}' has {1} stage-value {2} but the call binds {3}", function,
                                 count, what, slots.size()));
    return llvm::Error::success();
  }

  llvm::Error runStageOp(int64_t index, mlir::pf::StageTaskKind kind, std::string function,
                         std::optional<int64_t> microbatch, const std::vector<int64_t> &inputs,
                         const std::vector<int64_t> &outputs) {
    if (kind == mlir::pf::StageTaskKind::Update || kind == mlir::pf::StageTaskKind::Precondition)
      return runStepCall(kind, function, inputs, outputs);
    if (kind == mlir::pf::StageTaskKind::KfacInverse)
      return r.runInverse(function, graph,
                          r.windowStepOf(stepIndex) >= 0 || !r.unreportedInverses.count(function));
    if (kind == mlir::pf::StageTaskKind::Accumulate) {
      auto m = microbatchOf(microbatch, function);
      if (!m)
        return m.takeError();
      return accumulate(function, *m, inputs, outputs);
    }
    if (kind != mlir::pf::StageTaskKind::Forward && kind != mlir::pf::StageTaskKind::Backward &&
        kind != mlir::pf::StageTaskKind::BackwardInput && kind != mlir::pf::StageTaskKind::BackwardWeight &&
        kind != mlir::pf::StageTaskKind::KfacFactorA && kind != mlir::pf::StageTaskKind::KfacFactorB)
      return error("stage task kind '" + mlir::pf::stringifyStageTaskKind(kind) +
                   "' is not run by this executor (forward, backward, backward_input, "
                   "backward_weight, kfac_factor_a, kfac_factor_b, accumulate, kfac_inverse, "
                   "precondition and update run)");
    auto m = microbatchOf(microbatch, function);
    if (!m)
      return m.takeError();
    // The graph inputs and per-call scalars are the host's.
    auto hostInputs = stageCallInputs(program, function, graph, {}, *m, M, r.options.ignoreIndex,
                                      /*withStageValues=*/false);
    if (!hostInputs)
      return hostInputs.takeError();
    std::vector<TensorView> inputViews, outputViews;
    for (auto &[name, value] : *hostInputs)
      inputViews.push_back({name, value.dtype, value.shape, value.data.data()});
    if (auto err = bindSlots(function, program.inputs(function), inputs, "arguments", inputViews,
                             [](const TensorSpec &) { return llvm::Error::success(); }))
      return err;
    // Every result (activations, the loss, the gradients' pieces) is a
    // value of the program.
    if (auto err = bindSlots(function, program.outputs(function), outputs, "results", outputViews,
                             [&](const TensorSpec &spec) {
                               return error("unexpected result '" + spec.name + "' of " +
                                            function);
                             }))
      return err;
    return program.run(function, inputViews, outputViews);
  }

  /// `stage<s>_accumulate` of micro-batch m (pf-build-rank-programs'
  /// count-weighted running sums `grad_sum/<p>` and `loss_sum`): its pieces
  /// and running sums are values of the program, bound like any stage
  /// call's; the host gives the micro-batch's weight and the step's total.
  llvm::Error accumulate(const std::string &function, int64_t m,
                         const std::vector<int64_t> &inputSlots,
                         const std::vector<int64_t> &outputSlots) {
    if (auto err = countTokens())
      return err;
    Values args;
    std::vector<TensorView> inputs, outputs;
    auto hostInput = [&](const TensorSpec &spec) -> llvm::Error {
      StringRef n(spec.name);
      if (n == kLossCountInput) {
        args[spec.name] = scalarI64(tokenCounts.empty() ? 1 : tokenCounts[size_t(m)]);
      } else if (n == kLossTotalInput) {
        int64_t total = 0;
        for (int64_t c : tokenCounts)
          total += c;
        args[spec.name] = scalarI64(total == 0 ? 1 : total);
      } else if (n == kMicrobatchInput) {
        args[spec.name] = scalarI64(m);
      } else {
        return error("unexpected input '" + spec.name + "' of " + function);
      }
      return llvm::Error::success();
    };
    if (auto err =
            bindSlots(function, program.inputs(function), inputSlots, "arguments", inputs, hostInput))
      return err;
    for (auto &[name, value] : args)
      inputs.push_back({name, value.dtype, value.shape, value.data.data()});
    if (auto err = bindSlots(function, program.outputs(function), outputSlots, "results", outputs,
                             [&](const TensorSpec &spec) {
                               return error("unexpected result '" + spec.name + "' of " +
                                            function);
                             }))
      return err;
    // A result the plan put over its operand (inPlaceOperand) must not
    // be zeroed before the call reads that operand.
    for (const TensorSpec &spec : program.outputs(function)) {
      if (!spec.zeroFill)
        continue;
      for (const TensorView &out : outputs)
        if (out.name == spec.name)
          for (const TensorView &in : inputs)
            if (in.data == out.data)
              return error("'" + spec.name + "' of " + function + " may be written in part, "
                           "so it cannot take the bytes of '" + in.name + "'");
    }
    return program.run(function, inputs, outputs);
  }

  /// A once-per-step call (update, precondition): the step's gradients (and
  /// a precondition call's results) are values of the program, bound like
  /// any stage call's; the graph inputs (lr, step) are the host's, as is a
  /// precondition call's `kfac/issues`.
  llvm::Error runStepCall(mlir::pf::StageTaskKind kind, const std::string &function,
                          const std::vector<int64_t> &inputSlots,
                          const std::vector<int64_t> &outputSlots) {
    std::vector<TensorView> inputs, outputs;
    if (auto err = bindSlots(function, program.inputs(function), inputSlots, "arguments", inputs,
                             [&](const TensorSpec &spec) -> llvm::Error {
                               auto input = graph.find(spec.name);
                               if (input == graph.end())
                                 return error("missing input '" + spec.name + "' (read by " +
                                              function + ")");
                               const NpyArray &value = input->second;
                               inputs.push_back({spec.name, value.dtype, value.shape,
                                                 const_cast<char *>(value.data.data())});
                               return llvm::Error::success();
                             }))
      return err;
    Values hostResults;
    if (auto err = bindSlots(function, program.outputs(function), outputSlots, "results", outputs,
                             [&](const TensorSpec &spec) -> llvm::Error {
                               if (kind != mlir::pf::StageTaskKind::Precondition ||
                                   spec.name != mlir::pf::kKfacIssuesName)
                                 return error("unexpected result '" + spec.name + "' of " +
                                              function);
                               NpyArray &value = hostResults[spec.name];
                               value = zeros(spec.dtype, spec.shape);
                               outputs.push_back(
                                   {spec.name, value.dtype, value.shape, value.data.data()});
                               return llvm::Error::success();
                             }))
      return err;
    if (auto err = program.run(function, inputs, outputs))
      return err;
    if (kind != mlir::pf::StageTaskKind::Precondition)
      return llvm::Error::success();
    // Chimera: a layer both replicas precondition reports its refresh issues
    // on the rank reporting its gradients; one only its owner preconditions
    // (and broadcasts), on the owner.
    bool reports = true;
    for (const TensorSpec &spec : program.outputs(function))
      if (isStageValue(spec.name))
        reports = reports &&
                  (!summedElsewhere.count(spec.name) || broadcastHere.count(spec.name));
    auto issues = hostResults.find(mlir::pf::kKfacIssuesName.str());
    if (reports && issues != hostResults.end() && issues->second.dtype == PFRT_I32 &&
        issues->second.numElements() == 1) {
      int32_t count = 0;
      std::memcpy(&count, issues->second.data.data(), sizeof(count));
      r.kfacIssues += count;
    }
    return llvm::Error::success();
  }

  /// The descriptor of the value in `slot`, whatever its type.
  llvm::Expected<const pfrt_tensor *> slotOf(int64_t slot, const std::string &name) const {
    if (slot < 0 || slot >= int64_t(descriptors.size()) || !descriptors[size_t(slot)].data)
      return error(llvm::formatv("slot {0} ('{1}') holds no value", slot, name));
    return &descriptors[size_t(slot)];
  }

  /// pf.step_result: the step's loss or a gradient in `slot`, read into
  /// host memory for the caller (counted as the step's results).
  llvm::Error takeStepResult(llvm::StringRef name, int64_t slot) {
    const bool isGradient = name.starts_with(mlir::pf::kGradientPrefix);
    if (!isGradient && name != mlir::pf::kLossName)
      return error("'" + name + "' is not a result of the step (the loss and grad/* are)");
    ValueType type{PFRT_F32, {}};
    if (isGradient) {
      auto t = slotOf(slot, name.str());
      if (!t)
        return t.takeError();
      type = valueType((*t)->dtype, (*t)->rank, (*t)->shape);
    } else if (!loss.data.empty()) {
      return error("the step's loss is reported twice");
    }
    r.resultByteCount += valueBytes(type);
    auto value = readSlot(slot, type, name.str());
    if (!value)
      return value.takeError();
    if (!isGradient)
      loss = std::move(*value);
    else if (!combined.emplace(name.str(), std::move(*value)).second)
      return error("'" + name + "' is reported twice on this rank");
    return llvm::Error::success();
  }

  /// A copy in host memory of the value in `slot`. Every read of a stage
  /// value's contents by host code goes through readSlot, which counts the
  /// bytes (RankRunner::hostStageValueBytes): the program writes them all
  /// itself, so only the results it hands over (pf.step_result) are read.
  llvm::Expected<NpyArray> readSlot(int64_t slot, const ValueType &type,
                                    const std::string &name) {
    auto t = slotTensor(slot, type.dtype, type.shape, name);
    if (!t)
      return t.takeError();
    r.hostStageValueByteCount += valueBytes(type);
    NpyArray value = zeros(type.dtype, type.shape);
    if (pfrt_copy_to_host(r.arenaContext, *t, value.data.data()) != PFRT_OK)
      return error("reading '" + name + "': " + pfrt_last_error(r.arenaContext));
    return value;
  }

  /// Chimera's K-FAC factors: each member's copy holds its replica's
  /// curvature of the step (RankRunner::startReplicaFactors); their sum, in
  /// place on every member (a + b = b + a: the same bits on both). A pending
  /// inverse (K-FAC in the bubbles): the rank that computed it hands it over.
  llvm::Error sumParameter(const std::string &name, const std::vector<int64_t> &members,
                           const ValueType &type) {
    const CompiledModel::Parameter *param = program.parameter(name);
    if (!param)
      return error("'" + name + "' is all-reduced by name but is not a parameter");
    if (param->dtype != type.dtype || param->shape != type.shape)
      return error(llvm::formatv("all_reduce of parameter '{0}' expects {1} but the parameter "
                                 "is {2}",
                                 param->name, typeText(type.dtype, type.shape),
                                 typeText(param->dtype, param->shape)));
    return r.allReduceParameter(param->name, members);
  }

  /// The micro-batches' weights c_m (with M > 1), counted once.
  llvm::Error countTokens() {
    if (M == 1 || !tokenCounts.empty())
      return llvm::Error::success();
    auto c = microbatchTokenCounts(graph, M, r.options.ignoreIndex);
    if (!c)
      return c.takeError();
    tokenCounts = std::move(*c);
    return llvm::Error::success();
  }
};

namespace {
/// The gather of the outputs on rank 0: per array a header (dtype, rank,
/// shape, name length), the name's bytes, the data; one tag above every
/// program tag.
constexpr int kHeaderWords = 3 + PFRT_MAX_RANK;

llvm::Error sendValuesTo(pfrt_context *ctx, pfrt_comm *world, const Values &outputs, int32_t to) {
  int32_t tag = pfrt_comm_max_tag(world);
  auto sendArray = [&](const NpyArray &a) -> llvm::Error {
    auto t = descriptor(const_cast<NpyArray &>(a));
    if (!t)
      return t.takeError();
    if (pfrt_comm_send(ctx, world, &*t, to, tag) != PFRT_OK)
      return error(llvm::formatv("sending values to rank {0}: {1}", to, pfrt_last_error(ctx)));
    return llvm::Error::success();
  };
  NpyArray count = zeros(PFRT_I64, {1});
  reinterpret_cast<int64_t *>(count.data.data())[0] = int64_t(outputs.size());
  if (auto err = sendArray(count))
    return err;
  for (const auto &[name, value] : outputs) {
    NpyArray header = zeros(PFRT_I64, {kHeaderWords});
    int64_t *h = reinterpret_cast<int64_t *>(header.data.data());
    h[0] = value.dtype;
    h[1] = int64_t(value.shape.size());
    h[2] = int64_t(name.size());
    for (auto [i, d] : llvm::enumerate(value.shape))
      h[3 + i] = d;
    NpyArray text = zeros(PFRT_I8, {int64_t(name.size())});
    std::memcpy(text.data.data(), name.data(), name.size());
    if (auto err = sendArray(header))
      return err;
    if (auto err = sendArray(text))
      return err;
    if (auto err = sendArray(value))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error receiveValuesFrom(pfrt_context *ctx, pfrt_comm *world, int32_t from, Values &outputs) {
  int32_t tag = pfrt_comm_max_tag(world);
  auto recvArray = [&](NpyArray &a) -> llvm::Error {
    auto t = descriptor(a);
    if (!t)
      return t.takeError();
    if (pfrt_comm_recv(ctx, world, &*t, from, tag) != PFRT_OK)
      return error(llvm::formatv("receiving values from rank {0}: {1}", from,
                                 pfrt_last_error(ctx)));
    return llvm::Error::success();
  };
  NpyArray count = zeros(PFRT_I64, {1});
  if (auto err = recvArray(count))
    return err;
  for (int64_t i = 0, n = reinterpret_cast<int64_t *>(count.data.data())[0]; i < n; ++i) {
    NpyArray header = zeros(PFRT_I64, {kHeaderWords});
    if (auto err = recvArray(header))
      return err;
    const int64_t *h = reinterpret_cast<const int64_t *>(header.data.data());
    if (h[1] < 0 || h[1] > PFRT_MAX_RANK || h[2] < 0)
      return error(llvm::formatv("rank {0} sent a malformed output header", from));
    NpyArray text = zeros(PFRT_I8, {h[2]});
    if (auto err = recvArray(text))
      return err;
    std::string name(text.data.begin(), text.data.end());
    NpyArray value = zeros(int32_t(h[0]), std::vector<int64_t>(h + 3, h + 3 + h[1]));
    if (auto err = recvArray(value))
      return err;
    if (!outputs.emplace(name, std::move(value)).second)
      return error(llvm::formatv("rank {0} reports '{1}', which another rank reported", from,
                                 name));
  }
  return llvm::Error::success();
}

/// This rank's program; every check a rank can make before compiling.
llvm::Expected<mlir::pf::RankProgramOp> programOf(ModuleOp module, int32_t rank, int32_t size) {
  std::vector<mlir::pf::RankProgramOp> programs;
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>())
    if (!program.getWindowStep())
      programs.push_back(program);
  if (programs.empty())
    return error("the module has no pf.rank_program: run pf-opt --pf-build-rank-programs first");
  if (int64_t(programs.size()) != size)
    return error(llvm::formatv("the module has {0} pf.rank_program ops but the job has {1} "
                               "ranks: start it with mpirun -np {0}",
                               programs.size(), size));
  if (failed(mlir::pf::verifyRankPrograms(module)))
    return error("the rank programs do not verify (see the diagnostics above)");
  for (mlir::pf::RankProgramOp program : programs)
    if (program.getRankValue() == rank)
      return program;
  return error(llvm::formatv("no pf.rank_program has rank({0})", rank));
}

/// The stage functions `program` calls, in order of first call.
std::vector<std::string> calledFunctions(mlir::pf::RankProgramOp program) {
  std::vector<std::string> names;
  for (mlir::pf::RunStageOp call : program.getBody().front().getOps<mlir::pf::RunStageOp>())
    if (!llvm::is_contained(names, call.getStage().str()))
      names.push_back(call.getStage().str());
  return names;
}

void printOutputs(const Values &outputs) {
  for (const auto &[name, array] : outputs)
    llvm::outs() << outputSummary(name, array);
}

/// Everything after the communicator exists; an error ends the job.
llvm::Error runRank(ModuleOp module, const RankRunOptions &options, pfrt_context *ctx,
                    pfrt_comm *world) {
  int32_t rank = pfrt_comm_rank(world), size = pfrt_comm_size(world);
  if (options.inputsFile.empty())
    return error("--run-ranks needs --inputs FILE.npz");
  RankRunner::Options runnerOptions;
  runnerOptions.threads = options.threads;
  runnerOptions.ignoreIndex = options.ignoreIndex;
  runnerOptions.overlapTransfers = options.overlapTransfers;
  auto runner = RankRunner::create(module, ctx, world, runnerOptions);
  if (!runner)
    return runner.takeError();
  int64_t M = (*runner)->microbatches();
  if (options.microbatches > 0 && options.microbatches != M)
    return error(llvm::formatv("--micro-batches {0} but the rank programs have "
                               "microbatches({1})",
                               options.microbatches, M));
  auto inputs = readNpz(options.inputsFile);
  if (!inputs)
    return error(inputs.error());
  for (const auto &[name, array] : *inputs)
    if (isStageValue(name))
      return error("input '" + name + "' is a stage value, not a graph input");
  // One write per line: mpirun interleaves the ranks' output by write.
  llvm::outs() << (*runner)->summary();
  llvm::outs().flush();

  Values results;
  if (auto err = (*runner)->runStep(*inputs, results))
    return err;
  if (rank != 0)
    return sendValuesTo(ctx, world, results, 0);
  for (int32_t from = 1; from < size; ++from)
    if (auto err = receiveValuesFrom(ctx, world, from, results))
      return err;
  if (!results.count("loss"))
    return error("no rank reported 'loss'");
  llvm::outs() << llvm::formatv("ranks {0}, micro-batches {1}\n", size, M);
  printOutputs(results);
  llvm::outs().flush();
  if (!options.outputsFile.empty())
    if (::pf::Status written = writeNpz(options.outputsFile, results); !written.ok())
      return error(written.message());
  return llvm::Error::success();
}
} // namespace

llvm::Error mlir::pf::driver::sendValues(pfrt_context *ctx, pfrt_comm *world,
                                         const Values &values, int32_t to) {
  return sendValuesTo(ctx, world, values, to);
}

llvm::Error mlir::pf::driver::receiveValues(pfrt_context *ctx, pfrt_comm *world, int32_t from,
                                            Values &values) {
  return receiveValuesFrom(ctx, world, from, values);
}

llvm::Expected<std::unique_ptr<RankRunner>>
RankRunner::create(ModuleOp module, pfrt_context *ctx, pfrt_comm *world,
                   const Options &options) {
  int32_t rank = pfrt_comm_rank(world), size = pfrt_comm_size(world);
  auto rankProgram = programOf(module, rank, size);
  if (!rankProgram)
    return rankProgram.takeError();
  std::unique_ptr<RankRunner> runner(new RankRunner());
  runner->ctx = ctx;
  runner->world = world;
  runner->rankIndex = rank;
  runner->programOp = *rankProgram;
  runner->options = options;
  runner->functionNames = calledFunctions(*rankProgram);
  if (runner->functionNames.empty())
    return error("the program of rank " + std::to_string(rank) + " calls no stage function");
  // Only this rank's stage functions: the program holds their parameters only.
  CompiledProgram::Options compileOptions;
  compileOptions.threads = options.threads;
  compileOptions.functions = runner->functionNames;
  compileOptions.backend = options.backend;
  compileOptions.device = options.device;
  compileOptions.gemmPrecision = options.gemmPrecision;
  compileOptions.deviceBuffers = options.deviceBuffers;
  auto program = CompiledProgram::compile(module, compileOptions);
  if (!program)
    return program.takeError();
  runner->compiledProgram = std::move(*program);
  if (runner->compiledProgram->onBackendMemory()) {
    // Collective: every rank creates its runner at the same point.
    pfrt_context *programContext = runner->compiledProgram->runtimeContext();
    pfrt_comm_options commOptions;
    pfrt_comm_options_init(&commOptions);
    commOptions.backend = options.transferBackend;
    if (pfrt_comm_create(programContext, &commOptions, &runner->transferComm) != PFRT_OK)
      return error(llvm::Twine("creating the communicator of the stage values on the ") +
                   pfrt_backend_name(programContext) +
                   " backend: " + pfrt_last_error(programContext));
    runner->transferContext = programContext;
  }
  for (mlir::pf::ParamOp param : module.getOps<mlir::pf::ParamOp>())
    if (param->hasAttr(mlir::pf::kKfacPendingAttrName) &&
        runner->compiledProgram->parameter(param.getSymName().str()))
      runner->pending.insert(param.getSymName().str());
  if (auto err = runner->findReplicaFactors(module))
    return std::move(err);
  if (auto err = runner->compilePrograms({runner->programOp}))
    return std::move(err);
  return runner;
}

llvm::Expected<pfrt_comm *> RankRunner::groupOf(llvm::ArrayRef<int64_t> members) {
  std::vector<int32_t> ranks(members.begin(), members.end());
  llvm::sort(ranks);
  if (int32_t(ranks.size()) == pfrt_comm_size(world))
    return world;
  auto it = groups.find(ranks);
  if (it != groups.end())
    return it->second;
  pfrt_comm *group = nullptr;
  if (pfrt_comm_create_group(ctx, world, ranks.data(), int32_t(ranks.size()), &group) != PFRT_OK)
    return error("creating the group of ranks " + listText(members) + ": " +
                 pfrt_last_error(ctx));
  groups[ranks] = group;
  return group;
}

llvm::Expected<pfrt_comm *> RankRunner::transferGroupOf(llvm::ArrayRef<int64_t> members) {
  if (!transferComm)
    return groupOf(members);
  std::vector<int32_t> ranks(members.begin(), members.end());
  llvm::sort(ranks);
  auto it = transferGroups.find(ranks);
  if (it != transferGroups.end())
    return it->second;
  pfrt_comm *group = nullptr;
  if (pfrt_comm_create_group(transferContext, transferComm, ranks.data(), int32_t(ranks.size()),
                             &group) != PFRT_OK)
    return error("creating the group of ranks " + listText(members) +
                 " on the transfer communicator: " + pfrt_last_error(transferContext));
  transferGroups[ranks] = group;
  return group;
}

llvm::Error RankRunner::allReduceParameter(const std::string &name,
                                           llvm::ArrayRef<int64_t> members) {
  const CompiledModel::Parameter *param = compiledProgram->parameter(name);
  if (!param)
    return error("all_reduce of '" + name + "', which is not a parameter");
  auto group = groupOf(members);
  if (!group)
    return group.takeError();
  return withHostParameters([&] { return allReduceHostParameter(*param, *group); });
}

llvm::Error RankRunner::allReduceHostParameter(const CompiledModel::Parameter &parameter,
                                               pfrt_comm *group) {
  const CompiledModel::Parameter *param = &parameter;
  const std::string &name = param->name;
  if (pending.count(name) && !ownedPending.count(name)) {
    if (param->dtype != PFRT_F32 && param->dtype != PFRT_F64)
      return error("all_reduce of the pending inverse '" + name + "': not f32 or f64");
    if (param->dtype == PFRT_F32)
      std::fill_n(static_cast<float *>(param->data), param->bytes / sizeof(float), -0.0f);
    else
      std::fill_n(static_cast<double *>(param->data), param->bytes / sizeof(double), -0.0);
  }
  pfrt_tensor t{};
  t.dtype = param->dtype;
  t.rank = int32_t(param->shape.size());
  for (size_t i = 0; i < param->shape.size(); ++i)
    t.shape[i] = param->shape[i];
  t.data = param->data;
  if (pfrt_comm_all_reduce_sum(ctx, group, &t) != PFRT_OK)
    return error("all-reducing the parameter '" + name + "': " + pfrt_last_error(ctx));
  return llvm::Error::success();
}

llvm::Error RankRunner::exchangePendingInverses() {
  if (windowPrograms.empty())
    return llvm::Error::success();
  auto last = cast<mlir::pf::RankProgramOp>(windowPrograms.back());
  for (mlir::pf::AllReduceOp reduce : last.getBody().front().getOps<mlir::pf::AllReduceOp>())
    if (pending.count(reduce.getValue().str()))
      if (auto err = allReduceParameter(reduce.getValue().str(), reduce.getRanks()))
        return err;
  return llvm::Error::success();
}

RankRunner::ActivationFigures RankRunner::plannedActivations() const {
  ActivationFigures most;
  std::vector<Operation *> programs{programOp};
  programs.insert(programs.end(), windowPrograms.begin(), windowPrograms.end());
  for (Operation *program : programs) {
    mlir::pf::StageValuePlan plan = mlir::pf::planStageValues(program, options.overlapTransfers);
    most.slots = std::max(most.slots, plan.savedMicrobatches);
    most.bytes = std::max(most.bytes, plan.liveBytes);
  }
  most.arenaBytes = arenaBytes;
  return most;
}

llvm::Error RankRunner::findReplicaFactors(ModuleOp module) {
  std::set<std::string> reduced;
  for (auto reduce : program().getBody().front().getOps<mlir::pf::AllReduceOp>())
    if (compiledProgram->parameter(reduce.getValue().str()))
      reduced.insert(reduce.getValue().str());
  if (reduced.empty())
    return llvm::Error::success();
  // factor -> `every` of its updates; and the factors this rank updates in a
  // call of micro-batch 0 (its copy carries the decayed previous factor).
  std::map<std::string, int64_t> every;
  std::set<std::string> atMicrobatchZero, hostDecided;
  for (auto run : program().getBody().front().getOps<mlir::pf::RunStageOp>()) {
    auto function = module.lookupSymbol<func::FuncOp>(run.getStage());
    if (!function || !run.getMicrobatch())
      continue;
    function.walk([&](mlir::pf::KFACUpdateFactorOp update) {
      std::string factor = update.getFactor().str();
      every[factor] = int64_t(update.getEvery());
      if (update.getDue())
        hostDecided.insert(factor);
      if (*run.getMicrobatch() == 0)
        atMicrobatchZero.insert(factor);
    });
  }
  // The inverse calls a lower rank also makes in the warm-up step.
  for (mlir::pf::RankProgramOp other : module.getOps<mlir::pf::RankProgramOp>()) {
    if (other.getWindowStep() || other.getRankValue() >= int64_t(rankIndex))
      continue;
    for (auto run : other.getBody().front().getOps<mlir::pf::RunStageOp>())
      if (run.getKind() == mlir::pf::StageTaskKind::KfacInverse)
        unreportedInverses.insert(run.getStage().str());
  }
  for (const std::string &factor : reduced) {
    auto it = every.find(factor);
    if (it == every.end())
      return error("the program all-reduces the parameter '" + factor +
                   "', but no call of this rank updates it as a K-FAC factor");
    if (!atMicrobatchZero.count(factor))
      replicaFactors.push_back({factor, it->second, hostDecided.count(factor) > 0});
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::startReplicaFactors(const Values &graph, Operation *program) {
  if (replicaFactors.empty())
    return llvm::Error::success();
  auto stepInput = graph.find("step");
  if (stepInput == graph.end() || stepInput->second.dtype != PFRT_I64 ||
      stepInput->second.numElements() != 1)
    return error("the K-FAC factor updates need the i64 scalar graph input 'step'");
  int64_t step;
  std::memcpy(&step, stepInput->second.data.data(), sizeof(step));
  // K-FAC in the bubbles: the host's kfac_curvature decides.
  int64_t curvature = 0;
  if (auto input = graph.find("kfac_curvature");
      input != graph.end() && input->second.dtype == PFRT_I64 &&
      input->second.numElements() == 1)
    std::memcpy(&curvature, input->second.data.data(), sizeof(curvature));
  std::set<std::string> summed; // the factors this step's program all-reduces
  for (auto reduce : cast<mlir::pf::RankProgramOp>(program).getBody().front().getOps<mlir::pf::AllReduceOp>())
    summed.insert(reduce.getValue().str());
  return withHostParameters([&] { return zeroReplicaFactors(step, curvature, summed); });
}

llvm::Error RankRunner::zeroReplicaFactors(int64_t step, int64_t curvature,
                                           const std::set<std::string> &summed) {
  for (const ReplicaFactor &factor : replicaFactors) {
    const CompiledModel::Parameter *param = compiledProgram->parameter(factor.name);
    if (factor.hostDecided && curvature == 0) {
      if (!summed.count(factor.name))
        continue;
      if (param->dtype != PFRT_F32)
        return error("the K-FAC factor '" + factor.name + "' is not f32");
      std::fill_n(static_cast<float *>(param->data), param->bytes / sizeof(float), -0.0f);
      continue;
    }
    // The lowering's rule (isDueStep): due when (step - 1) mod every is 0.
    if (!factor.hostDecided && (step - 1) % factor.every != 0)
      continue;
    std::memset(param->data, 0, size_t(param->bytes));
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::compilePrograms(const std::vector<Operation *> &programs) {
  if (programs.empty())
    return llvm::Error::success();
  MLIRContext *ctx = programs.front()->getContext();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(ctx));
  for (Operation *program : programs)
    module->getBody()->push_back(program->clone());
  int64_t needed = arenaBytes;
  PassManager lower(ctx);
  mlir::pf::PFLowerRankProgramsOptions lowering;
  lowering.overlap = options.overlapTransfers;
  lower.addPass(mlir::pf::createPFLowerRankPrograms(lowering));
  mlir::pf::buildStandardLLVMLoweringPipeline(lower);
  if (failed(lower.run(*module)))
    return error("lowering the rank program to runtime calls failed (see the diagnostics above)");
  detail::initializeJit(ctx);
  auto engine = ExecutionEngine::create(*module);
  if (!engine)
    return engine.takeError();
  detail::registerRuntimeKernels(**engine);
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    auto add = [&](const char *name, auto *function) {
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                             llvm::JITSymbolFlags::Exported};
    };
    // Every function of the table the lowering calls, so none can be left out.
#define PFRT_RANK_CALL(name, ...) add(#name, &name);
#include "pf/Runtime/pfrt_rank_abi.def"
    return map;
  });
  for (Operation *program : programs) {
    std::string name = ("pf_" + cast<mlir::pf::RankProgramOp>(program).getSymName()).str();
    auto symbol = (*engine)->lookup(name);
    if (!symbol)
      return symbol.takeError();
    loweredPrograms[program] =
        reinterpret_cast<LoweredProgram>(*symbol);
    // In first-use order on every member, as the programs use them.
    std::vector<pfrt_comm *> &programComms = programGroups[program];
    for (const auto &members : mlir::pf::programCommGroups(program)) {
      auto group = transferGroupOf(members);
      if (!group)
        return group.takeError();
      programComms.push_back(*group);
    }
    mlir::pf::StageValuePlan plan = mlir::pf::planStageValues(program, options.overlapTransfers);
    slotCounts[program] = int64_t(plan.slot.size());
    needed = std::max(needed, plan.arenaBytes);
  }
  programEngines.push_back(std::move(*engine));
  // One arena for every program (a step runs one), where the stage
  // functions run: the programs lay their values out in it.
  if (needed > arenaBytes || !arena) {
    arenaContext = transferComm ? transferContext : this->ctx;
    void *grown = nullptr;
    if (pfrt_alloc(arenaContext, std::max<int64_t>(needed, 1), &grown) != PFRT_OK)
      return error(llvm::formatv("allocating the {0}-byte arena of the stage values: {1}", needed,
                                 pfrt_last_error(arenaContext)));
    if (arena)
      pfrt_free(arenaContext, arena);
    arena = grown;
    arenaBytes = needed;
  }
  return llvm::Error::success();
}

RankRunner::~RankRunner() {
  if (arena)
    pfrt_free(arenaContext, arena);
  for (auto &[ranks, comm] : groups)
    pfrt_comm_destroy(comm);
  for (auto &[ranks, comm] : transferGroups)
    pfrt_comm_destroy(comm);
  pfrt_comm_destroy(transferComm); // before the program's context
}

llvm::Error RankRunner::withHostParameters(llvm::function_ref<llvm::Error()> body) {
  if (!compiledProgram->onBackendMemory())
    return body();
  if (auto err = compiledProgram->copyParametersToHost())
    return err;
  if (auto err = body())
    return err;
  return compiledProgram->copyParametersToBackend();
}

bool RankRunner::onBackendMemory() const { return compiledProgram->onBackendMemory(); }

int64_t RankRunner::stageValueCopies() const {
  return compiledProgram->stageValueCopies();
}

mlir::pf::RankProgramOp RankRunner::program() const { return cast<mlir::pf::RankProgramOp>(programOp); }

int64_t RankRunner::microbatches() const { return program().getNumMicrobatches(); }

std::string RankRunner::summary() const {
  int64_t parameterBytes = 0;
  for (const CompiledModel::Parameter &p : compiledProgram->parameters())
    parameterBytes += p.bytes;
  return llvm::formatv("rank {0}: stages {1}, functions {2}, parameters {3} ({4} bytes)\n",
                       rankIndex, listText(program().getStages()),
                       llvm::join(functionNames, " "), compiledProgram->parameters().size(),
                       parameterBytes)
      .str();
}

mlir::Operation *RankRunner::programForStep(int64_t step) const {
  int64_t k = windowStepOf(step);
  return k < 0 ? programOp : windowPrograms[size_t(k)];
}

int64_t RankRunner::windowStepOf(int64_t step) const {
  if (windowPrograms.empty() || step <= kfacWarmup)
    return -1;
  return (step - kfacWarmup - 1) % int64_t(windowPrograms.size());
}

llvm::Error RankRunner::useKfacWindow(int64_t warmup, int64_t steps) {
  if (warmup < 1 || steps < 1)
    return error(llvm::formatv("K-FAC window: warm-up steps and window steps must be >= 1, got "
                               "{0} and {1}",
                               warmup, steps));
  auto module = programOp->getParentOfType<ModuleOp>();
  std::vector<Operation *> found(size_t(steps), nullptr);
  for (mlir::pf::RankProgramOp program : module.getOps<mlir::pf::RankProgramOp>()) {
    if (program.getRankValue() != rankIndex || !program.getWindowStep())
      continue;
    int64_t k = int64_t(*program.getWindowStep());
    if (int64_t(program.getWindowSteps().value_or(0)) != steps || k >= steps)
      return error(llvm::formatv("K-FAC window: @{0} is not window step k < {1}",
                                 program.getSymName(), steps));
    for (mlir::pf::RunStageOp call : program.getBody().front().getOps<mlir::pf::RunStageOp>())
      if (!compiledProgram->hasEntry(call.getStage().str()))
        return error("K-FAC window: @" + program.getSymName() + " calls @" +
                     call.getStage() + ", which the rank's program does not");
    found[size_t(k)] = program;
  }
  for (auto [k, program] : llvm::enumerate(found))
    if (!program)
      return error(llvm::formatv("K-FAC window: rank {0} has no program of window step {1}",
                                 rankIndex, k));
  if (auto err = compilePrograms(found))
    return err;
  ownedPending.clear();
  for (Operation *program : found)
    for (mlir::pf::RunStageOp call :
         cast<mlir::pf::RankProgramOp>(program).getBody().front().getOps<mlir::pf::RunStageOp>())
      if (call.getKind() == mlir::pf::StageTaskKind::KfacInverse)
        for (llvm::StringRef inverse :
             mlir::pf::kfacInverseParameters(module.lookupSymbol(call.getStageAttr())).inverses)
          ownedPending.insert(inverse.str());
  windowPrograms = std::move(found);
  kfacWarmup = warmup;
  return llvm::Error::success();
}

llvm::Error RankRunner::runInverse(const std::string &function, const Values &graph,
                                   bool reports) {
  Values args, results;
  for (const TensorSpec &spec : compiledProgram->inputs(function)) {
    auto input = graph.find(spec.name);
    if (input == graph.end())
      return error("missing input '" + spec.name + "' (read by " + function + ")");
    args[spec.name] = input->second;
  }
  if (auto err = compiledProgram->run(function, args, results))
    return err;
  for (auto &[name, value] : results) {
    if (name != mlir::pf::kKfacIssuesName || value.dtype != PFRT_I32 || value.numElements() != 1)
      return error("unexpected result '" + name + "' of " + function);
    int32_t issues;
    std::memcpy(&issues, value.data.data(), sizeof(issues));
    if (reports)
      kfacIssues += issues;
  }
  return llvm::Error::success();
}

/// `<w>.kfac.A_inv` of the pending `<w>.kfac.A_inv_next`.
static std::string inverseInUse(llvm::StringRef pending) {
  return pending.drop_back(llvm::StringRef("_next").size()).str();
}

llvm::Error RankRunner::promoteInverses() {
  return withHostParameters([&] { return promoteHostInverses(); });
}

llvm::Error RankRunner::promoteHostInverses() {
  for (const std::string &name : pending) {
    const CompiledModel::Parameter *from = compiledProgram->parameter(name);
    const CompiledModel::Parameter *to = compiledProgram->parameter(inverseInUse(name));
    // Chimera's replicas split the preconditioning: a rank that computes or
    // receives a layer's pending inverses but leaves its preconditioning to
    // the other replica holds no inverses in use for it.
    if (from && !to)
      continue;
    if (!from || from->bytes != to->bytes)
      return error("kfac_promote_inverses: '" + name + "' has no inverse of its size to replace");
    std::memcpy(to->data, from->data, size_t(from->bytes));
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::recomputePendingInverses(const Values &graph, int64_t step) {
  int64_t k = windowStepOf(step);
  if (k < 0)
    return llvm::Error::success();
  // The pending inverses equal the ones in use after a promotion.
  if (auto err = withHostParameters([&] {
        for (const std::string &name : pending) {
          const CompiledModel::Parameter *from = compiledProgram->parameter(inverseInUse(name));
          const CompiledModel::Parameter *to = compiledProgram->parameter(name);
          if (from && to && from->bytes == to->bytes)
            std::memcpy(to->data, from->data, size_t(from->bytes));
        }
        return llvm::Error::success();
      }))
    return err;
  bool windowStart = k == 0 && step > kfacWarmup + 1;
  for (int64_t j = 0; j < (windowStart ? int64_t(windowPrograms.size()) : k); ++j)
    for (mlir::pf::RunStageOp call : cast<mlir::pf::RankProgramOp>(windowPrograms[size_t(j)])
                                   .getBody()
                                   .front()
                                   .getOps<mlir::pf::RunStageOp>())
      if (call.getKind() == mlir::pf::StageTaskKind::KfacInverse)
        if (auto err = runInverse(call.getStage().str(), graph))
          return err;
  // The previous window's last step handed the shared inverses over.
  if (windowStart)
    if (auto err = exchangePendingInverses())
      return err;
  kfacIssues = 0;
  return llvm::Error::success();
}

llvm::Error RankRunner::runStep(const Values &graph, Values &results, int64_t step) {
  kfacIssues = 0;
  Step run(*this, graph, step);
  if (auto err = run.run())
    return err;
  results = run.takeResults();
  return llvm::Error::success();
}

int mlir::pf::driver::runRanksTool(ModuleOp module, const RankRunOptions &options) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  if (!ctx) {
    llvm::errs() << "pf-run: error: cannot create a runtime context\n";
    return 1;
  }
  pfrt_comm *world = nullptr;
  if (pfrt_comm_create(ctx, nullptr, &world) != PFRT_OK) {
    llvm::errs() << "pf-run: error: --run-ranks: " << pfrt_last_error(ctx) << "\n";
    pfrt_context_destroy(ctx);
    return 1;
  }
  int32_t rank = pfrt_comm_rank(world);
  if (auto err = runRank(module, options, ctx, world)) {
    llvm::outs().flush();
    // One write: mpirun interleaves the ranks' output by write.
    llvm::errs() << ("rank " + std::to_string(rank) + ": " + llvm::toString(std::move(err)) +
                     "\n");
    // Returning would wait for the other ranks in MPI_Finalize.
    pfrt_comm_abort(ctx, world, 1);
    return 1;
  }
  pfrt_comm_destroy(world);
  pfrt_status finalized = pfrt_comm_finalize(ctx);
  if (finalized != PFRT_OK)
    llvm::errs() << ("rank " + std::to_string(rank) + ": " + pfrt_last_error(ctx) + "\n");
  pfrt_context_destroy(ctx);
  return finalized == PFRT_OK ? 0 : 1;
}
