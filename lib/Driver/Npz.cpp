//===- Npz.cpp - NumPy .npz archives through libzip -------------------------===//
#include "pf/Driver/Npz.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <zip.h>

#include <algorithm>
#include <cstring>

using namespace mlir::pf::driver;
using llvm::StringRef;

namespace {
struct DtypeInfo {
  int32_t code;
  const char *descr;
  const char *name;
  int64_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {1, "<f4", "float32", 4}, {11, "<f8", "float64", 8}, {10, "<f2", "float16", 2},
    {7, "<i8", "int64", 8},   {6, "<i4", "int32", 4},    {3, "|i1", "int8", 1},
    {9, "|b1", "bool", 1},
};

const DtypeInfo *byCode(int32_t code) {
  for (const auto &d : kDtypes)
    if (d.code == code)
      return &d;
  return nullptr;
}

const DtypeInfo *byDescr(StringRef descr) {
  for (const auto &d : kDtypes)
    if (descr == d.descr || (descr.size() == 3 && descr.substr(1) == StringRef(d.descr).substr(1) &&
                             descr[0] == '=' ))
      return &d;
  return nullptr;
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Value of `key` in the .npy header dict, e.g. 'descr': '<f4'.
StringRef headerField(StringRef header, StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == StringRef::npos)
    return {};
  StringRef rest = header.drop_front(at + key.size() + 2).ltrim(" :");
  if (rest.starts_with("'"))
    return rest.drop_front().take_until([](char c) { return c == '\''; });
  if (rest.starts_with("("))
    return rest.drop_front().take_until([](char c) { return c == ')'; });
  return rest.take_until([](char c) { return c == ',' || c == '}'; }).trim();
}

llvm::Expected<NpyArray> parseNpy(StringRef name, StringRef bytes) {
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return error(name + " is not a .npy array");
  uint8_t major = bytes[6], minor = bytes[7];
  // 1.0 has a 16-bit header length, 2.0 and 3.0 (UTF-8 header) a 32-bit one;
  // any other version is a format this reader does not know.
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return error(llvm::formatv("{0}: unsupported .npy format version {1}.{2} (known: 1.0, "
                               "2.0, 3.0)",
                               name, unsigned(major), unsigned(minor)));
  size_t headerLen, start;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (uint8_t(bytes[9]) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12)
      return error(name + ": truncated .npy header");
    headerLen = uint32_t(uint8_t(bytes[8])) | (uint32_t(uint8_t(bytes[9])) << 8) |
                (uint32_t(uint8_t(bytes[10])) << 16) | (uint32_t(uint8_t(bytes[11])) << 24);
    start = 12;
  }
  if (bytes.size() < start + headerLen)
    return error(name + ": truncated .npy header");
  StringRef header = bytes.substr(start, headerLen);
  const DtypeInfo *dtype = byDescr(headerField(header, "descr"));
  if (!dtype)
    return error(name + ": unsupported dtype '" + headerField(header, "descr") +
                 "' (supported: float32, float64, float16, int64, int32, int8, bool)");
  if (headerField(header, "fortran_order") == "True")
    return error(name + ": Fortran-order arrays are not supported");
  NpyArray array;
  array.dtype = dtype->code;
  llvm::SmallVector<StringRef> dims;
  headerField(header, "shape").split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef dim : dims) {
    int64_t value;
    if (dim.trim().getAsInteger(10, value) || value < 0)
      return error(name + ": malformed shape in the .npy header");
    array.shape.push_back(value);
  }
  auto elements = checkedElementCount(array.shape);
  if (!elements)
    return error(llvm::formatv("{0}: shape {1} has more than {2} elements (kMaxNpyElements)",
                               name, shapeText(array.shape), kMaxNpyElements));
  StringRef payload = bytes.drop_front(start + headerLen);
  uint64_t expected = uint64_t(*elements) * dtype->bytes;
  if (payload.size() != expected)
    return error(llvm::formatv("{0}: holds {1} bytes of data, its shape needs {2}", name,
                               payload.size(), expected));
  array.data.assign(payload.begin(), payload.end());
  return array;
}

