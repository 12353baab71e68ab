//===- PFTensorOps.td - ONNX-subset tensor graph ops --------*- tablegen -*-===//
//
// Ops with ONNX semantics, normalized across opsets 13-21 by the importer
// (e.g. axes are attributes here even where ONNX passes them as inputs).
//
//===----------------------------------------------------------------------===//
#ifndef PF_TENSOR_OPS_TD
#define PF_TENSOR_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"
include "pf/Dialect/PF/IR/PFTensorEnums.td"

//===--- Constants and identity ---------------------------------------------===//

def PF_ConstantOp : PF_Op<"constant", [ConstantLike, Pure, PF_InferTypes]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def PF_IdentityOp : PF_TensorOp<"identity", [DeclareOpInterfaceMethods<PF_GradientOpInterface>,
    PF_ViewOpInterface]> {
  let summary = "returns its input";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===--- Elementwise ---------------------------------------------------------===//

def PF_AddOp : PF_BinaryOp<"add", [Commutative]>;
def PF_SubOp : PF_BinaryOp<"sub">;
def PF_MulOp : PF_BinaryOp<"mul", [Commutative]>;
def PF_DivOp : PF_BinaryOp<"div">;
def PF_PowOp : PF_BinaryOp<"pow">;
def PF_EqualOp : PF_BinaryOp<"equal", [Commutative]> {
  let results = (outs TensorOf<[I1]>:$output);
}
def PF_MinOp : PF_BinaryOp<"min", [Commutative]> {
  let summary = "elementwise minimum with numpy-style broadcasting (NaN propagates)";
}
def PF_MaxOp : PF_BinaryOp<"max", [Commutative]> {
  let summary = "elementwise maximum with numpy-style broadcasting (NaN propagates)";
}

// Ordered comparisons: numbers in, bool out (ONNX has no order on bool).
// Integers compare as signed: the importer has no unsigned types.
class PF_CompareOp<string mnemonic> : PF_BinaryOp<mnemonic> {
  let summary = "elementwise `" # mnemonic # "` comparison with numpy-style broadcasting";
  let arguments = (ins TensorOf<[AnyFloat, I8, I16, I32, I64]>:$lhs,
                       TensorOf<[AnyFloat, I8, I16, I32, I64]>:$rhs);
  let results = (outs TensorOf<[I1]>:$output);
}
def PF_GreaterOp : PF_CompareOp<"greater">;
def PF_GreaterEqualOp : PF_CompareOp<"greater_equal">;
def PF_LessOp : PF_CompareOp<"less">;
def PF_LessEqualOp : PF_CompareOp<"less_equal">;

// Boolean logic on i1 tensors (attention-mask building).
class PF_LogicOp<string mnemonic> : PF_BinaryOp<mnemonic, [Commutative]> {
  let summary = "elementwise logical `" # mnemonic # "` of bool tensors with numpy-style broadcasting";
  let arguments = (ins TensorOf<[I1]>:$lhs, TensorOf<[I1]>:$rhs);
  let results = (outs TensorOf<[I1]>:$output);
}
def PF_AndOp : PF_LogicOp<"and">;
def PF_OrOp : PF_LogicOp<"or">;
def PF_XorOp : PF_LogicOp<"xor">;
def PF_NotOp : PF_UnaryOp<"not", I1> {
  let summary = "elementwise logical not of a bool tensor";
  let hasFolder = 1;
}

def PF_SqrtOp : PF_UnaryOp<"sqrt", AnyFloat> { let summary = "elementwise square root"; }
def PF_ErfOp : PF_UnaryOp<"erf", AnyFloat> { let summary = "elementwise error function"; }
def PF_TanhOp : PF_UnaryOp<"tanh", AnyFloat> { let summary = "elementwise tanh"; }
def PF_ExpOp : PF_UnaryOp<"exp", AnyFloat> { let summary = "elementwise exp"; }
def PF_AbsOp : PF_UnaryOp<"abs", AnyFloat> {
  let summary = "elementwise absolute value";
  let hasFolder = 1;
}
def PF_SignOp : PF_UnaryOp<"sign", AnyFloat> {
  let summary = "elementwise sign: -1, 0 or 1 (NaN stays NaN)";
  let hasFolder = 1;
}
def PF_ReciprocalOp : PF_UnaryOp<"reciprocal", AnyFloat> {
  let summary = "elementwise 1 / x";
  let hasFolder = 1;
}
// NaN/infinity tests: masks (no gradient flows through a bool).
def PF_IsNaNOp : PF_TensorOp<"is_nan", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "elementwise: whether the element is NaN";
  let arguments = (ins TensorOf<[AnyFloat]>:$input);
  let results = (outs TensorOf<[I1]>:$output);
  let hasFolder = 1;
}
def PF_IsInfOp : PF_TensorOp<"is_inf", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "elementwise: whether the element is an infinity of a detected sign";
  let arguments = (ins TensorOf<[AnyFloat]>:$input,
                   DefaultValuedAttr<BoolAttr, "true">:$detect_negative,
                   DefaultValuedAttr<BoolAttr, "true">:$detect_positive);
  let results = (outs TensorOf<[I1]>:$output);
  let hasFolder = 1;
}

