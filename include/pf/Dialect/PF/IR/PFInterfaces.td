//===- PFInterfaces.td - pf op interfaces ------------------*- tablegen -*-===//
#ifndef PF_INTERFACES_TD
#define PF_INTERFACES_TD

include "mlir/IR/OpBase.td"

// Ops that carry trainable weights a K-FAC pass may precondition. The op says
// which operand is the weight and where its input activations come from, so
// passes do not switch over op names.
def PF_KFACEligibleOpInterface : OpInterface<"KFACEligibleOpInterface"> {
  let cppNamespace = "::mlir::pf";
  let description = [{
    An op whose weight gradient has the Kronecker structure K-FAC needs:
    y = x · W (+ b) applied row-wise to the flattened tokens of x.
  }];
  let methods = [
    InterfaceMethod<"The activation operand (x).", "::mlir::Value", "getKFACInput">,
    InterfaceMethod<"The weight operand (W).", "::mlir::Value", "getKFACWeight">,
    InterfaceMethod<"The bias operand, or null.", "::mlir::Value", "getKFACBias">,
    InterfaceMethod<[{The name of the parameter that feeds the weight, or an
      empty string when the weight is not a named parameter.}],
      "::llvm::StringRef", "getKFACWeightName">,
    InterfaceMethod<"Input features (size of factor A without bias column).",
      "int64_t", "getKFACInFeatures">,
    InterfaceMethod<"Output features (size of factor B).",
      "int64_t", "getKFACOutFeatures">,
  ];
}

// Cost of an op for the pipeline cost model: FLOPs and bytes moved. Ops that do
// not implement it are treated as free (shape arithmetic, views).
def PF_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::pf";
  let methods = [
    InterfaceMethod<"Forward floating-point operations.", "double", "getForwardFlops">,
    InterfaceMethod<"Bytes read and written by the forward op.", "double",
      "getForwardBytes", (ins), [{
        double bytes = 0;
        for (::mlir::Value v : $_op->getOperands())
          bytes += ::mlir::pf::tensorBytes(v.getType());
        for (::mlir::Value v : $_op->getResults())
          bytes += ::mlir::pf::tensorBytes(v.getType());
        return bytes;
      }]>,
  ];
}

// Reverse-mode differentiation: each op builds the gradients of its operands
// from the gradients of its results, with pf tensor ops (so every backward
// graph runs wherever the forward ops do). `pf-build-gradients` drives it; it
// never switches over op names.
def PF_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::pf";
  let description = [{
    `buildGradient` inserts, at the builder's insertion point, ops computing
    d(objective)/d(operand) for the operands marked in `wanted`, given
    d(objective)/d(result) for each result (`resultGrads`; a null value is a
    zero gradient, at least one is non-null). It appends one value per operand
    to `operandGrads`: the gradient, with exactly the operand's type, or null
    when the operand gets none (not wanted, integer-valued, or not
    differentiable). Operand and result types must be static; an op that
    cannot build a wanted gradient emits an error and fails.
  }];
  let methods = [
    InterfaceMethod<"Builds the operand gradients from the result gradients.",
      "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$wanted,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

// Ops whose result is their source's bytes seen with another shape (same
// element type and count, row-major): reshape, squeeze, identity, ... The
// runtime buffer planner gives the result a table entry that aliases the
// source's buffer and the lowering emits no kernel call for it, both from
// this one list.
def PF_ViewOpInterface : OpInterface<"ViewOpInterface"> {
  let cppNamespace = "::mlir::pf";
  let methods = [
    InterfaceMethod<"The operand whose bytes the result views.", "::mlir::Value",
      "getViewSource", (ins), "", [{ return $_op->getOperand(0); }]>,
  ];
}

#endif // PF_INTERFACES_TD
