//===- Passes.td - pf graph passes ------------------------*- tablegen -*-===//
//
// Graph phase: the ONNX Runtime-style clean-up of an imported forward graph,
// before anything training-specific. The `pf-graph-opt` pipeline, which the
// importer runs by default, runs them in this order: pf-untie-initializers
// (before shape folding, which would fold away the Identity ops that carry the
// de-duplicated names), pf-infer-shapes, canonicalize, pf-fuse-layer-norm,
// pf-fuse-gelu, pf-fuse-linear (the three fusions with `fuse=true`, the
// default), canonicalize, cse, pf-dce. pf-print-summary is not part of it.
// The pipeline builder is in lib/Transforms/Graph/Pipelines.cpp. `ninja -C build
// mlir-doc` renders this file into build/docs/passes/PFGraphPasses.md.
//
//===----------------------------------------------------------------------===//
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

    Example: the Shape of a static tensor folds to a constant, the Reshape to
    that same shape folds away, and the result types and the signature become
    static:

    ```mlir
    // Before
    func.func @main(%x: tensor<2x8xf32>) -> tensor<*xf32> {
      %s = pf.shape %x : (tensor<2x8xf32>) -> tensor<2xi64>
      %r = pf.reshape %x, %s : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
      %e = pf.exp %r : (tensor<?x?xf32>) -> tensor<*xf32>
      return %e : tensor<*xf32>
    }
    // After
    func.func @main(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32> {
      %0 = pf.exp %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    ```
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

    The new parameter follows its source among the `pf.param` ops; a name
    already taken gets a unique suffix. An identity without `pf.name`, or of
    a value that is not a parameter, is left alone; the source's read stays
    (pf-dce removes it when unused).

    ```mlir
    // Before
    pf.param @a : tensor<2xf32> = dense<[1.0, 2.0]> : tensor<2xf32>
    func.func @main() -> (tensor<2xf32>, tensor<2xf32>) {
      %a = pf.param_ref @a : tensor<2xf32>
      %c = pf.identity %a {pf.name = "a.copy"} : (tensor<2xf32>) -> tensor<2xf32>
      return %a, %c : tensor<2xf32>, tensor<2xf32>
    }
    // After
    pf.param @a : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
    pf.param @a.copy : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
    func.func @main() -> (tensor<2xf32>, tensor<2xf32>) {
      %0 = pf.param_ref @a : tensor<2xf32>
      %1 = pf.param_ref @a.copy : tensor<2xf32>
      return %0, %1 : tensor<2xf32>, tensor<2xf32>
    }
    ```
  }];
}

def PFFuseLayerNorm : Pass<"pf-fuse-layer-norm"> {
  let summary = "Fuse decomposed LayerNorm and ONNX LayerNormalization into pf.layer_norm";
  let description = [{
    Matches ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add), the form the
    PyTorch exporter emits, and `pf.layer_normalization` whose statistics
    outputs are unused.

    Without the scale and bias, the fused op gets a ones scale; the variance
    may also be `pf.mul %d, %d`.

    ```mlir
    // Before
    %m = pf.reduce_mean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %d = pf.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %two = pf.constant dense<2.0> : tensor<f32>
    %p = pf.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %v = pf.reduce_mean %p {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %eps = pf.constant dense<1.0e-12> : tensor<f32>
    %a = pf.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    %s = pf.sqrt %a : (tensor<2x1xf32>) -> tensor<2x1xf32>
    %n = pf.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %w = pf.param_ref @w : tensor<8xf32>
    %y = pf.mul %n, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %b = pf.param_ref @b : tensor<8xf32>
    %z = pf.add %y, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    // After
    %0 = pf.param_ref @w : tensor<8xf32>
    %1 = pf.param_ref @b : tensor<8xf32>
    %2 = pf.layer_norm %arg0, %0, %1 {axis = 1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    ```
  }];
}

