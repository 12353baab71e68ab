//===- RankRunner.cpp - Run one rank's compiled pipeline program ----------===//
#include "pf/RankRuntime/RankRunner.h"
#include "pf/RankRuntime/StageCalls.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Runtime/pfrt_rank.h"
#include "pf/Support/StepNames.h"

#include <algorithm>
#include <cstring>

using namespace mlir::pf::driver;
using ::pf::formatText;
using ::pf::Status;

namespace {
Status error(const std::string &message) { return Status::error(message); }

/// A tensor type as the lowered program passes it (pfrt dtype, shape).
struct ValueType {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
};

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

/// "[0, 3]".
template <typename T> std::string listText(const std::vector<T> &values) {
  std::string text;
  for (T v : values)
    text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

std::string joined(const std::vector<std::string> &names, const char *separator) {
  std::string text;
  for (const std::string &n : names)
    text += (text.empty() ? "" : separator) + n;
  return text;
}

NpyArray zeros(int32_t dtype, std::vector<int64_t> shape) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.assign(size_t(a.numElements() * dtypeBytes(dtype)), 0);
  return a;
}

bool startsWith(const std::string &name, const char *prefix) {
  return name.compare(0, std::strlen(prefix), prefix) == 0;
}

pfrt_tensor descriptorOf(NpyArray &array) {
  pfrt_tensor t{};
  t.data = array.data.empty() ? nullptr : array.data.data();
  t.dtype = array.dtype;
  t.rank = int32_t(array.shape.size());
  for (size_t i = 0; i < array.shape.size() && i < size_t(PFRT_MAX_RANK); ++i)
    t.shape[i] = array.shape[i];
  return t;
}
} // namespace

/// What a lowered rank program calls through pfrt_rank.h: the services of
/// one run of the program.
struct pfrt_rank_host {
  virtual ~pfrt_rank_host() = default;
  virtual int32_t runStage(int64_t op, StageCallKind kind, const char *function,
                           int64_t microbatch, std::vector<int64_t> inputs,
                           std::vector<int64_t> outputs) = 0;
  virtual int32_t mark(int64_t op, int32_t phase) = 0;
  virtual int32_t allReduceParameter(int64_t op, const char *name, std::vector<int64_t> ranks,
                                     ValueType type) = 0;
  virtual int32_t stepScalar(int64_t op, const char *name, double *value) = 0;
  virtual int32_t promoteInverses(int64_t op) = 0;
  virtual int32_t stepResult(int64_t op, const char *name, int64_t slot) = 0;
};

// Defined here, in the one runner both tools link: the JIT resolves them in
// pf-train, the dynamic loader in an artifact's rank library (pf-trainer
// exports them).
extern "C" {
__attribute__((visibility("default"))) int32_t
pfrt_rank_run_stage(pfrt_rank_host *host, int64_t op, int32_t kind, const char *function,
                    int64_t microbatch, int64_t /*layer*/, int64_t input_count,
                    const int64_t *inputs, int64_t output_count, const int64_t *outputs) {
  return host->runStage(op, StageCallKind(kind), function, microbatch,
                        std::vector<int64_t>(inputs, inputs + input_count),
                        std::vector<int64_t>(outputs, outputs + output_count));
}
__attribute__((visibility("default"))) int32_t pfrt_rank_mark(pfrt_rank_host *host, int64_t op,
                                                              int32_t phase) {
  return host->mark(op, phase);
}
__attribute__((visibility("default"))) int32_t
pfrt_rank_all_reduce_parameter(pfrt_rank_host *host, int64_t op, const char *name,
                               int64_t count, const int64_t *ranks, int32_t dtype, int64_t rank,
                               const int64_t *shape) {
  return host->allReduceParameter(op, name, std::vector<int64_t>(ranks, ranks + count),
                                  valueType(dtype, rank, shape));
}
__attribute__((visibility("default"))) int32_t
pfrt_rank_step_scalar(pfrt_rank_host *host, int64_t op, const char *name, double *value) {
  return host->stepScalar(op, name, value);
}
__attribute__((visibility("default"))) int32_t
pfrt_rank_kfac_promote_inverses(pfrt_rank_host *host, int64_t op) {
  return host->promoteInverses(op);
}
__attribute__((visibility("default"))) int32_t
pfrt_rank_step_result(pfrt_rank_host *host, int64_t op, const char *name, int64_t slot) {
  return host->stepResult(op, name, slot);
}
}

/// The state of one run of the program: its slots' descriptors and what the
/// program hands over (pf.step_result).
class RankRunner::Step : public pfrt_rank_host {
public:
  Step(RankRunner &runner, const Values &graph, int64_t step)
      : r(runner), stages(*runner.stagePrograms), graph(graph), stepIndex(step),
        M(runner.microbatches()) {}