std::string npyBytes(const NpyArray &array) {
  const DtypeInfo *dtype = byCode(array.dtype);
  std::string shape;
  for (int64_t d : array.shape)
    shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1)
    shape.erase(shape.size() - 2); // "(2, 3)" but "(5,)"
  else if (array.shape.size() == 1)
    shape.erase(shape.size() - 1);
  std::string header = llvm::formatv("{{'descr': '{0}', 'fortran_order': False, 'shape': ({1}), }",
                                     dtype ? dtype->descr : "<f4", shape);
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char((header.size() >> 8) & 0xff);
  out += header;
  out.append(array.data.begin(), array.data.end());
  return out;
}
} // namespace

std::optional<int64_t> mlir::pf::driver::checkedElementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (n > kMaxNpyElements / d)
      return std::nullopt;
    n *= d;
  }
  return empty ? 0 : n;
}

int64_t NpyArray::numElements() const {
  // Arrays read by readNpz are within kMaxNpyElements; others are built by
  // pf from shapes it made.
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t mlir::pf::driver::dtypeBytes(int32_t dtype) {
  const DtypeInfo *d = byCode(dtype);
  return d ? d->bytes : 0;
}

std::string mlir::pf::driver::outputSummary(const std::string &name, const NpyArray &array) {
  double checksum = 0;
  if (array.dtype == 1 /*f32*/)
    for (int64_t i = 0; i < array.numElements(); ++i)
      checksum += reinterpret_cast<const float *>(array.data.data())[i];
  return llvm::formatv("output {0}: {1} {2}, sum {3:E6}\n", name, dtypeName(array.dtype),
                       shapeText(array.shape), checksum)
      .str();
}

std::string mlir::pf::driver::shapeText(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

const char *mlir::pf::driver::dtypeName(int32_t dtype) {
  const DtypeInfo *d = byCode(dtype);
  return d ? d->name : "unsupported";
}

namespace {
/// Whether the sizes an entry's header declares can be what it holds, checked
/// before anything is read: the compressed bytes lie inside the file, a stored
/// entry is as long as its compressed bytes, and a deflated one at most
/// kMaxDeflateRatio times them. Every size readNpz acts on is thus bounded
/// by the file's real size, whatever the header claims.
llvm::Error checkDeclaredSizes(const zip_stat_t &stat, uint64_t fileBytes, StringRef name,
                               StringRef path) {
  std::string entry = ("entry '" + name + "' of '" + path + "'").str();
  constexpr uint64_t kNeeded = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
  if ((stat.valid & kNeeded) != kNeeded)
    return error(entry + " does not declare its sizes and compression method");
  if (stat.comp_method != ZIP_CM_STORE && stat.comp_method != ZIP_CM_DEFLATE)
    return error(llvm::formatv("{0} uses compression method {1}; .npz entries are stored or "
                               "deflated (as np.savez and np.savez_compressed write them)",
                               entry, stat.comp_method));
  if (stat.comp_size > fileBytes)
    return error(llvm::formatv("{0} declares {1} compressed bytes, more than the whole file "
                               "({2} bytes)",
                               entry, uint64_t(stat.comp_size), fileBytes));
  if (stat.comp_method == ZIP_CM_STORE && stat.size != stat.comp_size)
    return error(llvm::formatv("{0} is stored in {1} bytes but declares {2}", entry,
                               uint64_t(stat.comp_size), uint64_t(stat.size)));
  if (stat.comp_method == ZIP_CM_DEFLATE && stat.size / kMaxDeflateRatio > stat.comp_size)
    return error(llvm::formatv("{0} declares {1} bytes from {2} deflated bytes, more than "
                               "deflate's largest ratio ({3}:1, kMaxDeflateRatio) can hold",
                               entry, uint64_t(stat.size), uint64_t(stat.comp_size),
                               kMaxDeflateRatio));
  if (stat.size > kMaxNpzEntryBytes)
    return error(llvm::formatv("{0} declares {1} bytes, over the limit of {2} "
                               "(kMaxNpzEntryBytes)",
                               entry, uint64_t(stat.size), kMaxNpzEntryBytes));
  return llvm::Error::success();
}

/// The bytes of one entry, `size` of them as checkDeclaredSizes admitted.
/// They grow as they are read, so a header that lies costs only what the
/// file really holds.
llvm::Expected<std::string> readEntry(zip_file_t *file, uint64_t size, StringRef entry) {
  std::string bytes;
  uint64_t got = 0;
  while (got < size) {
    size_t chunk = size_t(std::min<uint64_t>(size - got, 1 << 20));
    bytes.resize(size_t(got) + chunk);
    zip_int64_t n = zip_fread(file, bytes.data() + got, chunk);
    if (n < 0)
      return error(entry + " is damaged: " + zip_file_strerror(file));
    if (n == 0)
      break;
    got += uint64_t(n);
  }
  bytes.resize(size_t(got));
  if (got != size)
    return error(llvm::formatv("truncated {0}: it holds {1} bytes, it declares {2}", entry,
                               got, size));
  // libzip compares the entry's CRC-32 only once a read reaches its end:
  // without this one, damaged bytes inside an array would load silently.
  char past;
  zip_int64_t n = zip_fread(file, &past, 1);
  if (n < 0)
    return error(entry + " is damaged: " + zip_file_strerror(file));
  if (n > 0)
    return error(llvm::formatv("{0} holds more than the {1} bytes it declares", entry, size));
  return bytes;
}
} // namespace

llvm::Expected<std::map<std::string, NpyArray>> mlir::pf::driver::readNpz(StringRef path) {
  uint64_t fileBytes = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, fileBytes))
    return error("cannot read '" + path + "' as .npz: " + ec.message());
  int code = 0;
  zip_t *archive = zip_open(path.str().c_str(), ZIP_RDONLY, &code);
  if (!archive) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string message = zip_error_strerror(&err);
    zip_error_fini(&err);
    return error("cannot read '" + path + "' as .npz: " + message);
  }
  auto fail = [&](llvm::Error err) {
    zip_close(archive);
    return llvm::Expected<std::map<std::string, NpyArray>>(std::move(err));
  };
  std::map<std::string, NpyArray> arrays;
  zip_int64_t entries = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t stat;
    if (zip_stat_index(archive, i, 0, &stat) != 0)
      continue;
    // A copy: stat.name lives only as long as the archive state it points into.
    std::string name = stat.name;
    std::string entry = "entry '" + name + "' of '" + path.str() + "'";
    if (auto err = checkDeclaredSizes(stat, fileBytes, name, path))
      return fail(std::move(err));
    zip_file_t *file = zip_fopen_index(archive, i, 0);
    if (!file)
      return fail(error("cannot read " + entry + ": " + zip_strerror(archive)));
    auto bytes = readEntry(file, stat.size, entry);
    zip_fclose(file);
    if (!bytes)
      return fail(bytes.takeError());
    auto array = parseNpy((path + ": " + name).str(), *bytes);
    if (!array)
      return fail(array.takeError());
    std::string key = name;
    if (StringRef(key).ends_with(".npy"))
      key.resize(key.size() - 4);
    arrays[key] = std::move(*array);
  }
  zip_close(archive);
  return arrays;
}

