//===- RuntimeABI.h - the pfrt kernels the lowering may call ------*- C++ -*-===//
//
// The lowering's view of include/pf/Runtime/pfrt_abi.def: each kernel's name
// and argument kinds, and the MLIR types they lower to. Callees are declared
// from this table, never from the types at a call site.
//
//===----------------------------------------------------------------------===//
#ifndef PF_LIB_CONVERSION_RUNTIMEABI_H
#define PF_LIB_CONVERSION_RUNTIMEABI_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::pf::abi {

/// Argument kinds of pfrt_abi.def (that file lists their C types).
enum class ArgKind : uint8_t {
  Tensor,
  TensorArray,
  I64Array,
  F64Out,
  I32Out,
  I64Out,
  Comm,
  I32,
  I64,
  F64,
  Str ///< pfrt_rank_abi.def: a NUL-terminated constant string
};

struct Kernel {
  llvm::StringRef name;
  /// The arguments after the leading context.
  llvm::ArrayRef<ArgKind> args;
};

/// Every kernel of pfrt_abi.def, in its order.
llvm::ArrayRef<Kernel> kernels();

/// The kernel named `name`, or null when pfrt_abi.def has none.
const Kernel *lookupKernel(llvm::StringRef name);

/// The type an argument of `kind` has in the lowered code.
Type argType(MLIRContext *ctx, ArgKind kind);

/// (!llvm.ptr context, arguments...) -> i32 status.
FunctionType kernelType(MLIRContext *ctx, const Kernel &kernel);

/// pfrt dtype code (PFRT_F32, ...) of an element type; 0 when the runtime
/// has none.
int32_t dtypeCode(Type element);

/// Every function of pfrt_rank_abi.def (what a lowered rank program calls,
/// after the leading pfrt_rank_host pointer), in its order.
llvm::ArrayRef<Kernel> rankCalls();

/// The rank call named `name`, or null.
const Kernel *lookupRankCall(llvm::StringRef name);

/// (!llvm.ptr host, the kinds...) -> i32.
FunctionType rankCallType(MLIRContext *ctx, const Kernel &call);

} // namespace mlir::pf::abi

#endif // PF_LIB_CONVERSION_RUNTIMEABI_H
