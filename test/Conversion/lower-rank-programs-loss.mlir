// The loss of a last stage that two ranks run: each rank's accumulate call
// weights its micro-batches' losses (a running sum in the arena), the
// all-reduce of that value lowers to pfrt_rank_all_reduce(host, op, value,
// order, count, ranks, dtype, rank, shape, input slot, output slot), and
// pf.step_result to pfrt_rank_step_result(host, op, name, microbatch, slot).
// A named all-reduce passes -1 for both slots.
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s

func.func private @stage1_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_replica0_single(tensor<f32> {pf.name = "loss"}, tensor<i64> {pf.name = "loss_count"}, tensor<i64> {pf.name = "loss_total"}) -> (tensor<f32> {pf.name = "loss_sum"}) attributes {pf.stage = 1 : i64}

// CHECK-DAG: llvm.mlir.global internal constant @[[SUM:.*]]("loss_sum\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[LOSS:.*]]("loss\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:.*]](dense<[0, 1]> : tensor<2xi64>)
// CHECK: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr,
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c0_i64{{[_0-9]*}},
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}},
// CHECK: call @pfrt_rank_run_stage(%[[HOST]], %c2_i64{{[_0-9]*}},
// The all-reduce (op 3) reads slot 1 (the partial sum) into slot 2.
// CHECK: %[[OP:.*]] = arith.constant 3 : i64
// CHECK-NEXT: %[[NAME:.*]] = llvm.mlir.addressof @[[SUM]]
// CHECK-NEXT: %[[ORDER:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[COUNT:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[MEMBERS:.*]] = llvm.mlir.addressof @[[RANKS]]
// CHECK-NEXT: %[[F32:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[RANK0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[SHAPE:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[IN:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[OUT:.*]] = arith.constant 2 : i64
// CHECK-NEXT: call @pfrt_rank_all_reduce(%[[HOST]], %[[OP]], %[[NAME]], %[[ORDER]], %[[COUNT]], %[[MEMBERS]], %[[F32]], %[[RANK0]], %[[SHAPE]], %[[IN]], %[[OUT]])
// CHECK: %[[LNAME:.*]] = llvm.mlir.addressof @[[LOSS]]
// CHECK-NEXT: %[[STEP:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[SLOT:.*]] = arith.constant 2 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[LNAME]], %[[STEP]], %[[SLOT]])
// CHECK: %[[NONE:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[NONE2:.*]] = arith.constant -1 : i64
// CHECK-NEXT: call @pfrt_rank_all_reduce(%[[HOST]], %c5_i64{{[_0-9]*}}, {{.*}}, %[[NONE]], %[[NONE2]])
// CHECK-DAG: func.func private @pfrt_rank_all_reduce(!llvm.ptr, i64, !llvm.ptr, i32, i64, !llvm.ptr, i32, i64, !llvm.ptr, i64, i64) -> i32
// CHECK-DAG: func.func private @pfrt_rank_step_result(!llvm.ptr, i64, !llvm.ptr, i64, i64) -> i32
pf.rank_program @rank0 rank(0) ranks(2) stages([1]) microbatches(2) {
  %loss = pf.run_stage forward @stage1_forward() microbatch(1) : () -> tensor<f32>
  pf.run_stage backward @stage1_backward() microbatch(1) : () -> ()
  %partial = pf.run_stage accumulate @stage1_accumulate_replica0_single(%loss) microbatch(1) : (tensor<f32>) -> tensor<f32>
  %sum = pf.all_reduce "loss_sum"(%partial : tensor<f32>) ranks([0, 1]) order(library) : tensor<f32> -> tensor<f32>
  pf.step_result "loss" %sum : tensor<f32>
  pf.all_reduce "grad/w" ranks([0, 1]) : tensor<4xf32>
}
