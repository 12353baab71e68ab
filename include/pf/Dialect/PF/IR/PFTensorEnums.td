//===- PFTensorEnums.td - enums of the tensor ops -----------*- tablegen -*-===//
#ifndef PF_TENSOR_ENUMS_TD
#define PF_TENSOR_ENUMS_TD

include "mlir/IR/EnumAttr.td"

// How pf.scatter_nd combines an update with the element it lands on (ONNX
// ScatterND's `reduction`); the values are the runtime's PFRT_SCATTER_*.
def PF_ScatterReduction : I32EnumAttr<"ScatterReduction", "how scatter_nd combines updates", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Add", 1, "add">,
    I32EnumAttrCase<"Mul", 2, "mul">,
    I32EnumAttrCase<"Max", 3, "max">,
    I32EnumAttrCase<"Min", 4, "min">]> {
  let cppNamespace = "::mlir::pf";
}

#endif // PF_TENSOR_ENUMS_TD
