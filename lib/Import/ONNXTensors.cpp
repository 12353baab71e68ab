//===- ONNXTensors.cpp - TensorProto -> elements attributes ---------------===//
#include "ImportContext.h"

#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <optional>

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
size_t rawElementBytes(Type element) { return size_t(storageBytesPerElement(element)); }

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

/// The external_data entries of a tensor stored outside the model.
struct ExternalData {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
};

FailureOr<ExternalData> parseExternalData(const onnx::TensorProto &t, Location loc) {
  ExternalData data;
  for (const auto &entry : t.external_data()) {
    if (entry.key() != "location" && entry.key() != "offset" && entry.key() != "length")
      continue;
    if (entry.key() == "location") {
      data.location = entry.value();
      continue;
    }
    uint64_t value;
    if (StringRef(entry.value()).getAsInteger(10, value))
      return emitError(loc) << "initializer '" << t.name() << "': external data "
                            << entry.key() << " '" << entry.value()
                            << "' is not a non-negative integer";
    if (entry.key() == "offset")
      data.offset = value;
    else
      data.length = value;
  }
  if (data.location.empty())
    return emitError(loc) << "initializer '" << t.name()
                          << "' is stored externally but names no location";
  return data;
}

/// The external file of `data`, refused (as ONNX's checker does) unless it is
/// a relative path that stays inside the model's directory: a model from
/// elsewhere must not make pf read /etc/passwd or ../../secrets.
FailureOr<std::string> externalPath(const onnx::TensorProto &t, const ExternalData &data,
                                    StringRef baseDir, Location loc) {
  StringRef location = data.location;
  auto refuse = [&](StringRef why) {
    return emitError(loc) << "initializer '" << t.name() << "': external data location '"
                          << location << "' " << why;
  };
  if (llvm::sys::path::is_absolute(location) || location.starts_with("/") ||
      location.starts_with("\\"))
    return refuse("is an absolute path; it must be relative to the model's directory");
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location);
       it != e; ++it)
    if (*it == "..")
      return refuse("leaves the model's directory ('..')");
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  // A symbolic link inside the directory may still point out of it.
  SmallString<256> realBase, realPath;
  if (!llvm::sys::fs::real_path(baseDir.empty() ? StringRef(".") : baseDir, realBase) &&
      !llvm::sys::fs::real_path(path, realPath)) {
    StringRef inside(realPath);
    if (!inside.consume_front(realBase) ||
        !(inside.empty() || llvm::sys::path::is_separator(inside.front())))
      return refuse("resolves outside the model's directory (a symbolic link?)");
  }
  return std::string(path);
}

/// The `expected` bytes of an external tensor, read (not memory-mapped: a
/// file that shrinks under a mapping faults) after checking that the file
/// holds them, before anything of that size is allocated.
FailureOr<std::string> externalBytes(const onnx::TensorProto &t, StringRef baseDir,
                                     Location loc, uint64_t expected) {
  auto data = parseExternalData(t, loc);
  if (failed(data))
    return failure();
  auto path = externalPath(t, *data, baseDir, loc);
  if (failed(path))
    return failure();
  auto cannotRead = [&](const llvm::Twine &why) {
    return emitError(loc) << "cannot read external data '" << *path << "' of initializer '"
                          << t.name() << "': " << why
                          << " (import with --no-weights to read shapes only)";
  };
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(*path, status))
    return cannotRead(ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return cannotRead("not a regular file");
  uint64_t fileSize = status.getSize();
  if (data->offset > fileSize)
    return emitError(loc) << "initializer '" << t.name() << "': external data offset "
                          << data->offset << " is past the end of '" << *path << "' ("
                          << fileSize << " bytes)";
  uint64_t length = data->length.value_or(fileSize - data->offset);
  if (length != expected)
    return emitError(loc) << describe(t) << " has " << length
                          << " bytes of external data but its shape and type need "
                          << expected;
  if (length > fileSize - data->offset)
    return emitError(loc) << "initializer '" << t.name() << "': external data at offset "
                          << data->offset << " with length " << length
                          << " runs past the end of '" << *path << "' (" << fileSize
                          << " bytes)";
  auto buffer = llvm::MemoryBuffer::getFileSlice(*path, length, data->offset,
                                                 /*IsVolatile=*/true);
  if (!buffer)
    return cannotRead(buffer.getError().message());
  if ((*buffer)->getBufferSize() != length)
    return cannotRead("the file changed while it was read");
  return (*buffer)->getBuffer().str();
}