  /// Runs the step's lowered program (each op calls back into the services
  /// below).
  Status run() {
    const CompiledRankProgram &program = r.programForStep(stepIndex);
    if (Status s = r.startReplicaFactors(graph, program.table); !s.ok())
      return s;
    for (const std::string &name : program.table.summedElsewhere)
      summedElsewhere.insert(name);
    for (const std::string &name : program.table.broadcastHere)
      broadcastHere.insert(name);
    // The program's stage values: one descriptor per slot, which the program
    // writes (pointing into the arena) before the op making the value.
    descriptors.assign(size_t(program.table.slots), pfrt_tensor{});
    size_t index = size_t(&program - r.programs.data());
    std::vector<pfrt_comm *> &groups = r.programGroups[index];
    int32_t status = program.function(this, transferContext(), transferComm(),
                                       descriptors.data(), r.arena, groups.data(), r.ctx, r.world);
    if (!failure.ok())
      return failure;
    if (status != 0)
      return error(formatText("the rank program's call after op %lld failed: %s (%s)",
                              (long long)currentOp, pfrt_last_error(transferContext()),
                              pfrt_status_string(pfrt_status(status))));
    return Status::success();
  }

  // pfrt_rank_host: each service runs one op of the program.
  int32_t runStage(int64_t op, StageCallKind kind, const char *function, int64_t microbatch,
                   std::vector<int64_t> inputs, std::vector<int64_t> outputs) override {
    return execute(op, "pf.run_stage",
                   [&] { return runStageOp(kind, function, microbatch, inputs, outputs); });
  }
  /// The program's own communication, timed between its marks.
  int32_t mark(int64_t op, int32_t phase) override {
    currentOp = op;
    if (!r.options.recordTimes)
      return 0;
    if (phase == 0)
      markStart = now();
    else
      r.executedOps.push_back({stepIndex, op, r.windowStepOf(stepIndex), markStart, now()});
    return 0;
  }
  int32_t allReduceParameter(int64_t op, const char *name, std::vector<int64_t> ranks,
                             ValueType type) override {
    return execute(op, "pf.all_reduce", [&] { return sumParameter(name, ranks, type); });
  }
  /// The step's scalar input `name` for op `op` (not timed: the op is, by
  /// its marks).
  int32_t stepScalar(int64_t op, const char *name, double *value) override {
    currentOp = op;
    auto input = graph.find(name);
    if (input == graph.end() || input->second.dtype != PFRT_F64 ||
        input->second.numElements() != 1) {
      failure = error(formatText("op %lld: the program reads the step's f64 scalar '%s', "
                                 "which the step does not give",
                                 (long long)op, name));
      return int32_t(PFRT_INTERNAL);
    }
    std::memcpy(value, input->second.data.data(), sizeof(double));
    return 0;
  }
  int32_t promoteInverses(int64_t op) override {
    return execute(op, "pf.kfac_promote_inverses", [&] { return r.promoteInverses(); });
  }
  int32_t stepResult(int64_t op, const char *name, int64_t slot) override {
    return execute(op, "pf.step_result", [&] { return takeStepResult(name, slot); });
  }

  /// `loss` (on the rank holding the last stage) and the `grad/*` the
  /// program handed over: moved out of the finished step.
  Values takeResults() {
    Values out;
    if (!loss.data.empty())
      out[kLossNameText] = std::move(loss);
    for (auto &[name, value] : combined)
      out[name] = std::move(value);
    combined.clear();
    return out;
  }

private:
  /// The first failure of the program's ops; the program returns at once.
  Status failure = Status::success();

  /// One op: `body` runs, timed. A failure is kept, named by op index.
  int32_t execute(int64_t index, const char *opName, const std::function<Status()> &body) {
    currentOp = index;
    double start = r.options.recordTimes ? now() : 0;
    if (Status s = body(); !s.ok()) {
      failure = error(formatText("op %lld (%s): ", (long long)index, opName) + s.message());
      return int32_t(PFRT_INTERNAL);
    }
    if (r.options.recordTimes)
      r.executedOps.push_back({stepIndex, index, r.windowStepOf(stepIndex), start, now()});
    noteGradients();
    return 0;
  }

  RankRunner &r;
  StagePrograms &stages;
  const Values &graph;
  int64_t stepIndex, M;
  std::vector<pfrt_tensor> descriptors;
  double markStart = 0;
  NpyArray loss;
  Values combined;
  int64_t currentOp = 0;
  /// Gradients this rank sums with lower members (the lowest counts them),
  /// and the preconditioned gradients it broadcasts to the other replica
  /// (the layers whose preconditioning it owns).
  std::set<std::string> summedElsewhere, broadcastHere;
  /// c_m of each micro-batch (M > 1), once counted.
  std::vector<int64_t> tokenCounts;

  pfrt_context *transferContext() const { return r.transferComm ? r.transferContext : r.ctx; }
  pfrt_comm *transferComm() const { return r.transferComm ? r.transferComm : r.world; }

  double now() {
    double t = 0;
    pfrt_comm_wall_time(r.ctx, r.world, &t);
    return t;
  }

  void noteGradients() {
    int64_t gradientBytes = 0;
    for (const auto &[name, value] : combined)
      gradientBytes += int64_t(value.data.size());
    r.gradientPeakBytes = std::max(r.gradientPeakBytes, gradientBytes);
  }

