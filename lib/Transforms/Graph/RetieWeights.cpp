//===- RetieWeights.cpp - tie folded transposed copies back ----------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Transforms/Graph/Passes.h"
#include "pf/Transforms/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"

#include <cstring>

namespace mlir::pf {
#define GEN_PASS_DEF_PFRETIEWEIGHTS
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The bytes of a 2-D parameter's data in row-major order, or nothing (no
/// data, a splat, or a layout this pass does not read).
std::optional<ArrayRef<char>> rawData(ParamOp param) {
  if (!param.getValue())
    return std::nullopt;
  ElementsAttr value = *param.getValue();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense || dense.isSplat())
    return std::nullopt;
  return dense.getRawData();
}

/// Whether the [rows, cols] matrix `a` equals the transpose of the
/// [cols, rows] matrix `b`, element by element (bitwise: the folded copy is
/// exact).
bool isTransposeOf(ArrayRef<char> a, ArrayRef<char> b, int64_t rows, int64_t cols,
                   int64_t width) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (std::memcmp(a.data() + (i * cols + j) * width, b.data() + (j * rows + i) * width,
                      width) != 0)
        return false;
  return true;
}

/// Whether every element of `data` is the same value (a zero matrix equals
/// every other zero matrix's transpose without being a tie).
bool isOneValue(ArrayRef<char> data, int64_t width) {
  for (size_t offset = width; offset < data.size(); offset += width)
    if (std::memcmp(data.data(), data.data() + offset, width) != 0)
      return false;
  return true;
}

struct Matrix {
  ParamOp param;
  StringRef name;
  Type element;
  ArrayRef<char> data;
  int64_t rows, cols, width;
};

std::optional<Matrix> matrixOf(ParamOp param) {
  auto type = dyn_cast<RankedTensorType>(param.getType());
  if (!type || type.getRank() != 2 || !type.hasStaticShape() ||
      !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t width = type.getElementTypeBitWidth() / 8;
  std::optional<ArrayRef<char>> data = rawData(param);
  if (width == 0 || !data || int64_t(data->size()) != type.getNumElements() * width)
    return std::nullopt;
  return Matrix{param,       param.getSymName(),  type.getElementType(), *data,
                type.getDimSize(0), type.getDimSize(1), width};
}

/// Whether `copy` holds the transpose of `source`.
bool isTransposedCopy(const Matrix &copy, const Matrix &source) {
  return source.rows == copy.cols && source.cols == copy.rows &&
         source.element == copy.element &&
         isTransposeOf(copy.data, source.data, copy.rows, copy.cols, copy.width);
}

struct RetieWeightsPass : public mlir::pf::impl::PFRetieWeightsBase<RetieWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Matrix> matrices;
    for (auto param : module.getOps<ParamOp>())
      if (std::optional<Matrix> matrix = matrixOf(param))
        matrices.push_back(*matrix);
    SmallVector<std::pair<ParamOp, ParamOp>> ties; // (copy, source)
    // Two generated names that are each other's transpose: the first in the
    // module stays, as the source (copies are looked for from the end).
    DenseSet<Operation *> copies, sources;
    for (const Matrix &copy : llvm::reverse(matrices)) {
      if (!isExporterGeneratedName(copy.name) || isOneValue(copy.data, copy.width) ||
          sources.contains(copy.param))
        continue;
      for (const Matrix &source : matrices)
        if (source.param != copy.param && !copies.contains(source.param) &&
            isTransposedCopy(copy, source)) {
          ties.push_back({copy.param, source.param});
          copies.insert(copy.param);
          sources.insert(source.param);
          break;
        }
    }
    for (auto [copy, source] : ties)
      retie(module, copy, source);
  }

  /// Every read of `copy` becomes a transpose of `source`; `copy` goes.
  void retie(ModuleOp module, ParamOp copy, ParamOp source) {
    SmallVector<ParamRefOp> reads;
    module.walk([&](ParamRefOp ref) {
      if (ref.getName() == copy.getSymName())
        reads.push_back(ref);
    });
    for (ParamRefOp read : reads) {
      OpBuilder builder(read);
      auto sourceRead = ParamRefOp::create(builder, read.getLoc(), source.getType(),
                                           source.getSymName());
      auto transposed = TransposeOp::create(builder, read.getLoc(), read.getType(), sourceRead,
                                            builder.getDenseI64ArrayAttr({1, 0}));
      read.getOutput().replaceAllUsesWith(transposed.getOutput());
      read.erase();
    }
    emitRemark(copy.getLoc()) << "pf-retie-weights: '" << copy.getSymName()
                              << "' equals the transpose of '" << source.getSymName()
                              << "' (an exporter's folded copy of a tied weight): tied back to "
                                 "it; retie=false (pf-translate/pf-train --no-retie) keeps them "
                                 "apart";
    // Exports write the copy back as the transpose of the trained source.
    SmallVector<Attribute> copies;
    if (auto known = source->getAttrOfType<ArrayAttr>(kOnnxTransposedCopiesAttrName))
      copies.append(known.begin(), known.end());
    copies.push_back(copy.getSymNameAttr());
    source->setAttr(kOnnxTransposedCopiesAttrName, ArrayAttr::get(&getContext(), copies));
    copy.erase();
  }
};
} // namespace
