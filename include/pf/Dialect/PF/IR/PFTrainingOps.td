//===- PFTrainingOps.td - loss, gradient helpers, optimizers -*- tablegen -*-===//
#ifndef PF_TRAINING_OPS_TD
#define PF_TRAINING_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"
include "mlir/IR/SymbolInterfaces.td"

def PF_SoftmaxCrossEntropyOp : PF_TensorOp<"softmax_cross_entropy",
    [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "masked-LM loss: mean cross-entropy of the counted rows, and its gradient";
  let description = [{
    `logits` is [..., V] and `labels` has logits' shape without the last
    dimension. Rows whose label is `ignore_index` do not count; the loss is the
    mean over the counted rows (0 when none count). `grad_logits` is the
    gradient of `loss` with respect to `logits` (softmax − one-hot, divided by
    the count), computed in the same pass; `count` is the number of counted
    rows (K-FAC scales factor B by it).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$logits, TensorOf<[I32, I64]>:$labels,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[AnyFloat]>:$loss, TensorOf<[AnyFloat]>:$grad_logits,
                 0DTensorOf<[I64]>:$count);
}

def PF_GatherGradOp : PF_Op<"gather_grad", [Pure]> {
  let summary = "gradient of pf.gather with respect to its data (a scatter-add)";
  let description = [{
    Adds each slice of `grad_output` into the result (shaped like the
    gathered data) at the position its index selected; repeated indices sum.
  }];
  let arguments = (ins AnyTensor:$indices, TensorOf<[AnyFloat]>:$grad_output,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyRankedTensor:$grad_data);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===--- Backward of the fused ops (one runtime kernel each) ---------------===//

def PF_LayerNormGradOp : PF_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "grad_output", "grad_input"]>,
    AllTypesMatch<["scale", "grad_scale", "grad_bias"]>]> {
  let summary = "gradients of pf.layer_norm: input, scale and bias";
  let description = [{
    With x̂ = (x − mean)·rstd recomputed from `input` and `epsilon` over the
    dimensions `axis`..rank−1 and g = grad_output·scale:
    grad_input = rstd·(g − mean(g) − x̂·mean(g·x̂)), grad_scale = Σ grad_output·x̂
    and grad_bias = Σ grad_output over the leading dimensions.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$scale,
                   TensorOf<[AnyFloat]>:$grad_output, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs TensorOf<[AnyFloat]>:$grad_input, TensorOf<[AnyFloat]>:$grad_scale,
                 TensorOf<[AnyFloat]>:$grad_bias);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad_output attr-dict `:` type($input) `,` type($scale)
  }];
  let hasVerifier = 1;
}

def PF_GeluGradOp : PF_Op<"gelu_grad", [Pure,
    AllTypesMatch<["input", "grad_output", "grad_input"]>]> {
  let summary = "gradient of pf.gelu: grad_output · gelu'(input)";
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$grad_output,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs TensorOf<[AnyFloat]>:$grad_input);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def PF_SoftmaxGradOp : PF_Op<"softmax_grad", [Pure,
    AllTypesMatch<["output", "grad_output", "grad_input"]>]> {
  let summary = "gradient of pf.softmax from its output: y · (dy − Σ_axis dy·y)";
  let arguments = (ins TensorOf<[AnyFloat]>:$output, TensorOf<[AnyFloat]>:$grad_output,
                   I64Attr:$axis);
  let results = (outs TensorOf<[AnyFloat]>:$grad_input);
  let assemblyFormat = "$output `,` $grad_output attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def PF_ClipByGlobalNormOp : PF_Op<"clip_by_global_norm", [Pure,
    AllTypesMatch<["gradients", "clipped"]>]> {
  let summary = "scales gradients down so that their global L2 norm is at most max_norm";
  let description = [{
    With n = sqrt(Σ ||g_i||²): g_i · max_norm / (n + 1e-6) when n > max_norm,
    else g_i unchanged (torch.nn.utils.clip_grad_norm_).
  }];
  let arguments = (ins Variadic<TensorOf<[AnyFloat]>>:$gradients, F64Attr:$max_norm);
  let results = (outs Variadic<TensorOf<[AnyFloat]>>:$clipped);
  let assemblyFormat = "$gradients attr-dict `:` type($gradients)";
  let hasVerifier = 1;
}