  ::pf::Expected<int64_t> microbatchOf(int64_t m, const std::string &function) {
    if (m < 0)
      return error("'" + function + "' has no micro-batch");
    if (m >= M)
      return error(formatText("micro-batch %lld of '%s' but the step has %lld", (long long)m,
                              function.c_str(), (long long)M));
    return m;
  }

  /// The descriptor of the value in `slot` (named `name`), checked to hold a
  /// value of `dtype` and `shape`.
  ::pf::Expected<const pfrt_tensor *> slotTensor(int64_t slot, int32_t dtype,
                                                 const std::vector<int64_t> &shape,
                                                 const std::string &name) const {
    if (slot < 0 || slot >= int64_t(descriptors.size()) || !descriptors[size_t(slot)].data)
      return error(formatText("slot %lld ('%s') holds no value", (long long)slot, name.c_str()));
    const pfrt_tensor &t = descriptors[size_t(slot)];
    std::vector<int64_t> held(t.shape, t.shape + std::max(t.rank, 0));
    if (t.dtype != dtype || held != shape)
      return error(formatText("slot %lld is %s but '%s' is %s", (long long)slot,
                              typeText(t.dtype, held).c_str(), name.c_str(),
                              typeText(dtype, shape).c_str()));
    return &t;
  }

  /// A view of the value in `slot` for a stage call, checked against the
  /// function's `spec` (the program wrote the descriptor before the op).
  ::pf::Expected<StageView> viewOf(int64_t slot, const TensorSpec &spec) const {
    auto t = slotTensor(slot, spec.dtype, spec.shape, spec.name);
    if (!t)
      return t.status();
    return StageView{spec.name, (*t)->dtype, spec.shape, (*t)->data, stages.onBackendMemory()};
  }

  /// A call's stage-value arguments or results (`what`) bind to its `slots`
  /// in order (the verifier checked them against the function's signature),
  /// in place; `other` takes the rest.
  Status bindSlots(const std::string &function, const std::vector<TensorSpec> &specs,
                   const std::vector<int64_t> &slots, const char *what,
                   std::vector<StageView> &views,
                   const std::function<Status(const TensorSpec &)> &other) const {
    size_t count = 0;
    for (const TensorSpec &spec : specs) {
      if (!isStageValue(spec.name)) {
        if (Status s = other(spec); !s.ok())
          return s;
        continue;
      }
      if (count++ >= slots.size())
        continue; // counted for the error below
      auto view = viewOf(slots[count - 1], spec);
      if (!view)
        return view.status();
      views.push_back(*view);
    }
    if (count != slots.size())
      return error(formatText("'%s' has %zu stage-value %s but the call binds %zu",
                              function.c_str(), count, what, slots.size()));
    return Status::success();
  }

  Status unexpectedResult(const TensorSpec &spec, const std::string &function) const {
    return error("unexpected result '" + spec.name + "' of " + function);
  }

  Status runStageOp(StageCallKind kind, const std::string &function, int64_t microbatch,
                    const std::vector<int64_t> &inputs, const std::vector<int64_t> &outputs) {
    if (kind == StageCallKind::Update || kind == StageCallKind::Precondition)
      return runStepCall(kind, function, inputs, outputs);
    if (kind == StageCallKind::KfacInverse)
      return r.runInverse(function, graph,
                          r.windowStepOf(stepIndex) >= 0 || !r.unreportedInverses.count(function));
    if (kind == StageCallKind::Accumulate) {
      auto m = microbatchOf(microbatch, function);
      if (!m)
        return m.status();
      return accumulate(function, *m, inputs, outputs);
    }
    if (kind != StageCallKind::Forward && kind != StageCallKind::Backward &&
        kind != StageCallKind::BackwardInput && kind != StageCallKind::BackwardWeight &&
        kind != StageCallKind::KfacFactorA && kind != StageCallKind::KfacFactorB)
      return error(formatText("stage task kind %d is not run by this executor (forward, "
                              "backward, backward_input, backward_weight, kfac_factor_a, "
                              "kfac_factor_b, accumulate, kfac_inverse, precondition and "
                              "update run)",
                              int(kind)));
    auto m = microbatchOf(microbatch, function);
    if (!m)
      return m.status();
    // The graph inputs and per-call scalars are the host's.
    auto hostInputs = stageCallInputs(stages.inputs(function), function, graph, {}, *m, M,
                                      r.options.ignoreIndex, /*withStageValues=*/false);
    if (!hostInputs)
      return hostInputs.status();
    std::vector<StageView> inputViews, outputViews;
    for (auto &[name, value] : *hostInputs)
      inputViews.push_back({name, value.dtype, value.shape, value.data.data(), false});
    if (Status s = bindSlots(function, stages.inputs(function), inputs, "arguments", inputViews,
                             [](const TensorSpec &) { return Status::success(); });
        !s.ok())
      return s;
    // Every result (activations, the loss, the gradients' pieces) is a
    // value of the program.
    if (Status s = bindSlots(function, stages.outputs(function), outputs, "results", outputViews,
                             [&](const TensorSpec &spec) {
                               return unexpectedResult(spec, function);
                             });
        !s.ok())
      return s;
    return stages.run(function, inputViews, outputViews);
  }

