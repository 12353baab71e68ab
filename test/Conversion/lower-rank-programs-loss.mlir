// The loss of a last stage that two ranks run: each rank's accumulate call
// weights its micro-batches' losses (a running sum in the arena), and the
// library's all-reduce of that value is the program's own
// pfrt_comm_all_reduce_sum on the sum's slot (the plan puts it over the
// partial sum, so no pfrt_copy), on the program's communicator (both ranks),
// between the host's timeline marks; pf.step_result lowers to
// pfrt_rank_step_result(host, op, name, slot). A gradient's
// partial sum is all-reduced so too; a named all-reduce (a parameter's, in
// place) is the host's service pfrt_rank_all_reduce_parameter(host, op,
// name, count, ranks, dtype, rank, shape).
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s

func.func private @stage1_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_replica0_single(tensor<f32> {pf.name = "loss"}, tensor<i64> {pf.name = "loss_count"}, tensor<i64> {pf.name = "loss_total"}) -> (tensor<f32> {pf.name = "loss_sum"}) attributes {pf.stage = 1 : i64}

// CHECK-DAG: llvm.mlir.global internal constant @[[LOSS:.*]]("loss\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[W:.*]]("grad/w\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[FACTOR:.*]]("stage1.w.kfac.A\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:.*]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[SLOT2:.*]](dense<2> : tensor<1xi64>)
// CHECK: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[COMM:[a-z0-9]+]]: !llvm.ptr, %[[SLOTS:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr) -> i32
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c0_i64{{[_0-9]*}},
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c2_i64{{[_0-9]*}},
// The loss's all-reduce (op 3, order(library)): slot 3, over slot 2.
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c3_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[SUMSLOT:.*]] = llvm.getelementptr %[[SLOTS]][3]
// CHECK-NOT: call @pfrt_copy
// CHECK: call @pfrt_comm_all_reduce_sum(%[[CTX]], %[[COMM]], %[[SUMSLOT]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c3_i64{{[_0-9]*}}, %c1_i32
// CHECK: %[[LNAME:.*]] = llvm.mlir.addressof @[[LOSS]]
// CHECK-NEXT: %[[SLOT:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[LNAME]], %[[SLOT]])
// grad/w's all-reduce (op 5): the library's sum of slot 4, written over its
// operand's bytes (no copy), which the step_result hands over.
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c5_i64{{[_0-9]*}}, %c0_i32
// CHECK-NOT: call @pfrt_copy
// CHECK: call @pfrt_comm_all_reduce_sum(%[[CTX]], %[[COMM]],
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c5_i64{{[_0-9]*}}, %c1_i32
// CHECK: %[[WNAME2:.*]] = llvm.mlir.addressof @[[W]]
// CHECK-NEXT: %[[WSLOT:.*]] = arith.constant 4 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c6_i64{{[_0-9]*}}, %[[WNAME2]], %[[WSLOT]])
// The named all-reduce (op 7): the parameter's name, members and type.
// CHECK: %[[FOP:.*]] = arith.constant 7 : i64
// CHECK-NEXT: %[[FNAME:.*]] = llvm.mlir.addressof @[[FACTOR]]
// CHECK-NEXT: %[[COUNT:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[MEMBERS:.*]] = llvm.mlir.addressof @[[RANKS]]
// CHECK-NEXT: %[[DTYPE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[RANK:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[SHAPE:.*]] = llvm.mlir.addressof
// CHECK-NEXT: call @pfrt_rank_all_reduce_parameter(%[[HOST]], %[[FOP]], %[[FNAME]], %[[COUNT]], %[[MEMBERS]], %[[DTYPE]], %[[RANK]], %[[SHAPE]])
// CHECK-DAG: func.func private @pfrt_rank_all_reduce_parameter(!llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i32, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_rank_step_result(!llvm.ptr, i64, !llvm.ptr, i64) -> i32
pf.rank_program @rank0 rank(0) ranks(2) stages([1]) microbatches(2) {
  %loss = pf.run_stage forward @stage1_forward() microbatch(0) : () -> tensor<f32>
  %piece = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4xf32>
  %partial = pf.run_stage accumulate @stage1_accumulate_replica0_single(%loss) microbatch(0) : (tensor<f32>) -> tensor<f32>
  %sum = pf.all_reduce "loss_sum"(%partial : tensor<f32>) ranks([0, 1]) order(library) : tensor<f32> -> tensor<f32>
  pf.step_result "loss" %sum : tensor<f32>
  %w = pf.all_reduce "grad/w"(%piece : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  pf.step_result "grad/w" %w : tensor<4xf32>
  pf.all_reduce "stage1.w.kfac.A" ranks([0, 1]) : tensor<4x4xf32>
}