def PF_NegOp : PF_UnaryOp<"neg", AnyType> {
  let summary = "elementwise negation";
  let hasFolder = 1;
}

def PF_WhereOp : PF_TensorOp<"where", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "select x where condition is true, else y (broadcasting)";
  let arguments = (ins TensorOf<[I1]>:$condition, AnyTensor:$x, AnyTensor:$y);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_CastOp : PF_TensorOp<"cast", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "elementwise conversion to another element type";
  let arguments = (ins AnyTensor:$input, TypeAttr:$to);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===--- Linear algebra ------------------------------------------------------===//

def PF_MatMulOp : PF_TensorOp<"matmul", [DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "numpy matmul: batched, broadcasting, 1-D operands promoted";
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
}

def PF_GemmOp : PF_TensorOp<"gemm", [DeclareOpInterfaceMethods<PF_CostOpInterface, ["getForwardFlops"]>]> {
  let summary = "alpha * op(A) * op(B) + beta * C on 2-D operands";
  let arguments = (ins AnyTensor:$a, AnyTensor:$b, Optional<AnyTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   UnitAttr:$transA, UnitAttr:$transB);
  let results = (outs AnyTensor:$output);
}

//===--- Shape manipulation ----------------------------------------------===//

def PF_ShapeOp : PF_TensorOp<"shape"> {
  let summary = "the shape of a tensor as a 1-D i64 tensor (dims [start, end))";
  let arguments = (ins AnyTensor:$input, OptionalAttr<I64Attr>:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs TensorOf<[I64]>:$output);
  let hasFolder = 1;
}

