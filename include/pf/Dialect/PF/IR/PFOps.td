//===- PFOps.td - all pf ops --------------------------------*- tablegen -*-===//
#ifndef PF_OPS_TD
#define PF_OPS_TD

include "pf/Dialect/PF/IR/PFTensorOps.td"
include "pf/Dialect/PF/IR/PFFusedOps.td"
include "pf/Dialect/PF/IR/PFParamOps.td"
include "pf/Dialect/PF/IR/PFPipelineOps.td"
include "pf/Dialect/PF/IR/PFKFACOps.td"
include "pf/Dialect/PF/IR/PFTrainingOps.td"
include "pf/Dialect/PF/IR/PFProgramOps.td"

#endif // PF_OPS_TD
