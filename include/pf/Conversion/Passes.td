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
    lowers with the standard MLIR passes to LLVM.

    Example: `%y = pf.exp %x` becomes
    `%s = func.call @pfrt_exp(%ctx, %x_entry, %y_entry)`, a check of `%s`
    and a branch to the failure exit.
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

#endif // PF_CONVERSION_PASSES_TD
