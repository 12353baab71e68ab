//===- PFBase.td - shared op classes of the pf dialect ------*- tablegen -*-===//
#ifndef PF_BASE_TD
#define PF_BASE_TD

include "pf/Dialect/PF/IR/PFDialect.td"
include "pf/Dialect/PF/IR/PFInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Result types are inferred from operand types (and constant shape operands).
// A result type may be less refined than the inferred one (e.g. `?` where the
// inference knows 8), so IR before shape inference still verifies.
def PF_InferTypes : InferTypeOpAdaptorBase<[{
  static bool isCompatibleReturnTypes(::mlir::TypeRange l, ::mlir::TypeRange r) {
    return ::mlir::pf::areCompatibleTensorTypes(l, r);
  }
}]>;

// Integer attributes with a range: ODS verifies it (the message names the
// attribute and the range).
def PF_NonNegativeI64Attr : ConfinedAttr<I64Attr, [IntNonNegative]>;
def PF_PositiveI64Attr : ConfinedAttr<I64Attr, [IntPositive]>;

class PF_TensorOp<string mnemonic, list<Trait> traits = []>
    : PF_Op<mnemonic, !listconcat(traits, [Pure, PF_InferTypes])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

class PF_UnaryOp<string mnemonic, Type type, list<Trait> traits = []>
    : PF_TensorOp<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<PF_GradientOpInterface>])> {
  let arguments = (ins TensorOf<[type]>:$input);
  let results = (outs TensorOf<[type]>:$output);
}

class PF_BinaryOp<string mnemonic, list<Trait> traits = []>
    : PF_TensorOp<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<PF_GradientOpInterface>])> {
  let summary = "elementwise `" # mnemonic # "` with numpy-style broadcasting";
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

#endif // PF_BASE_TD
