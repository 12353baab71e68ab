// pf.reduce_microbatch lowers to pfrt_rank_reduce(host, op, value,
// microbatch, root, count, ranks, dtype, rank, shape, piece slot, sum slot),
// its status checked like every other call's; the sum slot is -1 on the
// member handing its piece over. The root's sum (after its accumulate
// call) goes to every member by pf.broadcast, which lowers to
// pfrt_rank_broadcast(host, op, value, root, count, ranks, dtype, rank,
// shape, input slot, output slot): the input slot is -1 off the root.
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank2 | FileCheck %s --check-prefix=RANK2
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank1 | FileCheck %s --check-prefix=RANK1

func.func private @stage0_forward() -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}) -> (tensor<100x16xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}

// CHECK-DAG: llvm.mlir.global internal constant @[[EMB:.*]]("grad/emb\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:.*]](dense<[0, 2]> : tensor<2xi64>)
// CHECK: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// The forward's act/1 (slot 0, read by nothing) and saved/0 (slot 1) take
// bytes 0 and 256 of the arena; the backward reads slot 1 and makes the
// piece grad/emb (slot 2, at byte 512).
// CHECK: llvm.getelementptr %{{.*}}[0] :
// CHECK-NEXT: %[[AT0:.*]] = arith.constant 0 : i64
// CHECK: llvm.getelementptr %{{.*}}[1] :
// CHECK-NEXT: %[[AT256:.*]] = arith.constant 256 : i64
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c0_i64{{[_0-9]*}},
// CHECK: llvm.getelementptr %{{.*}}[2] :
// CHECK-NEXT: %[[AT512:.*]] = arith.constant 512 : i64
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// The backward's result becomes its slot (2) after the call, before the
// reduce (op 2).
// CHECK: ^bb2:
// CHECK-NEXT: arith.constant 2 : i64
// CHECK-NEXT: %[[OP:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[NAME:.*]] = llvm.mlir.addressof @[[EMB]]
// CHECK: %[[MICRO:.*]] = arith.constant 1 : i64
// CHECK: %[[ROOT:.*]] = arith.constant 2 : i64
// CHECK: %[[COUNT:.*]] = arith.constant 2 : i64
// CHECK: %[[MEMBERS:.*]] = llvm.mlir.addressof @[[RANKS]]
// CHECK-NEXT: %[[DTYPE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[RANK:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[SHAPE:.*]] = llvm.mlir.addressof
// CHECK-NEXT: %[[PIECE:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[NOSUM:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[STATUS:.*]] = call @pfrt_rank_reduce(%[[HOST]], %[[OP]], %[[NAME]], %[[MICRO]], %[[ROOT]], %[[COUNT]], %[[MEMBERS]], %[[DTYPE]], %[[RANK]], %[[SHAPE]], %[[PIECE]], %[[NOSUM]])
// CHECK: cf.cond_br
// The broadcast (op 3) receives the root's sum into slot 3 (back at byte 0:
// nothing else is live); it hands nothing over (-1).
// CHECK: llvm.getelementptr %{{.*}}[3] :
// CHECK-NEXT: arith.constant 0 : i64
// CHECK: %[[BOP:.*]] = arith.constant 3 : i64
// CHECK-NEXT: llvm.mlir.addressof @[[EMB]]
// CHECK-NEXT: %[[BROOT:.*]] = arith.constant 2 : i64
// CHECK-NEXT: arith.constant 2 : i64
// CHECK-NEXT: llvm.mlir.addressof @[[RANKS]]
// CHECK-NEXT: arith.constant 1 : i32
// CHECK-NEXT: arith.constant 2 : i64
// CHECK-NEXT: llvm.mlir.addressof
// CHECK-NEXT: %[[NOINPUT:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[RECEIVED:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @pfrt_rank_broadcast(%[[HOST]], %[[BOP]], %{{.*}}, %[[BROOT]], {{.*}}, %[[NOINPUT]], %[[RECEIVED]])
// CHECK: %[[STEPNAME:.*]] = llvm.mlir.addressof
// CHECK-NEXT: %[[STEP:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[REPORTED:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[STEPNAME]], %[[STEP]], %[[REPORTED]])
// CHECK-DAG: func.func private @pfrt_rank_broadcast(!llvm.ptr, i64, !llvm.ptr, i64, i64, !llvm.ptr, i32, i64, !llvm.ptr, i64, i64) -> i32
// CHECK-DAG: func.func private @pfrt_rank_reduce(!llvm.ptr, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i32, i64, !llvm.ptr, i64, i64) -> i32
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  pf.reduce_microbatch "grad/emb"(%grad : tensor<100x16xf32>) microbatch(1) root(2) ranks([0, 2]) : tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb" root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}

