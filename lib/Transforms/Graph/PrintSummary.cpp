//===- PrintSummary.cpp - readable summary of a pf module -----------------===//
//
// Prints what an engineer checks after import: the entry signature, parameter
// counts and bytes, op counts, the encoder blocks with their K-FAC layers, and
// the forward FLOPs from the cost interface.
//
//===----------------------------------------------------------------------===//
#include "pf/Transforms/Utils.h"
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include <map>

namespace mlir::pf {
#define GEN_PASS_DEF_PFPRINTSUMMARY
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::optional<int64_t> blockOfParam(SymbolTable &symbols, Value value) {
  auto ref = value ? value.getDefiningOp<ParamRefOp>() : ParamRefOp();
  return ref ? encoderBlockOfParam(symbols, ref.getName()) : std::nullopt;
}

/// A linear layer's block from its weight or, for exporters that lose the
/// weight's name (onnx::MatMul_N), its bias.
std::optional<int64_t> blockOfLinear(SymbolTable &symbols, LinearOp linear) {
  if (auto block = blockOfParam(symbols, linear.getWeight()))
    return block;
  return blockOfParam(symbols, linear.getBias());
}

struct BlockCounts {
  int64_t linear = 0, layerNorm = 0, gelu = 0;
};

struct Summary {
  std::map<std::string, int64_t> opCounts;
  int64_t params = 0, paramElements = 0, paramsWithData = 0;
  double paramBytes = 0, forwardFlops = 0;
  std::map<int64_t, BlockCounts> blocks;
  int64_t linearsOutsideBlocks = 0;
  SmallVector<std::pair<std::string, std::string>> inputs, outputs;
  std::string entry;
};

Summary summarize(ModuleOp module) {
  Summary s;
  SymbolTable symbols(module);
  for (auto param : module.getOps<ParamOp>()) {
    auto type = cast<RankedTensorType>(param.getType());
    ++s.params;
    s.paramElements += type.getNumElements();
    s.paramBytes += tensorBytes(type);
    s.paramsWithData += param.getValue().has_value();
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (s.entry.empty()) {
      s.entry = func.getSymName().str();
      for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
        auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttrName);
        s.inputs.push_back({name ? name.str() : llvm::formatv("arg{0}", i).str(), typeString(type)});
      }
      for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
        s.outputs.push_back({name ? name.str() : llvm::formatv("result{0}", i).str(), typeString(type)});
      }
    }
  }
  module.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "pf" && !isa<ParamOp>(op))
      ++s.opCounts[op->getName().getStringRef().str()];
    if (auto cost = dyn_cast<CostOpInterface>(op))
      s.forwardFlops += cost.getForwardFlops();
    if (auto linear = dyn_cast<LinearOp>(op)) {
      if (auto block = blockOfLinear(symbols, linear))
        ++s.blocks[*block].linear;
      else
        ++s.linearsOutsideBlocks;
    } else if (auto norm = dyn_cast<LayerNormOp>(op)) {
      if (auto block = blockOfParam(symbols, norm.getScale()))
        ++s.blocks[*block].layerNorm;
    } else if (auto gelu = dyn_cast<GeluOp>(op)) {
      // GELU has no weights: it belongs to the block of the linear feeding it.
      if (auto producer = gelu.getInput().getDefiningOp<LinearOp>())
        if (auto block = blockOfLinear(symbols, producer))
          ++s.blocks[*block].gelu;
    }
  });
  return s;
}

void printText(const Summary &s, raw_ostream &os) {
  os << "pf module summary\n";
  os << "  entry @" << s.entry << "\n";
  for (auto &[name, type] : s.inputs)
    os << "    input  " << name << ": " << type << "\n";
  for (auto &[name, type] : s.outputs)
    os << "    output " << name << ": " << type << "\n";
  os << llvm::formatv("  parameters: {0} ({1} elements, {2:F1} MB, {3})\n", s.params,
                      s.paramElements, s.paramBytes / 1e6,
                      s.paramsWithData == s.params ? "weights loaded"
                      : s.paramsWithData == 0      ? "shapes only"
                                                   : "some weights missing");
  os << llvm::formatv("  forward: {0:F2} GFLOP\n", s.forwardFlops / 1e9);
  os << "  ops:\n";
  for (auto &[name, count] : s.opCounts)
    os << llvm::formatv("    {0,-28} {1,6}\n", name, count);
  os << "  encoder blocks: " << s.blocks.size() << "\n";
  for (auto &[block, counts] : s.blocks)
    os << llvm::formatv("    block {0,3}: {1} pf.linear, {2} pf.layer_norm, {3} pf.gelu\n",
                        block, counts.linear, counts.layerNorm, counts.gelu);
  os << "  pf.linear outside encoder blocks: " << s.linearsOutsideBlocks << "\n";
}

void printJson(const Summary &s, raw_ostream &os) {
  llvm::json::Object ops;
  for (auto &[name, count] : s.opCounts)
    ops[name] = count;
  llvm::json::Array blocks;
  for (auto &[block, counts] : s.blocks)
    blocks.push_back(llvm::json::Object{{"block", block},
                                        {"linear", counts.linear},
                                        {"layer_norm", counts.layerNorm},
                                        {"gelu", counts.gelu}});
  auto named = [](ArrayRef<std::pair<std::string, std::string>> list) {
    llvm::json::Array array;
    for (auto &[name, type] : list)
      array.push_back(llvm::json::Object{{"name", name}, {"type", type}});
    return array;
  };
  llvm::json::Object root{
      {"entry", s.entry},
      {"inputs", named(s.inputs)},
      {"outputs", named(s.outputs)},
      {"parameters", s.params},
      {"parameter_elements", s.paramElements},
      {"parameter_bytes", s.paramBytes},
      {"parameters_with_data", s.paramsWithData},
      {"forward_flops", s.forwardFlops},
      {"ops", std::move(ops)},
      {"blocks", std::move(blocks)},
      {"linear_outside_blocks", s.linearsOutsideBlocks},
  };
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

struct PrintSummaryPass : public mlir::pf::impl::PFPrintSummaryBase<PrintSummaryPass> {
  using Base::Base;
  void runOnOperation() override {
    Summary summary = summarize(getOperation());
    if (json)
      printJson(summary, llvm::outs());
    else
      printText(summary, llvm::outs());
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};
} // namespace
