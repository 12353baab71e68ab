//===- PFKFACOps.td - K-FAC work ---------------------------*- tablegen -*-===//
#ifndef PF_KFAC_OPS_TD
#define PF_KFAC_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"

def PF_KFACFactorAOp : PF_TensorOp<"kfac.factor_a"> {
  let summary = "Kronecker factor A = xᵀx / n of a layer's input";
  let description = [{
    x is flattened to [n, in] (all leading dims are tokens). With `bias_column`
    a column of ones is appended, so A is (in+1)×(in+1).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, UnitAttr:$bias_column);
  let results = (outs TensorOf<[AnyFloat]>:$factor);
}

def PF_KFACFactorBOp : PF_TensorOp<"kfac.factor_b"> {
  let summary = "Kronecker factor B = gᵀg / n · scale of a layer's output gradient";
  let description = [{
    g is flattened to [n, out]. `scale` undoes the 1/n of a mean loss (n²
    when g is the gradient of the mean over n rows), as the K-FAC literature does.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$output_grad,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs TensorOf<[AnyFloat]>:$factor);
}

def PF_KFACPiOp : PF_TensorOp<"kfac.pi"> {
  let summary = "π = sqrt((tr A / dim A) / (tr B / dim B)) for π-damping";
  let arguments = (ins TensorOf<[AnyFloat]>:$factor_a, TensorOf<[AnyFloat]>:$factor_b);
  let results = (outs 0DTensorOf<[AnyFloat]>:$pi);
}

def PF_KFACInverseOp : PF_TensorOp<"kfac.inverse"> {
  let summary = "damped inverse of a Kronecker factor (Cholesky)";
  let description = [{
    (F + √λ·π·I)⁻¹ for factor A and (F + √λ/π·I)⁻¹ for factor B, λ = `damping`.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$factor, 0DTensorOf<[AnyFloat]>:$pi,
                   DefaultValuedAttr<F64Attr, "1.0e-3">:$damping,
                   StrAttr:$side);
  let results = (outs TensorOf<[AnyFloat]>:$inverse);
  let hasVerifier = 1;
}

def PF_KFACPreconditionOp : PF_TensorOp<"kfac.precondition"> {
  let summary = "ΔW = B⁻¹ · ∇W · A⁻¹ (and B⁻¹ · ∇b)";
  let description = [{
    ∇W is [out, in], or [in, out] with `weight_in_out` (a layer that reads
    its weight untransposed, as PyTorch's exporter folds it); the update has
    ∇W's layout. When A⁻¹ is (in+1)×(in+1) the bias gradient is required and
    is preconditioned jointly with W as the extra input.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$weight_grad, TensorOf<[AnyFloat]>:$a_inverse,
                   TensorOf<[AnyFloat]>:$b_inverse, Optional<TensorOf<[AnyFloat]>>:$bias_grad,
                   UnitAttr:$weight_in_out);
  let results = (outs TensorOf<[AnyFloat]>:$weight_update,
                 Optional<TensorOf<[AnyFloat]>>:$bias_update);
}

def PF_KFACPreconditionEigenOp : PF_TensorOp<"kfac.precondition_eigen"> {
  let summary = "K-FAC preconditioning in the factors' eigenbasis, damping on the product";
  let description = [{
    With A = Qa·diag(λa)·Qaᵀ and B = Qb·diag(λb)·Qbᵀ (`pf.kfac.refresh_inverses`
    with `values`): ΔW = Qb·((Qbᵀ·∇W·Qa) / (λb·λaᵀ + damping))·Qaᵀ, the
    exact (B ⊗ A + damping·I)⁻¹ of the Kronecker product rather than
    pf.kfac.precondition's product of per-factor damped inverses. The
    damping is a value (a constant, or the host's per-step `kfac_damping`);
    it must be > 0. Layouts and the bias as in pf.kfac.precondition (a
    separate bias: A = 1).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$weight_grad,
                   TensorOf<[AnyFloat]>:$a_vectors, TensorOf<[AnyFloat]>:$a_values,
                   TensorOf<[AnyFloat]>:$b_vectors, TensorOf<[AnyFloat]>:$b_values,
                   0DTensorOf<[F64]>:$damping,
                   Optional<TensorOf<[AnyFloat]>>:$bias_grad, UnitAttr:$weight_in_out);
  let results = (outs TensorOf<[AnyFloat]>:$weight_update,
                 Optional<TensorOf<[AnyFloat]>>:$bias_update);
  let hasVerifier = 1;
}

//===--- Stateful K-FAC (training steps) ---------------------------------===//

include "mlir/IR/SymbolInterfaces.td"

def PF_KFACUpdateFactorOp : PF_Op<"kfac.update_factor", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemRead, MemWrite]>,
    AttrSizedOperandSegments]> {
  let summary = "running average of a Kronecker factor, updated in place";
  let description = [{
    F ← decay·F + (1 − decay)·scale·xᵀx/n with x flattened to [n, d] (a ones
    column appended with `bias_column`); at step 1 the factor is set to the
    new value instead. Runs at steps 1, 1 + every, ... only. With `count`
    the scale is multiplied by count² at run time (B from gradients of a mean
    over `count` tokens). `factor` names a pf.param of shape [d, d].

    Several updates of one factor in a function (one per micro-batch) make
    one running-average step together: the first in program order decays
    the factor, and each adds (1 − decay)·scale·xᵀx/n divided by the number
    of updates, so the new estimate is the micro-batches' mean.

    With `microbatch` (a pipeline stage function, called once per
    micro-batch) the update is the one of micro-batch `microbatch` (known at
    run time) among `updates` calls of the step, one per call: the call of
    micro-batch 0 decays the factor and each adds 1/`updates` of its term,
    exactly the arithmetic of `updates` updates in one function. Such a
    function holds one update of the factor.

    With `due` (K-FAC in the pipeline's bubbles: the host decides which
    steps gather curvature) the update runs when `due` is non-zero, in
    place of the `every` rule.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, 0DTensorOf<[I64]>:$step,
                   Optional<0DTensorOf<[I64]>>:$count,
                   Optional<0DTensorOf<[I64]>>:$microbatch,
                   Optional<0DTensorOf<[I64]>>:$due,
                   FlatSymbolRefAttr:$factor, UnitAttr:$bias_column,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   DefaultValuedAttr<F64Attr, "0.95">:$decay,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$every,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$updates);
  let assemblyFormat = [{
    $factor `from` $input `step` $step (`count` $count^)?
    (`microbatch` `(` $microbatch^ `:` type($microbatch) `)`)?
    (`due` `(` $due^ `:` type($due) `)`)? attr-dict `:` type($input) `,`
    type($step) (`,` type($count)^)?
  }];
  let hasVerifier = 1;
}

def PF_KFACCaptureOutputOp : PF_Op<"kfac.capture_output", [Pure,
    AllTypesMatch<["input", "output"]>, PF_ViewOpInterface,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "identity whose gradient updates factor B from the output gradient";
  let description = [{
    Returns its input. Its gradient rule passes the gradient through and
    updates the factor named `factor` from it (`pf.kfac.update_factor`), so
    K-FAC's B factor comes out of the backward pass without the autodiff
    driver knowing about K-FAC. With `scale_by_loss_count` the update is also
    scaled by the square of the token count of the function's
    `pf.softmax_cross_entropy` (its gradients are of a mean over those tokens;
    with several such ops, micro-batches of one count-weighted mean, the sum
    of their counts).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, 0DTensorOf<[I64]>:$step,
                   FlatSymbolRefAttr:$factor, DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   DefaultValuedAttr<F64Attr, "0.95">:$decay,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$every,
                   UnitAttr:$scale_by_loss_count);
  let results = (outs TensorOf<[AnyFloat]>:$output);
  let assemblyFormat = [{
    $input `into` $factor `step` $step attr-dict `:` type($input) `,` type($step)
  }];
}

def PF_KFACUpdateLayerNormFactorOp : PF_Op<"kfac.update_layer_norm_factor", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemRead, MemWrite]>,
    AttrSizedOperandSegments]> {
  let summary = "running average of a LayerNorm's scale-and-shift Fisher, updated in place";
  let description = [{
    The Fisher of a LayerNorm's scale γ and shift β [h] in 2x2 blocks, one
    per feature j: new_j = scale · E_t[g gᵀ] over the tokens t of `input`
    (the LayerNorm's input [..., h], normalized over its last dimension with
    `epsilon`) and `output_grad` (the gradient of its output), g = (dy·x̂,
    dy). `factor` names a pf.param [h, 3] (γγ, γβ, ββ) or [h, 2] (the
    blocks' diagonal). The running average, `count`, `every`, `due` and
    several updates of one factor (micro-batches) are pf.kfac.update_factor's.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, TensorOf<[AnyFloat]>:$output_grad,
                   0DTensorOf<[I64]>:$step, Optional<0DTensorOf<[I64]>>:$count,
                   Optional<0DTensorOf<[I64]>>:$due, FlatSymbolRefAttr:$factor,
                   F64Attr:$epsilon, DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   DefaultValuedAttr<F64Attr, "0.95">:$decay,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$every);
  let assemblyFormat = [{
    $factor `from` $input `,` $output_grad `step` $step (`count` $count^)?
    (`due` `(` $due^ `:` type($due) `)`)? attr-dict `:` type($input) `,` type($output_grad)
    `,` type($step) (`,` type($count)^)?
  }];
  let hasVerifier = 1;
}

def PF_KFACCaptureLayerNormOp : PF_Op<"kfac.capture_layer_norm", [Pure,
    AllTypesMatch<["output", "result"]>, PF_ViewOpInterface,
    DeclareOpInterfaceMethods<PF_GradientOpInterface>]> {
  let summary = "identity on a LayerNorm's output whose gradient updates its Fisher factor";
  let description = [{
    Returns `output` (a `pf.layer_norm`'s result); `input` is that
    LayerNorm's input. Its gradient rule passes the gradient through and
    updates the factor from it and `input`
    (`pf.kfac.update_layer_norm_factor`); `input` gets no gradient from it.
    `scale_by_loss_count` as pf.kfac.capture_output's.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$output, TensorOf<[AnyFloat]>:$input,
                   0DTensorOf<[I64]>:$step, FlatSymbolRefAttr:$factor, F64Attr:$epsilon,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   DefaultValuedAttr<F64Attr, "0.95">:$decay,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$every,
                   UnitAttr:$scale_by_loss_count);
  let results = (outs TensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $output `of` $input `into` $factor `step` $step attr-dict `:` type($output) `,`
    type($input) `,` type($step)
  }];
}

def PF_KFACPreconditionLayerNormOp : PF_TensorOp<"kfac.precondition_layer_norm"> {
  let summary = "(F_j + λI)⁻¹ (∇γ_j, ∇β_j) per feature of a LayerNorm";
  let description = [{
    `factor` [h, 3] holds each feature's 2x2 block (γγ, γβ, ββ), [h, 2]
    only its diagonal; λ = `damping` (0-d f64). The updates have the
    gradients' types.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$factor, 0DTensorOf<[F64]>:$damping,
                   TensorOf<[AnyFloat]>:$scale_grad, TensorOf<[AnyFloat]>:$bias_grad);
  let results = (outs TensorOf<[AnyFloat]>:$scale_update, TensorOf<[AnyFloat]>:$bias_update);
}

def PF_KFACUpdateEmbeddingFactorOp : PF_Op<"kfac.update_embedding_factor", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "running average of an embedding's diagonal factor A (token counts), in place";
  let description = [{
    An embedding lookup (`pf.gather` of rows of a [vocab, h] table) is a
    linear layer on one-hot inputs, so its factor A = E[a aᵀ] is diagonal:
    new_v = scale · count_v / n, count_v the number of the n `ids` that pick
    row v. `factor` names a pf.param [vocab] (`<table>.kfac.A`). The running
    average, `every`, `due` and several updates of one factor
    (micro-batches) are pf.kfac.update_factor's.
  }];
  let arguments = (ins TensorOf<[I32, I64]>:$ids, 0DTensorOf<[I64]>:$step,
                   Optional<0DTensorOf<[I64]>>:$due, FlatSymbolRefAttr:$factor,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   DefaultValuedAttr<F64Attr, "0.95">:$decay,
                   DefaultValuedAttr<PF_PositiveI64Attr, "1">:$every);
  let assemblyFormat = [{
    $factor `from` $ids `step` $step (`due` `(` $due^ `:` type($due) `)`)? attr-dict `:`
    type($ids) `,` type($step)
  }];
  let hasVerifier = 1;
}

def PF_KFACPreconditionEmbeddingOp : PF_TensorOp<"kfac.precondition_embedding"> {
  let summary = "ΔW = diag(A⁻¹) · ∇W · B⁻¹ of an embedding table [vocab, h]";
  let description = [{
    `a_inverse` [vocab] is the diagonal of the damped A⁻¹ (token counts),
    `b_inverse` [h, h] the damped B⁻¹ (`pf.kfac.refresh_inverses` with a
    1-D factor A): the rows of ∇W scaled, then one GEMM. The update has ∇W's
    type.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$weight_grad, TensorOf<[AnyFloat]>:$a_inverse,
                   TensorOf<[AnyFloat]>:$b_inverse);
  let results = (outs TensorOf<[AnyFloat]>:$weight_update);
}

def PF_KFACRefreshInversesOp : PF_Op<"kfac.refresh_inverses", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemRead, MemWrite]>,
    AttrSizedOperandSegments]> {
  let summary = "π-damped inverses of a layer's factors, every `every` steps, in place";
  let description = [{
    At steps 1, 2, ..., `warmup` and 1, 1 + every, ...: π from both factors, A⁻¹ = (A + √λ·π·I)⁻¹ and
    B⁻¹ = (B + √λ/π·I)⁻¹ (λ = `damping`), written into `a_inverse` and
    `b_inverse`. A factor that is not positive definite is retried with more
    damping (`retries` times, tenfold each) and otherwise keeps its previous
    inverse. `outcome` is 0 (refreshed or not due), 1 (needed more damping)
    or 2 (kept a previous inverse).

    With `due` the refresh runs when `due` is non-zero, in place of the
    `warmup`/`every` rule (the host decides: single-process K-FAC with the
    arithmetic of the pipeline's bubbles, `pf-train --kfac-window`).

    With `damping_value` (the host's per-step `kfac_damping`, a damping
    schedule) λ is that value instead of the `damping` attribute.

    A 1-D `factor_a` (and `a_inverse`) is an embedding's diagonal factor A
    (token counts, pf.kfac.update_embedding_factor): π uses its sum, A⁻¹ is
    1 / (a + √λ·π) per entry, and B is inverted as above
    (`pfrt_kfac_embedding_inverses`); not with `values`.

    With `values` the refresh is an eigendecomposition instead (K-FAC in the
    eigenbasis, for pf.kfac.precondition_eigen): `a_inverse` and
    `b_inverse` receive the factors' eigenvectors (column k: eigenvector k)
    and `a_values`/`b_values` (1-D pf.params) their eigenvalues; no damping
    is added here (`damping` and `retries` do not apply) and a factor whose
    decomposition fails keeps its previous one (outcome 2).
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, Optional<0DTensorOf<[I64]>>:$due,
                   Optional<0DTensorOf<[F64]>>:$damping_value,
                   FlatSymbolRefAttr:$factor_a,
                   FlatSymbolRefAttr:$factor_b, FlatSymbolRefAttr:$a_inverse,
                   FlatSymbolRefAttr:$b_inverse,
                   DefaultValuedAttr<F64Attr, "1.0e-3">:$damping,
                   DefaultValuedAttr<I64Attr, "1">:$every,
                   DefaultValuedAttr<PF_NonNegativeI64Attr, "3">:$retries,
                   DefaultValuedAttr<PF_NonNegativeI64Attr, "0">:$warmup,
                   OptionalAttr<FlatSymbolRefAttr>:$a_values,
                   OptionalAttr<FlatSymbolRefAttr>:$b_values);
  let results = (outs 0DTensorOf<[I32]>:$outcome);
  let assemblyFormat = [{
    `(` $factor_a `,` $factor_b `)` `into` ` ` `(` $a_inverse `,` $b_inverse `)`
    (`values` ` ` `(` $a_values^ `,` $b_values `)`)? `step` $step
    (`due` `(` $due^ `:` type($due) `)`)?
    (`damping` `(` $damping_value^ `:` type($damping_value) `)`)?
    attr-dict `:` type($step) `->` type($outcome)
  }];
  let hasVerifier = 1;
}

def PF_KFACKLClipOp : PF_Op<"kfac.kl_clip", [Pure, AttrSizedOperandSegments]> {
  let summary = "KL-clipping of K-FAC updates (Ba et al.)";
  let description = [{
    ν = min(1, sqrt(κ / (lr² · Σᵢ ⟨updateᵢ, gradientᵢ⟩))) (1 when the sum is not
    positive); returns ν · updateᵢ. Bounds the step's KL divergence (the
    quadratic model's predicted change) so large preconditioned steps cannot
    blow up training.
  }];
  let arguments = (ins 0DTensorOf<[F64]>:$lr, Variadic<TensorOf<[AnyFloat]>>:$updates,
                   Variadic<TensorOf<[AnyFloat]>>:$gradients, F64Attr:$kappa);
  let results = (outs Variadic<TensorOf<[AnyFloat]>>:$clipped);
  let assemblyFormat = [{
    `lr` $lr `:` type($lr) `updates` `(` $updates `:` type($updates) `)`
    `gradients` `(` $gradients `:` type($gradients) `)` attr-dict `->` type($clipped)
  }];
  let hasVerifier = 1;
}

def PF_KFACGraftOp : PF_Op<"kfac.graft", [Pure, AttrSizedOperandSegments]> {
  let summary = "a layer's K-FAC update rescaled to its gradient's norm (grafting)";
  let description = [{
    s = sqrt(Σᵢ ‖gradientᵢ‖² / Σᵢ ‖updateᵢ‖²) (1 when Σᵢ ‖updateᵢ‖² is 0);
    returns s · updateᵢ: K-FAC's direction with the gradient's length, over
    one layer's weight and bias together (learning-rate grafting, Agarwal et
    al. 2020). An adaptive optimizer after K-FAC (AdamW, LAMB) normalises
    each element by the running average of its past inputs; the
    preconditioned gradient's length swings by orders of magnitude from step
    to step as the factors' small eigenvalues move, and those swings reach
    the parameters as steps many times the learning rate (pf-train's early
    loss spikes, docs/training.md). Grafting keeps the optimizer's inputs on
    the gradient's scale. A NaN or Inf in an update stays in the result.
  }];
  let arguments = (ins Variadic<TensorOf<[AnyFloat]>>:$updates,
                   Variadic<TensorOf<[AnyFloat]>>:$gradients);
  let results = (outs Variadic<TensorOf<[AnyFloat]>>:$grafted);
  let assemblyFormat = [{
    `updates` `(` $updates `:` type($updates) `)`
    `gradients` `(` $gradients `:` type($gradients) `)` attr-dict `->` type($grafted)
  }];
  let hasVerifier = 1;
}

#endif // PF_KFAC_OPS_TD
