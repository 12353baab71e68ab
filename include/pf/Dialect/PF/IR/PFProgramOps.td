//===- PFProgramOps.td - the per-rank program ---------------*- tablegen -*-===//
//
// What one rank runs in one training step of a pipeline: ordered calls of the
// stage functions of pf-split-stages and explicit communication with the
// other ranks. Unlike pf.program/pf.task (a record of the simulation), these
// ops are executable: pf-build-rank-programs writes them, verifyRankPrograms
// (PFRankProgram.h) checks the whole set, and a lowering turns them into
// runtime and communication calls. See docs/pipeline-execution.md.
//
//===----------------------------------------------------------------------===//
#ifndef PF_PROGRAM_OPS_TD
#define PF_PROGRAM_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"
include "pf/Dialect/PF/IR/PFProgramEnums.td"
include "mlir/IR/SymbolInterfaces.td"

def PF_RankProgramOp : PF_Op<"rank_program", [Symbol, IsolatedFromAbove,
    NoTerminator, SingleBlock, HasParent<"::mlir::ModuleOp">]> {
  let summary = "the ordered work of one rank in one pipelined training step";
  let description = [{
    One per rank at module level. `ranks` is the number of ranks D,
    `microbatches` the micro-batches N of the step and `stages` the pipeline
    stages this rank holds (the `pf.stage` of the functions it may call). The
    body runs top to bottom; communication blocks as described in
    docs/pipeline-execution.md.

    K-FAC in the bubbles: a rank also has `window_steps` (K) programs with
    `window_step` 0..K-1, the steps of a refresh window after the warm-up
    steps (which run the program without them); each window program places
    some of the rank's `kfac_inverse` calls in its bubbles, and every
    `kfac_inverse` of the program without window runs in exactly one of them.

    ```mlir
    pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
      %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x8x16xf32>
      %saved = pf.run_stage forward @stage1_forward(%act) microbatch(0)
          : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$rank, I64Attr:$ranks,
                   DenseI64ArrayAttr:$stages, I64Attr:$microbatches,
                   OptionalAttr<PF_NonNegativeI64Attr>:$window_step,
                   OptionalAttr<PF_PositiveI64Attr>:$window_steps);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `rank` `(` $rank `)` `ranks` `(` $ranks `)` `stages` `(` $stages `)`
    `microbatches` `(` $microbatches `)` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getRankValue() { return int64_t(getRank()); }
    int64_t getNumRanks() { return int64_t(getRanks()); }
    int64_t getNumMicrobatches() { return int64_t(getMicrobatches()); }
    bool holdsStage(int64_t stage) {
      return llvm::is_contained(getStages(), stage);
    }
  }];
}

class PF_RankProgramBodyOp<string mnemonic, list<Trait> traits = []>
    : PF_Op<mnemonic, !listconcat(traits, [HasParent<"RankProgramOp">])>;

def PF_RunStageOp : PF_RankProgramBodyOp<"run_stage",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a stage function (one micro-batch, or once per step)";
  let description = [{
    Calls `stage`, a function with a `pf.stage` that the enclosing program
    holds. `kind` says what the call is; the per-micro-batch kinds (forward,
    backward, backward_input, backward_weight, kfac_factor_a, kfac_factor_b,
    accumulate) need a `microbatch`, the per-step ones (kfac_inverse,
    precondition, update) have none. `layer` is the K-FAC layer, if any.

    The stage values the call reads and makes are SSA values of the
    program: `inputs` are the function's arguments whose `pf.name` is a
    stage value (`act/*`, `saved/*`, `grad_act/*`, `wsaved/*`, `kfac_in/*`,
    `loss`, the gradients' `grad/*`, `grad_part/*` and running sums;
    PFStageValues.h), in argument order, each made by an earlier call or
    `pf.recv_act` of the same micro-batch (an accumulate call's running sums:
    by the previous accumulate call); `outputs` are the function's
    stage-value results, in result order. The function's other arguments
    (graph inputs, per-call scalars; a once-per-step call's gradients) are
    the host's.

    `in_place` (accumulate calls, whose functions are elementwise): result i
    may be written over input `in_place[i]` (-1: not), the running sum it
    continues or the piece it weights; the program's plan gives it that
    input's bytes where the call is the input's last reader.

    ```mlir
    %act, %saved = pf.run_stage forward @stage0_forward() microbatch(0)
        : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
    %s1 = pf.run_stage accumulate @stage0_accumulate_last(%g1, %s0) microbatch(1)
        in_place([1]) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    ```
  }];
  let arguments = (ins PF_StageTaskKind:$kind, FlatSymbolRefAttr:$stage,
                   Variadic<AnyRankedTensor>:$inputs,
                   OptionalAttr<PF_NonNegativeI64Attr>:$microbatch,
                   OptionalAttr<PF_NonNegativeI64Attr>:$layer,
                   OptionalAttr<DenseI64ArrayAttr>:$in_place);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let assemblyFormat = [{
    $kind $stage `(` $inputs `)` (`microbatch` `(` $microbatch^ `)`)?
    (`layer` `(` $layer^ `)`)? (`in_place` `(` $in_place^ `)`)? attr-dict `:`
    functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
}

def PF_SendActOp : PF_RankProgramBodyOp<"send_act"> {
  let summary = "sends an activation or activation gradient to a neighbour rank";
  let description = [{
    Sends `value` (an `act/*` or `grad_act/*` result of an earlier call on
    this rank, or one it received) of micro-batch `microbatch` to rank `to`.
    The rank `to` has exactly one `pf.recv_act` from this rank with the same
    tag, micro-batch and type.

    ```mlir
    pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, PF_NonNegativeI64Attr:$microbatch,
                       I64Attr:$to, PF_NonNegativeI64Attr:$tag);
  let assemblyFormat = [{
    $value `microbatch` `(` $microbatch `)` `to` `(` $to `)` `tag` `(` $tag `)` attr-dict
    `:` type($value)
  }];
  let hasVerifier = 1;
}

def PF_RecvActOp : PF_RankProgramBodyOp<"recv_act"> {
  let summary = "receives an activation or activation gradient from a neighbour rank";
  let description = [{
    Receives micro-batch `microbatch`'s value sent by rank `from` with
    `tag`, for later calls of that micro-batch on this rank.

    ```mlir
    %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins PF_NonNegativeI64Attr:$microbatch, I64Attr:$from,
                       PF_NonNegativeI64Attr:$tag);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = [{
    `microbatch` `(` $microbatch `)` `from` `(` $from `)` `tag` `(` $tag `)` attr-dict
    `:` type($value)
  }];
  let hasVerifier = 1;
}

def PF_AllReduceOp : PF_RankProgramBodyOp<"all_reduce"> {
  let summary = "sums a value over a group of ranks";
  let description = [{
    Every rank in `ranks` (this one included) runs an all_reduce of the same
    `value`, `ranks`, order and type; afterwards each holds the sum. Used for
    the gradient of a parameter held by several stages (the tied word
    embedding), for the replicas of Chimera and for the loss of a last stage
    that two ranks run.

    A gradient or the loss is summed as a value of the program: one input,
    this member's partial sum (a gradient's count-weighted sum over the
    micro-batches it ran, Σ c_m·x_m / Σ c over the step's micro-batches; the
    loss's `loss_sum`), added by the communication library in the
    association it picks: `order(library)`. (The bitwise mode,
    `pf-build-rank-programs{deterministic=true}`, sums a gradient's pieces
    as one process does with pf.reduce_microbatch, pf.send_act/pf.recv_act,
    accumulate calls on one member and pf.broadcast instead.) The lowest
    member reports a summed gradient.

    A named value (no inputs, no result, `order(microbatch)`, the default)
    is a parameter summed in place (Chimera's K-FAC factors; the member that
    does not run micro-batch 0 of the stage starts each due factor update
    from zero, so the sum holds every micro-batch's curvature once), or a
    pending inverse handed over.

    ```mlir
    %w = pf.all_reduce "grad/w"(%s : tensor<16x16xf32>) ranks([0, 1]) order(library)
        : tensor<16x16xf32> -> tensor<16x16xf32>
    %loss = pf.all_reduce "loss_sum"(%partial : tensor<f32>) ranks([0, 1]) order(library)
        : tensor<f32> -> tensor<f32>
    pf.all_reduce "stage1.w.kfac.A" ranks([0, 1]) : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$value, Variadic<AnyRankedTensor>:$inputs,
                   DenseI64ArrayAttr:$ranks,
                   DefaultValuedAttr<PF_ReductionOrder,
                                     "::mlir::pf::ReductionOrder::Microbatch">:$order,
                   TypeAttrOf<AnyRankedTensor>:$type);
  let results = (outs Optional<AnyRankedTensor>:$sum);
  let assemblyFormat = [{
    $value (`(` $inputs^ `:` type($inputs) `)`)?
    `ranks` `(` $ranks `)` (`order` `(` $order^ `)`)? attr-dict `:` $type (`->` type($sum)^)?
  }];
  let builders = [
    // A named value (no operand, no result).
    OpBuilder<(ins "::llvm::StringRef":$value, "::llvm::ArrayRef<int64_t>":$ranks,
                   "::mlir::pf::ReductionOrder":$order, "::mlir::RankedTensorType":$type), [{
      build($_builder, $_state, ::mlir::Type(), value, ::mlir::ValueRange(), ranks, order,
            type);
    }]>
  ];
  let hasVerifier = 1;
}

def PF_BroadcastOp : PF_RankProgramBodyOp<"broadcast"> {
  let summary = "hands a gradient of the step from one rank to the others of a group";
  let description = [{
    Every rank in `ranks` runs a broadcast of the same `value`, `root`,
    `ranks` and type; the root passes its value as `input`, and every
    member's `result` is the root's value bit for bit (the root's in its
    operand's bytes).

    - The tied word embedding: after the `pf.reduce_microbatch`es, the
      root's accumulated gradient of the step goes back to the first stage,
      which handed its pieces over; the lowest member reports it.
    - Chimera's split preconditioning: the owner of a layer preconditions
      its gradient and broadcasts the result, and the other replica, which
      skipped that call, takes it (keeping its own clipped gradient for the
      KL-clip's inner product).

    ```mlir
    // the root
    %g = pf.broadcast "grad/emb"(%s : tensor<64x16xf32>) root(1) ranks([0, 1])
        : tensor<64x16xf32> -> tensor<64x16xf32>
    // the other member
    %g = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<64x16xf32> -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$value, Optional<AnyRankedTensor>:$input, I64Attr:$root,
                   DenseI64ArrayAttr:$ranks, TypeAttrOf<AnyRankedTensor>:$type);
  // Optional only so that the accessor of the `type` attribute stays the
  // op's getType(); the verifier requires the result.
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    $value (`(` $input^ `:` type($input) `)`)? `root` `(` $root `)` `ranks` `(` $ranks `)`
    attr-dict `:` $type (`->` type($result)^)?
  }];
  let hasVerifier = 1;
}

def PF_ReduceMicrobatchOp : PF_RankProgramBodyOp<"reduce_microbatch"> {
  let summary = "hands one micro-batch's piece of a gradient to the rank that sums it";
  let description = [{
    Both ranks in `ranks` run a reduce of the same `value`, `microbatch`,
    `root`, `ranks` and type, each on its own `piece` of the micro-batch (a
    result of a call of that micro-batch). The root's `sum` is the sum of
    both pieces; the other member has no result (its piece is handed over).
    The other member posts its piece and goes on (the send completes by the
    step end); the root waits for it. The tied word embedding: the first
    stage hands each micro-batch's (row-sparse) embedding gradient to the
    last stage, whose `accumulate` call then weights the micro-batch's sum
    as one process does (a + b first), and a `pf.broadcast` of the step's
    gradient from the root gives it back at the step end.

    ```mlir
    // rank 0 (the first stage)
    pf.reduce_microbatch "grad/emb"(%g0#2 : tensor<64x16xf32>) microbatch(0) root(1)
        ranks([0, 1]) : tensor<64x16xf32>
    // rank 1 (the root)
    %s = pf.reduce_microbatch "grad/emb"(%g1#3 : tensor<64x16xf32>) microbatch(0) root(1)
        ranks([0, 1]) : tensor<64x16xf32> -> tensor<64x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$value, AnyRankedTensor:$piece, PF_NonNegativeI64Attr:$microbatch,
                   I64Attr:$root, DenseI64ArrayAttr:$ranks, TypeAttrOf<AnyRankedTensor>:$type);
  let results = (outs Optional<AnyRankedTensor>:$sum);
  let assemblyFormat = [{
    $value `(` $piece `:` type($piece) `)` `microbatch` `(` $microbatch `)` `root` `(` $root `)`
    `ranks` `(` $ranks `)` attr-dict `:` $type (`->` type($sum)^)?
  }];
  let hasVerifier = 1;
}

def PF_ClipGradientsOp : PF_RankProgramBodyOp<"clip_gradients"> {
  let summary = "clips every rank's gradients by their global norm over all ranks";
  let description = [{
    A collective of all ranks, after the step's backwards and gradient sums
    and before the updates. Each rank passes its gradients of the step
    (`gradients`, named by `names`) and gets them back clipped (`clipped`,
    each in its operand's bytes). The squared norm of each `grad/<param>`
    in `order` is computed by the one rank that counts it (`counted`: the
    lowest member of its sum over ranks, or the rank holding it), all ranks
    exchange these, and every rank sums them in
    `order` — the order of the single-process step's global norm (the
    module's `pf.step_gradients`), so the norm is bit for bit the
    single-process one. When the norm exceeds `max_norm`, every rank scales
    all its gradients (tied copies included) by max_norm / (norm + 1e-6), as
    `pf.clip_by_global_norm` does.

    ```mlir
    %c:2 = pf.clip_gradients(%w0, %w1 : tensor<16x16xf32>, tensor<16xf32>)
        names(["grad/w0", "grad/w1"]) counted([true, true]) max_norm(1.000000e+00)
        order(["grad/w0", "grad/w1"]) -> tensor<16x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$gradients, StrArrayAttr:$names,
                   DenseBoolArrayAttr:$counted, F64Attr:$max_norm, StrArrayAttr:$order);
  let results = (outs Variadic<AnyRankedTensor>:$clipped);
  let assemblyFormat = [{
    `(` ($gradients^ `:` type($gradients))? `)` `names` `(` $names `)` `counted` `(` $counted `)`
    `max_norm` `(` $max_norm `)`
    `order` `(` $order `)` attr-dict (`->` type($clipped)^)?
  }];
  let hasVerifier = 1;
}

def PF_KfacKLClipOp : PF_RankProgramBodyOp<"kfac_kl_clip", [AttrSizedOperandSegments]> {
  let summary = "KL-clips every rank's K-FAC updates by Σ⟨update, gradient⟩ over all ranks";
  let description = [{
    A collective of all ranks, after each rank's `precondition` calls (and
    the broadcasts of Chimera's split preconditioning) and before its
    update. Each rank passes the preconditioned gradients of its K-FAC
    layers (`updates`, named by `names`) and the clipped gradients they were
    computed from (`gradients`, one each), and gets the updates back scaled
    (`clipped`, each in its update's bytes). Each rank computes ⟨update,
    gradient⟩ (`pfrt_dot`, as the single-process `pf.kfac.kl_clip` lowering
    does) of the entries of `order` it counts (`counted`: a layer both
    replicas hold counts on the lowest); the ranks exchange them in
    one all-reduce with a slot per entry (one non-zero term each, so exact),
    and every rank adds the slots in `order` — the single-process sum's
    order — from 0. ν = min(1, sqrt(κ / (lr²·Σ))) (1 when lr²·Σ is not
    positive) then scales this rank's updates, `lr` being the graph input of
    the step.

    ```mlir
    %u = pf.kfac_kl_clip updates(%p : tensor<16x16xf32>) gradients(%g : tensor<16x16xf32>)
        names(["grad/w0"]) counted([true]) kappa(1.000000e-03) order(["grad/w0", "grad/b0"])
        -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$updates, Variadic<AnyRankedTensor>:$gradients,
                   StrArrayAttr:$names, DenseBoolArrayAttr:$counted, F64Attr:$kappa,
                   StrArrayAttr:$order);
  let results = (outs Variadic<AnyRankedTensor>:$clipped);
  let assemblyFormat = [{
    `updates` `(` ($updates^ `:` type($updates))? `)`
    `gradients` `(` ($gradients^ `:` type($gradients))? `)`
    `names` `(` $names `)` `counted` `(` $counted `)` `kappa` `(` $kappa `)`
    `order` `(` $order `)` attr-dict
    (`->` type($clipped)^)?
  }];
  let hasVerifier = 1;
}

def PF_StepResultOp : PF_RankProgramBodyOp<"step_result"> {
  let summary = "hands a value of the step to the host (the loss, the step's gradients)";
  let description = [{
    The host reads `value` as the step's `name` after the step: the loss,
    or a gradient (`grad/<param>`) as the update takes it (what
    `pf-run --run-ranks` writes out).

    `loss` is the step's loss, the count-weighted mean over the
    micro-batches that accumulate calls formed (or the forward's loss with
    one micro-batch), reported by one rank: the one running every
    micro-batch of the last stage, or where two ranks run it (Chimera,
    DualPipe) the lower after the library's sum of their partial sums, or in
    the bitwise mode the owner of the exact sum. `grad/<param>` is the
    step's gradient, reported by the rank counting it. Over all programs
    each result leaves once.

    ```mlir
    pf.step_result "loss" %sum : tensor<f32>
    pf.step_result "grad/w" %s3 : tensor<16x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, AnyRankedTensor:$value);
  let assemblyFormat = [{
    $name $value attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
}

def PF_KfacPromoteInversesOp : PF_RankProgramBodyOp<"kfac_promote_inverses"> {
  let summary = "the inverses computed for the next window become the ones in use";
  let description = [{
    Copies every K-FAC inverse this rank computed into a pending parameter
    (`pf.kfac_pending`: `<weight>.kfac.A_inv_next`, `.B_inv_next`) over the
    inverse the precondition calls read (`.A_inv`, `.B_inv`). The `kfac_inverse`
    calls of a window write the pending inverses while the window's
    preconditioning still reads the previous ones; a warm-up step promotes
    after its inverse calls, the first step of a window before any of them.
  }];
  let assemblyFormat = "attr-dict";
}

#endif // PF_PROGRAM_OPS_TD
