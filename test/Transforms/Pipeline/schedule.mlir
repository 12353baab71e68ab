// RUN: pf-opt %s -split-input-file --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=gpipe report=%t.json" | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: %python %pf_src/test/Inputs/check_report.py %t.json --expect schedule=gpipe --expect devices=2 --expect microbatches=4
// RUN: pf-opt %s -split-input-file --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=1f1b kfac=none" | FileCheck %s --check-prefix=NOKFAC
// RUN: pf-opt %s -split-input-file --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=chimera policy=pipefisher svg=%t.svg trace=%t.trace.json" | FileCheck %s --check-prefix=CHIMERA
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// RUN: FileCheck %s --check-prefix=TRACE < %t.trace.json
// With uniform per-block costs (forward 1 ms, backward 2 ms, no p2p) the
// figures follow from the formulas: GPipe and 1F1B over p = 3 stages and
// m = 4 micro-batches take (m+p-1)(F+B) = 18 ms, each device is busy
// m(F+B) = 12 ms, the bubble share is (p-1)/(m+p-1) = 1/3.
// RUN: pf-opt %s -split-input-file --pf-partition="stages=3 microbatches=4 cost=profile profile=%S/Inputs/uniform-3-layers.json" --pf-schedule="schedule=gpipe kfac=none cost=profile profile=%S/Inputs/uniform-3-layers.json report=%t.gpipe.json trace=%t.gpipe.trace.json svg=%t.gpipe.svg" | FileCheck %s --check-prefix=GPIPE
// RUN: FileCheck %s --check-prefix=GPIPE-REPORT < %t.gpipe.json
// RUN: %python %pf_src/test/Inputs/check_report.py %t.gpipe.json --expect pipeline_step_ms=6*3 --expect bubble_fraction=2/6
// RUN: FileCheck %s --check-prefix=GPIPE-TRACE < %t.gpipe.trace.json
// RUN: FileCheck %s --check-prefix=GPIPE-SVG < %t.gpipe.svg
// RUN: pf-opt %s -split-input-file --pf-partition="stages=3 microbatches=4 cost=profile profile=%S/Inputs/uniform-3-layers.json" --pf-schedule="schedule=1f1b policy=pf cost=profile profile=%S/Inputs/uniform-3-layers.json report=%t.1f1b.json" | FileCheck %s --check-prefix=ONEF
// RUN: FileCheck %s --check-prefix=ONEF-REPORT < %t.1f1b.json
// RUN: %python %pf_src/test/Inputs/check_report.py %t.1f1b.json --expect step_time_ms=18.5 --expect utilization.with_kfac=31/37 --expect kfac_work_ms=3*7
// Errors: schedule-errors.mlir.

// A toy encoder (as in partition.mlir): embeddings, three blocks of one
// linear each, a head.

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

// Every device gets a program; forward passes of all 4 micro-batches run on
// device 0 before its backward passes (GPipe), and K-FAC curvature is placed.
// CHECK-LABEL: func.func @main(
// CHECK: pf.pipeline stages(2) microbatches(4) {{.*}}attributes {pf.kfac_policy = "pf", pf.refresh_steps = {{[1-9][0-9]*}} : i64, pf.step_time_ms = {{.*}}, pf.utilization = {{.*}}, schedule = "gpipe"}
// CHECK: pf.program device(0) {
// CHECK-COUNT-4: pf.task "forward" {{.*}}stage = 0
// CHECK: pf.task "backward"
// CHECK: pf.program device(1) {
// CHECK-DAG: pf.task "curvature_a"
// CHECK-DAG: pf.task "curvature_b"
// CHECK-DAG: pf.task "inversion_a"
// CHECK-DAG: pf.task "inversion_b"
// CHECK-DAG: pf.task "precondition"

// The report describes this configuration: two devices, blocks 2 + 1, K-FAC
// placed by pf (the analytic costs' figures: GPIPE-REPORT below).
// REPORT: "devices": 2,
// REPORT: "layers": 3,
// REPORT-NEXT: "layers_per_stage": [
// REPORT-NEXT: 2,
// REPORT-NEXT: 1
// REPORT-NEXT: ],
// REPORT-NEXT: "memory": {
// REPORT: "modelled": false,
// REPORT: "microbatches": 4,
// REPORT: "per_device": [
// REPORT-NEXT: {
// REPORT-NEXT: "device": 0,
// REPORT: "device": 1,
// REPORT: "policy": "pf",
// REPORT: "schedule": "gpipe",
// REPORT-NEXT: "scheduler_seconds":
// REPORT-NEXT: "stages": 2,