llvm::Error mlir::pf::driver::writeNpz(StringRef path, const std::map<std::string, NpyArray> &arrays) {
  if (arrays.empty()) {
    // libzip writes no file for an archive without entries (and removes one
    // that is there); np.savez() writes the zip end record alone.
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    if (ec)
      return error("cannot write '" + path + "': " + ec.message());
    out << llvm::StringRef("PK\x05\x06", 4) << std::string(18, '\0');
    return llvm::Error::success();
  }
  int code = 0;
  zip_t *archive = zip_open(path.str().c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!archive)
    return error("cannot write '" + path + "'");
  std::vector<std::string> payloads; // must outlive zip_close
  payloads.reserve(arrays.size());
  for (const auto &[name, array] : arrays) {
    payloads.push_back(npyBytes(array));
    zip_source_t *source =
        zip_source_buffer(archive, payloads.back().data(), payloads.back().size(), 0);
    if (!source || zip_file_add(archive, (name + ".npy").c_str(), source, ZIP_FL_OVERWRITE) < 0) {
      zip_source_free(source);
      zip_discard(archive);
      return error("cannot add '" + name + "' to '" + path + "'");
    }
    zip_set_file_compression(archive, zip_name_locate(archive, (name + ".npy").c_str(), 0),
                             ZIP_CM_STORE, 0);
  }
  if (zip_close(archive) != 0) {
    std::string message = zip_strerror(archive);
    zip_discard(archive);
    return error("cannot write '" + path + "': " + message);
  }
  return llvm::Error::success();
}
