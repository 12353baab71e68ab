//===- ONNXTensors.cpp - TensorProto -> elements attributes ---------------===//
#include "ImportContext.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::onnx_import;

Type onnx_import::convertElementType(MLIRContext *ctx, int32_t dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT64: return b.getI64Type();
  case onnx::TensorProto::INT32: return b.getI32Type();
  case onnx::TensorProto::INT16: return b.getI16Type();
  case onnx::TensorProto::INT8: return b.getI8Type();
  case onnx::TensorProto::BOOL: return b.getI1Type();
  // Unsigned types are not imported: as signless integers the folders and the
  // runtime would treat them as signed (wrong Div, Cast and comparisons).
  default: return nullptr;
  }
}

std::string onnx_import::dataTypeName(int32_t dataType) {
  std::string name = onnx::TensorProto::DataType_IsValid(dataType)
                         ? onnx::TensorProto::DataType_Name(
                               static_cast<onnx::TensorProto::DataType>(dataType))
                         : std::string("unknown");
  return name + " (" + std::to_string(dataType) + ")";
}

namespace {
/// Bytes per element in ONNX raw data (bool: one byte).
size_t rawElementBytes(Type element) {
  return element.isInteger(1) ? 1 : element.getIntOrFloatBitWidth() / 8;
}

template <typename T, typename Field>
void appendAs(std::string &bytes, const Field &field) {
  for (auto v : field) {
    T value = static_cast<T>(v);
    bytes.append(reinterpret_cast<const char *>(&value), sizeof(T));
  }
}

/// Data from the typed repeated fields, as little-endian raw bytes.
std::string typedFieldBytes(const onnx::TensorProto &t, Type element) {
  std::string bytes;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: appendAs<float>(bytes, t.float_data()); break;
  case onnx::TensorProto::DOUBLE: appendAs<double>(bytes, t.double_data()); break;
  case onnx::TensorProto::INT64: appendAs<int64_t>(bytes, t.int64_data()); break;
  case onnx::TensorProto::UINT64: case onnx::TensorProto::UINT32:
    if (element.getIntOrFloatBitWidth() == 64) appendAs<uint64_t>(bytes, t.uint64_data());
    else appendAs<uint32_t>(bytes, t.uint64_data());
    break;
  case onnx::TensorProto::INT32: appendAs<int32_t>(bytes, t.int32_data()); break;
  case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16:
  case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
    appendAs<uint16_t>(bytes, t.int32_data()); break;
  case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL:
    appendAs<uint8_t>(bytes, t.int32_data()); break;
  default: break;
  }
  return bytes;
}

/// "tensor 'name'", or "the tensor" for the unnamed value of a Constant node
/// (the diagnostic's location names the node).
std::string describe(const onnx::TensorProto &t) {
  return t.name().empty() ? std::string("the tensor") : "tensor '" + t.name() + "'";
}

FailureOr<std::string> externalBytes(const onnx::TensorProto &t, StringRef baseDir,
                                     Location loc) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto &entry : t.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = std::strtoull(entry.value().c_str(), nullptr, 10);
    else if (entry.key() == "length")
      length = std::strtoll(entry.value().c_str(), nullptr, 10);
  }
  if (location.empty())
    return emitError(loc) << "initializer '" << t.name()
                          << "' is stored externally but names no location";
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  auto buffer = llvm::MemoryBuffer::getFileSlice(
      path, length >= 0 ? uint64_t(length) : uint64_t(-1), offset, /*IsVolatile=*/false);
  if (length < 0)
    buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(loc) << "cannot read external data '" << path << "' of initializer '"
                          << t.name() << "': " << buffer.getError().message()
                          << " (import with --no-weights to read shapes only)";
  StringRef data = (*buffer)->getBuffer();
  if (length < 0 && offset > 0)
    data = data.drop_front(std::min<uint64_t>(offset, data.size()));
  return data.str();
}
} // namespace

FailureOr<ElementsAttr> onnx_import::convertTensor(MLIRContext *ctx,
                                                   const onnx::TensorProto &t,
                                                   StringRef baseDir, Location loc,
                                                   bool asResource,
                                                   StringRef resourceName) {
  Type element = convertElementType(ctx, t.data_type());
  if (!element)
    return emitError(loc) << describe(t) << " has unsupported data type "
                          << dataTypeName(t.data_type());
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return emitError(loc) << describe(t) << " has a negative dimension";
  auto type = RankedTensorType::get(shape, element);

  std::string bytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto external = externalBytes(t, baseDir, loc);
    if (failed(external))
      return failure();
    bytes = std::move(*external);
  } else if (t.has_raw_data()) {
    bytes = t.raw_data();
  } else {
    bytes = typedFieldBytes(t, element);
  }
  size_t expected = size_t(type.getNumElements()) * rawElementBytes(element);
  if (bytes.size() != expected)
    return emitError(loc) << describe(t) << " holds " << bytes.size()
                          << " bytes of data but its shape and type need " << expected;

  if (element.isInteger(1)) {
    SmallVector<bool> values;
    for (char c : bytes)
      values.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, ArrayRef<bool>(values)));
  }
  ArrayRef<char> raw(bytes.data(), bytes.size());
  if (asResource) {
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, alignof(double));
    return ElementsAttr(DenseResourceElementsAttr::get(
        type, resourceName.empty() ? StringRef(t.name()) : resourceName, std::move(blob)));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(type, raw));
}
