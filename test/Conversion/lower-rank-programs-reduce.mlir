// pf.reduce_microbatch is the program's own row-sparse transfer on the
// members' communicator (%groups[0]: ranks 0 and 2 of 3), with tag
// kReduceRowsTag (32000) + the micro-batch: off the root the piece's rows go
// by pfrt_comm_isend_rows, posted into a send word and waited for at the
// end (also with overlap=false); on the root pfrt_comm_recv_add_rows
// makes the sum. The root's sum (after its accumulate call) goes to every
// member by pf.broadcast, the program's own pfrt_comm_broadcast on the
// result's slot, from the root's rank in that group (1).
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank2 | FileCheck %s --check-prefix=RANK2
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank1 | FileCheck %s --check-prefix=RANK1
// RUN: pf-opt %s --pf-lower-rank-programs="program=rank0 overlap=false" | FileCheck %s --check-prefix=BLOCKING

func.func private @stage0_forward() -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}) -> (tensor<100x16xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}

// CHECK-DAG: llvm.mlir.global internal constant @[[EMB:.*]]("grad/emb\00")
// CHECK: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[GROUPS:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr) -> i32
// The one posted send's word.
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[SENDS:.*]] = llvm.alloca %[[ONE]] x i64
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
// The reduce (op 2) off the root: the piece (slot 2) posted to group rank
// 1 (rank 2) into the one send word, between the host's marks.
// CHECK: ^bb2:
// CHECK: %[[GROUP0:.*]] = llvm.getelementptr %[[GROUPS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[PAIR:.*]] = llvm.load %[[GROUP0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[PIECE:.*]] = llvm.getelementptr %{{.*}}[2] :
// CHECK-NEXT: %[[TAG:.*]] = arith.constant 32001 : i32
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c2_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[TOROOT:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[WORD:.*]] = llvm.getelementptr %[[SENDS]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT: call @pfrt_comm_isend_rows(%{{.*}}, %[[PAIR]], %[[PIECE]], %[[TOROOT]], %[[TAG]], %[[WORD]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c2_i64{{[_0-9]*}}, %c1_i32
// The broadcast (op 3) receives the root's sum into slot 3 (back at byte 0:
// nothing else is live).
// CHECK: llvm.getelementptr %{{.*}}[3] :
// CHECK-NEXT: arith.constant 0 : i64
// CHECK: %[[RECEIVED:.*]] = llvm.getelementptr %{{.*}}[3] :
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c3_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[GROUP:.*]] = llvm.getelementptr %[[GROUPS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[COMM:.*]] = llvm.load %[[GROUP]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[GROUPROOT:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @pfrt_comm_broadcast(%{{.*}}, %[[COMM]], %[[RECEIVED]], %[[GROUPROOT]])
// CHECK: %[[STEPNAME:.*]] = llvm.mlir.addressof
// CHECK-NEXT: %[[REPORTED:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[STEPNAME]], %[[REPORTED]])
// At the end the rows' send completes on the pair's communicator.
// CHECK: %[[DONE:.*]] = llvm.getelementptr %[[SENDS]][0]
// CHECK-NEXT: %[[REQUEST:.*]] = llvm.load %[[DONE]] : !llvm.ptr -> i64
// CHECK-NEXT: %[[GROUPAGAIN:.*]] = llvm.getelementptr %[[GROUPS]][0]
// CHECK-NEXT: %[[PAIRAGAIN:.*]] = llvm.load %[[GROUPAGAIN]]
// CHECK-NEXT: call @pfrt_comm_wait(%{{.*}}, %[[PAIRAGAIN]], %[[REQUEST]])
// CHECK-DAG: func.func private @pfrt_comm_broadcast(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: func.func private @pfrt_comm_isend_rows(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK-NOT: pfrt_rank_reduce
// With overlap=false too the rows are posted and waited for at the end: the
// root takes them where its schedule is past that pass, maybe after this
// rank's next (blocking) transfers.
// BLOCKING: %[[ONE:.*]] = arith.constant 1 : i64
// BLOCKING-NEXT: %[[WORDS:.*]] = llvm.alloca %[[ONE]] x i64
// BLOCKING: %[[WORD:.*]] = llvm.getelementptr %[[WORDS]][0]
// BLOCKING-NEXT: call @pfrt_comm_isend_rows(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[WORD]])
// BLOCKING: call @pfrt_rank_step_result(
// BLOCKING: %[[REQUEST:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// BLOCKING: call @pfrt_comm_wait(%{{.*}}, %{{.*}}, %[[REQUEST]])
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  pf.reduce_microbatch "grad/emb"(%grad : tensor<100x16xf32>) microbatch(1) root(2) ranks([0, 2]) : tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb" root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}

// The root: its piece is slot 2 (byte 512) and the sum, slot 3, takes the
// piece's bytes (inPlaceOperand: the reduce reads the piece last and
// adds the rows to it in place), received from group rank 0 (rank 0); so
// does the accumulate call's running sum (slot 4), over the sum it weights.
// RANK2: func.func @pf_rank2(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr) -> i32
// RANK2: llvm.getelementptr %{{.*}}[2] :
// RANK2-NEXT: %[[AT512:.*]] = arith.constant 512 : i64
// RANK2: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// RANK2: llvm.getelementptr %{{.*}}[3] :
// RANK2-NEXT: arith.constant 512 : i64
// RANK2: %[[PIECE:.*]] = llvm.getelementptr %{{.*}}[2] :
// RANK2: %[[SUM:.*]] = llvm.getelementptr %{{.*}}[3] :
// RANK2: call @pfrt_comm_recv_add_rows(%{{.*}}, %{{.*}}, %[[PIECE]], %[[SUM]], %c0_i32{{[_0-9]*}}, %c32001_i32)
// RANK2: llvm.getelementptr %{{.*}}[4] :
// RANK2-NEXT: arith.constant 512 : i64
// The root broadcasts its running sum (slot 4) and returns it as slot 5
// (over the same bytes: no copy), the value it reports.
// RANK2: llvm.getelementptr %{{.*}}[5] :
// RANK2-NEXT: arith.constant 512 : i64
// RANK2: %[[OUT:.*]] = llvm.getelementptr %{{.*}}[5] :
// RANK2-NOT: pfrt_copy
// RANK2: call @pfrt_comm_broadcast(%{{.*}}, %{{.*}}, %[[OUT]], %c1_i32{{[_0-9]*}})
// RANK2: %[[STEPNAME:.*]] = llvm.mlir.addressof
// RANK2-NEXT: %[[REPORTED:.*]] = arith.constant 5 : i64
// RANK2-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c5_i64{{[_0-9]*}}, %[[STEPNAME]], %[[REPORTED]])
func.func private @stage0_accumulate_first(tensor<100x16xf32> {pf.name = "grad/emb"}) -> (tensor<100x16xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank2 rank(2) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  %sum = pf.reduce_microbatch "grad/emb"(%grad : tensor<100x16xf32>) microbatch(1) root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  %first = pf.run_stage accumulate @stage0_accumulate_first(%sum) microbatch(1) in_place([0]) : (tensor<100x16xf32>) -> tensor<100x16xf32>
  %emb = pf.broadcast "grad/emb"(%first : tensor<100x16xf32>) root(2) ranks([0, 2]) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}

// A piece read after its accumulate call (here by an all-reduce) keeps its
// bytes: the running sum (slot 3) lies past it (512 + 6400). The all-reduce
// of the piece (slot 2) sums it where it is: its result (slot 4) takes the
// piece's bytes, no pfrt_copy, on the group of ranks 0 and 1 (%groups[0]).
// RANK1: func.func @pf_rank1(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %[[CTX:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %[[SLOTS:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %[[GROUPS:[a-z0-9]+]]: !llvm.ptr,
// RANK1: llvm.getelementptr %{{.*}}[2] :
// RANK1-NEXT: arith.constant 512 : i64
// RANK1: llvm.getelementptr %{{.*}}[3] :
// RANK1-NEXT: arith.constant 6912 : i64
// RANK1: call @pfrt_rank_run_stage(
// RANK1: llvm.getelementptr %{{.*}}[4] :
// RANK1-NEXT: arith.constant 512 : i64
// RANK1: call @pfrt_rank_mark(%[[HOST]], %c3_i64{{[_0-9]*}}, %c0_i32
// RANK1-NOT: call @pfrt_copy
// RANK1: %[[GROUP:.*]] = llvm.getelementptr %[[GROUPS]][0]
// RANK1-NEXT: %[[COMM:.*]] = llvm.load %[[GROUP]]
// RANK1-NEXT: %[[SUM:.*]] = llvm.getelementptr %[[SLOTS]][4]
// RANK1-NEXT: call @pfrt_comm_all_reduce_sum(%[[CTX]], %[[COMM]], %[[SUM]])
// RANK1: %[[STEPNAME:.*]] = llvm.mlir.addressof
// RANK1-NEXT: %[[REPORTED:.*]] = arith.constant 4 : i64
// RANK1-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[STEPNAME]], %[[REPORTED]])
pf.rank_program @rank1 rank(1) ranks(3) stages([0]) microbatches(2) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(1) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %grad = pf.run_stage backward @stage0_backward(%saved) microbatch(1) : (tensor<4x16xf32>) -> tensor<100x16xf32>
  %first = pf.run_stage accumulate @stage0_accumulate_first(%grad) microbatch(1) in_place([0]) : (tensor<100x16xf32>) -> tensor<100x16xf32>
  %emb = pf.all_reduce "grad/emb"(%grad : tensor<100x16xf32>) ranks([0, 1]) order(library) : tensor<100x16xf32> -> tensor<100x16xf32>
  pf.step_result "grad/emb" %emb : tensor<100x16xf32>
}
