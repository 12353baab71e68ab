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
#include "llvm/ADT/SmallVector.h"

namespace mlir::pf {

/// Checks the module's pf.rank_program ops together: one program per rank,
/// every send matched by exactly one recv (peers, tag, type, value), each
/// micro-batch's forward and backward run exactly once per stage with the
/// forward first, every act/grad_act argument received or computed before the
/// call that reads it, and no deadlock when sends and recvs block until both
/// sides meet (rendezvous). Emits one diagnostic per violation.
LogicalResult verifyRankPrograms(ModuleOp module);

/// The K-FAC parameters a stage function's pf.kfac.refresh_inverses ops read
/// (the factors) and write (the inverses, or eigenvectors and eigenvalues):
/// a kfac_inverse call's dataflow.
struct KfacInverseParameters {
  llvm::SmallVector<StringRef> factors, inverses;
};
KfacInverseParameters kfacInverseParameters(Operation *function);

} // namespace mlir::pf

#endif // PF_DIALECT_PF_IR_PFRANKPROGRAM_H
