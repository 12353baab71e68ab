//===- PFFusedOps.td - ops created by the graph passes -------*- tablegen -*-===//
#ifndef PF_FUSED_OPS_TD
#define PF_FUSED_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"

def PF_LinearOp : PF_TensorOp<"linear", [
    DeclareOpInterfaceMethods<PF_KFACEligibleOpInterface>,
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "y = x · W + b over the last dimension of x";
  let description = [{
    `weight` is [in, out]; with `transpose_weight` it is stored [out, in] (the
    PyTorch / Hugging Face layout) and y = x · Wᵀ + b. When the weight comes from
    a `pf.param_ref`, the op is a K-FAC candidate named by that parameter.

    ```mlir
    %y = pf.linear %x, %w, %b {transpose_weight}
        : (tensor<8x128x128xf32>, tensor<512x128xf32>, tensor<512xf32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$weight,
                   Optional<TensorOf<[AnyFloat]>>:$bias, UnitAttr:$transpose_weight);
  let results = (outs TensorOf<[AnyFloat]>:$output);
  let extraClassDeclaration = [{
    int64_t getInFeatures();
    int64_t getOutFeatures();
  }];
}

def PF_LayerNormOp : PF_TensorOp<"layer_norm", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "layer normalization over the dims from `axis` on";
  let description = [{
    y = (x − mean) / sqrt(var + epsilon) · scale + bias, statistics over the
    dimensions `axis`..rank−1 (biased variance, as PyTorch and ONNX).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$scale,
                   Optional<TensorOf<[AnyFloat]>>:$bias,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs TensorOf<[AnyFloat]>:$output);
}

def PF_GeluOp : PF_TensorOp<"gelu", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "GELU, exact (erf) or tanh approximation (ONNX Gelu semantics)";
  let arguments = (ins TensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs TensorOf<[AnyFloat]>:$output);
  let hasVerifier = 1;
}

#endif // PF_FUSED_OPS_TD
