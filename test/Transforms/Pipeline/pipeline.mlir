// RUN: pf-opt %s -split-input-file --pf-pipeline="stages=3 microbatches=4 schedule=gpipe kfac=none cost=profile profile=%S/Inputs/uniform-3-layers.json print-report=true" | FileCheck %s
// RUN: pf-opt %s -split-input-file --pf-pipeline="stages=3 microbatches=4 schedule=1f1b kfac=bubbles policy=pf cost=profile profile=%S/Inputs/uniform-3-layers.json print-report=true" | FileCheck %s --check-prefix=KFAC
// The whole flow on the toy encoder of partition.mlir: graph passes,
// partition, schedule. From ONNX: pipeline.test.

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
pf.param @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
pf.param @"cls.predictions.bias" : tensor<100xf32>

func.func @main(%ids: tensor<4x8xi64>) -> tensor<4x8x100xf32> {
  %emb = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<100x16xf32>
  %x0 = pf.gather %emb, %ids : (tensor<100x16xf32>, tensor<4x8xi64>) -> tensor<4x8x16xf32>
  %w0 = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<16x16xf32>
  %x1 = pf.linear %x0, %w0 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %w1 = pf.param_ref @"bert.encoder.layer.1.dense.weight" : tensor<16x16xf32>
  %x2 = pf.linear %x1, %w1 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %w2 = pf.param_ref @"bert.encoder.layer.2.dense.weight" : tensor<16x16xf32>
  %x3 = pf.linear %x2, %w2 {transpose_weight} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %r = pf.add %x3, %x1 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %bias = pf.param_ref @"cls.predictions.bias" : tensor<100xf32>
  %logits = pf.linear %r, %emb, %bias {transpose_weight} : (tensor<4x8x16xf32>, tensor<100x16xf32>, tensor<100xf32>) -> tensor<4x8x100xf32>
  return %logits : tensor<4x8x100xf32>
}

// Uniform blocks (forward 1 ms, backward 2 ms): three stages of one block;
// (m+p-1)(F+B) = 6 x 3 = 18 ms per step, 12 ms busy per device, bubble share
// (p-1)/(m+p-1) = 1/3.
// CHECK: schedule gpipe, 3 devices, 3 stages, 4 micro-batches, 3 layers, policy none
// CHECK-NEXT: cost model: uniform 3 layers
// CHECK-NEXT: layers per stage: 1 1 1
// CHECK: step time (ms) 18.00 18.00
// CHECK-NEXT: utilization 66.67% 66.67%
// CHECK-NEXT: bubble fraction 33.33%
// CHECK: device pipeline/step K-FAC/window outside util w/o util with
// CHECK-NEXT: 0 12.00 0.00 0.00 66.67% 66.67%
// CHECK-NEXT: 1 12.00 0.00 0.00 66.67% 66.67%
// CHECK-NEXT: 2 12.00 0.00 0.00 66.67% 66.67%
// CHECK-LABEL: func.func @main(
// CHECK: pf.pipeline stages(3) microbatches(4) {{.*}}pf.step_time_ms = 1.800000e+01 : f64{{.*}}schedule = "gpipe"
// CHECK-COUNT-3: pf.program device

// With K-FAC: per device and refresh, curvature 4 x 1 ms and inversion 2 ms
// fill the 6 ms of bubbles (capacity bound 1.0): with the 5% margin K = 2;
// 0.5 ms of preconditioning after the flush: 18.5 ms per step, and
// (2 x 12 + 4 + 2 + 2 x 0.5) / (2 x 18.5) = 83.78% of the window is work.
// KFAC: schedule 1f1b, 3 devices, 3 stages, 4 micro-batches, 3 layers, policy pf
// KFAC: step time (ms) 18.00 18.50
// KFAC-NEXT: utilization 66.67% 83.78%
// KFAC-NEXT: bubble fraction 33.33%
// KFAC-NEXT: refresh interval K - 2 (capacity bound 1.00)
// KFAC-NEXT: overhead per step (ms) 0.50 (2.78%)
// KFAC: device pipeline/step K-FAC/window outside util w/o util with
// KFAC-NEXT: 0 12.00 7.00 1.00 66.67% 83.78%
// KFAC-LABEL: func.func @main(
// KFAC: pf.task "curvature_a"
