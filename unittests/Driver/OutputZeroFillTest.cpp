//===- OutputZeroFillTest.cpp - which outputs a run clears first -----------===//
//
// Outputs written whole by their kernel are handed over as they are (no
// memset of BERT's 125 MB of logits before every run); outputs of ops that
// write in place or under a condition keep starting from zeros.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/Runner.h"
#include "pf/Runtime/pfrt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::pf::driver;

namespace {
// A forward output (exp) and the outcome of a K-FAC refresh, an op that
// writes parameters in place and runs only on due steps.
constexpr const char *kModule = R"mlir(
pf.param @A : tensor<2x2xf32> = dense<[[2.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
pf.param @B : tensor<2x2xf32> = dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
pf.param @A_inv : tensor<2x2xf32> = dense<0.0> : tensor<2x2xf32>
pf.param @B_inv : tensor<2x2xf32> = dense<0.0> : tensor<2x2xf32>
func.func @main(%x: tensor<4xf32> {pf.name = "x"}, %step: tensor<i64> {pf.name = "step"})
    -> (tensor<4xf32> {pf.name = "y"}, tensor<i32> {pf.name = "outcome"}) {
  %y = pf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %o = pf.kfac.refresh_inverses(@A, @B) into (@A_inv, @B_inv) step %step {every = 4 : i64} : tensor<i64> -> tensor<i32>
  return %y, %o : tensor<4xf32>, tensor<i32>
}
)mlir";

class OutputZeroFillTest : public ::testing::Test {
protected:
  OutputZeroFillTest() {
    DialectRegistry registry;
    registry.insert<mlir::pf::PFDialect, func::FuncDialect, arith::ArithDialect,
                    cf::ControlFlowDialect, LLVM::LLVMDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kModule, &context);
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(OutputZeroFillTest, ForwardOutputsAreOverwrittenAndInPlaceOnesStartAtZero) {
  ASSERT_TRUE(module);
  CompiledModel::Options options;
  options.threads = 1;
  options.ownParameters = true;
  auto model = CompiledModel::compile(*module, options);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  const auto &outputs = (*model)->outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "y");
  EXPECT_FALSE(outputs[0].zeroFill);
  EXPECT_EQ(outputs[1].name, "outcome");
  EXPECT_TRUE(outputs[1].zeroFill);

  std::vector<float> x = {0.0f, 1.0f, -1.0f, 2.0f};
  int64_t step = 2; // not due: (2 - 1) mod 4 != 0
  // Garbage in both output buffers, as a reused buffer holds.
  std::vector<float> y(4, std::numeric_limits<float>::quiet_NaN());
  int32_t outcome = 77;
  const std::vector<int64_t> four = {4}, scalar;
  TensorView inputs[] = {{"x", PFRT_F32, four, x.data()}, {"step", PFRT_I64, scalar, &step}};
  TensorView outs[] = {{"y", PFRT_F32, four, y.data()}, {"outcome", PFRT_I32, scalar, &outcome}};
  ASSERT_FALSE(bool((*model)->run(inputs, outs)));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(y[i], std::exp(x[i])) << i;
  EXPECT_EQ(outcome, 0); // PFRT_KFAC_INVERTED: what a step without a refresh reports

  // The NumPy-style run reuses its arrays: the same values come back.
  std::map<std::string, NpyArray> in, out;
  in["x"].dtype = PFRT_F32;
  in["x"].shape = {4};
  in["x"].data.assign(reinterpret_cast<char *>(x.data()),
                      reinterpret_cast<char *>(x.data()) + 4 * sizeof(float));
  in["step"].dtype = PFRT_I64;
  in["step"].data.assign(reinterpret_cast<char *>(&step),
                         reinterpret_cast<char *>(&step) + sizeof step);
  for (int run = 0; run < 2; ++run) {
    ASSERT_FALSE(bool((*model)->run(in, out)));
    const float *values = reinterpret_cast<const float *>(out["y"].data.data());
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_FLOAT_EQ(values[i], std::exp(x[i])) << run << " " << i;
    EXPECT_EQ(*reinterpret_cast<const int32_t *>(out["outcome"].data.data()), 0) << run;
  }
}

} // namespace