def PFFuseGelu : Pass<"pf-fuse-gelu"> {
  let summary = "Fuse GELU (erf and tanh forms) into pf.gelu";
  let description = [{
    Matches x·(1 + erf(x/√2))·0.5 (BERT's exact GELU; erf of x·(1/√2)
    too, with the factors in any order and association) and the tanh
    approximation, with the constants compared within `tolerance`.

    ```mlir
    // Before
    %sqrt2 = pf.constant dense<1.4142135> : tensor<f32>
    %q = pf.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e = pf.erf %q : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %one = pf.constant dense<1.0> : tensor<f32>
    %a = pf.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %m = pf.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %half = pf.constant dense<0.5> : tensor<f32>
    %y = pf.mul %m, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    // After
    %0 = pf.gelu %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
    ```
  }];
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

    The Hugging Face layout, bias first in the Add as PyTorch exports it:

    ```mlir
    // Before
    %w = pf.param_ref @w : tensor<16x8xf32>
    %t = pf.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %m = pf.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %b = pf.param_ref @b : tensor<16xf32>
    %y = pf.add %b, %m : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    // After
    %0 = pf.param_ref @w : tensor<16x8xf32>
    %1 = pf.param_ref @b : tensor<16xf32>
    %2 = pf.linear %arg0, %0, %1 {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
  }];
}

def PFRetieWeights : Pass<"pf-retie-weights", "::mlir::ModuleOp"> {
  let summary = "Tie folded transposed copies of a parameter back to it";
  let description = [{
    PyTorch's TorchScript exporter folds `Transpose(word_embeddings)` of a
    tied decoder into a separate, anonymous `[hidden, vocab]` initializer
    (`onnx::MatMul_N`): trained as it comes, the tie is lost and the
    embedding's gradient misses the decoder's share. A parameter with an
    exporter-generated name (see `isExporterGeneratedName`) whose data equals
    the transpose of another 2-D parameter's, element for element, is read
    as `pf.transpose` of that parameter instead and removed; a remark names
    both. Data that is one repeated value (zeros) is no evidence of a tie and
    is left alone, as are parameters without data (`--no-weights`).

    ```mlir
    // Before (@"onnx::MatMul_9" holds the transpose of @emb)
    %w = pf.param_ref @"onnx::MatMul_9" : tensor<8x50xf32>
    // After
    %0 = pf.param_ref @emb : tensor<50x8xf32>
    %w = pf.transpose %0 {perm = array<i64: 1, 0>} : (tensor<50x8xf32>) -> tensor<8x50xf32>
    ```
  }];
}

def PFNameWeights : Pass<"pf-name-weights", "::mlir::ModuleOp"> {
  let summary = "Name exporter-named linear weights after their layer's bias";
  let description = [{
    PyTorch's exporter folds each linear weight into an initializer with a
    generated name (`onnx::MatMul_311`); the bias keeps its module path. A
    `pf.linear` whose weight has a generated name and whose bias is named
    `<layer>.bias` gets its weight renamed `<layer>.weight`, so gradients,
    K-FAC state, checkpoints and summaries carry a name the user knows and
    the encoder block can be read from it. The initializer's name stays in
    `pf.onnx_name`. A weight shared by layers with different biases, or a
    name already taken, is left alone.
  }];
}

def PFCheckSharedBiases : Pass<"pf-check-shared-biases", "::mlir::ModuleOp"> {
  let summary = "Warn about a bias shared by linear layers with different weights";
  let description = [{
    A parameter that is the bias of several `pf.linear`s whose weights
    differ trains as one parameter. Models do not share biases without
    their weights (ALBERT shares whole layers, weight and bias), but an
    exporter that stores equal initializers once does:
    `torch.onnx.export(dynamo=True)` with its default `optimize=True`, on a
    model whose biases are still all zero, points every layer at one
    initializer without an `Identity`. Nothing in the graph tells such a
    merge from a real tie, so the pass warns, naming the parameter and its
    layers, and compiles the model as it is.
  }];
}

def PFFindEncoderBlocks : Pass<"pf-find-encoder-blocks", "::mlir::ModuleOp"> {
  let summary = "Find the encoder blocks from the graph's structure when names do not say";
  let description = [{
    K-FAC and partitioning work per encoder block, which parameter names
    normally give (`encoder.layer.N.`, `h.N.`, see `encoderBlockOfName`).
    When no parameter read by the entry function has such a name, this pass
    finds the blocks from the graph: the ops between two `pf.layer_norm`s
    form a segment; a segment with a softmax and no GELU (attention) followed
    by one with a GELU and no softmax (feed-forward), each ended by a
    LayerNorm of a residual add, is one block of a post-LN encoder (BERT).
    Blocks are numbered in program order; every parameter read in a block
    (its linears' weights and biases, its LayerNorms' scale and shift) gets
    `pf.encoder_block`, and a remark says how many blocks were found. A
    parameter read in two blocks is left unmarked. With names that give
    blocks, only the exporter-named parameters read in one block
    (`onnx::MatMul_N`: the folded weight of a linear without a bias, which
    pf-name-weights cannot name after its bias) get its `pf.encoder_block`,
    and only when every block found reads the named parameters of one named
    block, in order (a remark counts them). Without such a pattern the
    module is unchanged.
  }];
}

def PFDeadCodeElimination : Pass<"pf-dce", "::mlir::ModuleOp"> {
  let summary = "Remove dead ops and parameters nothing reads";
  let description = [{
    Runs MLIR's region DCE on every function (ops with side effects, such as
    the in-place optimizer updates, stay), then erases every `pf.param` that
    no symbol use names any more.

    ```mlir
    // Before
    pf.param @used : tensor<4xf32>
    pf.param @unread : tensor<4xf32>
    pf.param @read_by_dead_op : tensor<4xf32>
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %w = pf.param_ref @used : tensor<4xf32>
      %d = pf.param_ref @read_by_dead_op : tensor<4xf32>
      %dead = pf.exp %d : (tensor<4xf32>) -> tensor<4xf32>
      %y = pf.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }
    // After
    pf.param @used : tensor<4xf32>
    func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = pf.param_ref @used : tensor<4xf32>
      %1 = pf.add %arg0, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %1 : tensor<4xf32>
    }
    ```
  }];
}

def PFPrintSummary : Pass<"pf-print-summary", "::mlir::ModuleOp"> {
  let summary = "Print a readable summary of a pf module (ops, parameters, blocks)";
  let description = [{
    Prints to stdout and leaves the module unchanged: the entry function's
    inputs and outputs, the parameter count and size, the forward FLOP, the
    op counts and the linear/LayerNorm/GELU ops per encoder block (JSON with
    `json=true`). For the input of the pf-fuse-linear example:

    ```
    pf module summary
      entry @main
        input  arg0: tensor<4x8xf32>
        output result0: tensor<4x16xf32>
      parameters: 2 (144 elements, 0.0 MB, shapes only)
      forward: 0.00 GFLOP
      ops:
        pf.add                            1
        pf.matmul                         1
        pf.param_ref                      2
        pf.transpose                      1
      encoder blocks: 0
      pf.linear outside encoder blocks: 0
    ```
  }];
  let options = [
    Option<"json", "json", "bool", /*default=*/"false", "Print JSON instead of text">,
  ];
}

//===----------------------------------------------------------------------===//
// Fusions for inference (pf-inference-fusions). Their ops have no gradient:
// the training step is built from the graph before them.
//===----------------------------------------------------------------------===//

def PFFuseAttentionSoftmax : Pass<"pf-fuse-attention-softmax"> {
  let summary = "Fold attention's scaling and additive mask into its softmax";
  let description = [{
    softmax(x / c + mask) or softmax(x · c + mask) over the last axis, with c
    a splat constant and the mask broadcasting to x (BERT's [B, 1, 1, S]
    against [B, H, S, S]), becomes one pf.scaled_masked_softmax (scale 1/c
    or c); either part alone fuses too. The scaled and the masked scores
    must have no other user.

    ```mlir
    // Before
    %c = pf.constant dense<8.0> : tensor<f32>
    %d = pf.div %x, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
    %a = pf.add %d, %mask : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
    %p = pf.softmax %a {axis = -1 : i64} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    // After
    %p = pf.scaled_masked_softmax %x, %mask {scale = 1.250000e-01 : f64}
        : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
}