// NOKFAC-LABEL: func.func @main(
// NOKFAC: pf.program device(0)
// NOKFAC-NOT: curvature
// NOKFAC-NOT: inversion

// CHIMERA-LABEL: func.func @main(
// CHIMERA: pf.kfac_policy = "pipefisher"{{.*}}schedule = "chimera"
// Chimera: each stage has a replica on the mirrored device.
// CHIMERA: pf.stage 0 {{.*}}pf.devices = array<i64: 0, 1>
// CHIMERA: pf.stage 1 {{.*}}pf.devices = array<i64: 1, 0>
// CHIMERA: pf.program device(0)
// CHIMERA: pf.program device(1)

// SVG: <svg xmlns="http://www.w3.org/2000/svg"
// SVG: chimera, D=2, N=4, policy pipefisher: K={{[1-9][0-9]*}}, step
// SVG-DAG: >GPU 0<
// SVG-DAG: >GPU 1<
// SVG-NOT: >GPU 2<
// SVG: </svg>
// TRACE: {"displayTimeUnit":"ms","otherData":{"schedule":"chimera","policy":"pipefisher","refresh_steps":{{[1-9][0-9]*}},
// TRACE-NEXT: "traceEvents":[
// TRACE-DAG: "cat":"curvature-A","ph":"X"
// TRACE-DAG: "cat":"inversion-B","ph":"X"
// TRACE-DAG: "cat":"precondition","ph":"X"

// GPipe: device d runs the forward of micro-batch i at (d+i)F, the last
// device starts the backwards at (m+p-1)F = 6 ms, device d the backward of
// micro-batch i at 6 + (p-1-d)B + iB.
// GPIPE-LABEL: func.func @main(
// GPIPE: pf.pipeline stages(3) microbatches(4) {{.*}}attributes {pf.kfac_policy = "none", pf.refresh_steps = 0 : i64, pf.step_time_ms = 1.800000e+01 : f64, pf.utilization = 0.66666666666666{{[0-9]*}} : f64, schedule = "gpipe"}
// GPIPE: pf.program device(0) {
// GPIPE-NEXT: pf.task "forward" {end = 1.000000e+00 : f64, microbatch = 0 : i64, stage = 0 : i64, start = 0.000000e+00 : f64, step = 0 : i64}
// GPIPE-COUNT-3: pf.task "forward"
// GPIPE-NEXT: pf.task "backward" {end = 1.200000e+01 : f64, microbatch = 0 : i64, stage = 0 : i64, start = 1.000000e+01 : f64, step = 0 : i64}
// GPIPE-COUNT-2: pf.task "backward"
// GPIPE-NEXT: pf.task "backward" {end = 1.800000e+01 : f64, microbatch = 3 : i64, stage = 0 : i64, start = 1.600000e+01 : f64, step = 0 : i64}
// GPIPE: pf.program device(2) {
// GPIPE-NEXT: pf.task "forward" {end = 3.000000e+00 : f64, microbatch = 0 : i64, stage = 2 : i64, start = 2.000000e+00 : f64, step = 0 : i64}
// GPIPE-COUNT-3: pf.task "forward"
// GPIPE-NEXT: pf.task "backward" {end = 8.000000e+00 : f64, microbatch = 0 : i64, stage = 2 : i64, start = 6.000000e+00 : f64, step = 0 : i64}
// GPIPE-NOT: curvature

// GPIPE-REPORT: "bubble_fraction": 0.33333333333333{{[0-9]*}},
// GPIPE-REPORT: "kfac_work_ms": 0.0,
// GPIPE-REPORT: "per_device": [
// GPIPE-REPORT-COUNT-3: "pipeline_busy_ms_per_step": 12.0,
// GPIPE-REPORT: "pipeline_step_ms": 18.0,
// GPIPE-REPORT-NEXT: "policy": "none",
// GPIPE-REPORT-NEXT: "refresh_steps": 0,
// GPIPE-REPORT: "step_time_ms": 18.0,
// GPIPE-REPORT: "utilization": {
// GPIPE-REPORT-NEXT: "with_kfac": 0.66666666666666{{[0-9]*}},
// GPIPE-REPORT-NEXT: "without_kfac": 0.66666666666666{{[0-9]*}}

