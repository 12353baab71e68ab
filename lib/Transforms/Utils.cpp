//===- Utils.cpp - helpers every pf pass uses -----------------------------===//
#include "pf/Transforms/Utils.h"
#include "pf/Dialect/PF/IR/PFAttrNames.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::pf;

/// The keyword must start a name component, so "branch.1." is no block "h.1.".
std::optional<int64_t> mlir::pf::encoderBlockOfName(StringRef name) {
  static const llvm::Regex pattern("(^|[._/])(encoder|layers?|h|blocks?)[._]([0-9]+)[._]");
  SmallVector<StringRef> groups;
  if (!pattern.match(name, &groups))
    return std::nullopt;
  int64_t block;
  if (groups[3].getAsInteger(10, block))
    return std::nullopt;
  return block;
}

bool mlir::pf::isExporterGeneratedName(StringRef name) {
  static const llvm::Regex pattern("^(onnx::.*|/.*|_?val_[0-9]+|[0-9]+)$");
  return pattern.match(name);
}

std::optional<int64_t> mlir::pf::encoderBlockOfParam(SymbolTable &symbols, StringRef name) {
  if (Operation *param = symbols.lookup(name))
    if (auto block = param->getAttrOfType<IntegerAttr>(kEncoderBlockAttrName))
      return block.getInt();
  return encoderBlockOfName(name);
}

SmallVector<func::FuncOp> mlir::pf::stageGradientFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (int64_t s = 0;; ++s) {
    std::string prefix = "stage" + std::to_string(s) + "_backward";
    auto backward = module.lookupSymbol<func::FuncOp>(prefix);
    if (!backward)
      backward = module.lookupSymbol<func::FuncOp>(prefix + "_weight");
    if (!backward)
      return functions;
    functions.push_back(backward);
  }
}

func::FuncOp mlir::pf::getEntryFunction(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      return func;
  return {};
}

Value mlir::pf::getOrAddScalarArgument(func::FuncOp func, StringRef name, Type element) {
  Block &block = func.getBody().front();
  for (unsigned i = 0; i < block.getNumArguments(); ++i)
    if (auto attr = func.getArgAttrOfType<StringAttr>(i, kNameAttrName); attr && attr == name)
      return block.getArgument(i);
  Value arg = block.addArgument(RankedTensorType::get({}, element), func.getLoc());
  func.setType(FunctionType::get(func.getContext(), block.getArgumentTypes(),
                                 block.getTerminator()->getOperandTypes()));
  func.setArgAttr(block.getNumArguments() - 1, kNameAttrName, StringAttr::get(func.getContext(), name));
  return arg;
}

