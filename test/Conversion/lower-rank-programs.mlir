// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s
// RUN: pf-opt %s --pf-lower-rank-programs | FileCheck %s --check-prefix=ALL
// RUN: not pf-opt %s --pf-lower-rank-programs=program=rank7 2>&1 | FileCheck %s --check-prefix=MISSING

// Each op of a rank program becomes the call of its pfrt_rank_abi.def
// function, with the op's index first; a non-zero status returns at once.

func.func private @stage0_forward(tensor<4x8xi64> {pf.name = "input_ids"})
    -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}, tensor<4x16xf32> {pf.name = "grad_act/7"})
    -> (tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4x16xf32> {pf.name = "act/1"})
    -> (tensor<4x16xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"})
    attributes {pf.stage = 1 : i64}
func.func private @stage1_backward(tensor<4x16xf32> {pf.name = "saved/1"})
    -> (tensor<4x16xf32> {pf.name = "grad_act/7"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 1 : i64}
func.func private @stage0_update() attributes {pf.stage = 0 : i64}

// The constants: value and function names NUL-terminated, orders back to back.
// CHECK-DAG: llvm.mlir.global internal constant @[[ACT:__pf_rank_str_[0-9]+]]("act/1\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[SHAPE:__pf_rank_i64_[0-9]+]](dense<[4, 16]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:__pf_rank_i64_[0-9]+]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[ORDER:__pf_rank_str_[0-9]+]]("grad/emb\00grad/w0\00")
// CHECK: func.func @pf_rank0(%[[HOST:.*]]: !llvm.ptr) -> i32
// CHECK: %[[OP0:.*]] = arith.constant 0 : i64
// CHECK: %[[KIND:.*]] = arith.constant 0 : i32
// CHECK: %[[M:.*]] = arith.constant 0 : i64
// CHECK: %[[NONE:.*]] = arith.constant -1 : i64
// CHECK: %[[S0:.*]] = call @pfrt_rank_run_stage(%[[HOST]], %[[OP0]], %[[KIND]], %{{.*}}, %[[M]], %[[NONE]])
// CHECK: %[[BAD0:.*]] = arith.cmpi ne, %[[S0]], %{{.*}} : i32
// CHECK: cf.cond_br %[[BAD0]], ^[[EXIT:bb[0-9]+]](%[[S0]] : i32), ^bb1
// CHECK: ^bb1:
// CHECK: %[[NAME:.*]] = llvm.mlir.addressof @[[ACT]]
// CHECK: %[[DTYPE:.*]] = arith.constant 1 : i32
// CHECK: %[[RANK:.*]] = arith.constant 2 : i64
// CHECK: %[[DIMS:.*]] = llvm.mlir.addressof @[[SHAPE]]
// CHECK: call @pfrt_rank_send(%[[HOST]], %{{.*}}, %[[NAME]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DTYPE]], %[[RANK]], %[[DIMS]])
// CHECK: call @pfrt_rank_recv(
// The all_reduce's order (ReductionOrder: 1 = library) after the value's name.
// CHECK: %[[LIBRARY:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[MEMBERS2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: llvm.mlir.addressof @[[RANKS]]
// CHECK: call @pfrt_rank_all_reduce(%[[HOST]], %{{.*}}, %{{.*}}, %[[LIBRARY]], %[[MEMBERS2]],
// CHECK: arith.constant 1.000000e+00 : f64
// CHECK: call @pfrt_rank_clip_gradients(
// CHECK: call @pfrt_rank_run_stage(
// CHECK: %[[ROOT:.*]] = arith.constant 0 : i64
// CHECK: %[[COUNT:.*]] = arith.constant 2 : i64
// CHECK: %[[MEMBERS:.*]] = llvm.mlir.addressof @[[RANKS]]
// CHECK: call @pfrt_rank_broadcast(%[[HOST]], %{{.*}}, %{{.*}}, %[[ROOT]], %[[COUNT]], %[[MEMBERS]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: arith.constant 1.000000e-03 : f64
// CHECK: arith.constant 1 : i64
// CHECK: call @pfrt_rank_kfac_kl_clip(
// CHECK: call @pfrt_rank_kfac_promote_inverses(
// CHECK: call @pfrt_rank_run_stage(
// CHECK: cf.cond_br
// CHECK-NEXT: ^bb10:
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: return %[[ZERO]] : i32
// CHECK: ^[[EXIT]](%[[STATUS:.*]]: i32):
// CHECK-NEXT: return %[[STATUS]] : i32
// CHECK-NOT: pf.rank_program
// CHECK-NOT: @pf_rank1
// CHECK-DAG: func.func private @pfrt_rank_run_stage(!llvm.ptr, i64, i32, !llvm.ptr, i64, i64) -> i32
// CHECK-DAG: func.func private @pfrt_rank_send(!llvm.ptr, i64, !llvm.ptr, i64, i64, i64, i32, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_rank_broadcast(!llvm.ptr, i64, !llvm.ptr, i64, i64, !llvm.ptr, i32, i64, !llvm.ptr) -> i32
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward microbatch(0)
  pf.send_act "act/1" microbatch(0) to(1) tag(0) : tensor<4x16xf32>
  pf.recv_act "grad_act/7" microbatch(0) from(1) tag(2) : tensor<4x16xf32>
  pf.all_reduce "grad/emb" ranks([0, 1]) order(library) : tensor<100x16xf32>
  pf.clip_gradients max_norm(1.0) order(["grad/emb", "grad/w0"])
  pf.run_stage precondition @stage0_precondition
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<16x16xf32>
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/w0"])
  pf.kfac_promote_inverses
  pf.run_stage update @stage0_update
}

// ALL-DAG: func.func @pf_rank0(
// ALL-DAG: func.func @pf_rank1(
// The stage functions stay.
// ALL-DAG: func.func private @stage1_backward(
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.recv_act "act/1" microbatch(0) from(0) tag(0) : tensor<4x16xf32>
  pf.run_stage forward @stage1_forward microbatch(0)
  pf.run_stage backward @stage1_backward microbatch(0)
  pf.send_act "grad_act/7" microbatch(0) to(0) tag(2) : tensor<4x16xf32>
  pf.all_reduce "grad/emb" ranks([0, 1]) order(library) : tensor<100x16xf32>
  pf.clip_gradients max_norm(1.0) order(["grad/emb", "grad/w0"])
  pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<16x16xf32>
  pf.kfac_kl_clip kappa(1.0e-3) order(["grad/w0"])
}

// MISSING: error: pf-lower-rank-programs: no pf.rank_program @rank7
