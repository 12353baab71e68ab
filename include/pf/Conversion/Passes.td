//===- Passes.td - pf lowering passes ----------------------*- tablegen -*-===//
#ifndef PF_CONVERSION_PASSES_TD
#define PF_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def PFLowerToRuntime : Pass<"pf-lower-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower a pf function to calls of the pfrt runtime ABI";
  let description = [{
    Plans every tensor of the entry function into a buffer (graph inputs and
    outputs and parameters are the host's; intermediates share one arena,
    placed by liveness; reshapes alias their input) and replaces the function
    with `pf_main(ctx, table) -> i64`: `table` is an array of `pfrt_tensor`
    descriptors the host fills from the typed `pf.runtime_plan` attribute
    (`#pf.runtime_plan<...>`: buffers, tensors, inputs, outputs, op names,
    arena and peak live bytes), and each op becomes the `func.call @pfrt_*`
    of its pattern (one file per op family), the callees declared from
    `include/pf/Runtime/pfrt_abi.def`. The result is 0, or
    ((op index + 1) << 32 | pfrt status) of the first failing call. The rest
    lowers with the standard MLIR passes to LLVM. A lowered module runs one
    function: the lowered function is replaced, and the module's other
    functions with a body (e.g. the other stage functions of pf-split-stages)
    are erased; external declarations stay.

    Example: each op's operands and results are table entries
    (`llvm.getelementptr` into `table`), its call's status is checked, and a
    failure branches to the exit with the op's code:

    ```mlir
    // Before
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = pf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }
    // After
    func.func @pf_main(%arg0: !llvm.ptr, %arg1: !llvm.ptr) -> i64 attributes {llvm.emit_c_interface, pf.runtime_plan = #pf.runtime_plan<arena_bytes = 0, buffers = [#pf.buffer<kind = input, bytes = 16, index = 0>, #pf.buffer<kind = output, bytes = 16, index = 0>], inputs = [#pf.io<name = "input0", tensor = 0>], op_names = ["pf.exp"], outputs = [#pf.io<name = "output0", tensor = 1>], peak_live_bytes = 0, tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [4]>, #pf.tensor<buffer = 1, dtype = 1, shape = [4]>]>} {
      %0 = llvm.getelementptr %arg1[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
      %1 = llvm.getelementptr %arg1[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i32, i32, array<8 x i64>)>
      %2 = call @pfrt_exp(%arg0, %0, %1) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
      %3 = arith.extui %2 : i32 to i64
      %c0_i64 = arith.constant 0 : i64
      %4 = arith.cmpi ne, %3, %c0_i64 : i64
      %c4294967296_i64 = arith.constant 4294967296 : i64
      %5 = arith.ori %3, %c4294967296_i64 : i64
      cf.cond_br %4, ^bb2(%5 : i64), ^bb1
    ^bb1:  // pred: ^bb0
      %c0_i64_0 = arith.constant 0 : i64
      return %c0_i64_0 : i64
    ^bb2(%6: i64):  // pred: ^bb0
      return %6 : i64
    }
    func.func private @pfrt_exp(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect", "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect", "::mlir::pf::PFDialect"];
  let options = [
    Option<"entryName", "entry", "std::string", /*default=*/"\"pf_main\"",
           "Name of the generated function">,
    Option<"functionName", "function", "std::string", /*default=*/"\"\"",
           "Function to lower (default: the first function with a body)">,
    Option<"profile", "profile", "bool", /*default=*/"false",
           "Call pf_profile_begin(i64 op) / pf_profile_end(i64 op), provided by "
           "the host, around every kernel call">,
  ];
}

def PFLowerRankPrograms : Pass<"pf-lower-rank-programs", "::mlir::ModuleOp"> {
  let summary = "Lower pf.rank_program ops to calls of the rank host ABI";
  let description = [{
    Replaces each `pf.rank_program @P` (or only the one named by `program`)
    by `func.func @pf_P(%host, %ctx, %comm, %slots: !llvm.ptr) -> i32`. Its
    stage values are the descriptors of `%slots` (`stageValueSlots`: the
    values in program order), which the host fills. The program moves them
    itself: `pf.recv_act` has the host allocate the slot
    (`pfrt_rank_alloc`) and calls `pfrt_comm_irecv` on `%ctx`/`%comm`,
    waited for (`pfrt_comm_wait`) right before the value's first reader;
    `pf.send_act` calls `pfrt_comm_isend`, and the sends are waited for
    (`pfrt_comm_wait_all`) at the end, after which the sent slots are
    released (`overlap=false`: blocking `pfrt_comm_send`/`recv` where the
    op is). The other ops call, in the program's order, the functions of
    `include/pf/Runtime/pfrt_rank.h` (declared from `pfrt_rank_abi.def`):
    `pf.run_stage` `pfrt_rank_run_stage` with its operands' and results'
    slots, `pf.all_reduce`, `pf.broadcast`, `pf.reduce_microbatch`, the
    clipping ops and `pf.kfac_promote_inverses` theirs; `pfrt_rank_release`
    follows a value's last use, `pfrt_rank_mark` brackets each transfer for
    the host's timeline. Names, slot lists, rank lists, shapes and orders
    become constant globals; every call passes the op's index in its
    program. After each call a non-zero status returns from the function at
    once; the result is 0 when every op ran. The stage functions stay as
    they are (each lowers with pf-lower-to-runtime). The rest lowers with
    the standard MLIR passes to LLVM.

    ```mlir
    // Before
    pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
      %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4x16xf32>
      %saved = pf.run_stage forward @stage1_forward(%act) microbatch(0)
          : (tensor<4x16xf32>) -> tensor<4x16xf32>
      ...
    }
    // After
    func.func @pf_rank1(%host: !llvm.ptr, %ctx: !llvm.ptr, %comm: !llvm.ptr,
                        %slots: !llvm.ptr) -> i32 {
      %requests = llvm.alloca %c1 x i64 : (i64) -> !llvm.ptr
      %0 = call @pfrt_rank_alloc(%host, %c0, %c0, %c0, %c1_i32, %c2, %shape)
      ... cf.cond_br on %0 != 0 to the exit
      %t = llvm.getelementptr %slots[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<...>
      %1 = call @pfrt_comm_irecv(%ctx, %comm, %t, %c0_i32, %c0_i32, %requests)
      ...
      %2 = call @pfrt_comm_wait(%ctx, %comm, %request)
      %3 = call @pfrt_rank_run_stage(%host, %c1, %c0_i32, %fn, %c0, %c-1, %c1, %ins,
                                     %c1, %outs)
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect", "::mlir::func::FuncDialect",
                           "::mlir::pf::PFDialect"];
  let options = [
    Option<"programName", "program", "std::string", /*default=*/"\"\"",
           "The pf.rank_program to lower (default: every one); the others are erased">,
    Option<"overlap", "overlap", "bool", /*default=*/"true",
           "Post sends and recvs (pfrt_comm_isend/irecv): a recv is waited for right "
           "before its first reader, the sends at the program's end; false: blocking "
           "pfrt_comm_send/recv where the op is">,
  ];
}

#endif // PF_CONVERSION_PASSES_TD
