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

// Fusions for inference (pf-inference-fusions): they have no gradient, so the
// training step is built from the unfused graph.

def PF_ScaledMaskedSoftmaxOp : PF_TensorOp<"scaled_masked_softmax", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>]> {
  let summary = "softmax(scale · x + mask) over the last axis (attention)";
  let description = [{
    Attention's scaling, additive mask and softmax in one pass over the
    scores. `mask` (optional) broadcasts to the input's shape, as BERT's
    [batch, 1, 1, seq] mask does against [batch, heads, seq, seq] scores.

    ```mlir
    %p = pf.scaled_masked_softmax %scores, %mask {scale = 1.250000e-01 : f64}
        : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, Optional<TensorOf<[AnyFloat]>>:$mask,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs TensorOf<[AnyFloat]>:$output);
}

def PF_AddLayerNormOp : PF_TensorOp<"add_layer_norm", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>]> {
  let summary = "layer normalization of input + residual";
  let description = [{
    y = layer_norm(input + residual) with pf.layer_norm's `axis` and
    `epsilon`: a residual connection and the LayerNorm after it in one pass.
    `residual` has the input's shape.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$residual,
                   TensorOf<[AnyFloat]>:$scale, Optional<TensorOf<[AnyFloat]>>:$bias,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs TensorOf<[AnyFloat]>:$output);
}

def PF_PermutedMatMulOp : PF_TensorOp<"permuted_matmul", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>]> {
  let summary = "batched matmul of permuted operands, with a permuted result";
  let description = [{
    transpose(matmul(transpose(lhs, lhs_perm), transpose(rhs, rhs_perm)),
    result_perm), each permutation absent for the identity, without copying
    a transpose: operands and result have one rank and equal batch
    dimensions, and every matrix keeps a unit-stride dimension in its tensor
    (the runtime passes leading dimensions to the GEMMs). Attention's
    [B,S,H,D] heads read as [B,H,S,D]:

    ```mlir
    %s = pf.permuted_matmul %q, %k {lhs_perm = array<i64: 0, 2, 1, 3>,
                                    rhs_perm = array<i64: 0, 2, 3, 1>}
        : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$lhs, TensorOf<[AnyFloat]>:$rhs,
                   OptionalAttr<DenseI64ArrayAttr>:$lhs_perm,
                   OptionalAttr<DenseI64ArrayAttr>:$rhs_perm,
                   OptionalAttr<DenseI64ArrayAttr>:$result_perm);
  let results = (outs TensorOf<[AnyFloat]>:$output);
}

def PF_LinearGeluOp : PF_TensorOp<"linear_gelu", [
    DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>]> {
  let summary = "gelu(x · W + b): a linear layer and the GELU after it";
  let description = [{
    pf.linear's operands and `transpose_weight`, pf.gelu's `approximate`. The
    bias and the GELU are applied in one pass over the product (pf.linear
    alone copies the bias into the output before the GEMM, and pf.gelu reads
    and writes it again).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$weight,
                   Optional<TensorOf<[AnyFloat]>>:$bias, UnitAttr:$transpose_weight,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs TensorOf<[AnyFloat]>:$output);
  let hasVerifier = 1;
}

#endif // PF_FUSED_OPS_TD
