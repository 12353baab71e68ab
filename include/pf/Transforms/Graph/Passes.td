//===- Passes.td - pf graph passes ------------------------*- tablegen -*-===//
#ifndef PF_TRANSFORMS_GRAPH_PASSES_TD
#define PF_TRANSFORMS_GRAPH_PASSES_TD

include "mlir/Pass/PassBase.td"

def PFInferShapes : Pass<"pf-infer-shapes", "::mlir::ModuleOp"> {
  let summary = "Propagate static shapes and fold shape arithmetic to constants";
  let description = [{
    Re-infers the result type of every pf op from its operands, in program
    order, folding Shape/Gather/Concat/Unsqueeze/... chains to constants as it
    goes, until nothing changes; then updates function signatures. With
    `require-static`, any dynamic dimension left is an error naming the op.
  }];
  let options = [
    Option<"requireStatic", "require-static", "bool", /*default=*/"false",
           "Fail when a tensor type is still dynamic afterwards">,
  ];
}

def PFUntieInitializers : Pass<"pf-untie-initializers", "::mlir::ModuleOp"> {
  let summary = "Give each de-duplicated initializer its own parameter again";
  let description = [{
    Exporters store equal initializers once and recreate the other names with
    Identity nodes. Training must update them separately, so each
    `pf.identity` of a `pf.param_ref` that carries its ONNX name (`pf.name`)
    becomes a parameter of that name with the same initial value.
  }];
}

def PFFuseLayerNorm : Pass<"pf-fuse-layer-norm"> {
  let summary = "Fuse decomposed LayerNorm and ONNX LayerNormalization into pf.layer_norm";
  let description = [{
    Matches ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add), the form the
    PyTorch exporter emits, and `pf.layer_normalization` whose statistics
    outputs are unused.
  }];
}

def PFFuseGelu : Pass<"pf-fuse-gelu"> {
  let summary = "Fuse GELU (erf and tanh forms) into pf.gelu";
  let options = [
    Option<"tolerance", "tolerance", "double", /*default=*/"1e-4",
           "Relative tolerance when matching the constants sqrt(2), 0.5, ...">,
  ];
}

def PFFuseLinear : Pass<"pf-fuse-linear"> {
  let summary = "Fuse MatMul(+Add) and Gemm with a parameter weight into pf.linear";
  let description = [{
    The weight must be a named parameter, directly (pre-transposed, [in, out])
    or through a Transpose ([out, in], the Hugging Face layout: the op gets
    `transpose_weight`). The bias must be 1-D of the output size.
  }];
}

def PFDeadCodeElimination : Pass<"pf-dce", "::mlir::ModuleOp"> {
  let summary = "Remove dead ops and parameters nothing reads";
}

def PFPrintSummary : Pass<"pf-print-summary", "::mlir::ModuleOp"> {
  let summary = "Print a readable summary of a pf module (ops, parameters, blocks)";
  let options = [
    Option<"json", "json", "bool", /*default=*/"false", "Print JSON instead of text">,
  ];
}

#endif // PF_TRANSFORMS_GRAPH_PASSES_TD