/// A 0-d i64 tensor (a count), which the assembly format need not spell.
def PF_I64Scalar : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))";
}

def PF_WeightedAddOp : PF_Op<"weighted_add", [Pure,
    AllTypesMatch<["sum", "input", "output"]>]> {
  let summary = "a running count-weighted sum: (sum + input · count) / total, in one pass";
  let description = [{
    Elementwise `(sum + input · count) / total`, `count` and `total` (0-d
    i64) converted to the element type and each multiply, add and divide
    rounded to it, so the bits are those of pf.mul, pf.add and pf.div (and
    pf.cast of the counts) one after the other, never a fused multiply-add;
    without `total` nothing is divided. pf-build-rank-programs' accumulate
    functions continue a gradient's micro-batch sum with it (one pass over
    the gradient instead of three); lowered to pfrt_weighted_add.

    ```mlir
    %next = pf.weighted_add %sum, %piece, %count : tensor<16x16xf32>
    %mean = pf.weighted_add %sum, %piece, %count, %total : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins TensorOf<[F32, F64]>:$sum, TensorOf<[F32, F64]>:$input,
                   PF_I64Scalar:$count, Optional<PF_I64Scalar>:$total);
  let results = (outs TensorOf<[F32, F64]>:$output);
  let assemblyFormat = [{
    $sum `,` $input `,` $count (`,` $total^)? attr-dict `:` type($output)
  }];
}

class PF_OptimizerOp<string mnemonic> : PF_Op<mnemonic, [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>]> {
  let description = [{
    Updates the parameter `param` (and its state parameters) in place with
    `grad`. `lr` and `step` (1-based, for bias correction) are 0-d tensors so
    schedules can change them every step without recompiling.
  }];
}

def PF_SGDUpdateOp : PF_OptimizerOp<"sgd_update"> {
  let summary = "SGD with momentum (PyTorch's formulation), in place";
  let arguments = (ins TensorOf<[AnyFloat]>:$grad, 0DTensorOf<[F64]>:$lr,
                   FlatSymbolRefAttr:$param, OptionalAttr<FlatSymbolRefAttr>:$momentum_buffer,
                   DefaultValuedAttr<F64Attr, "0.9">:$momentum,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay, UnitAttr:$nesterov);
  let assemblyFormat = "$param (`momentum_buffer` $momentum_buffer^)? `grad` $grad `lr` $lr attr-dict `:` type($grad) `,` type($lr)";
}

def PF_AdamWUpdateOp : PF_OptimizerOp<"adamw_update"> {
  let summary = "AdamW step (decoupled weight decay), in place";
  let arguments = (ins TensorOf<[AnyFloat]>:$grad, 0DTensorOf<[F64]>:$lr,
                   0DTensorOf<[I64]>:$step, FlatSymbolRefAttr:$param,
                   FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$eps,
                   DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let assemblyFormat = "$param `(` $exp_avg `,` $exp_avg_sq `)` `grad` $grad `lr` $lr `step` $step attr-dict `:` type($grad) `,` type($lr) `,` type($step)";
}

def PF_LAMBUpdateOp : PF_OptimizerOp<"lamb_update"> {
  let summary = "LAMB step (NVLAMB trust ratio per tensor), in place";
  let arguments = (ins TensorOf<[AnyFloat]>:$grad, 0DTensorOf<[F64]>:$lr,
                   0DTensorOf<[I64]>:$step, FlatSymbolRefAttr:$param,
                   FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$eps,
                   DefaultValuedAttr<F64Attr, "0.01">:$weight_decay,
                   DefaultValuedAttr<F64Attr, "10.0">:$max_trust_ratio);
  let assemblyFormat = "$param `(` $exp_avg `,` $exp_avg_sq `)` `grad` $grad `lr` $lr `step` $step attr-dict `:` type($grad) `,` type($lr) `,` type($step)";
}

#endif // PF_TRAINING_OPS_TD
