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

#endif // PF_INTERFACES_TD