  /// `stage<s>_accumulate` of micro-batch m (pf-build-rank-programs'
  /// count-weighted running sums): its pieces and running sums are values of
  /// the program, bound like any stage call's; the host gives the
  /// micro-batch's weight and the step's total.
  Status accumulate(const std::string &function, int64_t m,
                    const std::vector<int64_t> &inputSlots,
                    const std::vector<int64_t> &outputSlots) {
    if (Status s = countTokens(); !s.ok())
      return s;
    Values args;
    std::vector<StageView> inputs, outputs;
    auto hostInput = [&](const TensorSpec &spec) -> Status {
      if (spec.name == kLossCountInput) {
        args[spec.name] = scalarI64(tokenCounts.empty() ? 1 : tokenCounts[size_t(m)]);
      } else if (spec.name == kLossTotalInput) {
        int64_t total = 0;
        for (int64_t c : tokenCounts)
          total += c;
        args[spec.name] = scalarI64(total == 0 ? 1 : total);
      } else if (spec.name == kMicrobatchInput) {
        args[spec.name] = scalarI64(m);
      } else {
        return error("unexpected input '" + spec.name + "' of " + function);
      }
      return Status::success();
    };
    if (Status s = bindSlots(function, stages.inputs(function), inputSlots, "arguments", inputs,
                             hostInput);
        !s.ok())
      return s;
    for (auto &[name, value] : args)
      inputs.push_back({name, value.dtype, value.shape, value.data.data(), false});
    if (Status s = bindSlots(function, stages.outputs(function), outputSlots, "results", outputs,
                             [&](const TensorSpec &spec) {
                               return unexpectedResult(spec, function);
                             });
        !s.ok())
      return s;
    // A result the plan put over its operand (inPlaceOperand) must not
    // be zeroed before the call reads that operand.
    for (const TensorSpec &spec : stages.outputs(function)) {
      if (!spec.zeroFill)
        continue;
      for (const StageView &out : outputs)
        if (out.name == spec.name)
          for (const StageView &in : inputs)
            if (in.data == out.data)
              return error("'" + spec.name + "' of " + function +
                           " may be written in part, so it cannot take the bytes of '" +
                           in.name + "'");
    }
    return stages.run(function, inputs, outputs);
  }

  /// A once-per-step call (update, precondition): the step's gradients (and
  /// a precondition call's results) are values of the program, bound like
  /// any stage call's; the graph inputs (lr, step) are the host's, as is a
  /// precondition call's `kfac/issues`.
  Status runStepCall(StageCallKind kind, const std::string &function,
                     const std::vector<int64_t> &inputSlots,
                     const std::vector<int64_t> &outputSlots) {
    std::vector<StageView> inputs, outputs;
    if (Status s = bindSlots(function, stages.inputs(function), inputSlots, "arguments", inputs,
                             [&](const TensorSpec &spec) -> Status {
                               auto input = graph.find(spec.name);
                               if (input == graph.end())
                                 return error("missing input '" + spec.name + "' (read by " +
                                              function + ")");
                               const NpyArray &value = input->second;
                               inputs.push_back({spec.name, value.dtype, value.shape,
                                                 const_cast<char *>(value.data.data()), false});
                               return Status::success();
                             });
        !s.ok())
      return s;
    Values hostResults;
    if (Status s = bindSlots(function, stages.outputs(function), outputSlots, "results", outputs,
                             [&](const TensorSpec &spec) -> Status {
                               if (kind != StageCallKind::Precondition ||
                                   spec.name != kKfacIssuesOutput)
                                 return unexpectedResult(spec, function);
                               NpyArray &value = hostResults[spec.name];
                               value = zeros(spec.dtype, spec.shape);
                               outputs.push_back({spec.name, value.dtype, value.shape,
                                                  value.data.data(), false});
                               return Status::success();
                             });
        !s.ok())
      return s;
    if (Status s = stages.run(function, inputs, outputs); !s.ok())
      return s;
    if (kind != StageCallKind::Precondition)
      return Status::success();
    // Chimera: a layer both replicas precondition reports its refresh issues
    // on the rank reporting its gradients; one only its owner preconditions
    // (and broadcasts), on the owner.
    bool reports = true;
    for (const TensorSpec &spec : stages.outputs(function))
      if (isStageValue(spec.name))
        reports = reports &&
                  (!summedElsewhere.count(spec.name) || broadcastHere.count(spec.name));
    auto issues = hostResults.find(kKfacIssuesOutput);
    if (reports && issues != hostResults.end() && issues->second.dtype == PFRT_I32 &&
        issues->second.numElements() == 1) {
      int32_t count = 0;
      std::memcpy(&count, issues->second.data.data(), sizeof(count));
      r.kfacIssues += count;
    }
    return Status::success();
  }

