//===- PFRankProgram.h - checks of a module's per-rank programs -*- C++ -*-===//
//
// The per-op verifiers of pf.rank_program and its ops check each op's own
// fields; the rules that involve several ranks are checked here, on the whole
// module, by pf-build-rank-programs after it writes the programs and by
// pf-verify-rank-programs (docs/pipeline-execution.md lists the rules).
//
//===----------------------------------------------------------------------===//
#ifndef PF_DIALECT_PF_IR_PFRANKPROGRAM_H
#define PF_DIALECT_PF_IR_PFRANKPROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::pf {

/// Checks the module's pf.rank_program ops together: one program per rank,
/// every send matched by exactly one recv (peers, tag, type, micro-batch),
/// each micro-batch's forward and backward run exactly once per stage with
/// the forward first, and no deadlock when sends and recvs block until both
/// sides meet (rendezvous). That a call's stage values were received or
/// computed before it is SSA dominance. Emits one diagnostic per violation.
LogicalResult verifyRankPrograms(ModuleOp module);

/// The positions of a stage function's arguments (or results) that are
/// stage values (PFStageValues.h): what a pf.run_stage of it takes as
/// `inputs` (or makes as `outputs`), in that order. A once-per-step call
/// (update, precondition) takes the step's gradients (and a precondition
/// call returns them preconditioned).
llvm::SmallVector<unsigned> stageValuePositions(Operation *function, bool results);

/// The slot of each stage value of a pf.rank_program (`program`): its
/// values numbered 0, 1, ... in the order the ops making them run. The
/// lowering and the host that runs the lowered program agree on it.
llvm::DenseMap<Value, int64_t> stageValueSlots(Operation *program);

/// The operand result #`result` of `op` may be written over (null: none):
/// an accumulate call's per its `in_place`, the root reduce's piece, an
/// order(library) all-reduce's partial sum, the root broadcast's operand.
/// planStageValues gives the result that operand's bytes where `op` reads it
/// last; the host refuses a call whose result there would be zeroed first.
Value inPlaceOperand(Operation *op, unsigned result);

/// Whether the lowered program runs `op` itself on its slots (a
/// pfrt_comm_* call, no host service): the library's all-reduce of a
/// value (a partial sum of a gradient or of the loss), a broadcast, a
/// row-sparse sum of a micro-batch's pieces.
bool isProgramCollective(Operation *op);

/// The first tag of a row-sparse sum's messages (pf.reduce_microbatch of
/// micro-batch m, lowered to pfrt_comm_isend_rows / pfrt_comm_recv_add_rows
/// with tag kReduceRowsTag + m, so that the root matches each micro-batch's
/// rows by tag): above every activation's tag (the verifier refuses a send
/// or recv at or above it), and kReduceRowsTag + m at most
/// kLargestPortableTag (the verifier checks), below the host's own
/// exchanges just under pfrt_comm_max_tag.
constexpr int64_t kReduceRowsTag = 32000;
/// The largest tag every MPI accepts (MPI_TAG_UB is at least 32767).
constexpr int64_t kLargestPortableTag = 32767;

/// The member ranks of a collective isProgramCollective accepts.
llvm::ArrayRef<int64_t> collectiveMembers(Operation *op);

/// The member groups of a pf.rank_program's own collectives
/// (isProgramCollective) that are not every rank, each sorted, in the order
/// of their first use: the communicators the host creates for the lowered
/// program and passes it (`%groups`), index by index.
llvm::SmallVector<llvm::SmallVector<int64_t>> programCommGroups(Operation *program);

/// Where a pf.rank_program's stage values live: one arena the program
/// owns, each value at an offset for its lifetime, from the op making it to
/// the op after which it is released (its last use; with posted transfers a
/// sent value, or a received one nobody reads, at the program's end, when
/// the transfer completed). Two values whose lifetimes meet (an op's inputs
/// and outputs included) never share bytes, but for a result written over
/// an operand whose last reader is its op (inPlaceOperand). pf-lower-rank-programs lays the
/// program out so and the host allocates `arenaBytes`: the one copy of the
/// rule.
struct StageValuePlan {
  llvm::DenseMap<Value, int64_t> slot;   ///< stageValueSlots
  llvm::SmallVector<Value> values;       ///< by slot
  llvm::SmallVector<int64_t> offset, bytes;
  /// By slot: the op after which the value is released; null: at the end.
  llvm::SmallVector<Operation *> releasedAfter;
  int64_t arenaBytes = 0;
  /// The most bytes live at once, and the most micro-batches whose saved
  /// activations (saved/*, wsaved/*) are live at once.
  int64_t liveBytes = 0, savedMicrobatches = 0;
};
StageValuePlan planStageValues(Operation *program, bool overlap);

/// The micro-batch of a value made by a pf.run_stage or pf.recv_act.
std::optional<int64_t> microbatchOfStageValue(Value value);

/// The `pf.name` of a rank program's value: the function result a
/// pf.run_stage output is, or the argument a received value is to the
/// first call reading it; empty when neither says. For diagnostics and
/// traces only.
StringRef stageValueName(Value value);

/// The K-FAC parameters a stage function's pf.kfac.refresh_inverses ops read
/// (the factors) and write (the inverses, or eigenvectors and eigenvalues):
/// a kfac_inverse call's dataflow.
struct KfacInverseParameters {
  llvm::SmallVector<StringRef> factors, inverses;
};
KfacInverseParameters kfacInverseParameters(Operation *function);

} // namespace mlir::pf

#endif // PF_DIALECT_PF_IR_PFRANKPROGRAM_H