// The trace counts microseconds: forwards last 1000, backwards 2000.
// GPIPE-TRACE: {"displayTimeUnit":"ms","otherData":{"schedule":"gpipe","policy":"none","refresh_steps":0,"cost_model":"uniform 3 layers","refresh_staggered":false,"mean_refresh_interval":0},
// GPIPE-TRACE-DAG: {"name":"thread_name","ph":"M","pid":0,"tid":4,"args":{"name":"device 2"}}
// GPIPE-TRACE-DAG: {"name":"forward S0 m0","cat":"forward","ph":"X","pid":0,"tid":0,"ts":0,"dur":1000,
// GPIPE-TRACE-DAG: {"name":"forward S2 m3","cat":"forward","ph":"X","pid":0,"tid":4,"ts":5000,"dur":1000,
// GPIPE-TRACE-DAG: {"name":"backward S2 m0","cat":"backward","ph":"X","pid":0,"tid":4,"ts":6000,"dur":2000,
// GPIPE-TRACE-DAG: {"name":"backward S0 m3","cat":"backward","ph":"X","pid":0,"tid":0,"ts":16000,"dur":2000,
// GPIPE-TRACE-NOT: "cat":"curvature

// 1400 px for 18 ms: 77.78 px per ms.
// GPIPE-SVG: >gpipe, D=3, N=4, policy none: K=0, step 18.0 ms, utilization 66.7% -> 66.7%<
// GPIPE-SVG-DAG: <rect x="70" y="58" width="77.7778" height="16" fill="#4e79a7"><title>forward stage 0 micro 0 layer -1 step 0: 0-1 ms</title></rect>
// GPIPE-SVG-DAG: width="155.556" height="16" fill="#f28e2b"><title>backward stage 0 micro 3 layer -1 step 0: 16-18 ms</title></rect>
// GPIPE-SVG-DAG: >GPU 2<
// GPIPE-SVG-DAG: >18</text>

// 1F1B (the default, so no schedule attribute) has the same step and
// bubbles. K-FAC per device and refresh: curvature 1 ms per micro-batch (4)
// and inversion 2 ms fill the 6 ms of bubbles exactly (capacity bound 1.0),
// so with the 5% safety margin the refresh takes K = 2 steps; the 0.5 ms of
// preconditioning runs after the flush: T = 18 + 0.5 ms, and over the window
// (2·12 + 4 + 2 + 2·0.5) / (2·18.5) = 31/37 of the time is work.
// ONEF-LABEL: func.func @main(
// ONEF: pf.pipeline stages(3) microbatches(4) {{.*}}attributes {pf.kfac_policy = "pf", pf.refresh_steps = 2 : i64, pf.step_time_ms = 1.850000e+01 : f64, pf.utilization = 0.837837837837{{[0-9]*}} : f64} {
// ONEF-REPORT: "bubble_fraction": 0.33333333333333{{[0-9]*}},
// ONEF-REPORT: "per_device": [
// ONEF-REPORT-COUNT-3: "pipeline_busy_ms_per_step": 12.0,
// ONEF-REPORT: "pipeline_step_ms": 18.0,
// ONEF-REPORT-NEXT: "policy": "pf",
// ONEF-REPORT-NEXT: "refresh": {
// ONEF-REPORT-NEXT: "choice": "interval",
// ONEF-REPORT: "staggered": false
// ONEF-REPORT-NEXT: },
// ONEF-REPORT-NEXT: "refresh_steps": 2,
// ONEF-REPORT-NEXT: "refresh_steps_lower_bound": 1.0,
// ONEF-REPORT-NEXT: "schedule": "1f1b",
// ONEF-REPORT: "step_time_ms": 18.5,
// ONEF-REPORT: "with_kfac": 0.837837837837{{[0-9]*}},
// ONEF-REPORT-NEXT: "without_kfac": 0.66666666666666{{[0-9]*}}
