//===- Passes.td - pf pipeline passes ------------------------*- tablegen -*-===//
//
// Pipeline phase: cuts the model into pipeline stages and plans the pipelined
// step. The `pf-pipeline` pipeline runs pf-graph-opt (with require-static;
// `graph-opt=false` skips it), then pf-partition (stages × chunks stages for
// the interleaved schedule), then pf-schedule. pf-split-stages is not part of
// it: it works on a training step (after pf-add-masked-lm-loss and
// pf-build-gradients{tag-origin=true}) and makes one forward and one backward
// function per stage, each of which runs on its own (`pf-run --entry`;
// docs/pipeline-execution.md). The pipeline builder is in
// lib/Transforms/Pipeline/Pipelines.cpp. `ninja -C build mlir-doc` renders
// this file into build/docs/passes/PFPipelinePasses.md.
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_PIPELINE_PASSES_TD
#define PF_TRANSFORMS_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PFPartition : Pass<"pf-partition", "::mlir::ModuleOp"> {
  let summary = "Cut the model into pipeline stages balanced by a cost model";
  let description = [{
    The units are the encoder blocks (found by parameter names such as
    `encoder.layer.N.`); the embeddings join the first block and the heads the
    last. A contiguous min-max dynamic program over the per-block cost (forward
    + backward) picks the cut, optionally under a memory cap. The entry
    function's body becomes a `pf.pipeline` of `pf.stage` ops; values that
    cross a cut become `pf.send` / `pf.recv` pairs. Import with the
    micro-batch size as the batch dimension: each stage body is the work of
    one micro-batch.

    Each op in a stage records its block (`pf.block`), each stage its blocks.
    Two blocks, `stages=2 microbatches=4`:

    ```mlir
    // Before
    func.func @main(%x: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
      %w0 = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
      %x1 = pf.linear %x, %w0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
      %w1 = pf.param_ref @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
      %x2 = pf.linear %x1, %w1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
      return %x2 : tensor<4x8x16xf32>
    }
    // After
    func.func @main(%arg0: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
      %0 = pf.pipeline stages(2) microbatches(4) (%arg0 : tensor<4x8x16xf32>) {
      ^bb0(%arg1: tensor<4x8x16xf32>):
        pf.stage 0 (%arg1 : tensor<4x8x16xf32>) attributes {blocks = array<i64: 0>} {
        ^bb0(%arg2: tensor<4x8x16xf32>):
          %2 = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<16x16xf32>
          %3 = pf.linear %arg2, %2 {pf.block = 0 : i64, transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
          pf.send %3 to 1 tag 0 : tensor<4x8x16xf32>
        }
        %1 = pf.stage 1  attributes {blocks = array<i64: 1>} {
          %2 = pf.recv from 0 tag 0 : tensor<4x8x16xf32>
          %3 = pf.param_ref @bert.encoder.layer.1.dense.weight : tensor<16x16xf32>
          %4 = pf.linear %2, %3 {pf.block = 1 : i64, transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
          pf.yield %4 : tensor<4x8x16xf32>
        } -> tensor<4x8x16xf32>
        pf.yield %1 : tensor<4x8x16xf32>
      } -> tensor<4x8x16xf32>
      return %0 : tensor<4x8x16xf32>
    }
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2", "Number of pipeline stages (default: 2)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step (recorded on the pf.pipeline) (default: 1)">,
    Option<"cost", "cost", "::mlir::pf::CostSource",
           /*default=*/"::mlir::pf::CostSource::Analytic",
           "Where the per-block costs come from (default: analytic)",
           [{::mlir::pf::costSourceValues()}]>,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "With cost=profile: the profile JSON (docs/profile-format.md) (default: '')">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model (p100, v100, a100, h100, h200; default: a100)">,
    Option<"memoryCapMB", "memory-cap-mb", "double", /*default=*/"0",
           "Per-stage memory cap in MB (0: none) (default: 0)">,
  ];
}

def PFSchedule : Pass<"pf-schedule", "::mlir::ModuleOp"> {
  let summary = "Schedule the pipeline step and place the K-FAC work in its bubbles";
  let description = [{
    Builds the step of the chosen pipeline schedule over the stages that
    pf-partition made, simulates it with the cost model, places the K-FAC work
    (curvature, inversion, preconditioning of every linear layer of the encoder
    blocks) by the chosen policy, and writes one `pf.program` per device with
    its ordered `pf.task` ops. Optionally writes a report (JSON), a Chrome
    trace and an SVG timeline.

    The stages stay; each gets the devices it runs on (`pf.devices`), the
    `pf.pipeline` gets its `schedule` (printed unless 1f1b, the default), the
    simulated step time, utilization, K-FAC policy and
    refresh period, and the `pf.program` of each device lists its tasks with
    their simulated start and end (ms), micro-batch, stage and step (with
    K-FAC on, the programs cover the steps of one refresh period, and the
    K-FAC tasks name their `layer`). The pf-partition example with
    `microbatches=2`, then `schedule=gpipe kfac=none`:

    ```mlir
    %0 = pf.pipeline stages(2) microbatches(2) (%arg0 : tensor<4x8x16xf32>) attributes {pf.kfac_policy = "none", pf.refresh_steps = 0 : i64, pf.step_time_ms = 0.010026256410256413 : f64, pf.utilization = 8.3800482834815693E-4 : f64, schedule = "gpipe"} {
    ^bb0(%arg1: tensor<4x8x16xf32>):
      pf.stage 0 (%arg1 : tensor<4x8x16xf32>) attributes {blocks = array<i64: 0>, pf.devices = array<i64: 0>} {
        ...
      }
      %1 = pf.stage 1  attributes {blocks = array<i64: 1>, pf.devices = array<i64: 1>} {
        ...
      } -> tensor<4x8x16xf32>
      pf.program device(0) {
        pf.task "forward" {end = 1.4003418803418803E-6 : f64, microbatch = 0 : i64, stage = 0 : i64, start = 0.000000e+00 : f64, step = 0 : i64}
        pf.task "forward" {end = 2.8006837606837607E-6 : f64, microbatch = 1 : i64, stage = 0 : i64, start = 1.4003418803418803E-6 : f64, step = 0 : i64}
        pf.task "send_recv" {end = 0.0050082270085470091 : f64, microbatch = 0 : i64, stage = 0 : i64, start = 1.4003418803418803E-6 : f64, step = 0 : i64}
        ...
        pf.task "backward" {end = 0.010026256410256413 : f64, microbatch = 1 : i64, stage = 0 : i64, start = 0.010023455726495729 : f64, step = 0 : i64}
      }
      pf.program device(1) {
        pf.task "forward" {end = 0.0050096273504273512 : f64, microbatch = 0 : i64, stage = 1 : i64, start = 0.0050082270085470091 : f64, step = 0 : i64}
        ...
      }
      pf.yield %1 : tensor<4x8x16xf32>
    } -> tensor<4x8x16xf32>
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "::pf::sched::ScheduleKind",
           /*default=*/"::pf::sched::ScheduleKind::OneFOneB",
           "Pipeline schedule (default: 1f1b)", [{::mlir::pf::scheduleKindValues()}]>,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "Micro-batches per step (0: the pf.pipeline's) (default: 0)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"2",
           "Interleaved 1F1B: model chunks per device (default: 2)">,
    Option<"kfac", "kfac", "::mlir::pf::KfacMode", /*default=*/"::mlir::pf::KfacMode::Bubbles",
           "K-FAC work (default: bubbles)", [{::mlir::pf::kfacModeValues()}]>,
    Option<"policy", "policy", "::pf::sched::Policy", /*default=*/"::pf::sched::Policy::PF",
           "K-FAC placement policy (default: pf)", [{::mlir::pf::kfacPolicyValues()}]>,
    Option<"refreshSteps", "refresh-steps", "int64_t", /*default=*/"0",
           "Steps per K-FAC refresh (0: automatic) (default: 0)">,
    Option<"cost", "cost", "::mlir::pf::CostSource",
           /*default=*/"::mlir::pf::CostSource::Analytic",
           "Where the per-block costs come from (default: analytic)",
           [{::mlir::pf::costSourceValues()}]>,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "With cost=profile: the profile JSON (docs/profile-format.md) (default: '')">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model (p100, v100, a100, h100, h200; default: a100)">,
    Option<"reportFile", "report", "std::string", /*default=*/"\"\"",
           "Write the report as JSON to this file (default: '')">,
    Option<"traceFile", "trace", "std::string", /*default=*/"\"\"",
           "Write a Chrome/Perfetto trace to this file (default: '')">,
    Option<"svgFile", "svg", "std::string", /*default=*/"\"\"",
           "Write the SVG timeline to this file (default: '')">,
    Option<"printReport", "print-report", "bool", /*default=*/"false",
           "Print the text report to stdout (default: false)">,
  ];
}

