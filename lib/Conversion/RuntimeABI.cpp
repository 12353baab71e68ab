//===- RuntimeABI.cpp - the pfrt kernels the lowering may call -------------===//
#include "RuntimeABI.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::pf::abi;

namespace {
// The kind names pfrt_abi.def uses.
constexpr ArgKind Tensor = ArgKind::Tensor, TensorArray = ArgKind::TensorArray,
                  I64Array = ArgKind::I64Array, F64Out = ArgKind::F64Out,
                  I32Out = ArgKind::I32Out, I64Out = ArgKind::I64Out, Comm = ArgKind::Comm,
                  I32 = ArgKind::I32, I64 = ArgKind::I64,
                  F64 = ArgKind::F64;

#define PFRT_KERNEL(name, ...) constexpr ArgKind name##_args[] = {__VA_ARGS__};
#include "pf/Runtime/pfrt_abi.def"

#define PFRT_KERNEL(name, ...) Kernel{#name, name##_args},
const Kernel kKernels[] = {
#include "pf/Runtime/pfrt_abi.def"
};
} // namespace

llvm::ArrayRef<Kernel> mlir::pf::abi::kernels() { return kKernels; }

const Kernel *mlir::pf::abi::lookupKernel(llvm::StringRef name) {
  for (const Kernel &kernel : kKernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

Type mlir::pf::abi::argType(MLIRContext *ctx, ArgKind kind) {
  switch (kind) {
  case ArgKind::I32:
    return IntegerType::get(ctx, 32);
  case ArgKind::I64:
    return IntegerType::get(ctx, 64);
  case ArgKind::F64:
    return Float64Type::get(ctx);
  case ArgKind::Tensor:
  case ArgKind::TensorArray:
  case ArgKind::I64Array:
  case ArgKind::F64Out:
  case ArgKind::I32Out:
  case ArgKind::I64Out:
  case ArgKind::Comm:
    return LLVM::LLVMPointerType::get(ctx);
  }
  llvm_unreachable("unknown argument kind");
}

FunctionType mlir::pf::abi::kernelType(MLIRContext *ctx, const Kernel &kernel) {
  SmallVector<Type> inputs{LLVM::LLVMPointerType::get(ctx)};
  for (ArgKind kind : kernel.args)
    inputs.push_back(argType(ctx, kind));
  return FunctionType::get(ctx, inputs, {IntegerType::get(ctx, 32)});
}
