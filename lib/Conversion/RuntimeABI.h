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
  F64
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

} // namespace mlir::pf::abi

#endif // PF_LIB_CONVERSION_RUNTIMEABI_H
