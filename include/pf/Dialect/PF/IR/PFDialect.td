//===- PFDialect.td - the pf dialect definition ------------*- tablegen -*-===//
#ifndef PF_DIALECT_TD
#define PF_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def PF_Dialect : Dialect {
  let name = "pf";
  let summary = "PipeFisher graph, pipeline and K-FAC operations";
  let description = [{
    The pf dialect models a BERT-style training program from import to pipeline
    scheduling: tensor graph ops with ONNX semantics (normalized across opsets),
    fused ops created by graph passes (`pf.linear`, `pf.layer_norm`, `pf.gelu`),
    named parameters whose data stays out of the IR text, pipeline structure
    (stages, send/recv, micro-batches) and K-FAC work (factors, damped inverses,
    preconditioning).
  }];
  let cppNamespace = "::mlir::pf";
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // The discardable pf.* attributes (PFAttrNames.h), in PFAttrVerification.cpp.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The attributes of PFAttrs.td (defined where their storage is).
    void registerAttributes();
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class PF_Op<string mnemonic, list<Trait> traits = []>
    : Op<PF_Dialect, mnemonic, traits>;

#endif // PF_DIALECT_TD