def PFFoldMatmulTransposes : Pass<"pf-fold-matmul-transposes"> {
  let summary = "Read the transposes around batched matmuls as strides";
  let description = [{
    A pf.matmul of two operands of one rank >= 3 whose operands come from
    pf.transpose, or whose only user is one, becomes a pf.permuted_matmul
    that carries the permutations: the runtime passes leading dimensions to
    its GEMMs and no transpose is copied. A permutation is taken only when
    each matrix keeps a unit-stride dimension (the runtime's requirement);
    an operand's transpose stays when it has other users.

    ```mlir
    // Before: attention's head split, [B,S,H,D] read as [B,H,S,D] and [B,H,D,S]
    %qt = pf.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
    %kt = pf.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x8x16xf32>
    %s = pf.matmul %qt, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
    // After
    %s = pf.permuted_matmul %q, %k {lhs_perm = array<i64: 0, 2, 1, 3>, rhs_perm = array<i64: 0, 2, 3, 1>}
        : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
}

def PFFuseAddLayerNorm : Pass<"pf-fuse-add-layer-norm"> {
  let summary = "Fuse a residual add into the LayerNorm after it";
  let description = [{
    pf.layer_norm(pf.add(x, r)) with x and r of the result's shape and the
    sum used only by the LayerNorm becomes pf.add_layer_norm(x, r).

    ```mlir
    // Before
    %s = pf.add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = pf.layer_norm %s, %g, %b {axis = -1 : i64, epsilon = 9.99999996E-13 : f32}
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    // After
    %y = pf.add_layer_norm %x, %r, %g, %b {axis = -1 : i64, epsilon = 9.99999996E-13 : f32}
        : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
}

def PFFuseLinearGelu : Pass<"pf-fuse-linear-gelu"> {
  let summary = "Fuse a linear layer and the GELU after it";
  let description = [{
    pf.gelu(pf.linear(x, W, b)) with the product used only by the GELU
    becomes pf.linear_gelu: the bias and the GELU in one pass over the
    product (BERT's intermediate dense layers).

    ```mlir
    // Before
    %h = pf.linear %x, %w, %b {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %y = pf.gelu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
    // After
    %y = pf.linear_gelu %x, %w, %b {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
  }];
}

#endif // PF_TRANSFORMS_GRAPH_PASSES_TD
