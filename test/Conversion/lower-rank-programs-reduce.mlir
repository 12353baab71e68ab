// pf.reduce_microbatch lowers to pfrt_rank_reduce(host, op, value,
// microbatch, root, count, ranks, dtype, rank, shape), its status checked
// like every other call's.
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s

func.func private @stage0_forward() -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}) -> (tensor<100x16xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}

// CHECK-DAG: llvm.mlir.global internal constant @[[EMB:.*]]("grad/emb\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:.*]](dense<[0, 2]> : tensor<2xi64>)
// CHECK: func.func @pf_rank0(%[[HOST:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// The forward's act/1 (slot 0, read by nothing) and saved/0 (slot 1) take
// bytes 0 and 256 of the arena; the backward reads slot 1.
// CHECK: llvm.getelementptr %{{.*}}[0] :
// CHECK-NEXT: %[[AT0:.*]] = arith.constant 0 : i64
// CHECK: llvm.getelementptr %{{.*}}[1] :
// CHECK-NEXT: %[[AT256:.*]] = arith.constant 256 : i64
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c0_i64{{[_0-9]*}},
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// CHECK: %[[OP:.*]] = arith.constant 2 : i64
// CHECK: %[[NAME:.*]] = llvm.mlir.addressof @[[EMB]]
// CHECK: %[[MICRO:.*]] = arith.constant 1 : i64
// CHECK: %[[ROOT:.*]] = arith.constant 2 : i64
// CHECK: %[[COUNT:.*]] = arith.constant 2 : i64
// CHECK: %[[MEMBERS:.*]] = llvm.mlir.addressof @[[RANKS]]
// CHECK: %[[STATUS:.*]] = call @pfrt_rank_reduce(%[[HOST]], %[[OP]], %[[NAME]], %[[MICRO]], %[[ROOT]], %[[COUNT]], %[[MEMBERS]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: cf.cond_br
// CHECK-DAG: func.func private @pfrt_rank_reduce(!llvm.ptr, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i32, i64, !llvm.ptr) -> i32
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> ()
  pf.reduce_microbatch "grad/emb" microbatch(1) root(2) ranks([0, 2]) : tensor<100x16xf32>
}
