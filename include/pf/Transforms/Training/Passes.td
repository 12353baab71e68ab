//===- Passes.td - pf training passes ------------------------*- tablegen -*-===//
#ifndef PF_TRANSFORMS_TRAINING_PASSES_TD
#define PF_TRANSFORMS_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

def PFAddMaskedLMLoss : Pass<"pf-add-masked-lm-loss", "::mlir::ModuleOp"> {
  let summary = "Turn a masked-LM forward into a loss: cross-entropy over the vocabulary";
  let description = [{
    Adds a `labels` argument (int64, the logits' shape without the vocabulary;
    `ignore-index` marks tokens that do not count) and replaces the function's
    results with the mean cross-entropy `loss` of the counted tokens, so that
    `pf-build-gradients` can differentiate it.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"logits\"",
           "Name of the logits result (default: logits)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value of tokens that do not count (default: -100)">,
    Option<"keepOutputs", "keep-outputs", "bool", /*default=*/"false",
           "Keep the original results after the loss (default: false)">,
  ];
}

def PFInsertKFAC : Pass<"pf-insert-kfac", "::mlir::ModuleOp"> {
  let summary = "Collect K-FAC factors of the encoder blocks' linear layers";
  let description = [{
    For every `pf.linear` of an encoder block (the layers PipeFisher
    preconditions; embeddings, LayerNorm and heads keep the first-order
    optimizer) whose weight is a named parameter in [out, in] layout and
    whose name does not match `skip`: adds the state parameters
    `<weight>.kfac.A`, `.kfac.B`, `.kfac.A_inv`, `.kfac.B_inv`, updates A from
    the layer input in the forward pass, and captures the output so that the
    backward pass updates B (`pf.kfac.capture_output`). Run it before
    pf-build-gradients and pf-kfac-precondition after it.
  }];
  let options = [
    Option<"decay", "decay", "double", /*default=*/"0.5",
           "Running-average decay of the factors (default: 0.5, tuned on the masked-LM "
           "benchmark; the reference's is 0.95)">,
    Option<"skip", "skip", "std::string", /*default=*/"\"\"",
           "Regular expression: linear layers whose weight name matches keep the "
           "first-order optimizer (default: '')">,
    Option<"factorEvery", "factor-every", "int64_t", /*default=*/"1",
           "Steps between factor updates (default: 1)">,
    Option<"biasColumn", "bias-column", "bool", /*default=*/"false",
           "Append a ones column to the input so A is (in+1)x(in+1) and the bias "
           "is preconditioned jointly with the weight (default: false)">,
  ];
}

def PFBuildGradients : Pass<"pf-build-gradients", "::mlir::ModuleOp"> {
  let summary = "Append reverse-mode gradients to the entry function";
  let description = [{
    Differentiates the objective (function result `seed`; summed when it is not
    a scalar) with respect to the named parameters (`wrt=params`), the float
    function arguments (`wrt=inputs`) or both (`wrt=all`). Walks the ops in
    reverse and asks each one for its operand gradients through
    `GradientOpInterface` (no switch over op names); gradients of values used
    several times are summed with `pf.add`. The gradients become extra function
    results named `grad/<parameter name>` (all reads of one parameter summed:
    a tied embedding gets both contributions) and `grad/<input name>`. An op on
    the differentiated path without the interface is an error naming it.
  }];
  let options = [
    Option<"wrt", "wrt", "std::string", /*default=*/"\"params\"",
           "What to differentiate for: params, inputs or all (default: params)">,
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "Index of the function result that is the objective (default: 0)">,
    Option<"functionName", "function", "std::string", /*default=*/"\"\"",
           "The function to differentiate (default: the first with a body)">,
    Option<"tagOrigin", "tag-origin", "bool", /*default=*/"false",
           "Tag each differentiated forward op (pf.grad_id), the ops of its gradient "
           "rule (pf.grad_of, the same id) and the sums of partial gradients "
           "(pf.grad_sum), for pf-split-stages">,
  ];
}

def PFSplitMicrobatches : Pass<"pf-split-microbatches", "::mlir::ModuleOp"> {
  let summary = "Run a training step over several micro-batches";
  let description = [{
    Takes a function built for one micro-batch (after pf-add-masked-lm-loss,
    usually after pf-build-gradients too) and makes it take `microbatches` of
    them at once: every argument that is not 0-d grows its leading (batch)
    dimension by that factor and is sliced into one piece per micro-batch;
    the body is repeated once per piece, in order. With w_m = count_m / Σ
    count (the micro-batches' counted tokens), the `loss` result becomes
    Σ w_m·loss_m and every `grad/...` result Σ w_m·grad_m: the whole batch's
    loss and gradients. Other results are concatenated along dimension 0.

    Run after pf-build-gradients (as the `pf-training` pipeline does), each
    micro-batch's forward and backward run back to back and only one
    micro-batch's activations are live at a time; run before it, the
    gradients are built through all repeats at once (all forwards, then all
    backwards). K-FAC factors (pf-insert-kfac) get one update per
    micro-batch, which the lowering averages into one running-average update
    per step (PipeFisher's per-micro-batch curvature work, accumulated).
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step (1: leave the function as it is) (default: 1)">,
  ];
}

def PFClipGradients : Pass<"pf-clip-gradients", "::mlir::ModuleOp"> {
  let summary = "Scale the parameter gradients down to a global L2 norm";
  let description = [{
    Replaces every `grad/<parameter>` result with its clipped value
    (`pf.clip_by_global_norm`: all scaled by max-norm / (norm + 1e-6) when
    their global norm exceeds max-norm), as torch.nn.utils.clip_grad_norm_.
    Run it on the gradients from pf-build-gradients, before
    pf-kfac-precondition: the norm is the true gradient's, and K-FAC bounds
    its preconditioned steps itself (KL-clipping).
  }];
  let options = [
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0", "Largest global L2 norm (default: 1.0)">,
  ];
}

def PFKFACPrecondition : Pass<"pf-kfac-precondition", "::mlir::ModuleOp"> {
  let summary = "Precondition the gradients of K-FAC layers with their damped inverses";
  let description = [{
    For each result `grad/<weight>` of a layer pf-insert-kfac prepared:
    refreshes the layer's inverses every `refresh-every` steps (π-damping,
    more damping on failure, else the previous inverse is kept) and replaces
    the weight's and bias's gradients with B⁻¹·∇W·A⁻¹ and B⁻¹·∇b. Adds a
    result `kfac/issues`: the sum of the refresh outcomes (0 when every
    inverse was refreshed normally).
  }];
  let options = [
    Option<"damping", "damping", "double", /*default=*/"1e-5",
           "Damping λ (default: 1e-5, tuned on the masked-LM benchmark; the reference's is "
           "1e-3)">,
    Option<"refreshWarmup", "refresh-warmup", "int64_t", /*default=*/"50",
           "Refresh at every one of the first N steps, then every refresh-every (early "
           "curvature changes fastest; default: 50)">,
    Option<"refreshEvery", "refresh-every", "int64_t", /*default=*/"1",
           "Steps between inverse refreshes (stale inverses in between) (default: 1)">,
    Option<"retries", "retries", "int64_t", /*default=*/"3",
           "Tenfold damping increases tried when a factor will not invert (default: 3)">,
    Option<"klClip", "kl-clip", "double", /*default=*/"1e-3",
           "KL-clipping threshold κ (0: off; default: 1e-3); scales all preconditioned "
           "updates by min(1, sqrt(κ / (lr² Σ⟨update, gradient⟩))); adds an `lr` argument "
           "if missing">,
    Option<"exportFactors", "export-factors", "bool", /*default=*/"false",
           "Also return each layer's factors and inverses after the step "
           "(kfac/A/<weight>, kfac/B/..., kfac/A_inv/..., kfac/B_inv/...) (default: false)">,
  ];
}

def PFAddOptimizer : Pass<"pf-add-optimizer", "::mlir::ModuleOp"> {
  let summary = "Apply the gradients `grad/<param>` with SGD, AdamW or LAMB in place";
  let description = [{
    For every result named `grad/<parameter>` (from pf-build-gradients), adds
    the optimizer's state parameters (`<parameter>.exp_avg`, ... initialized
    to zero) and an in-place update op, and removes that result. Adds the
    arguments `lr` (f64) and `step` (i64, 1-based) so schedules need no
    recompilation. Biases and LayerNorm parameters get no weight decay, as in
    BERT.
  }];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::pf::Optimizer",
           /*default=*/"::mlir::pf::Optimizer::AdamW", "Update rule (default: adamw)",
           [{::mlir::pf::optimizerValues()}]>,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum (default: 0.9)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD: Nesterov momentum (default: false)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam/LAMB beta1 (default: 0.9)">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam/LAMB beta2 (default: 0.999)">,
    Option<"eps", "eps", "double", /*default=*/"1e-6", "Adam/LAMB epsilon (default: 1e-6)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Weight decay (not applied to biases and LayerNorm parameters) (default: 0.01)">,
    Option<"keepGradients", "keep-gradients", "bool", /*default=*/"false",
           "Keep the grad/ results (e.g. to check them from outside) (default: false)">,
    Option<"kfacOptimizer", "kfac-optimizer", "::mlir::pf::KfacOptimizer",
           /*default=*/"::mlir::pf::KfacOptimizer::Same",
           "Update rule of the K-FAC layers' (preconditioned) parameters, as PipeFisher "
           "runs K-FAC layers and the rest with different rules (default: same)",
           [{::mlir::pf::kfacOptimizerValues()}]>,
    Option<"kfacLRScale", "kfac-lr-scale", "double", /*default=*/"1",
           "Learning rate of the K-FAC layers relative to `lr` (default: 1)">,
  ];
}

#endif // PF_TRANSFORMS_TRAINING_PASSES_TD
