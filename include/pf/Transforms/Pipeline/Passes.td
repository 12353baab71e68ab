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
  ];
}

#endif // PF_TRANSFORMS_PIPELINE_PASSES_TD
