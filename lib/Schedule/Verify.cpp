//===- Verify.cpp - Placement, once-only and deadlock checks of a program --===//
//
// Layer "pipeline" (docs/schedule.md): uses OpGraph.h only; no costs, so it
// applies to imported programs before any simulation.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Verify.h"
#include "OpGraph.h"

#include <algorithm>

namespace pf::sched {
namespace {

const char *passLetter(PassKind pass) {
  switch (pass) {
  case PassKind::Forward:
    return "F";
  case PassKind::Backward:
    return "B";
  case PassKind::BackwardInput:
    return "I";
  case PassKind::BackwardWeight:
    return "W";
  }
  return "?";
}

const char *passWords(PassKind pass) {
  switch (pass) {
  case PassKind::Forward:
    return "forward";
  case PassKind::Backward:
    return "backward";
  case PassKind::BackwardInput:
    return "input gradient";
  case PassKind::BackwardWeight:
    return "weight gradient";
  }
  return "?";
}

/// Where an action sits: rank and step.
struct Position {
  int rank = -1, index = -1;
};

class ProgramVerifier {
public:
  ProgramVerifier(const PipelineProgram &program,
                  const std::vector<std::vector<int>> *steps)
      : program_(program), layout_(program.layout), graph_(program.layout),
        steps_(steps), where_(graph_.numIds()) {}

  Status run() {
    if (static_cast<int>(program_.order.size()) != layout_.devices)
      return Status::error("the schedule has " +
                           std::to_string(program_.order.size()) +
                           " ranks for " + std::to_string(layout_.devices) +
                           " devices");
    // In turn: the later checks rely on the earlier ones.
    if (Status s = checkActions(); !s.ok())
      return s;
    if (Status s = checkComplete(); !s.ok())
      return s;
    return checkDeadlockFree();
  }

private:
  int stepOf(int rank, int index) const {
    return steps_ ? (*steps_)[rank][index] : index;
  }
  std::string at(int rank, int index) const {
    return "rank " + std::to_string(rank) + ", step " +
           std::to_string(stepOf(rank, index)) + ", action " +
           actionName(program_.order[rank][index]);
  }

  /// Range, placement, whole or split, and at most once.
  Status checkActions() {
    for (int r = 0; r < layout_.devices; ++r)
      for (int i = 0; i < static_cast<int>(program_.order[r].size()); ++i) {
        const PipelineOp &op = program_.order[r][i];
        if (op.stage < 0 || op.stage >= layout_.stages)
          return Status::error(at(r, i) + ": stage out of range (the pipeline has " +
                               std::to_string(layout_.stages) + " stages)");
        if (op.micro < 0 || op.micro >= layout_.microbatches)
          return Status::error(at(r, i) + ": micro-batch out of range (" +
                               std::to_string(layout_.microbatches) +
                               " micro-batches)");
        if (graph_.device(op) != r)
          return Status::error(at(r, i) + ": stage " + std::to_string(op.stage) +
                               " runs on rank " + std::to_string(graph_.device(op)));
        if (Status s = checkForm(op, r, i); !s.ok())
          return s;
        Position &first = where_[graph_.id(op)];
        if (first.rank >= 0)
          return Status::error(at(r, i) + ": the " + passWords(op.pass) +
                               " of stage " + std::to_string(op.stage) +
                               ", micro-batch " + std::to_string(op.micro) +
                               " runs a second time (first at " +
                               at(first.rank, first.index) + ")");
        first = {r, i};
      }
    return Status::success();
  }

  Status checkForm(const PipelineOp &op, int r, int i) const {
    if (op.pass == PassKind::Forward)
      return Status::success();
    bool split = layout_.splitsBackward(op.stage, op.micro);
    if (!layout_.splitBackward && op.pass != PassKind::Backward)
      return Status::error(at(r, i) + ": this schedule does not split the backward");
    if (split && op.pass == PassKind::Backward)
      return Status::error(at(r, i) + ": a whole backward where this schedule splits it");
    if (!split && op.pass == PassKind::BackwardWeight)
      return Status::error(at(r, i) + ": a weight gradient of a backward that runs whole");
    return Status::success();
  }

  Status missing(PassKind pass, int stage, int micro) const {
    PipelineOp op{pass, stage, micro};
    return Status::error("stage " + std::to_string(stage) + " never runs the " +
                         passWords(pass) + " of micro-batch " +
                         std::to_string(micro) + " (" + actionName(op) +
                         ", on rank " + std::to_string(graph_.device(op)) + ")");
  }