def PFSplitStages : Pass<"pf-split-stages", "::mlir::ModuleOp"> {
  let summary = "Split a one-micro-batch training step into per-stage forward and backward functions";
  let description = [{
    Input: the entry function built by pf-add-masked-lm-loss and
    `pf-build-gradients{tag-origin=true}` (loss and `grad/<param>` results,
    first order, one micro-batch). Forward ops go to stages by unit: `grain`
    picks the units (`block`: encoder blocks, the embeddings joining the
    first and the heads the last, as pf-partition; `ends`: the embeddings and
    the masked-LM head as units of their own besides the blocks; `half`:
    besides, each block cut after its first LayerNorm into its attention and
    FFN halves, and the head after its transform's LayerNorm into the
    transform and the decoder with the loss), and the units are cut into
    contiguous stages by the min-max partition of their cost per
    micro-batch (analytic on `device`: forward + backward, and with
    grain=ends|half each parameter's gradient accumulation and 1/`microbatches`
    of its update, the tied embedding's pieces summed on the decoder's stage;
    or a profile's blocks divided among their units by the analytic shares;
    `print-costs=true` prints them). Each gradient op goes to the stage of
    the forward op it differentiates
    (`pf.grad_of`), each sum of partial gradients to the earliest stage whose
    backward computes a part of it. The entry function is replaced by
    `@stage<s>_forward` and `@stage<s>_backward` for every stage s, whose
    arguments and results carry `pf.name`: graph inputs by their name,
    `act/<id>` (activations for the next stage, relayed through stages that do
    not use them), `saved/<id>` (forward values the stage's backward reads),
    `grad_act/<id>` (gradients for the previous stage), the original `loss`
    (last stage's forward) and `grad/<param>` (the backward of every stage
    that reads the parameter; a parameter read by several stages, such as the
    tied word embedding, gets a partial gradient of the same name on each,
    to be summed across stages). See docs/pipeline-execution.md.

    With `split-backward=true` each `@stage<s>_backward` is written as two
    functions: `@stage<s>_backward_input`, the backward slice of its
    `grad_act/*` results (what stage s-1 waits for), and
    `@stage<s>_backward_weight`, the rest (weight gradients, returning the
    `grad/*`). The weight half takes the `saved/*` and `grad_act/*` arguments
    it reads by their names (a host keeps them until it ran) and the values
    the input half computed for it, which the input half returns as
    `wsaved/<id>`. Stage 0 sends no gradient, so its input half is empty.

    Each stage function carries `pf.stage`, `pf.units` (grain=ends|half: the
    names of its units: `embeddings`, `block<b>`, `block<b>.attn`, `block<b>.ffn`, `head`,
    `head.transform`, `head.decoder`) and `pf.blocks` (the encoder blocks
    with a unit on it; absent on a stage of the embeddings or the head
    alone); a saved value
    that is not an op's first result is named `saved/<id>#<result>`. Two
    blocks of one linear each, after pf-add-masked-lm-loss and
    `pf-build-gradients{tag-origin=true}`, with `stages=2` (constants elided):

    ```mlir
    // Before (pf-add-masked-lm-loss's input)
    func.func @main(%x: tensor<2x5xf32> {pf.name = "x"}) -> (tensor<2x5xf32> {pf.name = "logits"}) {
      %w0 = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<5x5xf32>
      %x1 = pf.linear %x, %w0 {transpose_weight} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
      %w1 = pf.param_ref @"bert.encoder.layer.1.dense.weight" : tensor<5x5xf32>
      %x2 = pf.linear %x1, %w1 {transpose_weight} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
      return %x2 : tensor<2x5xf32>
    }
    // After
    func.func @stage0_forward(%arg0: tensor<2x5xf32> {pf.name = "x"}) -> (tensor<2x5xf32> {pf.name = "act/1"}) attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64} {
      %0 = pf.param_ref @bert.encoder.layer.0.dense.weight : tensor<5x5xf32>
      %1 = pf.linear %arg0, %0 {transpose_weight} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
      return %1 : tensor<2x5xf32>
    }
    func.func @stage0_backward(%arg0: tensor<2x5xf32> {pf.name = "x"}, %arg1: tensor<2x5xf32> {pf.name = "grad_act/8"}) -> (tensor<5x5xf32> {pf.name = "grad/bert.encoder.layer.0.dense.weight"}) attributes {pf.blocks = array<i64: 0>, pf.stage = 0 : i64} {
      %0 = pf.gemm %arg1, %arg0 {beta = 0.000000e+00 : f32, transA} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<5x5xf32>
      return %0 : tensor<5x5xf32>
    }
    func.func @stage1_forward(%arg0: tensor<2xi64> {pf.name = "labels"}, %arg1: tensor<2x5xf32> {pf.name = "act/1"}) -> (tensor<2x5xf32> {pf.name = "saved/1"}, tensor<2x5xf32> {pf.name = "saved/4#1"}, tensor<f32> {pf.name = "loss"}) attributes {pf.blocks = array<i64: 1>, pf.stage = 1 : i64} {
      %0 = pf.param_ref @bert.encoder.layer.1.dense.weight : tensor<5x5xf32>
      %1 = pf.linear %arg1, %0 {transpose_weight} : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
      %loss, %grad_logits, %count = pf.softmax_cross_entropy %1, %arg0 : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x5xf32>, tensor<i64>)
      return %arg1, %grad_logits, %loss : tensor<2x5xf32>, tensor<2x5xf32>, tensor<f32>
    }
    func.func @stage1_backward(%arg0: tensor<2x5xf32> {pf.name = "saved/1"}, %arg1: tensor<2x5xf32> {pf.name = "saved/4#1"}) -> (tensor<2x5xf32> {pf.name = "grad_act/8"}, tensor<5x5xf32> {pf.name = "grad/bert.encoder.layer.1.dense.weight"}) attributes {pf.blocks = array<i64: 1>, pf.stage = 1 : i64} {
      ...
      %1 = pf.mul %arg1, %0 : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
      %2 = pf.param_ref @bert.encoder.layer.1.dense.weight : tensor<5x5xf32>
      %3 = pf.linear %1, %2 : (tensor<2x5xf32>, tensor<5x5xf32>) -> tensor<2x5xf32>
      %4 = pf.gemm %1, %arg0 {beta = 0.000000e+00 : f32, transA} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<5x5xf32>
      return %3, %4 : tensor<2x5xf32>, tensor<5x5xf32>
    }
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Number of pipeline stages (default: 2)">,
    Option<"cost", "cost", "::mlir::pf::CostSource",
           /*default=*/"::mlir::pf::CostSource::Analytic",
           "Where the per-block costs come from (default: analytic)",
           [{::mlir::pf::costSourceValues()}]>,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "With cost=profile: the profile JSON (docs/profile-format.md)">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model (p100, v100, a100, h100, h200; default: a100)">,
    Option<"grain", "grain", "::mlir::pf::StageGrain",
           /*default=*/"::mlir::pf::StageGrain::Block",
           "Units the stages are cut from: block (encoder blocks; the embeddings join the "
           "first, the heads the last), ends (blocks, the embeddings and the masked-LM head as "
           "units of their own), half (the embeddings, each block's attention and FFN halves, "
           "the head's transform and its decoder with the loss) (default: block)",
           [{::mlir::pf::stageGrainValues()}]>,
    Option<"printCosts", "print-costs", "bool", /*default=*/"false",
           "Print each unit's modelled forward + backward time, its stage and each "
           "stage's sum (ms, one micro-batch) to stderr (default: false)">,
    Option<"splitBackward", "split-backward", "bool", /*default=*/"false",
           "Write each backward as @stage<s>_backward_input (the slice its grad_act/* "
           "results need) and @stage<s>_backward_weight (the rest: grad/*; reads the "
           "stage's saved/* and grad_act/* arguments and the input half's wsaved/* "
           "results) instead of @stage<s>_backward, for schedule=zb-h1, zb-h2, zb-v, dualpipe "
           "and dualpipev (default: false)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Calls of each stage function per step, for the K-FAC factor updates (a step "
           "with pf-insert-kfac): each becomes the update of micro-batch `microbatch` (a new "
           "i64 graph input) of that many, with its loss count the graph input `loss_count`; "
           "with grain=ends|half the cost model spreads each update over that many "
           "micro-batches (default: 1)">,
  ];
}

def PFOutlineKfacFactors : Pass<"pf-outline-kfac-factors", "::mlir::ModuleOp"> {
  let summary = "Move each K-FAC factor update out of the passes into its own function";
  let description = [{
    On a split module with K-FAC in the bubbles (pf-split-stages, then
    pf-kfac-precondition{bubbles}, which numbers the layers in its
    `stage<s>_kfac_inverse_<l>` functions): every per-call
    `pf.kfac.update_factor` of a pass function (`stage<s>_forward`,
    `_backward`, `_backward_input`, `_backward_weight`) moves into
    `@stage<s>_kfac_factor_a_<l>` (factor A of layer l) or `_b_<l>`, called
    once per micro-batch, which a schedule may place anywhere after the pass
    that produces its input (`pf.kfac_after` names that pass). The input is
    the pass function's argument of the same name when the update read one
    (e.g. a received `act/*`), otherwise a new result `kfac_in/<factor>` of
    the pass; the scalars (`step`, `microbatch`, `loss_count`,
    `kfac_curvature`) are the graph inputs of the same names.

    ```mlir
    func.func @stage0_kfac_factor_a_0(%x: tensor<4x8x16xf32> {pf.name = "kfac_in/w0.kfac.A"},
        %step: tensor<i64> {pf.name = "step"}, %m: tensor<i64> {pf.name = "microbatch"},
        %due: tensor<i64> {pf.name = "kfac_curvature"})
        attributes {pf.kfac_after = "stage0_forward", pf.stage = 0 : i64} {
      pf.kfac.update_factor @w0.kfac.A from %x step %step microbatch(%m : tensor<i64>) due(%due : tensor<i64>) ...
      return
    }
    ```

    Errors: no inverse functions (not K-FAC in the bubbles), an update of a
    factor no inverse function names, a factor updated by two passes, an
    operand that is neither the input nor a graph input of the pass.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::pf::PFDialect"];
}

def PFBuildRankPrograms : Pass<"pf-build-rank-programs", "::mlir::ModuleOp"> {
  let summary = "Write one pf.rank_program per rank from a pipeline schedule of the stage functions";
  let description = [{
    Input: the output of pf-split-stages (`@stage<s>_forward` and
    `@stage<s>_backward`, or with split-backward=true its halves
    `@stage<s>_backward_input` and `@stage<s>_backward_weight`, s = 0..D-1).
    One stage per rank: rank s runs the
    passes of stage s in the order of the schedule (pf::sched::buildPipeline),
    with a `pf.recv_act` of each `act/*` (forward) or `grad_act/*` (backward)
    argument before the call that needs it and a `pf.send_act` of each such
    result after the call that computes it (matched by `pf.name` between
    neighbouring stages; tag = index of the name * N + micro-batch), and at the
    end an `pf.all_reduce` of each `grad/<param>` that several stages return.
    When pf-add-optimizer added `@stage<s>_update` functions (a split module),
    each program ends with `pf.clip_gradients` (with `clip-norm` > 0, on every
    rank) and `pf.run_stage update @stage<s>_update`: the micro-batches'
    gradients combined, clipped and applied, i.e. a whole training step.
    The programs are then checked by verifyRankPrograms. Schedules: gpipe,
    1f1b (over split functions: backward_input and backward_weight back to
    back where the backward would run) and zb-h1, which needs the halves: its
    backward_input passes send the `grad_act/*`, rank d defers each
    backward_weight by d micro-batches; zb-h2 likewise, with more warm-up
    forwards (rank d up to 2(D-1-d)+1 micro-batches awaiting their input
    gradient) and the weight halves moved into the tail (its order built for
    uniform passes, F = B = W). interleaved runs `chunks` stages per
    rank (stage s on rank s mod D); chimera two replicas of every stage
    (ranks s and D-1-s), whose gradients (and K-FAC factors) are summed by
    `pf.all_reduce`; dualpipe likewise over the halves. zb-v and dualpipev
    run 2D stages in a V (stage s < D on rank s, the others on rank
    2D-1-s): no transfer between the two stages of a rank, and the tied
    embedding's two pieces on rank 0 summed there (the first stage's
    renamed `grad_part/<p>`, added by `@stage<2D-1>_accumulate_tied*`). With K-FAC (pf-kfac-precondition on the split module)
    the step ends with each layer's `pf.run_stage precondition` and
    `pf.kfac_kl_clip`; Chimera's replicas split the preconditioning: each
    layer on one replica, its result handed to the other by `pf.broadcast`. See docs/pipeline-execution.md
    ("The per-rank program", "Backward halves and ZB-H1", "K-FAC in the
    bubbles").

    The transfers of all ranks are placed in one global order (each right
    after the call computing its value, on both ranks), so blocking sends and
    recvs meet in the same order on both sides and cannot deadlock.
    pf-split-stages' example (two blocks of one linear each, `stages=2`)
    with `schedule=1f1b microbatches=2` adds (stage functions unchanged):

    ```mlir
    pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
      pf.run_stage forward @stage0_forward microbatch(0)
      pf.send_act "act/1" microbatch(0) to(1) tag(0) : tensor<2x5xf32>
      pf.run_stage forward @stage0_forward microbatch(1)
      pf.send_act "act/1" microbatch(1) to(1) tag(1) : tensor<2x5xf32>
      pf.recv_act "grad_act/8" microbatch(0) from(1) tag(2) : tensor<2x5xf32>
      pf.run_stage backward @stage0_backward microbatch(0)
      pf.recv_act "grad_act/8" microbatch(1) from(1) tag(3) : tensor<2x5xf32>
      pf.run_stage backward @stage0_backward microbatch(1)
    }
    pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
      pf.recv_act "act/1" microbatch(0) from(0) tag(0) : tensor<2x5xf32>
      pf.run_stage forward @stage1_forward microbatch(0)
      pf.recv_act "act/1" microbatch(1) from(0) tag(1) : tensor<2x5xf32>
      pf.run_stage backward @stage1_backward microbatch(0)
      pf.send_act "grad_act/8" microbatch(0) to(0) tag(2) : tensor<2x5xf32>
      pf.run_stage forward @stage1_forward microbatch(1)
      pf.run_stage backward @stage1_backward microbatch(1)
      pf.send_act "grad_act/8" microbatch(1) to(0) tag(3) : tensor<2x5xf32>
    }
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "::pf::sched::ScheduleKind",
           /*default=*/"::pf::sched::ScheduleKind::OneFOneB",
           "Pipeline schedule: gpipe, 1f1b, zb-h1, zb-h2, zb-v, dualpipe or dualpipev (the last "
           "five need pf-split-stages{split-backward=true}; zb-v and dualpipev 2 × ranks "
           "stages), interleaved (with chunks) or chimera (default: 1f1b)",
           [{::mlir::pf::scheduleKindValues()}]>,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"4",
           "Micro-batches per step">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"2",
           "interleaved: stages per rank (model chunks); the module's stage count must "
           "be ranks × chunks, rank r holding stages r, r + ranks, ... (default: 2)">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0",
           "Clip the step's gradients by their global norm over all ranks "
           "(pf.clip_gradients, in the module's pf.step_gradients order) before the "
           "updates; 0: no clipping (default: 0)">,
    Option<"splitPrecondition", "split-precondition", "bool", /*default=*/"true",
           "chimera with K-FAC: each layer's preconditioning (and in step mode its inverse "
           "refresh) on one replica, its result handed to the other by pf.broadcast; false: "
           "both replicas precondition every layer (default: true)">,
    Option<"tiedPerMicrobatch", "tied-per-microbatch", "bool", /*default=*/"true",
           "A gradient two stages on two ranks return (the tied embedding), with N >= 2 and "
           "not chimera or dualpipe (the V schedules hold both stages on one rank, which "
           "sums the pieces itself): the first stage's rank hands each micro-batch's piece to the last "
           "stage's rank (pf.reduce_microbatch), which accumulates the sum and broadcasts "
           "the step's gradient back; false: both keep every piece to the step's end, "
           "summed then (default: true)">,
    Option<"deterministic", "deterministic", "bool", /*default=*/"false",
           "A gradient two ranks return pieces of (chimera's and dualpipe's replicas, a "
           "tied embedding without pf.reduce_microbatch) is summed at the step's end bit "
           "for bit as one process sums it: each micro-batch's sum goes to the higher "
           "member (pf.reduce_microbatch of the other's rows, or its piece by "
           "pf.send_act), which weights them in micro-batch order by accumulate calls and "
           "broadcasts the result; false: each member's weighted partial sum, added by the "
           "communication library's all-reduce (pf.all_reduce order(library): one "
           "gradient's bytes, the association the library's) (default: false)">,
    Option<"gradientResults", "gradient-results", "bool", /*default=*/"true",
           "Hand each gradient of the step, as the update takes it (summed, clipped, "
           "preconditioned), to the host by pf.step_result: what pf-run --run-ranks writes; "
           "false: only the loss leaves the program (pf-train) (default: true)">,
  ];
}

def PFKfacWindowPrograms : Pass<"pf-kfac-window-programs", "::mlir::ModuleOp"> {
  let summary = "Add the rank programs of a K-FAC refresh window, the K-FAC work placed into the bubbles";
  let description = [{
    Input: rank programs built with K-FAC in the bubbles
    (`pf-pipelined-training="... kfac=true kfac-work=bubbles"`: each warm-up
    program inverts at its step end). For every rank `r` and window step
    `k < steps` adds `@rank<r>_window<k>`: the same passes, transfers and step
    end, the promotion of the pending inverses at the start of window step 0,
    the factor calls only in window step 0, and each inverse call in the
    window step and at the place the placement gives (docs/pipeline-execution.md,
    "K-FAC in the bubbles"). pf-train computes the placement from the
    measured warm-up step; this pass takes it as `placement`, 4 numbers per
    row (the table of a checkpoint's `meta/kfac_placement`):
    `rank, layer, window step, passes before it` for an inverse call, or for
    a factor call of window step 0 `rank, layer, -(1 + 2·micro-batch + isB),
    passes before it`. A call goes right before the rank's pass after that
    many of its passes; with every pass done, into the rank's tail bubble:
    before the first collective after its last pass (an inverse after the
    sums of the factors it reads), not behind the gradient all-reduce, which
    waits for the other ranks. The result is checked by verifyRankPrograms.

    ```mlir
    // pf-kfac-window-programs="steps=1 placement=1,2,0,2,1,2,-2,2"
    pf.rank_program @rank1_window0 rank(1) ranks(2) stages([1]) microbatches(2) window_step(0) window_steps(1) {
      pf.kfac_promote_inverses
      ...
      pf.run_stage backward @stage1_backward microbatch(1)
      pf.send_act "grad_act/21" microbatch(1) to(0) tag(5) : tensor<4x8x16xf32>
      pf.run_stage kfac_factor_b @stage1_kfac_factor_b_2 microbatch(0) layer(2)
      pf.run_stage kfac_factor_b @stage1_kfac_factor_b_2 microbatch(1) layer(2)
      pf.run_stage kfac_inverse @stage1_kfac_inverse_2 layer(2)
      pf.all_reduce "grad/bert.embeddings.word_embeddings.weight" ranks([0, 1]) : tensor<100x16xf32>
      pf.clip_gradients ...
    }
    ```
  }];
  let options = [
    Option<"steps", "steps", "int64_t", /*default=*/"1",
           "Steps per refresh window K (window programs per rank; default: 1)">,
    ListOption<"placement", "placement", "int64_t",
               "The placement table, 4 numbers per row: rank, layer, window step (or "
               "-(1 + 2*micro-batch + isB) for a factor call of window step 0), passes "
               "before it; every inverse call needs a row">,
  ];
}

def PFVerifyRankPrograms : Pass<"pf-verify-rank-programs", "::mlir::ModuleOp"> {
  let summary = "Check a module's pf.rank_program ops together (matching, order, deadlock)";
  let description = [{
    Runs verifyRankPrograms (include/pf/Dialect/PF/IR/PFRankProgram.h): one
    program per rank, every send matched by one recv of the same peers, tag,
    type and value, each micro-batch's forward and backward once per stage and
    in that order, act/grad_act inputs received before use, and no deadlock
    when send and recv block until both ranks meet. Changes nothing. For
    example, two ranks that each receive before they send are rejected:

    ```mlir
    // error: rank 0, op 2: deadlock: no rank can progress (...); blocked:
    //   rank 0 at op 2 (recv of 'grad_act/3' (micro-batch 0) from rank 1, tag 1),
    //   rank 1 at op 2 (recv of 'grad_act/2' (micro-batch 0) from rank 0, tag 0)
    pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
      pf.run_stage forward @stage0_forward microbatch(0)
      pf.run_stage backward @stage0_backward microbatch(0)
      pf.recv_act "grad_act/3" microbatch(0) from(1) tag(1) : tensor<4xf32>
      pf.send_act "grad_act/2" microbatch(0) to(1) tag(0) : tensor<4xf32>
    }
    pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
      pf.run_stage forward @stage1_forward microbatch(0)
      pf.run_stage backward @stage1_backward microbatch(0)
      pf.recv_act "grad_act/2" microbatch(0) from(0) tag(0) : tensor<4xf32>
      pf.send_act "grad_act/3" microbatch(0) to(0) tag(1) : tensor<4xf32>
    }
    ```
  }];
}

#endif // PF_TRANSFORMS_PIPELINE_PASSES_TD
