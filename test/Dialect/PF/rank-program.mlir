// RUN: pf-opt %s --pf-verify-rank-programs | FileCheck %s
// RUN: pf-opt %s | pf-opt --pf-verify-rank-programs | FileCheck %s

// A hand-written two-rank 1F1B step with one micro-batch in flight: the
// per-rank program round-trips and passes the checks across ranks. The task
// kind is an enum attribute printed as a keyword, as is the all_reduce's
// order (elided when it is the default, microbatch).

func.func private @stage0_forward(tensor<4x8xi64> {pf.name = "input_ids"})
    -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}, tensor<4x16xf32> {pf.name = "grad_act/7"})
    -> (tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4x16xf32> {pf.name = "act/1"})
    -> (tensor<4x16xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"})
    attributes {pf.stage = 1 : i64}
func.func private @stage1_backward(tensor<4x16xf32> {pf.name = "saved/1"})
    -> (tensor<4x16xf32> {pf.name = "grad_act/7"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 1 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}

// CHECK-LABEL: pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
// CHECK-NEXT: pf.run_stage forward @stage0_forward microbatch(0)
// CHECK-NEXT: pf.send_act "act/1" microbatch(0) to(1) tag(0) : tensor<4x16xf32>
// CHECK-NEXT: pf.run_stage forward @stage0_forward microbatch(1)
// CHECK-NEXT: pf.recv_act "grad_act/7" microbatch(0) from(1) tag(2) : tensor<4x16xf32>
// CHECK-NEXT: pf.send_act "act/1" microbatch(1) to(1) tag(1) : tensor<4x16xf32>
// CHECK-NEXT: pf.run_stage backward @stage0_backward microbatch(0)
// CHECK: pf.all_reduce "grad/emb" ranks([0, 1]) order(library) : tensor<100x16xf32>
// CHECK-NEXT: pf.run_stage update @stage0_update
// CHECK-NEXT: }
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward microbatch(0)
  pf.send_act "act/1" microbatch(0) to(1) tag(0) : tensor<4x16xf32>
  pf.run_stage forward @stage0_forward microbatch(1)
  // Receive before sending: rank 1 sends this gradient before it receives
  // micro-batch 1 (a send waits for its recv).
  pf.recv_act "grad_act/7" microbatch(0) from(1) tag(2) : tensor<4x16xf32>
  pf.send_act "act/1" microbatch(1) to(1) tag(1) : tensor<4x16xf32>
  pf.run_stage backward @stage0_backward microbatch(0)
  pf.recv_act "grad_act/7" microbatch(1) from(1) tag(3) : tensor<4x16xf32>
  pf.run_stage backward @stage0_backward microbatch(1)
  pf.all_reduce "grad/emb" ranks([0, 1]) order(library) : tensor<100x16xf32>
  pf.run_stage update @stage0_update
}

// CHECK-LABEL: pf.rank_program @rank1 rank(1)
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.recv_act "act/1" microbatch(0) from(0) tag(0) : tensor<4x16xf32>
  pf.run_stage forward @stage1_forward microbatch(0)
  pf.run_stage backward @stage1_backward microbatch(0)
  pf.send_act "grad_act/7" microbatch(0) to(0) tag(2) : tensor<4x16xf32>
  pf.recv_act "act/1" microbatch(1) from(0) tag(1) : tensor<4x16xf32>
  pf.run_stage forward @stage1_forward microbatch(1)
  pf.run_stage backward @stage1_backward microbatch(1)
  pf.send_act "grad_act/7" microbatch(1) to(0) tag(3) : tensor<4x16xf32>
  pf.all_reduce "grad/emb" ranks([0, 1]) order(library) : tensor<100x16xf32>
}