  /// Every micro-batch's forward and backward once per stage.
  Status checkComplete() const {
    for (int s = 0; s < layout_.stages; ++s)
      for (int m = 0; m < layout_.microbatches; ++m) {
        bool split = layout_.splitsBackward(s, m);
        PassKind back = split ? PassKind::BackwardInput : PassKind::Backward;
        for (PassKind pass : {PassKind::Forward, back, PassKind::BackwardWeight}) {
          if (pass == PassKind::BackwardWeight && !split)
            continue;
          if (where_[graph_.id({pass, s, m})].rank < 0)
            return missing(pass, s, m);
        }
      }
    return Status::success();
  }

  /// Runs the ranks as blocking programs: a rank proceeds while its next
  /// action's inputs are done. All ranks blocked before the end: deadlock.
  Status checkDeadlockFree() const {
    const int D = layout_.devices;
    std::vector<size_t> next(D, 0);
    std::vector<char> done(graph_.numIds(), 0);
    std::vector<PipelineOp> deps;
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < D; ++r)
        while (next[r] < program_.order[r].size() &&
               inputsDone(program_.order[r][next[r]], done, deps)) {
          done[graph_.id(program_.order[r][next[r]])] = 1;
          ++next[r];
          progress = true;
        }
    }
    // A rank waiting for its own later pass is the root cause; report it
    // before the ranks that wait on it.
    std::vector<int> stuck;
    for (int r = 0; r < D; ++r)
      if (next[r] < program_.order[r].size())
        stuck.push_back(r);
    for (int r : stuck)
      if (waitsForItself(r, static_cast<int>(next[r]), done))
        return blocked(r, static_cast<int>(next[r]), done, next);
    if (!stuck.empty())
      return blocked(stuck.front(), static_cast<int>(next[stuck.front()]), done, next);
    return Status::success();
  }

  bool waitsForItself(int r, int i, const std::vector<char> &done) const {
    std::vector<PipelineOp> deps;
    graph_.producers(program_.order[r][i], deps);
    return std::any_of(deps.begin(), deps.end(), [&](const PipelineOp &p) {
      return !done[graph_.id(p)] && where_[graph_.id(p)].rank == r;
    });
  }

  bool inputsDone(const PipelineOp &op, const std::vector<char> &done,
                  std::vector<PipelineOp> &deps) const {
    graph_.producers(op, deps);
    return std::all_of(deps.begin(), deps.end(), [&](const PipelineOp &p) {
      return done[graph_.id(p)] != 0;
    });
  }

  /// Names the first input rank r waits for and where that input is.
  Status blocked(int r, int i, const std::vector<char> &done,
                 const std::vector<size_t> &next) const {
    std::vector<PipelineOp> deps;
    graph_.producers(program_.order[r][i], deps);
    // The rank's own later pass first: it explains the wait.
    std::stable_partition(deps.begin(), deps.end(), [&](const PipelineOp &p) {
      return where_[graph_.id(p)].rank == r;
    });
    for (const PipelineOp &p : deps) {
      if (done[graph_.id(p)])
        continue;
      Position w = where_[graph_.id(p)];
      std::string msg = at(r, i) + ": waits for " + actionName(p) + ", which ";
      if (w.rank == r)
        return Status::error(msg + "the same rank runs later, at step " +
                             std::to_string(stepOf(r, w.index)) +
                             " (dependency order)");
      return Status::error("the schedule deadlocks: " + msg + "rank " +
                           std::to_string(w.rank) + " runs at step " +
                           std::to_string(stepOf(w.rank, w.index)) +
                           " after its own blocked " +
                           at(w.rank, static_cast<int>(next[w.rank])));
    }
    return Status::error(at(r, i) + ": blocked");
  }

  const PipelineProgram &program_;
  const PipelineLayout &layout_;
  detail::OpGraph graph_;
  const std::vector<std::vector<int>> *steps_;
  std::vector<Position> where_;
};

} // namespace

std::string actionName(const PipelineOp &op) {
  return std::to_string(op.stage) + passLetter(op.pass) + std::to_string(op.micro);
}

Status verifyProgram(const PipelineProgram &program,
                     const std::vector<std::vector<int>> *steps) {
  return ProgramVerifier(program, steps).run();
}

} // namespace pf::sched
