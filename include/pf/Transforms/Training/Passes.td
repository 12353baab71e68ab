//===- Passes.td - pf training passes ------------------------*- tablegen -*-===//
//
// Training phase: turns a (graph-optimized) forward graph into one training
// step. The `pf-training` pipeline runs them in this order:
// pf-add-masked-lm-loss, pf-insert-kfac (with `kfac=true`),
// pf-build-gradients, pf-split-microbatches (when `micro-batches` is not 1:
// after the gradients, so each micro-batch's forward and backward run back to
// back), pf-clip-gradients (with `clip-norm` > 0: the true gradients),
// pf-kfac-precondition (with `kfac=true`), pf-add-optimizer, canonicalize,
// cse. The pipeline builder is in lib/Transforms/Training/Pipelines.cpp.
// `ninja -C build mlir-doc` renders this file into
// build/docs/passes/PFTrainingPasses.md.
//
//===----------------------------------------------------------------------===//
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

    ```mlir
    // Before
    func.func @main(%x: tensor<2x3x5xf32> {pf.name = "x"}) -> (tensor<2x3x5xf32> {pf.name = "logits"}) {
      %y = pf.exp %x : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      return %y : tensor<2x3x5xf32>
    }
    // After
    func.func @main(%arg0: tensor<2x3x5xf32> {pf.name = "x"}, %arg1: tensor<2x3xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
      %0 = pf.exp %arg0 : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %loss, %grad_logits, %count = pf.softmax_cross_entropy %0, %arg1 : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3x5xf32>, tensor<i64>)
      return %loss : tensor<f32>
    }
    ```

    With `predictions=P` (the masked-LM loss needs the logits only where a
    token is predicted, as NVIDIA's BERT pre-training gathers them) the
    decoder's input is gathered at `mlm_positions` first:

    ```mlir
    %idx = pf.unsqueeze %positions {axes = array<i64: 2>} : (tensor<8x20xi64>) -> tensor<8x20x1xi64>
    %rows = pf.gather_nd %hidden, %idx {batch_dims = 1 : i64} : (tensor<8x128x256xf32>, tensor<8x20x1xi64>) -> tensor<8x20x256xf32>
    %logits = pf.linear %rows, %embeddings, %bias {transpose_weight} : (...) -> tensor<8x20x30522xf32>
    ```
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"logits\"",
           "Name of the logits result (default: logits)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value of tokens that do not count (default: -100)">,
    Option<"keepOutputs", "keep-outputs", "bool", /*default=*/"false",
           "Keep the original results after the loss (default: false)">,
    Option<"predictions", "predictions", "int64_t", /*default=*/"0",
           "Apply the decoder (the pf.linear making the logits) only at P positions per "
           "sequence, given by an `mlm_positions` argument [batch, P] (padding positions "
           "carry ignored labels); `labels` is then [batch, P]. 0: every position "
           "(default: 0)">,
  ];
}

