//===- ProgramTest.cpp - CompiledProgram: several entries, shared parameters ===//
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

#include <cstring>

using namespace mlir;
using namespace mlir::pf::driver;

namespace {
// @update writes @w in place (SGD with momentum); @read returns w + x.
constexpr const char *kModule = R"mlir(
pf.param @w : tensor<4xf32> = dense<1.0> : tensor<4xf32>
pf.param @w.m : tensor<4xf32> = dense<0.0> : tensor<4xf32>
func.func @update(%g: tensor<4xf32> {pf.name = "g"}, %lr: tensor<f64> {pf.name = "lr"}) {
  pf.sgd_update @w momentum_buffer @w.m grad %g lr %lr : tensor<4xf32>, tensor<f64>
  return
}
func.func @read(%x: tensor<4xf32> {pf.name = "x"}) -> (tensor<4xf32> {pf.name = "y"}) {
  %w = pf.param_ref @w : tensor<4xf32>
  %y = pf.add %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
)mlir";

NpyArray f32(std::vector<float> values) {
  NpyArray a;
  a.dtype = PFRT_F32;
  a.shape = {int64_t(values.size())};
  a.data.resize(values.size() * sizeof(float));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

NpyArray f64Scalar(double value) {
  NpyArray a;
  a.dtype = PFRT_F64;
  a.data.resize(sizeof(double));
  std::memcpy(a.data.data(), &value, sizeof(double));
  return a;
}

std::vector<float> values(const NpyArray &a) {
  std::vector<float> v(a.numElements());
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(float));
  return v;
}

class ProgramTest : public ::testing::Test {
protected:
  ProgramTest() {
    DialectRegistry registry;
    registry.insert<mlir::pf::PFDialect, func::FuncDialect, arith::ArithDialect,
                    cf::ControlFlowDialect, LLVM::LLVMDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kModule, &context);
  }
  llvm::Expected<std::unique_ptr<CompiledProgram>> compile(std::vector<std::string> functions) {
    CompiledProgram::Options options;
    options.threads = 1;
    options.functions = std::move(functions);
    return CompiledProgram::compile(*module, options);
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ProgramTest, AnUpdateByOneEntryIsSeenByTheOther) {
  ASSERT_TRUE(module);
  auto program = compile({"update", "read"});
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  CompiledProgram &p = **program;
  EXPECT_EQ(p.entries(), (std::vector<std::string>{"update", "read"}));
  ASSERT_EQ(p.inputs("read").size(), 1u);
  EXPECT_EQ(p.inputs("read")[0].name, "x");
  ASSERT_EQ(p.outputs("read").size(), 1u);
  EXPECT_EQ(p.outputs("read")[0].name, "y");
  EXPECT_TRUE(p.outputs("update").empty());
  ASSERT_EQ(p.parameters().size(), 2u);
  EXPECT_EQ(p.parameters()[0].name, "w");
  EXPECT_EQ(p.parameters()[1].name, "w.m");

  std::map<std::string, NpyArray> out;
  ASSERT_FALSE(bool(p.run("read", {{"x", f32({0, 0, 0, 0})}}, out)));
  EXPECT_EQ(values(out["y"]), (std::vector<float>{1, 1, 1, 1}));

  // w -= lr·g (the first momentum step is the gradient itself).
  std::map<std::string, NpyArray> none;
  ASSERT_FALSE(bool(p.run("update", {{"g", f32({1, 2, 3, 4})}, {"lr", f64Scalar(0.5)}}, none)));
  ASSERT_FALSE(bool(p.run("read", {{"x", f32({0, 0, 0, 0})}}, out)));
  EXPECT_EQ(values(out["y"]), (std::vector<float>{0.5f, 0, -0.5f, -1}));
  // The host sees the one copy too, momentum state included.
  const CompiledModel::Parameter *w = p.parameter("w");
  ASSERT_NE(w, nullptr);
  EXPECT_FLOAT_EQ(static_cast<const float *>(w->data)[3], -1.0f);
  EXPECT_FLOAT_EQ(static_cast<const float *>(p.parameter("w.m")->data)[3], 4.0f);

  // The host writes a parameter: the next entry reads it.
  static_cast<float *>(w->data)[0] = 7.0f;
  ASSERT_FALSE(bool(p.run("read", {{"x", f32({1, 1, 1, 1})}}, out)));
  EXPECT_EQ(values(out["y"])[0], 8.0f);
}

TEST_F(ProgramTest, BadRequestsAreErrors) {
  ASSERT_TRUE(module);
  auto missing = compile({"read", "nosuch"});
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no function named 'nosuch'"),
            std::string::npos);
  auto twice = compile({"read", "read"});
  ASSERT_FALSE(bool(twice));
  EXPECT_NE(llvm::toString(twice.takeError()).find("listed twice"), std::string::npos);
  auto empty = compile({});
  ASSERT_FALSE(bool(empty));
  llvm::consumeError(empty.takeError());

  auto program = compile({"read"});
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  std::map<std::string, NpyArray> out;
  llvm::Error unknown = (*program)->run("update", {}, out);
  ASSERT_TRUE(bool(unknown));
  EXPECT_NE(llvm::toString(std::move(unknown)).find("no compiled function named 'update'"),
            std::string::npos);
  llvm::Error wrongShape = (*program)->run("read", {{"x", f32({1, 2})}}, out);
  ASSERT_TRUE(bool(wrongShape));
  EXPECT_NE(llvm::toString(std::move(wrongShape)).find("input 'x' of 'read' has shape"),
            std::string::npos);
  // Only what the compiled entries read is a parameter of the program.
  EXPECT_EQ((*program)->parameters().size(), 1u);
}
} // namespace