  /// pf.step_result: the step's loss or a gradient in `slot`, read into
  /// host memory for the caller (counted as the step's results).
  Status takeStepResult(const std::string &name, int64_t slot) {
    const bool isGradient = startsWith(name, kGradientPrefixText);
    if (!isGradient && name != kLossNameText)
      return error("'" + name + "' is not a result of the step (the loss and grad/* are)");
    ValueType type{PFRT_F32, {}};
    if (isGradient) {
      if (slot < 0 || slot >= int64_t(descriptors.size()) || !descriptors[size_t(slot)].data)
        return error(formatText("slot %lld ('%s') holds no value", (long long)slot,
                                name.c_str()));
      const pfrt_tensor &t = descriptors[size_t(slot)];
      type = valueType(t.dtype, t.rank, t.shape);
    } else if (!loss.data.empty()) {
      return error("the step's loss is reported twice");
    }
    r.resultByteCount += valueBytes(type);
    auto value = readSlot(slot, type, name);
    if (!value)
      return value.status();
    if (!isGradient)
      loss = std::move(*value);
    else if (!combined.emplace(name, std::move(*value)).second)
      return error("'" + name + "' is reported twice on this rank");
    return Status::success();
  }

  /// A copy in host memory of the value in `slot`. Every read of a stage
  /// value's contents by host code goes through readSlot, which counts the
  /// bytes (RankRunner::hostStageValueBytes): the program writes them all
  /// itself, so only the results it hands over (pf.step_result) are read.
  ::pf::Expected<NpyArray> readSlot(int64_t slot, const ValueType &type,
                                    const std::string &name) {
    auto t = slotTensor(slot, type.dtype, type.shape, name);
    if (!t)
      return t.status();
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
  Status sumParameter(const std::string &name, const std::vector<int64_t> &members,
                      const ValueType &type) {
    const ModelParameter *param = stages.parameter(name);
    if (!param)
      return error("'" + name + "' is all-reduced by name but is not a parameter");
    if (param->dtype != type.dtype || param->shape != type.shape)
      return error("all_reduce of parameter '" + param->name + "' expects " +
                   typeText(type.dtype, type.shape) + " but the parameter is " +
                   typeText(param->dtype, param->shape));
    return r.allReduceParameter(param->name, members);
  }

  Status countTokens() {
    if (M == 1 || !tokenCounts.empty())
      return Status::success();
    auto c = microbatchTokenCounts(graph, M, r.options.ignoreIndex);
    if (!c)
      return c.status();
    tokenCounts = std::move(*c);
    return Status::success();
  }
};

//===--- The gather of named arrays -----------------------------------------===//

namespace {
/// Per array a header (dtype, rank, shape, name length), the name's bytes,
/// the data; one tag above every program tag.
constexpr int kHeaderWords = 3 + PFRT_MAX_RANK;
} // namespace

Status mlir::pf::driver::sendValues(pfrt_context *ctx, pfrt_comm *world, const Values &outputs,
                                    int32_t to) {
  int32_t tag = pfrt_comm_max_tag(world);
  auto sendArray = [&](const NpyArray &a) -> Status {
    if (a.shape.size() > size_t(PFRT_MAX_RANK))
      return error(formatText("a tensor of rank %zu (at most %d)", a.shape.size(),
                              PFRT_MAX_RANK));
    pfrt_tensor t = descriptorOf(const_cast<NpyArray &>(a));
    if (pfrt_comm_send(ctx, world, &t, to, tag) != PFRT_OK)
      return error(formatText("sending values to rank %d: %s", to, pfrt_last_error(ctx)));
    return Status::success();
  };
  NpyArray count = zeros(PFRT_I64, {1});
  reinterpret_cast<int64_t *>(count.data.data())[0] = int64_t(outputs.size());
  if (Status s = sendArray(count); !s.ok())
    return s;
  for (const auto &[name, value] : outputs) {
    NpyArray header = zeros(PFRT_I64, {kHeaderWords});
    int64_t *h = reinterpret_cast<int64_t *>(header.data.data());
    h[0] = value.dtype;
    h[1] = int64_t(value.shape.size());
    h[2] = int64_t(name.size());
    for (size_t i = 0; i < value.shape.size() && i < size_t(PFRT_MAX_RANK); ++i)
      h[3 + i] = value.shape[i];
    NpyArray text = zeros(PFRT_I8, {int64_t(name.size())});
    std::memcpy(text.data.data(), name.data(), name.size());
    for (const NpyArray *a : std::vector<const NpyArray *>{&header, &text, &value})
      if (Status s = sendArray(*a); !s.ok())
        return s;
  }
  return Status::success();
}

Status mlir::pf::driver::receiveValues(pfrt_context *ctx, pfrt_comm *world, int32_t from,
                                       Values &outputs) {
  int32_t tag = pfrt_comm_max_tag(world);
  auto recvArray = [&](NpyArray &a) -> Status {
    pfrt_tensor t = descriptorOf(a);
    if (pfrt_comm_recv(ctx, world, &t, from, tag) != PFRT_OK)
      return error(formatText("receiving values from rank %d: %s", from, pfrt_last_error(ctx)));
    return Status::success();
  };
  NpyArray count = zeros(PFRT_I64, {1});
  if (Status s = recvArray(count); !s.ok())
    return s;
  for (int64_t i = 0, n = reinterpret_cast<int64_t *>(count.data.data())[0]; i < n; ++i) {
    NpyArray header = zeros(PFRT_I64, {kHeaderWords});
    if (Status s = recvArray(header); !s.ok())
      return s;
    const int64_t *h = reinterpret_cast<const int64_t *>(header.data.data());
    if (h[1] < 0 || h[1] > PFRT_MAX_RANK || h[2] < 0)
      return error(formatText("rank %d sent a malformed output header", from));
    NpyArray text = zeros(PFRT_I8, {h[2]});
    if (Status s = recvArray(text); !s.ok())
      return s;
    std::string name(text.data.begin(), text.data.end());
    NpyArray value = zeros(int32_t(h[0]), std::vector<int64_t>(h + 3, h + 3 + h[1]));
    if (Status s = recvArray(value); !s.ok())
      return s;
    if (!outputs.emplace(name, std::move(value)).second)
      return error(formatText("rank %d reports '%s', which another rank reported", from,
                              name.c_str()));
  }
  return Status::success();
}

//===--- The runner ---------------------------------------------------------===//

::pf::Expected<std::unique_ptr<RankRunner>>
RankRunner::create(RankPlan plan, LoweredRankProgram program,
                   std::unique_ptr<StagePrograms> stages, pfrt_context *ctx, pfrt_comm *world,
                   const Options &options) {
  int32_t rank = pfrt_comm_rank(world), size = pfrt_comm_size(world);
  if (plan.ranks != size)
    return error(formatText("the rank programs are for %d ranks but the job has %d: start it "
                            "with mpirun -np %d",
                            plan.ranks, size, plan.ranks));
  if (plan.rank != rank)
    return error(formatText("the program given to rank %d is rank %d's", rank, plan.rank));
  if (plan.functions.empty())
    return error(formatText("the program of rank %d calls no stage function", rank));
  for (const std::string &function : plan.functions)
    if (!stages->hasEntry(function))
      return error(formatText("rank %d's program calls '%s', which its stage functions lack",
                              rank, function.c_str()));
  if (!program)
    return error(formatText("rank %d's program has no code", rank));
  std::unique_ptr<RankRunner> runner(new RankRunner());
  runner->ctx = ctx;
  runner->world = world;
  runner->rankIndex = rank;
  runner->options = options;
  runner->stagePrograms = std::move(stages);
  if (runner->stagePrograms->onBackendMemory()) {
    // Collective: every rank creates its runner at the same point.
    pfrt_context *programContext = runner->stagePrograms->runtimeContext();
    pfrt_comm_options commOptions;
    pfrt_comm_options_init(&commOptions);
    commOptions.backend = options.transferBackend;
    if (pfrt_comm_create(programContext, &commOptions, &runner->transferComm) != PFRT_OK)
      return error(std::string("creating the communicator of the stage values on the ") +
                   pfrt_backend_name(programContext) +
                   " backend: " + pfrt_last_error(programContext));
    runner->transferContext = programContext;
  }
  for (const std::string &name : plan.pending)
    if (runner->stagePrograms->parameter(name))
      runner->pending.insert(name);
  runner->unreportedInverses.insert(plan.unreportedInverses.begin(),
                                    plan.unreportedInverses.end());
  for (const ReplicaFactor &factor : plan.replicaFactors) {
    const ModelParameter *param = runner->stagePrograms->parameter(factor.name);
    if (!param)
      return error("the replica factor '" + factor.name + "' is not a parameter of rank " +
                   std::to_string(rank));
    if (param->dtype != PFRT_F32)
      return error("the K-FAC factor '" + factor.name + "' is not f32");
  }
  CompiledRankProgram warmup{plan.program, program};
  runner->rankPlan = std::move(plan);
  if (Status s = runner->adoptPrograms({std::move(warmup)}); !s.ok())
    return s;
  return runner;
}

RankRunner::~RankRunner() {
  if (arena)
    pfrt_free(arenaContext, arena);
  for (auto &[ranks, comm] : groups)
    pfrt_comm_destroy(comm);
  for (auto &[ranks, comm] : transferGroups)
    pfrt_comm_destroy(comm);
  pfrt_comm_destroy(transferComm); // before the stage programs' context
  stagePrograms.reset();
}

Status RankRunner::adoptPrograms(std::vector<CompiledRankProgram> added) {
  int64_t needed = arenaBytes;
  for (CompiledRankProgram &program : added) {
    if (!program.function)
      return error("the rank program '" + program.table.name + "' has no code");
    // In first-use order on every member, as the programs use them.
    std::vector<pfrt_comm *> comms;
    for (const std::vector<int64_t> &members : program.table.commGroups) {
      auto group = transferGroupOf(members);
      if (!group)
        return group.status();
      comms.push_back(*group);
    }
    programGroups.push_back(std::move(comms));
    needed = std::max(needed, program.table.arenaBytes);
    programs.push_back(std::move(program));
  }
  // One arena for every program (a step runs one), where the stage
  // functions run: the programs lay their values out in it.
  if (needed > arenaBytes || !arena) {
    arenaContext = transferComm ? transferContext : ctx;
    void *grown = nullptr;
    if (pfrt_alloc(arenaContext, std::max<int64_t>(needed, 1), &grown) != PFRT_OK)
      return error(formatText("allocating the %lld-byte arena of the stage values: %s",
                              (long long)needed, pfrt_last_error(arenaContext)));
    if (arena)
      pfrt_free(arenaContext, arena);
    arena = grown;
    arenaBytes = needed;
  }
  return Status::success();
}

::pf::Expected<pfrt_comm *> RankRunner::groupOf(const std::vector<int64_t> &members) {
  std::vector<int32_t> ranks(members.begin(), members.end());
  std::sort(ranks.begin(), ranks.end());
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

::pf::Expected<pfrt_comm *> RankRunner::transferGroupOf(const std::vector<int64_t> &members) {
  if (!transferComm)
    return groupOf(members);
  std::vector<int32_t> ranks(members.begin(), members.end());
  std::sort(ranks.begin(), ranks.end());
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

Status RankRunner::allReduceParameter(const std::string &name,
                                      const std::vector<int64_t> &members) {
  const ModelParameter *param = stagePrograms->parameter(name);
  if (!param)
    return error("all_reduce of '" + name + "', which is not a parameter");
  auto group = groupOf(members);
  if (!group)
    return group.status();
  pfrt_comm *comm = *group;
  return withHostParameters([&] { return allReduceHostParameter(*param, comm); });
}

Status RankRunner::allReduceHostParameter(const ModelParameter &param, pfrt_comm *group) {
  const std::string &name = param.name;
  if (pending.count(name) && !ownedPending.count(name)) {
    if (param.dtype != PFRT_F32 && param.dtype != PFRT_F64)
      return error("all_reduce of the pending inverse '" + name + "': not f32 or f64");
    if (param.dtype == PFRT_F32)
      std::fill_n(static_cast<float *>(param.data), param.bytes / sizeof(float), -0.0f);
    else
      std::fill_n(static_cast<double *>(param.data), param.bytes / sizeof(double), -0.0);
  }
  pfrt_tensor t{};
  t.dtype = param.dtype;
  t.rank = int32_t(param.shape.size());
  for (size_t i = 0; i < param.shape.size(); ++i)
    t.shape[i] = param.shape[i];
  t.data = param.data;
  if (pfrt_comm_all_reduce_sum(ctx, group, &t) != PFRT_OK)
    return error("all-reducing the parameter '" + name + "': " + pfrt_last_error(ctx));
  return Status::success();
}

Status RankRunner::exchangePendingInverses() {
  if (windowCount() == 0)
    return Status::success();
  for (const ParameterSum &sum : programs.back().table.parameterSums)
    if (pending.count(sum.name))
      if (Status s = allReduceParameter(sum.name, sum.ranks); !s.ok())
        return s;
  return Status::success();
}

RankRunner::ActivationFigures RankRunner::plannedActivations() const {
  ActivationFigures most;
  for (const CompiledRankProgram &program : programs) {
    most.slots = std::max(most.slots, program.table.savedMicrobatches);
    most.bytes = std::max(most.bytes, program.table.liveBytes);
  }
  most.arenaBytes = arenaBytes;
  return most;
}

Status RankRunner::startReplicaFactors(const Values &graph, const RankProgramTable &program) {
  if (rankPlan.replicaFactors.empty())
    return Status::success();
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
  std::set<std::string> summed(program.allReduced.begin(), program.allReduced.end());
  return withHostParameters([&] { return zeroReplicaFactors(step, curvature, summed); });
}

Status RankRunner::zeroReplicaFactors(int64_t step, int64_t curvature,
                                      const std::set<std::string> &summed) {
  for (const ReplicaFactor &factor : rankPlan.replicaFactors) {
    const ModelParameter *param = stagePrograms->parameter(factor.name);
    if (factor.hostDecided && curvature == 0) {
      if (!summed.count(factor.name))
        continue;
      std::fill_n(static_cast<float *>(param->data), param->bytes / sizeof(float), -0.0f);
      continue;
    }
    // The lowering's rule (isDueStep): due when (step - 1) mod every is 0.
    if (!factor.hostDecided && (step - 1) % factor.every != 0)
      continue;
    std::memset(param->data, 0, size_t(param->bytes));
  }
  return Status::success();
}

Status RankRunner::withHostParameters(const std::function<Status()> &body) {
  if (!stagePrograms->onBackendMemory())
    return body();
  if (Status s = stagePrograms->copyParametersToHost(); !s.ok())
    return s;
  if (Status s = body(); !s.ok())
    return s;
  return stagePrograms->copyParametersToBackend();
}

std::string RankRunner::summary() const {
  int64_t parameterBytes = 0;
  for (const ModelParameter &p : stagePrograms->parameters())
    parameterBytes += p.bytes;
  return formatText("rank %d: stages %s, functions %s, parameters %zu (%lld bytes)\n", rankIndex,
                    listText(rankPlan.stages).c_str(), joined(rankPlan.functions, " ").c_str(),
                    stagePrograms->parameters().size(), (long long)parameterBytes);
}

const CompiledRankProgram &RankRunner::programForStep(int64_t step) const {
  int64_t k = windowStepOf(step);
  return programs[size_t(k + 1)];
}

int64_t RankRunner::windowStepOf(int64_t step) const {
  if (windowCount() == 0 || step <= kfacWarmup)
    return -1;
  return (step - kfacWarmup - 1) % int64_t(windowCount());
}

Status RankRunner::useKfacWindow(int64_t warmup, std::vector<CompiledRankProgram> windows) {
  const int64_t steps = int64_t(windows.size());
  if (warmup < 1 || steps < 1)
    return error(formatText("K-FAC window: warm-up steps and window steps must be >= 1, got "
                            "%lld and %lld",
                            (long long)warmup, (long long)steps));
  if (windowCount() != 0)
    return error("K-FAC window: the windows are placed already");
  for (int64_t k = 0; k < steps; ++k) {
    const RankProgramTable &table = windows[size_t(k)].table;
    if (table.windowStep != k || table.windowSteps != steps)
      return error(formatText("K-FAC window: @%s is not window step %lld of %lld",
                              table.name.c_str(), (long long)k, (long long)steps));
  }
  ownedPending.clear();
  for (const CompiledRankProgram &window : windows)
    ownedPending.insert(window.table.computedInverses.begin(),
                        window.table.computedInverses.end());
  if (Status s = adoptPrograms(std::move(windows)); !s.ok())
    return s;
  kfacWarmup = warmup;
  return Status::success();
}

Status RankRunner::runInverse(const std::string &function, const Values &graph, bool reports) {
  Values args, results;
  for (const TensorSpec &spec : stagePrograms->inputs(function)) {
    auto input = graph.find(spec.name);
    if (input == graph.end())
      return error("missing input '" + spec.name + "' (read by " + function + ")");
    args[spec.name] = input->second;
  }
  if (Status s = stagePrograms->run(function, args, results); !s.ok())
    return s;
  for (auto &[name, value] : results) {
    if (name != kKfacIssuesOutput || value.dtype != PFRT_I32 || value.numElements() != 1)
      return error("unexpected result '" + name + "' of " + function);
    int32_t issues;
    std::memcpy(&issues, value.data.data(), sizeof(issues));
    if (reports)
      kfacIssues += issues;
  }
  return Status::success();
}

/// `<w>.kfac.A_inv` of the pending `<w>.kfac.A_inv_next`.
static std::string inverseInUse(const std::string &pending) {
  return pending.substr(0, pending.size() - std::strlen("_next"));
}

Status RankRunner::promoteInverses() {
  return withHostParameters([&]() -> Status {
    for (const std::string &name : pending) {
      const ModelParameter *from = stagePrograms->parameter(name);
      const ModelParameter *to = stagePrograms->parameter(inverseInUse(name));
      // Chimera's replicas split the preconditioning: a rank that computes
      // or receives a layer's pending inverses but leaves its
      // preconditioning to the other replica holds no inverses in use for it.
      if (from && !to)
        continue;
      if (!from || from->bytes != to->bytes)
        return error("kfac_promote_inverses: '" + name +
                     "' has no inverse of its size to replace");
      std::memcpy(to->data, from->data, size_t(from->bytes));
    }
    return Status::success();
  });
}

Status RankRunner::recomputePendingInverses(const Values &graph, int64_t step) {
  int64_t k = windowStepOf(step);
  if (k < 0)
    return Status::success();
  // The pending inverses equal the ones in use after a promotion.
  if (Status s = withHostParameters([&] {
        for (const std::string &name : pending) {
          const ModelParameter *from = stagePrograms->parameter(inverseInUse(name));
          const ModelParameter *to = stagePrograms->parameter(name);
          if (from && to && from->bytes == to->bytes)
            std::memcpy(to->data, from->data, size_t(from->bytes));
        }
        return Status::success();
      });
      !s.ok())
    return s;
  bool windowStart = k == 0 && step > kfacWarmup + 1;
  for (int64_t j = 0; j < (windowStart ? int64_t(windowCount()) : k); ++j)
    for (const std::string &call : programs[size_t(j + 1)].table.inverseCalls)
      if (Status s = runInverse(call, graph); !s.ok())
        return s;
  // The previous window's last step handed the shared inverses over.
  if (windowStart)
    if (Status s = exchangePendingInverses(); !s.ok())
      return s;
  kfacIssues = 0;
  return Status::success();
}

Status RankRunner::runStep(const Values &graph, Values &results, int64_t step) {
  kfacIssues = 0;
  Step run(*this, graph, step);
  if (Status s = run.run(); !s.ok())
    return s;
  results = run.takeResults();
  return Status::success();
}
