//===- StepEndRules.cpp - formulas both step lowerings emit -----------------===//

#include "StepEndRules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

Value mlir::pf::emitKLClipFactor(OpBuilder &b, Location loc, Value lr, Value sumOfDots,
                                 double kappa) {
  auto constant = [&](double value) {
    return arith::ConstantFloatOp::create(b, loc, b.getF64Type(), llvm::APFloat(value));
  };
  Value denom = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, lr, lr), sumOfDots);
  Value ratio = arith::DivFOp::create(b, loc, constant(kappa), denom);
  Value root = LLVM::SqrtOp::create(b, loc, ratio);
  Value capped = arith::MinimumFOp::create(b, loc, root, constant(1.0));
  Value positive =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, denom, constant(0.0));
  return arith::SelectOp::create(b, loc, positive, capped, constant(1.0));
}
