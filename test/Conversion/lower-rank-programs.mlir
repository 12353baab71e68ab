// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0 | FileCheck %s
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank1 | FileCheck %s --check-prefix=RANK1
// RUN: pf-opt %s --pf-lower-rank-programs=program=rank0\ overlap=false | FileCheck %s --check-prefix=BLOCKING
// RUN: pf-opt %s --pf-lower-rank-programs | FileCheck %s --check-prefix=ALL
// RUN: not pf-opt %s --pf-lower-rank-programs=program=rank7 2>&1 | FileCheck %s --check-prefix=MISSING

// Each op of a rank program becomes the call of its pfrt_rank_abi.def
// function, with the op's index first; a non-zero status returns at once.
// Each stage value (a pf.run_stage output, a pf.recv_act result) is a slot,
// numbered from 0 in program order: a descriptor of the program's %slots,
// which the program points at the value's planned offset of its %arena
// (planStageValues: two values living at once never share bytes) right
// before the op making it. A call passes its inputs' and outputs' slots as
// constant lists. Sends and recvs are the program's own pfrt_comm_* calls
// on the slot's descriptor: posted, the recv waited for before its first
// reader, the sends at the end (a sent value lives until then); or blocking
// with overlap=false.

func.func private @stage0_forward(tensor<4x8xi64> {pf.name = "input_ids"})
    -> (tensor<4x16xf32> {pf.name = "act/1"}, tensor<4x16xf32> {pf.name = "saved/0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x16xf32> {pf.name = "saved/0"}, tensor<4x16xf32> {pf.name = "grad_act/7"})
    -> (tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 0 : i64}
func.func private @stage0_precondition(tensor<16x16xf32> {pf.name = "grad/w0"})
    -> (tensor<16x16xf32> {pf.name = "grad/w0"})
    attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4x16xf32> {pf.name = "act/1"})
    -> (tensor<4x16xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"})
    attributes {pf.stage = 1 : i64}
func.func private @stage1_backward(tensor<4x16xf32> {pf.name = "saved/1"})
    -> (tensor<4x16xf32> {pf.name = "grad_act/7"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 1 : i64}
func.func private @stage0_update(tensor<16x16xf32> {pf.name = "grad/w0"}, tensor<100x16xf32> {pf.name = "grad/emb"})
    attributes {pf.stage = 0 : i64}

// The constants: function and value names NUL-terminated, slot lists like
// rank lists (the forward's output slots [0, 1] and the members [0, 1] are
// one constant).
// CHECK-DAG: llvm.mlir.global internal constant @[[FORWARD:__pf_rank_str_[0-9]+]]("stage0_forward\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[BACKWARD:__pf_rank_str_[0-9]+]]("stage0_backward\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[RANKS:__pf_rank_i64_[0-9]+]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[BACKWARD_IN:__pf_rank_i64_[0-9]+]](dense<[1, 2]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[BACKWARD_OUT:__pf_rank_i64_[0-9]+]](dense<[3, 4]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[W0:__pf_rank_str_[0-9]+]]("grad/w0\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[EMB:__pf_rank_str_[0-9]+]]("grad/emb\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[LR:__pf_rank_str_[0-9]+]]("lr\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[PRECONDITION:__pf_rank_str_[0-9]+]]("stage0_precondition\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[UPDATE:__pf_rank_str_[0-9]+]]("stage0_update\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[PRE_IN:__pf_rank_i64_[0-9]+]](dense<7> : tensor<1xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[PRE_OUT:__pf_rank_i64_[0-9]+]](dense<8> : tensor<1xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[UPDATE_IN:__pf_rank_i64_[0-9]+]](dense<[10, 6]> : tensor<2xi64>)
// CHECK: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[COMM:[a-z0-9]+]]: !llvm.ptr, %[[SLOTS:[a-z0-9]+]]: !llvm.ptr, %[[ARENA:[a-z0-9]+]]: !llvm.ptr, %[[GROUPS:[a-z0-9]+]]: !llvm.ptr, %[[HOSTCTX:[a-z0-9]+]]: !llvm.ptr, %[[WORLD:[a-z0-9]+]]: !llvm.ptr) -> i32
// One request word per posted send, one per posted recv.
// CHECK: %[[SENDS:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[RECVS:.*]] = llvm.alloca %{{.*}} x i64
// Before the forward: act/1 (slot 0) at byte 0 of the arena, f32 (dtype 1),
// rank 2, 4x16; saved/0 (slot 1) right after it, at 256.
// CHECK: %[[D0:.*]] = llvm.getelementptr %[[SLOTS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// CHECK-NEXT: %[[AT0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[P0:.*]] = llvm.getelementptr %[[ARENA]][%[[AT0]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: %[[F0:.*]] = llvm.getelementptr %[[D0]][0, 0]
// CHECK-NEXT: llvm.store %[[P0]], %[[F0]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[F1:.*]] = llvm.getelementptr %[[D0]][0, 1]
// CHECK-NEXT: %[[F32:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.store %[[F32]], %[[F1]] : i32, !llvm.ptr
// CHECK-NEXT: %[[F2:.*]] = llvm.getelementptr %[[D0]][0, 2]
// CHECK-NEXT: %[[RANK2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: llvm.store %[[RANK2]], %[[F2]] : i32, !llvm.ptr
// CHECK-NEXT: %[[DIM0:.*]] = llvm.getelementptr %[[D0]][0, 3, 0]
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-NEXT: llvm.store %[[FOUR]], %[[DIM0]] : i64, !llvm.ptr
// CHECK-NEXT: %[[DIM1:.*]] = llvm.getelementptr %[[D0]][0, 3, 1]
// CHECK-NEXT: %[[SIXTEEN:.*]] = arith.constant 16 : i64
// CHECK-NEXT: llvm.store %[[SIXTEEN]], %[[DIM1]] : i64, !llvm.ptr
// CHECK-NEXT: %[[D1:.*]] = llvm.getelementptr %[[SLOTS]][1]
// CHECK-NEXT: %[[AT256:.*]] = arith.constant 256 : i64
// CHECK-NEXT: llvm.getelementptr %[[ARENA]][%[[AT256]]]
// The forward (op 0) takes no stage values and makes slots 0 (act/1) and 1
// (saved/0): (host, op, kind, function, micro-batch, layer, #in, in slots,
// #out, out slots); an empty list is a null pointer.
// CHECK: %[[OP0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[KIND:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[FN0:.*]] = llvm.mlir.addressof @[[FORWARD]] : !llvm.ptr
// CHECK-NEXT: %[[M:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[NONE:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[NIN0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[IN0:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[NOUT0:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[OUT0:.*]] = llvm.mlir.addressof @[[RANKS]] : !llvm.ptr
// CHECK-NEXT: %[[S0:.*]] = call @pfrt_rank_run_stage(%[[HOST]], %[[OP0]], %[[KIND]], %[[FN0]], %[[M]], %[[NONE]], %[[NIN0]], %[[IN0]], %[[NOUT0]], %[[OUT0]])
// CHECK: %[[BAD0:.*]] = arith.cmpi ne, %[[S0]], %{{.*}} : i32
// CHECK: cf.cond_br %[[BAD0]], ^[[EXIT:bb[0-9]+]](%[[S0]] : i32), ^bb1
// The send (op 1) of act/1 (slot 0) to rank 1 with tag 0, posted into
// the first send word, between the host's timeline marks.
// CHECK: ^bb1:
// CHECK: %[[ACT:.*]] = llvm.getelementptr %[[SLOTS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// CHECK-NEXT: %[[TO:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[TAG0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[SEND0:.*]] = llvm.getelementptr %[[SENDS]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}})
// CHECK: call @pfrt_comm_isend(%[[CTX]], %[[COMM]], %[[ACT]], %[[TO]], %[[TAG0]], %[[SEND0]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c1_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}})
// The recv (op 2) of grad_act/7: slot 2 at byte 512 (act/1, being sent,
// and saved/0, read by the backward, are both live), posted into.
// CHECK: %[[D2:.*]] = llvm.getelementptr %[[SLOTS]][2]
// CHECK-NEXT: %[[AT512:.*]] = arith.constant 512 : i64
// CHECK-NEXT: llvm.getelementptr %[[ARENA]][%[[AT512]]]
// CHECK: %[[GRAD:.*]] = llvm.getelementptr %[[SLOTS]][2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// CHECK-NEXT: %[[FROM:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[TAG2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[RECV0:.*]] = llvm.getelementptr %[[RECVS]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT: call @pfrt_comm_irecv(%[[CTX]], %[[COMM]], %[[GRAD]], %[[FROM]], %[[TAG2]], %[[RECV0]])
// Right before the backward, its first reader, the program waits for it
// (marked as op 2's time).
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c2_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}})
// CHECK: %[[WORD:.*]] = llvm.getelementptr %[[RECVS]][0]
// CHECK-NEXT: %[[REQUEST:.*]] = llvm.load %[[WORD]] : !llvm.ptr -> i64
// CHECK-NEXT: call @pfrt_comm_wait(%[[CTX]], %[[COMM]], %[[REQUEST]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c2_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}})
// The backward (op 3) reads saved/0 and grad_act/7 (slots [1, 2]) and makes
// grad/w0 and grad/emb (slots [3, 4]), at bytes 768 and 1792 (act/1, being
// sent, and the backward's inputs are live).
// CHECK: llvm.getelementptr %[[SLOTS]][3] :
// CHECK-NEXT: %[[AT768:.*]] = arith.constant 768 : i64
// CHECK-NEXT: llvm.getelementptr %[[ARENA]][%[[AT768]]]
// CHECK: llvm.getelementptr %[[SLOTS]][4] :
// CHECK-NEXT: %[[AT1792:.*]] = arith.constant 1792 : i64
// CHECK-NEXT: llvm.getelementptr %[[ARENA]][%[[AT1792]]]
// CHECK: %[[FN3:.*]] = llvm.mlir.addressof @[[BACKWARD]] : !llvm.ptr
// CHECK-NEXT: arith.constant 0 : i64
// CHECK-NEXT: arith.constant -1 : i64
// CHECK-NEXT: %[[NIN3:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[IN3:.*]] = llvm.mlir.addressof @[[BACKWARD_IN]] : !llvm.ptr
// CHECK-NEXT: %[[NOUT3:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[OUT3:.*]] = llvm.mlir.addressof @[[BACKWARD_OUT]] : !llvm.ptr
// CHECK-NEXT: call @pfrt_rank_run_stage(%[[HOST]], %c3_i64{{[_0-9]*}}, %{{.*}}, %[[FN3]], %{{.*}}, %{{.*}}, %[[NIN3]], %[[IN3]], %[[NOUT3]], %[[OUT3]])
// The all_reduce (op 4) sums grad/emb by the library: the program's own
// pfrt_comm_all_reduce_sum on its result's slot (5), which the plan put over
// the partial sum (slot 4: no pfrt_copy), on the program's communicator
// (both ranks), between the host's timeline marks.
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c4_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[SUMSLOT:.*]] = llvm.getelementptr %[[SLOTS]][5]
// CHECK-NOT: call @pfrt_copy
// CHECK: call @pfrt_comm_all_reduce_sum(%[[CTX]], %[[COMM]], %[[SUMSLOT]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c4_i64{{[_0-9]*}}, %c1_i32
// The host frees nothing: the arena is the program's.
// CHECK-NOT: pfrt_rank_release
// clip_gradients (op 5) is the program's own, between the host's marks. It
// takes the rank's gradients of the step, the sum (slot 5) and its own
// grad/w0 (slot 3), and clips each in its bytes: slots 6 (byte 1792) and 7
// (byte 768). The norm's terms: an f64 array of the order's length
// (grad/emb, grad/w0), zeroed; pfrt_dot of each gradient this rank counts
// (both: grad/emb's sum on its lowest member, grad/w0 on its only holder)
// into its position; one all-reduce of the array on the host's context and
// communicator of every rank; the sum in order from 0, whose square root is
// the norm. Then pfrt_clip_to_norm on the
// list of the results' descriptors.
// CHECK: llvm.getelementptr %[[SLOTS]][6] :
// CHECK-NEXT: %[[CLIPPED_EMB_AT:.*]] = arith.constant 1792 : i64
// CHECK: llvm.getelementptr %[[SLOTS]][7] :
// CHECK-NEXT: %[[CLIPPED_W0_AT:.*]] = arith.constant 768 : i64
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c5_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[NTERMS:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[TERMS:.*]] = llvm.alloca %[[NTERMS]] x f64
// CHECK-NEXT: %[[FZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[T0:.*]] = llvm.getelementptr %[[TERMS]][0] : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK-NEXT: llvm.store %[[FZERO]], %[[T0]]
// CHECK-NEXT: %[[T1:.*]] = llvm.getelementptr %[[TERMS]][1] : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK-NEXT: llvm.store %[[FZERO]], %[[T1]]
// CHECK-NEXT: %[[SUMA:.*]] = llvm.getelementptr %[[SLOTS]][5]
// CHECK-NEXT: %[[SUMB:.*]] = llvm.getelementptr %[[SLOTS]][5]
// CHECK-NEXT: %[[TERM0:.*]] = llvm.getelementptr %[[TERMS]][0]
// CHECK-NEXT: call @pfrt_dot(%[[CTX]], %[[SUMA]], %[[SUMB]], %[[TERM0]])
// CHECK: %[[W0A:.*]] = llvm.getelementptr %[[SLOTS]][3]
// CHECK-NEXT: %[[W0B:.*]] = llvm.getelementptr %[[SLOTS]][3]
// CHECK-NEXT: %[[TERM1:.*]] = llvm.getelementptr %[[TERMS]][1]
// CHECK-NEXT: call @pfrt_dot(%[[CTX]], %[[W0A]], %[[W0B]], %[[TERM1]])
// The array's descriptor: the alloca, f64 (dtype 11), rank 1, 2 elements.
// CHECK: %[[TERMSDESC:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// CHECK-NEXT: %[[TDATA:.*]] = llvm.getelementptr %[[TERMSDESC]][0, 0]
// CHECK-NEXT: llvm.store %[[TERMS]], %[[TDATA]]
// CHECK-NEXT: llvm.getelementptr %[[TERMSDESC]][0, 1]
// CHECK-NEXT: arith.constant 11 : i32
// CHECK: call @pfrt_comm_all_reduce_sum(%[[HOSTCTX]], %[[WORLD]], %[[TERMSDESC]])
// CHECK: %[[L0:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f64
// CHECK-NEXT: %[[S0:.*]] = arith.addf %[[FZERO]], %[[L0]] : f64
// CHECK: %[[L1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f64
// CHECK-NEXT: %[[S1:.*]] = arith.addf %[[S0]], %[[L1]] : f64
// CHECK-NEXT: %[[NORM:.*]] = llvm.intr.sqrt(%[[S1]]) : (f64) -> f64
// The results are in their gradients' bytes: no copy.
// CHECK-NOT: pfrt_copy
// CHECK: %[[LIST:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// CHECK-NEXT: %[[R6:.*]] = llvm.getelementptr %[[SLOTS]][6]
// CHECK-NEXT: %[[E0:.*]] = llvm.getelementptr %[[LIST]][0]
// CHECK-NEXT: %[[V6:.*]] = llvm.load %[[R6]]
// CHECK-NEXT: llvm.store %[[V6]], %[[E0]]
// CHECK-NEXT: %[[R7:.*]] = llvm.getelementptr %[[SLOTS]][7]
// CHECK-NEXT: %[[E1:.*]] = llvm.getelementptr %[[LIST]][1]
// CHECK-NEXT: %[[V7:.*]] = llvm.load %[[R7]]
// CHECK-NEXT: llvm.store %[[V7]], %[[E1]]
// CHECK-NEXT: %[[NCLIP:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[MAXNORM:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT: call @pfrt_clip_to_norm(%[[CTX]], %[[LIST]], %[[NCLIP]], %[[MAXNORM]], %[[NORM]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c5_i64{{[_0-9]*}}, %c1_i32
// CHECK: call @pfrt_rank_kfac_promote_inverses(%[[HOST]], %c6_i64{{[_0-9]*}})
// The precondition call (op 7), once per step (micro-batch and layer -1),
// takes the clipped grad/w0 (slot 7) and makes its update (slot 8).
// CHECK: llvm.getelementptr %[[SLOTS]][8] :
// CHECK: %[[FN7:.*]] = llvm.mlir.addressof @[[PRECONDITION]] : !llvm.ptr
// CHECK-NEXT: %[[STEP7:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[NOLAYER7:.*]] = arith.constant -1 : i64
// CHECK-NEXT: %[[NIN7:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[IN7:.*]] = llvm.mlir.addressof @[[PRE_IN]] : !llvm.ptr
// CHECK-NEXT: %[[NOUT7:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[OUT7:.*]] = llvm.mlir.addressof @[[PRE_OUT]] : !llvm.ptr
// CHECK-NEXT: call @pfrt_rank_run_stage(%[[HOST]], %c7_i64{{[_0-9]*}}, %{{.*}}, %[[FN7]], %[[STEP7]], %[[NOLAYER7]], %[[NIN7]], %[[IN7]], %[[NOUT7]], %[[OUT7]])
// The broadcast (op 8), the program's own: on its root the result (slot
// 9) is in the operand's bytes (8192 both: no copy), which
// pfrt_comm_broadcast sends from group rank 0 over the program's
// communicator (both ranks), between the host's marks.
// CHECK: llvm.getelementptr %[[SLOTS]][9] :
// CHECK-NEXT: %[[BCAST_AT:.*]] = arith.constant 8192 : i64
// CHECK: %[[BCAST:.*]] = llvm.getelementptr %[[SLOTS]][9] :
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c8_i64{{[_0-9]*}}, %c0_i32
// CHECK-NOT: pfrt_copy
// CHECK: call @pfrt_comm_broadcast(%[[CTX]], %[[COMM]], %[[BCAST]], %c0_i32{{[_0-9]*}})
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c8_i64{{[_0-9]*}}, %c1_i32
// The KL-clip (op 9), the program's own: ⟨update, gradient⟩ of the update
// (the broadcast's result, slot 9) with its clipped gradient (slot 7),
// summed over the ranks like the norm's terms; the step's lr from the host;
// ν by the single-process formula, min(1, sqrt(κ / (lr² Σ))) where lr² Σ >
// 0; the update scaled into its result (slot 10).
// CHECK: llvm.getelementptr %[[SLOTS]][10] :
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c9_i64{{[_0-9]*}}, %c0_i32
// CHECK: %[[KLTERMS:.*]] = llvm.alloca %{{.*}} x f64
// CHECK: %[[U:.*]] = llvm.getelementptr %[[SLOTS]][9]
// CHECK-NEXT: %[[G:.*]] = llvm.getelementptr %[[SLOTS]][7]
// CHECK-NEXT: %[[KLT0:.*]] = llvm.getelementptr %[[KLTERMS]][0]
// CHECK-NEXT: call @pfrt_dot(%[[CTX]], %[[U]], %[[G]], %[[KLT0]])
// CHECK: call @pfrt_comm_all_reduce_sum(%[[HOSTCTX]], %[[WORLD]],
// CHECK: %[[TOTAL:.*]] = arith.addf
// CHECK: %[[LRSLOT:.*]] = llvm.alloca %{{.*}} x f64
// CHECK: %[[LRNAME:.*]] = llvm.mlir.addressof @[[LR]]
// CHECK-NEXT: call @pfrt_rank_step_scalar(%[[HOST]], %c9_i64{{[_0-9]*}}, %[[LRNAME]], %[[LRSLOT]])
// CHECK: %[[LRV:.*]] = llvm.load %[[LRSLOT]] : !llvm.ptr -> f64
// CHECK-NEXT: %[[LR2:.*]] = arith.mulf %[[LRV]], %[[LRV]] : f64
// CHECK-NEXT: %[[DENOM:.*]] = arith.mulf %[[LR2]], %[[TOTAL]] : f64
// CHECK-NEXT: %[[KAPPA:.*]] = arith.constant 1.000000e-03 : f64
// CHECK-NEXT: %[[RATIO:.*]] = arith.divf %[[KAPPA]], %[[DENOM]] : f64
// CHECK-NEXT: %[[ROOTV:.*]] = llvm.intr.sqrt(%[[RATIO]]) : (f64) -> f64
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT: %[[CAPPED:.*]] = arith.minimumf %[[ROOTV]], %[[ONE]] : f64
// CHECK: %[[POSITIVE:.*]] = arith.cmpf ogt, %[[DENOM]]
// CHECK: %[[NU:.*]] = arith.select %[[POSITIVE]], %[[CAPPED]]
// CHECK: %[[UPD:.*]] = llvm.getelementptr %[[SLOTS]][9]
// CHECK-NEXT: %[[KLOUT:.*]] = llvm.getelementptr %[[SLOTS]][10]
// CHECK-NEXT: call @pfrt_scale(%[[CTX]], %[[UPD]], %[[NU]], %[[KLOUT]])
// CHECK: call @pfrt_rank_mark(%[[HOST]], %c9_i64{{[_0-9]*}}, %c1_i32
// The step's gradients go to the host (ops 10 and 11): the name,
// micro-batch -1 (the step's) and the slot of the final value: grad/emb's
// clipped sum (6), grad/w0's KL-clipped update (10).
// CHECK: %[[EMBNAME:.*]] = llvm.mlir.addressof @[[EMB]] : !llvm.ptr
// CHECK-NEXT: %[[SLOT6:.*]] = arith.constant 6 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c10_i64{{[_0-9]*}}, %[[EMBNAME]], %[[SLOT6]])
// CHECK: %[[W0NAME:.*]] = llvm.mlir.addressof @[[W0]] : !llvm.ptr
// CHECK-NEXT: %[[SLOT10:.*]] = arith.constant 10 : i64
// CHECK-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c11_i64{{[_0-9]*}}, %[[W0NAME]], %[[SLOT10]])
// The update (op 12) takes the final values in its arguments' order:
// grad/w0 (10), grad/emb (6); it makes none.
// CHECK: %[[FN12:.*]] = llvm.mlir.addressof @[[UPDATE]] : !llvm.ptr
// CHECK-NEXT: arith.constant -1 : i64
// CHECK-NEXT: arith.constant -1 : i64
// CHECK-NEXT: %[[NIN12:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[IN12:.*]] = llvm.mlir.addressof @[[UPDATE_IN]] : !llvm.ptr
// CHECK-NEXT: %[[NOUT12:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[NOOUT12:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: call @pfrt_rank_run_stage(%[[HOST]], %c12_i64{{[_0-9]*}}, %{{.*}}, %[[FN12]], %{{.*}}, %{{.*}}, %[[NIN12]], %[[IN12]], %[[NOUT12]], %[[NOOUT12]])
// At the end: the posted send completes.
// CHECK: cf.cond_br
// CHECK-NEXT: ^bb{{[0-9]+}}:
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[NSENDS:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @pfrt_comm_wait_all(%[[CTX]], %[[COMM]], %[[SENDS]], %[[NSENDS]])
// CHECK: ^bb{{[0-9]+}}:
// CHECK-NEXT: return %[[ZERO]] : i32
// CHECK: ^[[EXIT]](%[[STATUS:.*]]: i32):
// CHECK-NEXT: return %[[STATUS]] : i32
// CHECK-NOT: pf.rank_program
// CHECK-NOT: @pf_rank1
// CHECK-DAG: func.func private @pfrt_rank_run_stage(!llvm.ptr, i64, i32, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_rank_mark(!llvm.ptr, i64, i32) -> i32
// CHECK-DAG: func.func private @pfrt_comm_isend(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_comm_irecv(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_comm_wait(!llvm.ptr, !llvm.ptr, i64) -> i32
// CHECK-DAG: func.func private @pfrt_comm_wait_all(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: func.func private @pfrt_rank_step_result(!llvm.ptr, i64, !llvm.ptr, i64) -> i32
// CHECK-DAG: func.func private @pfrt_comm_all_reduce_sum(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_comm_broadcast(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: func.func private @pfrt_dot(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_clip_to_norm(!llvm.ptr, !llvm.ptr, i32, f64, f64) -> i32
// CHECK-DAG: func.func private @pfrt_scale(!llvm.ptr, !llvm.ptr, f64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @pfrt_rank_step_scalar(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NOT: pfrt_rank_send
// CHECK-NOT: pfrt_rank_recv
// CHECK-NOT: pfrt_rank_release
// CHECK-NOT: pfrt_rank_broadcast
// CHECK-NOT: pfrt_rank_clip
// CHECK-NOT: pfrt_rank_report
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act, %saved = pf.run_stage forward @stage0_forward() microbatch(0) : () -> (tensor<4x16xf32>, tensor<4x16xf32>)
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4x16xf32>
  %grad = pf.recv_act microbatch(0) from(1) tag(2) : tensor<4x16xf32>
  %w0, %emb = pf.run_stage backward @stage0_backward(%saved, %grad) microbatch(0) : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<100x16xf32>)
  %embsum = pf.all_reduce "grad/emb"(%emb : tensor<100x16xf32>) ranks([0, 1]) order(library) : tensor<100x16xf32> -> tensor<100x16xf32>
  %clipped:2 = pf.clip_gradients(%embsum, %w0 : tensor<100x16xf32>, tensor<16x16xf32>) names(["grad/emb", "grad/w0"]) counted([true, true]) max_norm(1.0) order(["grad/emb", "grad/w0"]) -> tensor<100x16xf32>, tensor<16x16xf32>
  pf.kfac_promote_inverses
  %pre = pf.run_stage precondition @stage0_precondition(%clipped#1) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %owned = pf.broadcast "grad/w0"(%pre : tensor<16x16xf32>) root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
  %update = pf.kfac_kl_clip updates(%owned : tensor<16x16xf32>) gradients(%clipped#1 : tensor<16x16xf32>) names(["grad/w0"]) counted([true]) kappa(1.0e-3) order(["grad/w0"]) -> tensor<16x16xf32>
  pf.step_result "grad/emb" %clipped#0 : tensor<100x16xf32>
  pf.step_result "grad/w0" %update : tensor<16x16xf32>
  pf.run_stage update @stage0_update(%update, %clipped#0) : (tensor<16x16xf32>, tensor<100x16xf32>) -> ()
}

// overlap=false: blocking transfers where the ops are, no request words;
// act/1's life ends at its send (its last use), so grad_act/7 takes its
// bytes: slot 2 at offset 0.
// BLOCKING: func.func @pf_rank0(%[[HOST:[a-z0-9]+]]: !llvm.ptr, %[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[COMM:[a-z0-9]+]]: !llvm.ptr, %[[SLOTS:[a-z0-9]+]]: !llvm.ptr, %[[ARENA:[a-z0-9]+]]: !llvm.ptr, %[[GROUPS:[a-z0-9]+]]: !llvm.ptr, %[[HOSTCTX:[a-z0-9]+]]: !llvm.ptr, %[[WORLD:[a-z0-9]+]]: !llvm.ptr) -> i32
// BLOCKING-NOT: llvm.alloca
// BLOCKING: call @pfrt_rank_run_stage(
// BLOCKING: %[[ACT:.*]] = llvm.getelementptr %[[SLOTS]][0] :
// BLOCKING: call @pfrt_comm_send(%[[CTX]], %[[COMM]], %[[ACT]], %{{.*}}, %{{.*}})
// BLOCKING: call @pfrt_rank_mark(
// BLOCKING: llvm.getelementptr %[[SLOTS]][2] :
// BLOCKING-NEXT: %[[AT:.*]] = arith.constant 0 : i64
// BLOCKING-NEXT: llvm.getelementptr %[[ARENA]][%[[AT]]]
// BLOCKING: %[[GRAD:.*]] = llvm.getelementptr %[[SLOTS]][2]
// BLOCKING: call @pfrt_comm_recv(%[[CTX]], %[[COMM]], %[[GRAD]], %{{.*}}, %{{.*}})
// BLOCKING-NOT: pfrt_comm_wait
// BLOCKING: call @pfrt_rank_run_stage(
// BLOCKING-NOT: pfrt_comm_wait
// BLOCKING: return

// ALL-DAG: func.func @pf_rank0(
// ALL-DAG: func.func @pf_rank1(
// The stage functions stay.
// ALL-DAG: func.func private @stage1_backward(
// Rank 1: the received act/1 is slot 0 (byte 0), the forward's saved/1 and
// loss slots 1 and 2 (bytes 256 and 512: act/1 is read by that forward, the
// loss lives until pf.step_result), the backward's grad_act/7 slot 3, back
// at byte 0 (act/1's life ended at the forward), and its grad/emb slot 4, at
// byte 576 (after the loss). pf.step_result hands the loss's slot to the
// host: its name, micro-batch -1 (the step's) and slot. grad/emb's sum is
// rank 0's to count and report: rank 1 reports no gradient.
// RANK1-DAG: llvm.mlir.global internal constant @[[SLOTS0:__pf_rank_i64_[0-9]+]](dense<0> : tensor<1xi64>)
// RANK1-DAG: llvm.mlir.global internal constant @[[SLOTS12:__pf_rank_i64_[0-9]+]](dense<[1, 2]> : tensor<2xi64>)
// RANK1-DAG: llvm.mlir.global internal constant @[[SLOTS1:__pf_rank_i64_[0-9]+]](dense<1> : tensor<1xi64>)
// RANK1-DAG: llvm.mlir.global internal constant @[[SLOTS34:__pf_rank_i64_[0-9]+]](dense<[3, 4]> : tensor<2xi64>)
// RANK1-DAG: llvm.mlir.global internal constant @[[LOSS:__pf_rank_str_[0-9]+]]("loss\00")
// Its collectives name no value: no constant of a gradient's name.
// RANK1-NOT: constant @{{.*}}("grad/
// RANK1: func.func @pf_rank1(%[[HOST:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[SLOTS:.*]]: !llvm.ptr, %[[ARENA:[a-z0-9]+]]: !llvm.ptr, %[[GROUPS:[a-z0-9]+]]: !llvm.ptr, %[[HOSTCTX:[a-z0-9]+]]: !llvm.ptr, %[[WORLD:[a-z0-9]+]]: !llvm.ptr) -> i32
// RANK1: llvm.getelementptr %[[SLOTS]][0] :
// RANK1-NEXT: %[[AT0:.*]] = arith.constant 0 : i64
// RANK1-NEXT: llvm.getelementptr %[[ARENA]][%[[AT0]]]
// RANK1: call @pfrt_comm_irecv(
// RANK1: call @pfrt_comm_wait(
// RANK1: llvm.getelementptr %[[SLOTS]][1] :
// RANK1-NEXT: %[[AT256:.*]] = arith.constant 256 : i64
// RANK1-NEXT: llvm.getelementptr %[[ARENA]][%[[AT256]]]
// RANK1: llvm.getelementptr %[[SLOTS]][2] :
// RANK1-NEXT: %[[AT512:.*]] = arith.constant 512 : i64
// RANK1-NEXT: llvm.getelementptr %[[ARENA]][%[[AT512]]]
// RANK1: %[[FIN:.*]] = llvm.mlir.addressof @[[SLOTS0]]
// RANK1-NEXT: arith.constant 2 : i64
// RANK1-NEXT: %[[FOUT:.*]] = llvm.mlir.addressof @[[SLOTS12]]
// RANK1-NEXT: call @pfrt_rank_run_stage(%[[HOST]], %c1_i64{{[_0-9]*}}, {{.*}}, %c1_i64{{[_0-9]*}}, %[[FIN]], %c2_i64{{[_0-9]*}}, %[[FOUT]])
// RANK1: llvm.getelementptr %[[SLOTS]][3] :
// RANK1-NEXT: %[[AGAIN0:.*]] = arith.constant 0 : i64
// RANK1-NEXT: llvm.getelementptr %[[ARENA]][%[[AGAIN0]]]
// RANK1: llvm.getelementptr %[[SLOTS]][4] :
// RANK1-NEXT: %[[AT576:.*]] = arith.constant 576 : i64
// RANK1-NEXT: llvm.getelementptr %[[ARENA]][%[[AT576]]]
// RANK1: %[[BIN:.*]] = llvm.mlir.addressof @[[SLOTS1]]
// RANK1-NEXT: arith.constant 2 : i64
// RANK1-NEXT: %[[BOUT:.*]] = llvm.mlir.addressof @[[SLOTS34]]
// RANK1-NEXT: call @pfrt_rank_run_stage(%[[HOST]], %c2_i64{{[_0-9]*}}, {{.*}}, %c1_i64{{[_0-9]*}}, %[[BIN]], %c2_i64{{[_0-9]*}}, %[[BOUT]])
// RANK1: llvm.getelementptr %[[SLOTS]][3] :
// RANK1: call @pfrt_comm_isend(
// RANK1: %[[NAME:.*]] = llvm.mlir.addressof @[[LOSS]]
// RANK1-NEXT: %[[SLOT2:.*]] = arith.constant 2 : i64
// RANK1-NEXT: call @pfrt_rank_step_result(%[[HOST]], %c4_i64{{[_0-9]*}}, %[[NAME]], %[[SLOT2]])
// RANK1: call @pfrt_comm_all_reduce_sum(
// Its clip_gradients (op 6) clips its one gradient, the sum (slot 5), into
// slot 6 (in its bytes, 576). Its array of terms has the order's length (2)
// but it counts no term (counted [false]: rank 0, the sum's lowest member,
// does): no pfrt_dot, only its zeros in the all-reduce; so both ranks form
// the same norm.
// RANK1: llvm.getelementptr %[[SLOTS]][6] :
// RANK1-NEXT: %[[CLIPPED_AT:.*]] = arith.constant 576 : i64
// RANK1: call @pfrt_rank_mark(%[[HOST]], %c6_i64{{[_0-9]*}}, %c0_i32
// RANK1: %[[NTERMS:.*]] = arith.constant 2 : i64
// RANK1-NEXT: llvm.alloca %[[NTERMS]] x f64
// RANK1-NOT: pfrt_dot
// RANK1: call @pfrt_comm_all_reduce_sum(%[[HOSTCTX]], %[[WORLD]],
// RANK1: %[[NORM:.*]] = llvm.intr.sqrt
// RANK1: %[[LIST:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
// RANK1-NEXT: llvm.getelementptr %[[SLOTS]][6]
// RANK1: %[[NCLIP:.*]] = arith.constant 1 : i32
// RANK1-NEXT: %[[MAXNORM:.*]] = arith.constant 1.000000e+00 : f64
// RANK1-NEXT: call @pfrt_clip_to_norm(%{{.*}}, %[[LIST]], %[[NCLIP]], %[[MAXNORM]], %[[NORM]])
// The broadcast's other member (op 7) receives the root's value into slot
// 7 (rank 0 is group rank 0).
// RANK1: llvm.getelementptr %[[SLOTS]][7] :
// RANK1: %[[RECEIVED:.*]] = llvm.getelementptr %[[SLOTS]][7] :
// RANK1: call @pfrt_comm_broadcast(%{{.*}}, %{{.*}}, %[[RECEIVED]], %c0_i32{{[_0-9]*}})
// Its KL-clip (op 8) has no updates: it adds zeros to the all-reduce of the
// inner products and forms the same ν, scaling nothing.
// RANK1: call @pfrt_rank_mark(%[[HOST]], %c8_i64{{[_0-9]*}}, %c0_i32
// RANK1-NOT: pfrt_dot
// RANK1: call @pfrt_comm_all_reduce_sum(%[[HOSTCTX]], %[[WORLD]],
// RANK1: call @pfrt_rank_step_scalar(
// RANK1-NOT: pfrt_scale
// RANK1: call @pfrt_rank_mark(%[[HOST]], %c8_i64{{[_0-9]*}}, %c1_i32
// RANK1-NOT: pfrt_rank_step_result(
// RANK1: call @pfrt_comm_wait_all(
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x16xf32>
  %saved, %loss = pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<f32>)
  %grad, %emb = pf.run_stage backward @stage1_backward(%saved) microbatch(0) : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<100x16xf32>)
  pf.send_act %grad microbatch(0) to(0) tag(2) : tensor<4x16xf32>
  pf.step_result "loss" %loss : tensor<f32>
  %embsum = pf.all_reduce "grad/emb"(%emb : tensor<100x16xf32>) ranks([0, 1]) order(library) : tensor<100x16xf32> -> tensor<100x16xf32>
  %clipped = pf.clip_gradients(%embsum : tensor<100x16xf32>) names(["grad/emb"]) counted([false]) max_norm(1.0) order(["grad/emb", "grad/w0"]) -> tensor<100x16xf32>
  %owned = pf.broadcast "grad/w0" root(0) ranks([0, 1]) : tensor<16x16xf32> -> tensor<16x16xf32>
  pf.kfac_kl_clip updates() gradients() names([]) counted([]) kappa(1.0e-3) order(["grad/w0"])
}

// MISSING: error: pf-lower-rank-programs: no pf.rank_program @rank7
