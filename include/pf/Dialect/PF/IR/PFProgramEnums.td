//===- PFProgramEnums.td - enums of the per-rank program ----*- tablegen -*-===//
#ifndef PF_PROGRAM_ENUMS_TD
#define PF_PROGRAM_ENUMS_TD

include "mlir/IR/EnumAttr.td"

// What a `pf.run_stage` runs: a pass of one micro-batch (forward, backward and
// its zero-bubble halves, the K-FAC factor contributions, the accumulation) or
// once-per-step work (inverses, preconditioning, the optimizer update).
def PF_StageTaskKind : I32EnumAttr<"StageTaskKind", "the work a pf.run_stage does", [
    I32EnumAttrCase<"Forward", 0, "forward">,
    I32EnumAttrCase<"Backward", 1, "backward">,
    I32EnumAttrCase<"BackwardInput", 2, "backward_input">,
    I32EnumAttrCase<"BackwardWeight", 3, "backward_weight">,
    I32EnumAttrCase<"KfacFactorA", 4, "kfac_factor_a">,
    I32EnumAttrCase<"KfacFactorB", 5, "kfac_factor_b">,
    I32EnumAttrCase<"KfacInverse", 6, "kfac_inverse">,
    I32EnumAttrCase<"Precondition", 7, "precondition">,
    I32EnumAttrCase<"Accumulate", 8, "accumulate">,
    I32EnumAttrCase<"Update", 9, "update">]> {
  let cppNamespace = "::mlir::pf";
}

def PF_ReductionOrder : I32EnumAttr<"ReductionOrder",
    "how a pf.all_reduce of a gradient adds the members' values", [
    // One process's sum bit for bit: a parameter summed in place by name
    // (Chimera's K-FAC factors, a + b on both members). For a gradient,
    // pf-build-rank-programs{deterministic=true} forms it so from its
    // pieces (per micro-batch to one member, weighted there in micro-batch
    // order) with other ops, not with pf.all_reduce.
    I32EnumAttrCase<"Microbatch", 0, "microbatch">,
    // Each member's count-weighted partial sum over the micro-batches it ran,
    // added by the communication library's all-reduce (MPI_Allreduce,
    // ncclAllReduce) in the association it picks: one gradient's bytes
    // through the collective instead of every micro-batch's piece.
    I32EnumAttrCase<"Library", 1, "library">]> {
  let cppNamespace = "::mlir::pf";
}

#endif // PF_PROGRAM_ENUMS_TD