def PF_ReshapeOp : PF_TensorOp<"reshape", [DeclareOpInterfaceMethods<PF_GradientOpInterface>,
    PF_ViewOpInterface]> {
  let summary = "reshape to a shape given as a 1-D i64 tensor (0 copies, -1 infers)";
  let arguments = (ins AnyTensor:$data, TensorOf<[I64]>:$shape, UnitAttr:$allowzero);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_TransposeOp : PF_TensorOp<"transpose", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "permute dimensions (default: reverse them)";
  let arguments = (ins AnyTensor:$input, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_UnsqueezeOp : PF_TensorOp<"unsqueeze", [DeclareOpInterfaceMethods<PF_GradientOpInterface>,
    PF_ViewOpInterface]> {
  let summary = "insert size-1 dimensions at the given output axes";
  let arguments = (ins AnyTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_SqueezeOp : PF_TensorOp<"squeeze", [DeclareOpInterfaceMethods<PF_GradientOpInterface>,
    PF_ViewOpInterface]> {
  let summary = "remove size-1 dimensions (the given axes, or all)";
  let arguments = (ins AnyTensor:$input, OptionalAttr<DenseI64ArrayAttr>:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_ConcatOp : PF_TensorOp<"concat", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "concatenate along an axis";
  let arguments = (ins Variadic<AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_SliceOp : PF_TensorOp<"slice", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "ONNX Slice: starts/ends/axes/steps given as 1-D integer tensors";
  let arguments = (ins AnyTensor:$data, AnyTensor:$starts, AnyTensor:$ends,
                   Optional<AnyTensor>:$axes, Optional<AnyTensor>:$steps);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_GatherOp : PF_TensorOp<"gather", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "take entries of data along an axis at integer indices";
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_GatherNDOp : PF_TensorOp<"gather_nd", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "ONNX GatherND: slices of data at index tuples (the last dimension of indices)";
  let description = [{
    With b = batch_dims and m = indices.shape[-1] (1 <= m <= rank(data) - b),
    the result is indices.shape[:-1] ++ data.shape[b + m:]; the first b
    dimensions of data and indices are batch dimensions and must agree.
    Negative indices count from the end.
  }];
  let arguments = (ins AnyTensor:$data, TensorOf<[I32, I64]>:$indices,
                   DefaultValuedAttr<PF_NonNegativeI64Attr, "0">:$batch_dims);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_ScatterNDOp : PF_TensorOp<"scatter_nd", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "ONNX ScatterND: a copy of data with slices at index tuples combined with updates";
  let description = [{
    m = indices.shape[-1] <= rank(data); updates has the shape
    indices.shape[:-1] ++ data.shape[m:]. Updates apply in index order; with
    reduction `none` the last of repeated indices wins.
  }];
  let arguments = (ins AnyTensor:$data, TensorOf<[I32, I64]>:$indices, AnyTensor:$updates,
                   DefaultValuedAttr<PF_ScatterReduction, "ScatterReduction::None">:$reduction);
  let results = (outs AnyTensor:$output);
  // The reduction is spelled out (`reduction add`) unless it is none.
  let assemblyFormat = [{
    $data `,` $indices `,` $updates (`reduction` $reduction^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def PF_CumSumOp : PF_TensorOp<"cumsum", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "cumulative sum along an axis (exclusive: without the element itself; reverse: from the end)";
  let arguments = (ins AnyTensor:$input, I64Attr:$axis, UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_TriluOp : PF_TensorOp<"trilu", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, zero the rest";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<I64Attr, "0">:$k,
                   DefaultValuedAttr<BoolAttr, "true">:$upper);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_ExpandOp : PF_TensorOp<"expand", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "broadcast to a shape given as a 1-D i64 tensor";
  let arguments = (ins AnyTensor:$input, TensorOf<[I64]>:$shape);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def PF_ConstantOfShapeOp : PF_TensorOp<"constant_of_shape"> {
  let summary = "a tensor of the given shape filled with one value";
  let arguments = (ins TensorOf<[I64]>:$shape, OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===--- Reductions and normalization ----------------------------------------===//

class PF_ReduceOp<string mnemonic> : PF_TensorOp<mnemonic, [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "reduce over axes (all axes when none are given)";
  let arguments = (ins AnyTensor:$input, OptionalAttr<DenseI64ArrayAttr>:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   UnitAttr:$noop_with_empty_axes);
  let results = (outs AnyTensor:$output);
}
def PF_ReduceMeanOp : PF_ReduceOp<"reduce_mean">;
def PF_ReduceSumOp : PF_ReduceOp<"reduce_sum">;
// Max/min of nothing (an empty reduced dimension) is -inf/+inf for floats and
// the lowest/highest value for integers, as in ONNX.
def PF_ReduceMaxOp : PF_ReduceOp<"reduce_max"> { let hasFolder = 1; }
def PF_ReduceMinOp : PF_ReduceOp<"reduce_min"> { let hasFolder = 1; }

def PF_SoftmaxOp : PF_TensorOp<"softmax", [DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "softmax along one axis";
  let arguments = (ins TensorOf<[AnyFloat]>:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs TensorOf<[AnyFloat]>:$output);
}

def PF_LayerNormalizationOp : PF_TensorOp<"layer_normalization"> {
  let summary = "ONNX LayerNormalization (opset 17), optional mean/inv-std outputs";
  let description = [{
    Kept as imported so the optional statistics outputs survive; the LayerNorm
    fusion pass rewrites it to `pf.layer_norm` when only `output` is used.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$scale,
                   Optional<TensorOf<[AnyFloat]>>:$bias,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs TensorOf<[AnyFloat]>:$output, TensorOf<[AnyFloat]>:$mean,
                 TensorOf<[AnyFloat]>:$inv_std_dev);
}

#endif // PF_TENSOR_OPS_TD
