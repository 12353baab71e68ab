// RUN: pf-opt %S/partition.mlir --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=gpipe report=%t.json" | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: pf-opt %S/partition.mlir --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=1f1b kfac=none" | FileCheck %s --check-prefix=NOKFAC
// RUN: pf-opt %S/partition.mlir --pf-partition="stages=2 microbatches=4" --pf-schedule="schedule=chimera policy=pipefisher svg=%t.svg trace=%t.trace.json" | FileCheck %s --check-prefix=CHIMERA
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// RUN: FileCheck %s --check-prefix=TRACE < %t.trace.json
// RUN: not pf-opt %S/partition.mlir --pf-schedule 2>&1 | FileCheck %s --check-prefix=UNPARTITIONED
// RUN: not pf-opt %S/partition.mlir --pf-partition="stages=3" --pf-schedule="schedule=chimera" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not pf-opt %S/partition.mlir --pf-partition="stages=2" --pf-schedule="schedule=pipedream" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not pf-opt %S/partition.mlir --pf-partition="stages=2" --pf-schedule="policy=magic" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not pf-opt %S/partition.mlir --pf-partition="stages=2" --pf-schedule="kfac=later" 2>&1 | FileCheck %s --check-prefix=KFAC
// RUN: not pf-opt %S/partition.mlir --pf-partition="stages=2" --pf-schedule="cost=profile" 2>&1 | FileCheck %s --check-prefix=NO-PROFILE

// Every device gets a program; forward passes of all 4 micro-batches run on
// device 0 before its backward passes (GPipe), and K-FAC curvature is placed.
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

// REPORT-DAG: "schedule": "gpipe"
// REPORT-DAG: "step_time_ms":
// REPORT-DAG: "bubble_fraction":
// REPORT-DAG: "refresh_steps":
// REPORT-DAG: "with_kfac":
// REPORT-DAG: "without_kfac":
// REPORT-DAG: "per_device":

// NOKFAC: pf.program device(0)
// NOKFAC-NOT: curvature
// NOKFAC-NOT: inversion

// CHIMERA: pf.kfac_policy = "pipefisher"{{.*}}schedule = "chimera"
// Chimera: each stage has a replica on the mirrored device.
// CHIMERA: pf.stage 0 {{.*}}pf.devices = array<i64: 0, 1>
// CHIMERA: pf.stage 1 {{.*}}pf.devices = array<i64: 1, 0>
// CHIMERA: pf.program device(0)
// CHIMERA: pf.program device(1)

// SVG: <svg
// SVG: </svg>
// TRACE: "traceEvents"

// UNPARTITIONED: no pf.pipeline found; run pf-partition first
// ODD: chimera needs an even number of stages
// UNKNOWN: schedule must be gpipe, 1f1b, interleaved, chimera or zb-h1, got 'pipedream'
// POLICY: policy must be pf or pipefisher, got 'magic'
// KFAC: kfac must be bubbles or none, got 'later'
// NO-PROFILE: pf-schedule: cost=profile needs profile=PATH
