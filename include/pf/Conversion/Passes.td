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
    descriptors the host fills from the `pf.tensors` / `pf.buffers`
    attributes, and each op becomes one `func.call @pfrt_*` on descriptors
    from it. The result is 0, or (op index << 32 | pfrt status) of the first
    failing call. The rest lowers with the standard MLIR passes to LLVM.
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