/// Bytes of data a tensor stored inside the model holds, without copying.
uint64_t inlineDataBytes(const onnx::TensorProto &t, Type element) {
  if (t.has_raw_data())
    return t.raw_data().size();
  uint64_t count = 0;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: count = t.float_data_size(); break;
  case onnx::TensorProto::DOUBLE: count = t.double_data_size(); break;
  case onnx::TensorProto::INT64: count = t.int64_data_size(); break;
  case onnx::TensorProto::UINT64: case onnx::TensorProto::UINT32:
    count = t.uint64_data_size(); break;
  default: count = t.int32_data_size(); break;
  }
  return count * rawElementBytes(element);
}
} // namespace

FailureOr<RankedTensorType> onnx_import::tensorType(MLIRContext *ctx,
                                                    const onnx::TensorProto &t, Location loc) {
  Type element = convertElementType(ctx, t.data_type());
  if (!element)
    return emitError(loc) << describe(t) << " has unsupported data type "
                          << dataTypeName(t.data_type());
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  std::string problem = shapeLimitError(shape);
  if (!problem.empty())
    return emitError(loc) << describe(t) << " has shape " << shapeText(shape) << ": "
                          << problem;
  return RankedTensorType::get(shape, element);
}

LogicalResult onnx_import::checkTensorData(MLIRContext *ctx, const onnx::TensorProto &t,
                                           Location loc) {
  auto type = tensorType(ctx, t, loc);
  if (failed(type))
    return failure();
  uint64_t expected =
      uint64_t(type->getNumElements()) * rawElementBytes(type->getElementType());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto data = parseExternalData(t, loc);
    if (failed(data))
      return failure();
    if (data->length && *data->length != expected)
      return emitError(loc) << describe(t) << " has " << *data->length
                            << " bytes of external data but its shape and type need "
                            << expected;
    return success();
  }
  uint64_t held = inlineDataBytes(t, type->getElementType());
  if (held != expected)
    return emitError(loc) << describe(t) << " holds " << held
                          << " bytes of data but its shape and type need " << expected;
  return success();
}

FailureOr<ElementsAttr> onnx_import::convertTensor(MLIRContext *ctx,
                                                   const onnx::TensorProto &t,
                                                   StringRef baseDir, Location loc,
                                                   bool asResource,
                                                   StringRef resourceName) {
  Type element = convertElementType(ctx, t.data_type());
  if (!element)
    return emitError(loc) << describe(t) << " has unsupported data type "
                          << dataTypeName(t.data_type());
  auto type = tensorType(ctx, t, loc);
  if (failed(type))
    return failure();
  // Within kMaxTensorElements, so this does not overflow.
  uint64_t expected = uint64_t(type->getNumElements()) * rawElementBytes(element);

  std::string bytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto external = externalBytes(t, baseDir, loc, expected);
    if (failed(external))
      return failure();
    bytes = std::move(*external);
  } else {
    if (inlineDataBytes(t, element) != expected)
      return emitError(loc) << describe(t) << " holds " << inlineDataBytes(t, element)
                            << " bytes of data but its shape and type need " << expected;
    bytes = t.has_raw_data() ? t.raw_data() : typedFieldBytes(t, element);
  }
  if (bytes.size() != expected)
    return emitError(loc) << describe(t) << " holds " << bytes.size()
                          << " bytes of data but its shape and type need " << expected;

  if (element.isInteger(1)) {
    SmallVector<bool> values;
    for (char c : bytes)
      values.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(*type, ArrayRef<bool>(values)));
  }
  ArrayRef<char> raw(bytes.data(), bytes.size());
  if (asResource) {
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, alignof(double));
    return ElementsAttr(DenseResourceElementsAttr::get(
        *type, resourceName.empty() ? StringRef(t.name()) : resourceName, std::move(blob)));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(*type, raw));
}
