//===- PFAttrs.td - pf attributes ---------------------------*- tablegen -*-===//
//
// The runtime plan: what the host needs to fill the tensor table of a
// function lowered by pf-lower-to-runtime (JIT, AOT header and profiling read
// it). Typed, so a plan is checked when it is built or parsed instead of being
// picked apart field by field at run time.
//
//===----------------------------------------------------------------------===//
#ifndef PF_ATTRS_TD
#define PF_ATTRS_TD

include "pf/Dialect/PF/IR/PFDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def PF_BufferKind : I32EnumAttr<"BufferKind", "where a planned buffer lives", [
    I32EnumAttrCase<"Input", 0, "input">,
    I32EnumAttrCase<"Output", 1, "output">,
    I32EnumAttrCase<"Param", 2, "param">,
    I32EnumAttrCase<"Constant", 3, "constant">,
    I32EnumAttrCase<"Arena", 4, "arena">]> {
  let cppNamespace = "::mlir::pf";
  let genSpecializedAttr = 0;
}

class PF_Attr<string name, string attrMnemonic> : AttrDef<PF_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def PF_PlannedBufferAttr : PF_Attr<"PlannedBuffer", "buffer"> {
  let summary = "one buffer of the runtime plan";
  let description = [{
    `index` is the input or output number (kinds input, output), `offset`
    the byte offset in the arena (arena), `name` the parameter (param) and
    `value` the data (constant); exactly the field of its kind is present.
  }];
  let parameters = (ins EnumParameter<PF_BufferKind>:$kind, "int64_t":$bytes,
                        OptionalParameter<"std::optional<int64_t>">:$index,
                        OptionalParameter<"std::optional<int64_t>">:$offset,
                        OptionalParameter<"::mlir::StringAttr">:$name,
                        OptionalParameter<"::mlir::ElementsAttr">:$value);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def PF_PlannedTensorAttr : PF_Attr<"PlannedTensor", "tensor"> {
  let summary = "one descriptor of the tensor table";
  let description = [{
    The buffer (an index into the plan's buffers) the descriptor points into,
    its pfrt dtype code (PFRT_F32, ...) and its shape.
  }];
  let parameters = (ins "int64_t":$buffer, "int32_t":$dtype,
                        "::mlir::DenseI64ArrayAttr":$shape);
  let assemblyFormat = "`<` struct(params) `>`";
}

def PF_PlanIOAttr : PF_Attr<"PlanIO", "io"> {
  let summary = "a graph input or output and its table entry";
  let description = [{
    `zero_fill` (outputs only): the host zeroes the output's buffer before
    each run, because the program may leave some of it unwritten (a kernel
    under a condition, an update in place). Outputs without it are written
    whole by their kernel or copy before anything reads them, so the host
    hands over its buffer as it is.
  }];
  let parameters = (ins "::mlir::StringAttr":$name, "int64_t":$tensor,
                        DefaultValuedParameter<"bool", "false">:$zero_fill);
  let assemblyFormat = "`<` struct(params) `>`";
}

def PF_RuntimePlanAttr : PF_Attr<"RuntimePlan", "runtime_plan"> {
  let summary = "the buffer plan of a function lowered to the runtime ABI";
  let description = [{
    `buffers` (#pf.buffer), `tensors` (#pf.tensor: the table, in order),
    `inputs` and `outputs` (#pf.io, in argument and result order), `op_names`
    (one string per op of the source function: the op index of a failing
    status and of profiling hooks), `arena_bytes` (the arena to allocate) and
    `peak_live_bytes` (the lower bound any placement has to meet).
  }];
  let parameters = (ins "int64_t":$arena_bytes, "::mlir::ArrayAttr":$buffers,
                        "::mlir::ArrayAttr":$inputs, "::mlir::ArrayAttr":$op_names,
                        "::mlir::ArrayAttr":$outputs, "int64_t":$peak_live_bytes,
                        "::mlir::ArrayAttr":$tensors);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the attribute on the lowered function.
    static constexpr ::llvm::StringLiteral kAttrName = "pf.runtime_plan";
    auto getBufferList() const { return getBuffers().getAsRange<PlannedBufferAttr>(); }
    auto getTensorList() const { return getTensors().getAsRange<PlannedTensorAttr>(); }
    auto getInputList() const { return getInputs().getAsRange<PlanIOAttr>(); }
    auto getOutputList() const { return getOutputs().getAsRange<PlanIOAttr>(); }
    auto getOpNameList() const { return getOpNames().getAsRange<::mlir::StringAttr>(); }
  }];
}

#endif // PF_ATTRS_TD
