//===- PFParamOps.td - named parameters --------------------*- tablegen -*-===//
#ifndef PF_PARAM_OPS_TD
#define PF_PARAM_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"
include "mlir/IR/SymbolInterfaces.td"

def PF_ParamOp : PF_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named trainable parameter (an ONNX initializer)";
  let description = [{
    Keeps the initializer's name as its symbol. The data, when present, is an
    elements attribute — normally a `dense_resource` blob, so the op text stays
    one line and bytecode stores the data in binary. Without `value` the
    parameter is shapes-only (imported with `--no-weights`).

    ```mlir
    pf.param @"bert.embeddings.word_embeddings.weight" : tensor<30522x128xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                   OptionalAttr<ElementsAttr>:$value);
  let assemblyFormat = "$sym_name `:` $type (`=` $value^)? attr-dict";
  let hasVerifier = 1;
}

def PF_ParamRefOp : PF_Op<"param_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a named parameter";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$name attr-dict `:` type($output)";
}

#endif // PF_PARAM_OPS_TD
