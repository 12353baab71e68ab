//===- RuntimeABI.cpp - the pfrt kernels the lowering may call -------------===//
#include "RuntimeABI.h"
#include "pf/Runtime/pfrt.h"

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
                  F64 = ArgKind::F64, Str = ArgKind::Str;

#define PFRT_KERNEL(name, ...) constexpr ArgKind name##_args[] = {__VA_ARGS__};
#include "pf/Runtime/pfrt_abi.def"

#define PFRT_KERNEL(name, ...) Kernel{#name, name##_args},
const Kernel kKernels[] = {
#include "pf/Runtime/pfrt_abi.def"
};

#define PFRT_RANK_CALL(name, ...) constexpr ArgKind name##_args[] = {__VA_ARGS__};
#include "pf/Runtime/pfrt_rank_abi.def"

#define PFRT_RANK_CALL(name, ...) Kernel{#name, name##_args},
const Kernel kRankCalls[] = {
#include "pf/Runtime/pfrt_rank_abi.def"
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
  case ArgKind::Str:
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

llvm::ArrayRef<Kernel> mlir::pf::abi::rankCalls() { return kRankCalls; }

const Kernel *mlir::pf::abi::lookupRankCall(llvm::StringRef name) {
  for (const Kernel &call : kRankCalls)
    if (call.name == name)
      return &call;
  return nullptr;
}

FunctionType mlir::pf::abi::rankCallType(MLIRContext *ctx, const Kernel &call) {
  // Same shape as a kernel: a leading pointer (the host instead of the
  // context), the kinds, an i32 status.
  return kernelType(ctx, call);
}

int32_t mlir::pf::abi::dtypeCode(Type element) {
  if (element.isF32()) return PFRT_F32;
  if (element.isF64()) return PFRT_F64;
  if (element.isF16()) return PFRT_F16;
  if (element.isInteger(64)) return PFRT_I64;
  if (element.isInteger(32)) return PFRT_I32;
  if (element.isInteger(8)) return PFRT_I8;
  if (element.isInteger(1)) return PFRT_BOOL;
  return 0;
}
