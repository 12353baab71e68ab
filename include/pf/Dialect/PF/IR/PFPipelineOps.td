//===- PFPipelineOps.td - pipeline structure ----------------*- tablegen -*-===//
#ifndef PF_PIPELINE_OPS_TD
#define PF_PIPELINE_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"
include "mlir/IR/RegionKindInterface.td"

def PF_PipelineOp : PF_Op<"pipeline", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "a pipelined training step over stages and micro-batches";
  let description = [{
    Holds the `pf.stage` ops of a partitioned program. Block arguments are the
    step's inputs; `pf.yield` returns the step's results. `schedule` names the
    pipeline schedule (gpipe, 1f1b, interleaved, chimera, zb-h1, ...).
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, I64Attr:$num_stages,
                   I64Attr:$num_microbatches,
                   DefaultValuedAttr<StrAttr, "\"1f1b\"">:$schedule);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `stages` `(` $num_stages `)` `microbatches` `(` $num_microbatches `)`
    (`(` $inputs^ `:` type($inputs) `)`)? attr-dict-with-keyword
    $body (`->` type($results)^)?
  }];
  let hasVerifier = 1;
}

def PF_StageOp : PF_Op<"stage", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "the ops of one pipeline stage";
  let description = [{
    The body takes the operands as block arguments; values cross stages only
    through `pf.send` / `pf.recv` or the stage's operands and results.
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, I64Attr:$index);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $index ` ` (`(` $inputs^ `:` type($inputs) `)`)? attr-dict-with-keyword
    $body (`->` type($results)^)?
  }];
  let hasVerifier = 1;
}

def PF_YieldOp : PF_Op<"yield", [Pure, Terminator,
    ParentOneOf<["PipelineOp", "StageOp"]>]> {
  let summary = "returns values from a pipeline or stage body";
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* empty yield */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def PF_SendOp : PF_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "sends a tensor to another stage";
  let arguments = (ins AnyTensor:$value, I64Attr:$to, PF_NonNegativeI64Attr:$tag);
  let assemblyFormat = "$value `to` $to `tag` $tag attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def PF_RecvOp : PF_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "receives a tensor from another stage";
  let arguments = (ins I64Attr:$from, PF_NonNegativeI64Attr:$tag);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "`from` $from `tag` $tag attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def PF_MicrobatchOp : PF_TensorOp<"microbatch"> {
  let summary = "micro-batch `index` of `count` equal slices along `dim`";
  let arguments = (ins AnyRankedTensor:$input, PF_NonNegativeI64Attr:$index,
                   PF_PositiveI64Attr:$count,
                   DefaultValuedAttr<PF_NonNegativeI64Attr, "0">:$dim);
  let results = (outs AnyRankedTensor:$output);
}

def PF_ProgramOp : PF_Op<"program", [NoTerminator, SingleBlock,
    HasParent<"PipelineOp">]> {
  let summary = "the ordered work of one device in a scheduled pipeline";
  let description = [{
    Written by `pf-schedule`: one per device, holding `pf.task` ops in the
    order the device runs them over a refresh window of `refresh_steps` steps
    (pipeline passes, communication and the K-FAC work placed by the policy).
    A later lowering emits per-rank code from it.
  }];
  let arguments = (ins I64Attr:$device);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`device` `(` $device `)` attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def PF_TaskOp : PF_Op<"task", [HasParent<"ProgramOp">]> {
  let summary = "one scheduled item: a pass, a transfer or a piece of K-FAC work";
  let description = [{
    `kind` is one of forward, backward, backward_input, backward_weight,
    curvature_a, curvature_b, inversion_a, inversion_b, precondition,
    send_recv, allreduce, factor_sync, precond_sync. Times are the
    simulated start and end in milliseconds from the window start.
  }];
  let arguments = (ins StrAttr:$kind, PF_NonNegativeI64Attr:$step,
                   PF_NonNegativeI64Attr:$stage,
                   OptionalAttr<PF_NonNegativeI64Attr>:$microbatch,
                   OptionalAttr<PF_NonNegativeI64Attr>:$layer,
                   F64Attr:$start, F64Attr:$end, UnitAttr:$outside_bubble);
  let assemblyFormat = "$kind attr-dict";
  let hasVerifier = 1;
}

#endif // PF_PIPELINE_OPS_TD