// The root: its piece is slot 2 (byte 512) and the sum, slot 3, takes the
// piece's bytes (inPlaceOperand: the reduce reads the piece last and
// adds the rows to it in place); so does the accumulate call's running sum
// (slot 4), over the sum it weights.
// RANK2-DAG: llvm.mlir.global internal constant @[[DIMS:.*]](dense<[100, 16]> : tensor<2xi64>)
// RANK2: func.func @pf_rank2(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// RANK2: llvm.getelementptr %{{.*}}[2] :
// RANK2-NEXT: %[[AT512:.*]] = arith.constant 512 : i64
// RANK2: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// RANK2: llvm.getelementptr %{{.*}}[3] :
// RANK2-NEXT: arith.constant 512 : i64
// RANK2: %[[SHAPE:.*]] = llvm.mlir.addressof @[[DIMS]]
// RANK2-NEXT: %[[PIECE:.*]] = arith.constant 2 : i64
// RANK2-NEXT: %[[SUM:.*]] = arith.constant 3 : i64
// RANK2-NEXT: call @pfrt_rank_reduce(%[[HOST]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SHAPE]], %[[PIECE]], %[[SUM]])
// RANK2: llvm.getelementptr %{{.*}}[4] :
// RANK2-NEXT: arith.constant 512 : i64
// The root broadcasts its running sum (slot 4) and returns it as slot 5
// (over the same bytes), the value it reports.
// RANK2: llvm.getelementptr %{{.*}}[5] :
// RANK2-NEXT: arith.constant 512 : i64
// RANK2: %[[SHAPE2:.*]] = llvm.mlir.addressof @[[DIMS]]
// RANK2-NEXT: %[[INPUT:.*]] = arith.constant 4 : i64
// RANK2-NEXT: %[[OUTPUT:.*]] = arith.constant 5 : i64
// RANK2-NEXT: call @pfrt_rank_broadcast(%[[HOST]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SHAPE2]], %[[INPUT]], %[[OUTPUT]])
// RANK2: %[[STEPNAME:.*]] = llvm.mlir.addressof
// RANK2-NEXT: %[[STEP:.*]] = arith.constant -1 : i64
// RANK2-NEXT: %[[REPORTED:.*]] = arith.constant 5 : i64
// RANK2-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c5_i64{{[_0-9]*}}, %[[STEPNAME]], %[[STEP]], %[[REPORTED]])
func.func private @stage0_accumulate_first(tensor<100x16xf32> {pf.name = "grad/emb"}) -> (tensor<100x16xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank2 rank(2) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  %sum = pf.reduce_microbatch "grad/emb"(%grad : tensor<100x16xf32>) microbatch(1) root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  %first = pf.run_stage accumulate @stage0_accumulate_first(%sum) microbatch(1) in_place([0]) : (tensor<100x16xf32>) -> tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb"(%first : tensor<100x16xf32>) root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}

// A piece read after its accumulate call (here by an all-reduce of the
// pieces, order(microbatch)) keeps its bytes: the running sum (slot 3) lies
// past it (512 + 6400). The all-reduce passes the piece's slot (2), its
// micro-batch (1) and the sum's slot (4).
// RANK1-DAG: llvm.mlir.global internal constant @[[PIECE:__pf_rank_i64_[0-9]+]](dense<2> : tensor<1xi64>)
// RANK1-DAG: llvm.mlir.global internal constant @[[MICRO1:__pf_rank_i64_[0-9]+]](dense<1> : tensor<1xi64>)
// RANK1: func.func @pf_rank1(%[[HOST:[a-z0-9]+]]: !llvm.ptr,
// RANK1: llvm.getelementptr %{{.*}}[2] :
// RANK1-NEXT: arith.constant 512 : i64
// RANK1: llvm.getelementptr %{{.*}}[3] :
// RANK1-NEXT: arith.constant 6912 : i64
// RANK1: call @pfrt_rank_run_stage(
// RANK1: %[[NPIECES:.*]] = arith.constant 1 : i64
// RANK1-NEXT: %[[PIECES:.*]] = llvm.mlir.addressof @[[PIECE]]
// RANK1-NEXT: %[[MICROS:.*]] = llvm.mlir.addressof @[[MICRO1]]
// RANK1-NEXT: %[[SUM:.*]] = arith.constant 4 : i64
// RANK1-NEXT: call @pfrt_rank_all_reduce(%[[HOST]], %c3_i64{{[_0-9]*}}, %{{.*}}, %c0_i32{{[_0-9]*}}, {{.*}}, %[[NPIECES]], %[[PIECES]], %[[MICROS]], %[[SUM]])
// RANK1: %[[STEPNAME:.*]] = llvm.mlir.addressof
// RANK1-NEXT: %[[STEP:.*]] = arith.constant -1 : i64
// RANK1-NEXT: %[[REPORTED:.*]] = arith.constant 4 : i64
// RANK1-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[STEPNAME]], %[[STEP]], %[[REPORTED]])
pf.rank_program @rank1 rank(1) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  %first = pf.run_stage accumulate @stage0_accumulate_first(%grad) microbatch(1) in_place([0]) : (tensor<100x16xf32>) -> tensor<100x16xf32>
  %emb = pf.all_reduce "grad/emb"(%grad : tensor<100x16xf32>) microbatches([1]) ranks([0, 1]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}
