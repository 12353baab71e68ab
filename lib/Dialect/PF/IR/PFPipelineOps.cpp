//===- PFPipelineOps.cpp - pipeline structure ---------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"

using namespace mlir;
using namespace mlir::pf;

/// The body's arguments mirror the operands; the yield mirrors the results.
static LogicalResult verifyRegionSignature(Operation *op, Region &body,
                                           ValueRange inputs, TypeRange results) {
  Block &block = body.front();
  if (block.getArgumentTypes() != inputs.getTypes())
    return op->emitOpError("body arguments ")
           << block.getArgumentTypes() << " do not match operands " << inputs.getTypes();
  // The terminator is checked by SingleBlockImplicitTerminator, which runs
  // after this verifier: do not assume it here.
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return success();
  if (yield.getValues().getTypes() != results) {
    InFlightDiagnostic diag = op->emitOpError("yields ");
    if (yield.getValues().empty())
      diag << "no values";
    else
      diag << yield.getValues().getTypes();
    diag << " but declares results ";
    if (results.empty())
      diag << "none";
    else
      diag << results;
    return diag;
  }
  return success();
}

// The ranges of num_stages, num_microbatches, index, to/from and device are
// checked here rather than by PF_PositiveI64Attr / PF_NonNegativeI64Attr:
// these messages are the tested diagnostics.
LogicalResult PipelineOp::verify() {
  // I64Attr getters return uint64_t: compare as signed.
  int64_t numStages = getNumStages(), numMicrobatches = getNumMicrobatches();
  if (numStages < 1)
    return emitOpError("needs at least one stage, got ") << numStages;
  if (numMicrobatches < 1)
    return emitOpError("needs at least one micro-batch, got ") << numMicrobatches;
  for (auto stage : getBody().front().getOps<StageOp>())
    if (int64_t index = stage.getIndex(); index >= numStages)
      return stage.emitOpError("index ") << index
                                         << " is out of range for a pipeline of "
                                         << numStages << " stages";
  return verifyRegionSignature(*this, getBody(), getInputs(), getResultTypes());
}

LogicalResult StageOp::verify() {
  if (!(*this)->getParentOfType<PipelineOp>())
    return emitOpError("must be nested in a pf.pipeline");
  if (int64_t(getIndex()) < 0)
    return emitOpError("index must be >= 0, got ") << int64_t(getIndex());
  return verifyRegionSignature(*this, getBody(), getInputs(), getResultTypes());
}

static LogicalResult verifyPeer(Operation *op, int64_t peer, StringRef what) {
  if (peer < 0)
    return op->emitOpError(what) << " stage must be >= 0, got " << peer;
  auto stage = op->getParentOfType<StageOp>();
  if (stage && int64_t(stage.getIndex()) == peer)
    return op->emitOpError(what) << " stage " << peer << " is the stage itself";
  if (auto pipeline = op->getParentOfType<PipelineOp>();
      pipeline && peer >= int64_t(pipeline.getNumStages()))
    return op->emitOpError(what) << " stage " << peer << " is out of range for "
                                 << int64_t(pipeline.getNumStages()) << " stages";
  return success();
}

LogicalResult SendOp::verify() { return verifyPeer(*this, getTo(), "destination"); }
LogicalResult RecvOp::verify() { return verifyPeer(*this, getFrom(), "source"); }

LogicalResult MicrobatchOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &out) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t count = adaptor.getCount(), index = adaptor.getIndex();
  int64_t dim = adaptor.getDim();
  if (count < 1 || index < 0 || index >= count)
    return emitOptionalError(loc, "microbatch: index ", index, " is not in [0, ",
                             count, ")");
  if (dim < 0 || dim >= type.getRank())
    return emitOptionalError(loc, "microbatch: dim ", dim, " out of range");
  SmallVector<int64_t> shape(type.getShape());
  if (!ShapedType::isDynamic(shape[dim])) {
    if (shape[dim] % count != 0)
      return emitOptionalError(loc, "microbatch: dimension of size ", shape[dim],
                               " does not split into ", count, " micro-batches");
    shape[dim] /= count;
  }
  out.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult ProgramOp::verify() {
  if (int64_t(getDevice()) < 0)
    return emitOpError("device must be >= 0");
  return success();
}

LogicalResult TaskOp::verify() {
  static const char *const kinds[] = {
      "forward",     "backward",    "backward_input", "backward_weight", "curvature_a",
      "curvature_b", "inversion_a", "inversion_b",    "precondition",    "send_recv",
      "allreduce",   "factor_sync", "precond_sync"};
  if (!llvm::is_contained(kinds, getKind()))
    return emitOpError("unknown task kind '") << getKind() << "'";
  if (getEnd().convertToDouble() < getStart().convertToDouble())
    return emitOpError("ends before it starts");
  return success();
}
