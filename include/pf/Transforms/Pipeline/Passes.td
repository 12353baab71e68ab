//===- Passes.td - pf pipeline passes ------------------------*- tablegen -*-===//
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
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2", "Number of pipeline stages">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step (recorded on the pf.pipeline)">,
    Option<"cost", "cost", "std::string", /*default=*/"\"analytic\"",
           "'analytic' or the path of a profile JSON (docs/profile-format.md)">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model (p100, v100, a100, h100, h200)">,
    Option<"memoryCapMB", "memory-cap-mb", "double", /*default=*/"0",
           "Per-stage memory cap in MB (0: none)">,
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
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved, chimera or zb-h1">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "Micro-batches per step (0: the pf.pipeline's)">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"2",
           "Interleaved 1F1B: model chunks per device">,
    Option<"kfac", "kfac", "std::string", /*default=*/"\"bubbles\"",
           "'bubbles' (K-FAC work placed by the policy) or 'none'">,
    Option<"policy", "policy", "std::string", /*default=*/"\"pf\"",
           "K-FAC placement: pf (ours) or pipefisher (the reference greedy)">,
    Option<"refreshSteps", "refresh-steps", "int64_t", /*default=*/"0",
           "Steps per K-FAC refresh (0: automatic)">,
    Option<"cost", "cost", "std::string", /*default=*/"\"analytic\"",
           "'analytic' or the path of a profile JSON">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model">,
    Option<"reportFile", "report", "std::string", /*default=*/"\"\"",
           "Write the report as JSON to this file">,
    Option<"traceFile", "trace", "std::string", /*default=*/"\"\"",
           "Write a Chrome/Perfetto trace to this file">,
    Option<"svgFile", "svg", "std::string", /*default=*/"\"\"",
           "Write the SVG timeline to this file">,
    Option<"printReport", "print-report", "bool", /*default=*/"false",
           "Print the text report to stdout">,
  ];
}

def PFSplitStages : Pass<"pf-split-stages", "::mlir::ModuleOp"> {
  let summary = "Split a one-micro-batch training step into per-stage forward and backward functions";
  let description = [{
    Input: the entry function built by pf-add-masked-lm-loss and
    `pf-build-gradients{tag-origin=true}` (loss and `grad/<param>` results,
    first order, one micro-batch). Forward ops go to stages by encoder block
    (the contiguous min-max cut of pf-partition over the cost model); each
    gradient op goes to the stage of the forward op it differentiates
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
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2", "Number of pipeline stages">,
    Option<"cost", "cost", "std::string", /*default=*/"\"analytic\"",
           "'analytic' or the path of a profile JSON (docs/profile-format.md)">,
    Option<"device", "device", "std::string", /*default=*/"\"a100\"",
           "Device of the analytic cost model (p100, v100, a100, h100, h200)">,
  ];
}

def PFBuildRankPrograms : Pass<"pf-build-rank-programs", "::mlir::ModuleOp"> {
  let summary = "Write one pf.rank_program per rank from a pipeline schedule of the stage functions";
  let description = [{
    Input: the output of pf-split-stages (`@stage<s>_forward` and
    `@stage<s>_backward`, s = 0..D-1). One stage per rank: rank s runs the
    passes of stage s in the order of the schedule (pf::sched::buildPipeline),
    with a `pf.recv_act` of each `act/*` (forward) or `grad_act/*` (backward)
    argument before the call that needs it and a `pf.send_act` of each such
    result after the call that computes it (matched by `pf.name` between
    neighbouring stages; tag = index of the name * N + micro-batch), and at the
    end an `pf.all_reduce` of each `grad/<param>` that several stages return.
    The programs are then checked by verifyRankPrograms. Only gpipe and 1f1b
    for now: the other schedules need stage functions that do not exist yet.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe or 1f1b (zb-h1, interleaved and chimera are rejected for now)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"4",
           "Micro-batches per step">,
  ];
}

def PFVerifyRankPrograms : Pass<"pf-verify-rank-programs", "::mlir::ModuleOp"> {
  let summary = "Check a module's pf.rank_program ops together (matching, order, deadlock)";
  let description = [{
    Runs verifyRankPrograms (include/pf/Dialect/PF/IR/PFRankProgram.h): one
    program per rank, every send matched by one recv of the same peers, tag,
    type and value, each micro-batch's forward and backward once per stage and
    in that order, act/grad_act inputs received before use, and no deadlock
    when send and recv block until both ranks meet. Changes nothing.
  }];
}

#endif // PF_TRANSFORMS_PIPELINE_PASSES_TD