def PFInsertKFAC : Pass<"pf-insert-kfac", "::mlir::ModuleOp"> {
  let summary = "Collect K-FAC factors of the encoder blocks' linear layers";
  let description = [{
    For every `pf.linear` of an encoder block (the layers PipeFisher
    preconditions; embeddings, LayerNorm and heads keep the first-order
    optimizer unless `layers` and `layer-norm` below add them) whose weight is a named parameter in [out, in] layout and
    whose name does not match `skip`: adds the state parameters
    `<weight>.kfac.A`, `.kfac.B`, `.kfac.A_inv`, `.kfac.B_inv`, updates A from
    the layer input in the forward pass, and captures the output so that the
    backward pass updates B (`pf.kfac.capture_output`). Run it before
    pf-build-gradients and pf-kfac-precondition after it.

    With `layers=encoder-and-head` the masked-LM head's transform (the
    hidden-to-hidden `pf.linear` before the head's GELU and LayerNorm) gets
    factors too; its state carries no `pf.encoder_block` (it belongs to no
    block), so pipelined training refuses it (pf-train names the option).

    With `layer-norm=blocks` (or `diagonal`) every `pf.layer_norm` over the
    last dimension whose scale and shift are named parameters gets the state
    `<scale>.kfac.F` ([h, 3]: γγ, γβ, ββ per feature; [h, 2] for the
    diagonal) and a `pf.kfac.capture_layer_norm` on its output, whose
    gradient rule updates F from the LayerNorm's input and output gradient;
    pf-kfac-precondition then solves (F_j + λI) u_j = (∇γ_j, ∇β_j).

    With `embeddings=word` (or `word-and-position`) the word (and position)
    embedding's `pf.gather` of rows of a [vocab, h] table is a K-FAC layer
    on one-hot inputs: `pf.kfac.update_embedding_factor` keeps factor A
    `<table>.kfac.A` [vocab], the running average of each row's token count
    per id (its diagonal), and a `pf.kfac.capture_output` on the gathered
    rows updates B [h, h] in the backward pass. A position embedding
    broadcast over the batch by a `pf.add` is captured on the add's result,
    whose gradient is the per-token one. pf-kfac-precondition then refreshes
    A⁻¹ = 1 / (A + √λ·π) and B⁻¹ with the others and replaces the table's
    gradient by diag(A⁻¹)·∇W·B⁻¹, the whole gradient of a tied weight
    included (the decoder's share too).

    The factor updates take the step number: the pass adds an i64 argument
    `step` when the function has none. The state parameters carry
    `pf.kfac_weight` (the weight they belong to); the gradient rule of
    `pf.kfac.capture_output` (in pf-build-gradients) is the
    `pf.kfac.update_factor` of B from the output's gradient.

    ```mlir
    // Before
    pf.param @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
    func.func @main(%x: tensor<6x4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "loss"}) {
      %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x4xf32>
      %y = pf.linear %x, %w {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
      %s = pf.reduce_sum %y {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
      return %s : tensor<f32>
    }
    // After
    pf.param @bert.encoder.layer.0.dense.weight : tensor<5x4xf32>
    pf.param @bert.encoder.layer.0.dense.weight.kfac.B_inv : tensor<5x5xf32> = dense<0.000000e+00> : tensor<5x5xf32> {pf.kfac_weight = "bert.encoder.layer.0.dense.weight"}
    ... (.kfac.A_inv, .kfac.B, .kfac.A alike)
    func.func @main(%arg0: tensor<6x4xf32> {pf.name = "x"}, %arg1: tensor<i64> {pf.name = "step"}) -> (tensor<f32> {pf.name = "loss"}) {
      %0 = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<5x4xf32>
      pf.kfac.update_factor @bert.encoder.layer.0.dense.weight.kfac.A from %arg0 step %arg1 {decay = 5.000000e-01 : f64} : tensor<6x4xf32>, tensor<i64>
      %1 = pf.linear %arg0, %0 {transpose_weight} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
      %2 = pf.kfac.capture_output %1 into @bert.encoder.layer.0.dense.weight.kfac.B step %arg1 {decay = 5.000000e-01 : f64, scale = 3.600000e+01 : f64} : tensor<6x5xf32>, tensor<i64>
      %3 = pf.reduce_sum %2 {keepdims = false} : (tensor<6x5xf32>) -> tensor<f32>
      return %3 : tensor<f32>
    }
    ```
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
    Option<"layers", "layers", "::mlir::pf::KfacLayers",
           /*default=*/"::mlir::pf::KfacLayers::Encoder",
           "Which linear layers get factors: encoder (the encoder blocks') or "
           "encoder-and-head (also the masked-LM head's transform, found by its weight's "
           "name 'predictions.transform.dense' or as the linear feeding the decoder "
           "through GELU and LayerNorm; never the decoder) (default: encoder)",
           [{::mlir::pf::kfacLayersValues()}]>,
    Option<"layerNorm", "layer-norm", "::mlir::pf::KfacLayerNorm",
           /*default=*/"::mlir::pf::KfacLayerNorm::None",
           "LayerNorms (scale γ and shift β over the last dimension) as K-FAC layers: none, "
           "blocks (state <γ>.kfac.F [h, 3], each feature's 2x2 Fisher of (γ_j, β_j) from "
           "the per-token gradients, pf.kfac.capture_layer_norm) or diagonal ([h, 2], the "
           "blocks' diagonal) (default: none)",
           [{::mlir::pf::kfacLayerNormValues()}]>,
    Option<"embeddings", "embeddings", "::mlir::pf::KfacEmbeddings",
           /*default=*/"::mlir::pf::KfacEmbeddings::None",
           "Embedding tables as K-FAC layers: none, word (the pf.gather of the table named "
           "'*word_embeddings*', or of the tied decoder's weight) or word-and-position (also "
           "'*position_embeddings*'): state <table>.kfac.A [vocab] (the diagonal: token "
           "counts), .kfac.B [h, h] from the per-token output gradient (after a broadcast "
           "over the batch), .kfac.A_inv, .kfac.B_inv; a tied decoder's share of the "
           "gradient is preconditioned with the embedding's factors (default: none)",
           [{::mlir::pf::kfacEmbeddingsValues()}]>,
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

    ```mlir
    // Before
    pf.param @w : tensor<4xf32>
    func.func @main(%x: tensor<4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "loss"}) {
      %w = pf.param_ref @w : tensor<4xf32>
      %y = pf.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = pf.reduce_sum %y {keepdims = false} : (tensor<4xf32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    // After
    func.func @main(%arg0: tensor<4xf32> {pf.name = "x"}) -> (tensor<f32> {pf.name = "loss"}, tensor<4xf32> {pf.name = "grad/w"}) {
      ... (%0, %1, %2 as before)
      %3 = pf.constant dense<1.000000e+00> : tensor<f32>
      %4 = pf.constant dense<1> : tensor<1xi64>
      %5 = pf.reshape %3, %4 : (tensor<f32>, tensor<1xi64>) -> tensor<1xf32>
      %6 = pf.constant dense<4> : tensor<1xi64>
      %7 = pf.expand %5, %6 : (tensor<1xf32>, tensor<1xi64>) -> tensor<4xf32>
      %8 = pf.mul %7, %arg0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %2, %8 : tensor<f32>, tensor<4xf32>
    }
    ```
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

    The function gets `pf.microbatches`. With `microbatches=2` (constants
    elided):

    ```mlir
    // Before
    func.func @main(%x: tensor<2x4xf32> {pf.name = "x"}, %labels: tensor<2xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) {
      %w = pf.param_ref @w : tensor<5x4xf32>
      %y = pf.linear %x, %w {transpose_weight} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
      %loss, %grad, %count = pf.softmax_cross_entropy %y, %labels : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
      return %loss : tensor<f32>
    }
    // After
    func.func @main(%arg0: tensor<4x4xf32> {pf.name = "x"}, %arg1: tensor<4xi64> {pf.name = "labels"}) -> (tensor<f32> {pf.name = "loss"}) attributes {pf.microbatches = 2 : i64} {
      %3 = pf.slice %arg0, %2, %1, %0 {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>} : (tensor<4x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4xf32>
      ... (%7: rows 2..4 of %arg0; %11, %15: the halves of %arg1)
      %16 = pf.param_ref @w : tensor<5x4xf32>
      %17 = pf.linear %3, %16 {transpose_weight} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
      %loss, %grad_logits, %count = pf.softmax_cross_entropy %17, %11 : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
      %18 = pf.cast %count {to = f32} : (tensor<i64>) -> tensor<f32>
      %19 = pf.mul %loss, %18 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      ... (%20 to %23: the same for micro-batch 1)
      %24 = pf.add %19, %23 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %25 = pf.add %count, %count_2 : (tensor<i64>, tensor<i64>) -> tensor<i64>
      ... (%29: %25, or 1 when no token counted)
      %30 = pf.cast %29 {to = f32} : (tensor<i64>) -> tensor<f32>
      %31 = pf.div %24, %30 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      return %31 : tensor<f32>
    }
    ```
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

    ```mlir
    // Before
    func.func @main(%l: tensor<f32>, %g: tensor<4x4xf32>) -> (tensor<f32> {pf.name = "loss"}, tensor<4x4xf32> {pf.name = "grad/encoder.dense.weight"}) {
      return %l, %g : tensor<f32>, tensor<4x4xf32>
    }
    // After
    func.func @main(%arg0: tensor<f32>, %arg1: tensor<4x4xf32>) -> (tensor<f32> {pf.name = "loss"}, tensor<4x4xf32> {pf.name = "grad/encoder.dense.weight"}) {
      %0 = pf.clip_by_global_norm %arg1 {max_norm = 1.000000e+00 : f64} : tensor<4x4xf32>
      return %arg0, %0 : tensor<f32>, tensor<4x4xf32>
    }
    ```
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

    On the pf-insert-kfac example after pf-build-gradients, with the default
    options (KL-clipping on, so an `lr` argument is added; unchanged ops
    elided):

    ```mlir
    // Before
    func.func @main(%arg0: tensor<6x4xf32> {pf.name = "x"}, %arg1: tensor<i64> {pf.name = "step"}) -> (tensor<f32> {pf.name = "loss"}, tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}) {
      ...
      %9 = pf.gemm %8, %arg0 {beta = 0.000000e+00 : f32, transA} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
      return %3, %9 : tensor<f32>, tensor<5x4xf32>
    }
    // After
    func.func @main(%arg0: tensor<6x4xf32> {pf.name = "x"}, %arg1: tensor<i64> {pf.name = "step"}, %arg2: tensor<f64> {pf.name = "lr"}) -> (tensor<f32> {pf.name = "loss"}, tensor<5x4xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}, tensor<i32> {pf.name = "kfac/issues"}) {
      ...
      %9 = pf.gemm %8, %arg0 {beta = 0.000000e+00 : f32, transA} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
      %10 = pf.kfac.refresh_inverses(@bert.encoder.layer.0.dense.weight.kfac.A, @bert.encoder.layer.0.dense.weight.kfac.B) into (@bert.encoder.layer.0.dense.weight.kfac.A_inv, @bert.encoder.layer.0.dense.weight.kfac.B_inv) step %arg1 {damping = 1.000000e-05 : f64, warmup = 50 : i64} : tensor<i64> -> tensor<i32>
      %11 = pf.param_ref @bert.encoder.layer.0.dense.weight.kfac.B_inv : tensor<5x5xf32>
      %12 = pf.param_ref @bert.encoder.layer.0.dense.weight.kfac.A_inv : tensor<4x4xf32>
      %weight_update = pf.kfac.precondition %9, %12, %11 : (tensor<5x4xf32>, tensor<4x4xf32>, tensor<5x5xf32>) -> tensor<5x4xf32>
      %13 = pf.kfac.kl_clip lr %arg2 : tensor<f64> updates(%weight_update : tensor<5x4xf32>) gradients(%9 : tensor<5x4xf32>) {kappa = 1.000000e-03 : f64} -> tensor<5x4xf32>
      return %3, %13, %10 : tensor<f32>, tensor<5x4xf32>, tensor<i32>
    }
    ```
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
    Option<"graft", "graft", "::mlir::pf::KfacGraft",
           /*default=*/"::mlir::pf::KfacGraft::Auto",
           "Length of each layer's update (pf.kfac.graft): none keeps the preconditioned "
           "gradient's, gradient rescales it to the layer gradient's L2 norm (weight and bias "
           "together), auto is gradient here (pf-training resolves it: none when the K-FAC "
           "layers' optimizer is SGD) (default: auto)",
           [{::mlir::pf::kfacGraftValues()}]>,
    Option<"basis", "basis", "::mlir::pf::KfacBasis",
           /*default=*/"::mlir::pf::KfacBasis::Inverse",
           "How each layer is preconditioned: inverse (π-damped inverses of the factors, "
           "state <weight>.kfac.A_inv/.B_inv) or eigen (the factors' eigendecompositions, "
           "damping on the Kronecker product's eigenvalues, pf.kfac.precondition_eigen; "
           "state <weight>.kfac.A_vectors/.A_values/.B_vectors/.B_values, which replace "
           "pf-insert-kfac's inverses; retries do not apply) (default: inverse)",
           [{::mlir::pf::kfacBasisValues()}]>,
    Option<"dampingInput", "damping-input", "bool", /*default=*/"false",
           "Take λ from an f64 argument `kfac_damping` (added if missing) at every step "
           "instead of the `damping` option: the host's damping schedule (pf-train "
           "--kfac-damping-schedule) (default: false)">,
    Option<"curvatureInput", "curvature-input", "bool", /*default=*/"false",
           "The factor updates run only when the scalar graph input `kfac_curvature` "
           "(added if missing) is non-zero: the host's factor-update interval (pf-train "
           "--kfac-factor-every); bubbles=true implies it (default: false)">,
    Option<"refreshInput", "refresh-input", "bool", /*default=*/"false",
           "The inverse refreshes run only when the scalar graph input `kfac_refresh_due` "
           "(added if missing) is non-zero, instead of at refresh-every and refresh-warmup: "
           "the host's refresh-interval schedule (pf-train --kfac-interval-schedule); on a "
           "split module every stage<s>_kfac_precondition_<l> takes it; not with bubbles "
           "(default: false)">,
    Option<"rawGradients", "raw-gradients", "bool", /*default=*/"false",
           "Also return each K-FAC layer's gradient as autodiff made it, before clipping "
           "and preconditioning (kfac/gradient/<weight>, kfac/gradient/<bias>; LayerNorm "
           "layers' scale and shift alike): the gradient term of the host's quadratic model "
           "of the loss (pf-train --kfac-damping-schedule adaptive); not on a split module "
           "(default: false)">,
    Option<"exportFactors", "export-factors", "bool", /*default=*/"false",
           "Also return each layer's factors and inverses after the step "
           "(kfac/A/<weight>, kfac/B/..., kfac/A_inv/..., kfac/B_inv/...; with basis=eigen "
           "kfac/A_vectors/..., kfac/A_values/..., kfac/B_vectors/..., kfac/B_values/...) "
           "(default: false)">,
    Option<"bubbles", "bubbles", "bool", /*default=*/"false",
           "K-FAC work for the pipeline's bubbles (docs/pipeline-execution.md, \"K-FAC in the "
           "bubbles\"): the factor updates run when the graph input kfac_curvature is non-zero; "
           "on a split module each layer gets @stage<s>_kfac_inverse_<l> (its inverses into "
           "pending parameters) and @stage<s>_precondition only preconditions; on one function "
           "the same arithmetic: the previous window's factors are inverted at the start when "
           "the graph input kfac_refresh is non-zero, and at the end only in the first "
           "refresh-warmup steps (default: false)">,
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

    `lr` and `step` are added only when the function has no argument of that
    name (pf-insert-kfac adds `step` already). "Biases and LayerNorm
    parameters" are told by name: ending in `bias`, or containing
    `LayerNorm` or `layer_norm`.

    With the default AdamW (the printer elides the default hyperparameters):

    ```mlir
    // Before
    pf.param @"encoder.dense.weight" : tensor<4x4xf32>
    func.func @main(%l: tensor<f32>, %g: tensor<4x4xf32>) -> (tensor<f32> {pf.name = "loss"}, tensor<4x4xf32> {pf.name = "grad/encoder.dense.weight"}) {
      return %l, %g : tensor<f32>, tensor<4x4xf32>
    }
    // After
    pf.param @encoder.dense.weight : tensor<4x4xf32>
    pf.param @encoder.dense.weight.exp_avg_sq : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32>
    pf.param @encoder.dense.weight.exp_avg : tensor<4x4xf32> = dense<0.000000e+00> : tensor<4x4xf32>
    func.func @main(%arg0: tensor<f32>, %arg1: tensor<4x4xf32>, %arg2: tensor<f64> {pf.name = "lr"}, %arg3: tensor<i64> {pf.name = "step"}) -> (tensor<f32> {pf.name = "loss"}) {
      pf.adamw_update @encoder.dense.weight(@encoder.dense.weight.exp_avg, @encoder.dense.weight.exp_avg_sq) grad %arg1 lr %arg2 step %arg3 : tensor<4x4xf32>, tensor<f64>, tensor<i64>
      return %arg0 : tensor<f32>
    }
    ```
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
