//===- Npz.cpp - NumPy .npz archives through libzip -------------------------===//
#include "pf/Support/Npz.h"

#include <zip.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>

using namespace mlir::pf::driver;
using ::pf::formatText;

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

const DtypeInfo *byDescr(std::string_view descr) {
  for (const auto &d : kDtypes)
    if (descr == d.descr ||
        (descr.size() == 3 && descr.substr(1) == std::string_view(d.descr).substr(1) &&
         descr[0] == '='))
      return &d;
  return nullptr;
}

::pf::Status error(std::string message) { return ::pf::Status::error(std::move(message)); }

constexpr const char *kSpace = " \t\n\v\f\r";

std::string_view trim(std::string_view text, const char *chars = kSpace) {
  size_t first = text.find_first_not_of(chars);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(chars) - first + 1);
}

/// `text` up to (not including) the first of `stops`, or all of it.
std::string_view takeUntil(std::string_view text, const char *stops) {
  return text.substr(0, text.find_first_of(stops));
}

/// Value of `key` in the .npy header dict, e.g. 'descr': '<f4'.
std::string_view headerField(std::string_view header, std::string_view key) {
  size_t at = header.find("'" + std::string(key) + "'");
  if (at == std::string_view::npos)
    return {};
  std::string_view rest = header.substr(at + key.size() + 2);
  rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(" :")));
  if (rest.substr(0, 1) == "'")
    return takeUntil(rest.substr(1), "'");
  if (rest.substr(0, 1) == "(")
    return takeUntil(rest.substr(1), ")");
  return trim(takeUntil(rest, ",}"));
}

/// A decimal integer, optionally negative, spanning all of `text` and
/// within int64_t; false otherwise.
bool parseInteger(std::string_view text, int64_t &value) {
  bool negative = !text.empty() && text[0] == '-';
  if (negative)
    text.remove_prefix(1);
  if (text.empty())
    return false;
  uint64_t magnitude = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    unsigned digit = unsigned(c - '0');
    if (magnitude > (UINT64_MAX - digit) / 10)
      return false;
    magnitude = magnitude * 10 + digit;
  }
  if (negative) {
    if (magnitude > uint64_t(INT64_MAX) + 1)
      return false;
    value = magnitude == uint64_t(INT64_MAX) + 1 ? INT64_MIN : -int64_t(magnitude);
  } else {
    if (magnitude > uint64_t(INT64_MAX))
      return false;
    value = int64_t(magnitude);
  }
  return true;
}

::pf::Expected<NpyArray> parseNpy(const std::string &name, std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    return error(name + " is not a .npy array");
  uint8_t major = bytes[6], minor = bytes[7];
  // 1.0 has a 16-bit header length, 2.0 and 3.0 (UTF-8 header) a 32-bit one;
  // any other version is a format this reader does not know.
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return error(formatText("%s: unsupported .npy format version %u.%u (known: 1.0, 2.0, 3.0)",
                            name.c_str(), unsigned(major), unsigned(minor)));
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
  std::string_view header = bytes.substr(start, headerLen);
  const DtypeInfo *dtype = byDescr(headerField(header, "descr"));
  if (!dtype)
    return error(name + ": unsupported dtype '" + std::string(headerField(header, "descr")) +
                 "' (supported: float32, float64, float16, int64, int32, int8, bool)");
  if (headerField(header, "fortran_order") == "True")
    return error(name + ": Fortran-order arrays are not supported");
  NpyArray array;
  array.dtype = dtype->code;
  std::string_view shape = headerField(header, "shape");
  while (!shape.empty()) {
    size_t comma = shape.find(',');
    std::string_view dim = shape.substr(0, comma);
    shape = comma == std::string_view::npos ? std::string_view() : shape.substr(comma + 1);
    if (dim.empty())
      continue;
    int64_t value;
    if (!parseInteger(trim(dim), value) || value < 0)
      return error(name + ": malformed shape in the .npy header");
    array.shape.push_back(value);
  }
  auto elements = checkedElementCount(array.shape);
  if (!elements)
    return error(name + ": shape " + shapeText(array.shape) + " has more than " +
                 std::to_string(kMaxNpyElements) + " elements (kMaxNpyElements)");
  std::string_view payload = bytes.substr(start + headerLen);
  uint64_t expected = uint64_t(*elements) * dtype->bytes;
  if (payload.size() != expected)
    return error(name + ": holds " + std::to_string(payload.size()) +
                 " bytes of data, its shape needs " + std::to_string(expected));
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
  std::string header = std::string("{'descr': '") + (dtype ? dtype->descr : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
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
  // %.6E, with nan and (-)INF spelled as the tools have always printed them.
  std::string sum = std::isnan(checksum)   ? std::string("nan")
                    : std::isinf(checksum) ? std::string(checksum < 0 ? "-INF" : "INF")
                                           : formatText("%.6E", checksum);
  return "output " + name + ": " + dtypeName(array.dtype) + " " + shapeText(array.shape) +
         ", sum " + sum + "\n";
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
::pf::Status checkDeclaredSizes(const zip_stat_t &stat, uint64_t fileBytes,
                               const std::string &name, const std::string &path) {
  std::string entry = "entry '" + name + "' of '" + path + "'";
  constexpr uint64_t kNeeded = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
  if ((stat.valid & kNeeded) != kNeeded)
    return error(entry + " does not declare its sizes and compression method");
  if (stat.comp_method != ZIP_CM_STORE && stat.comp_method != ZIP_CM_DEFLATE)
    return error(entry + " uses compression method " + std::to_string(stat.comp_method) +
                 "; .npz entries are stored or deflated (as np.savez and "
                 "np.savez_compressed write them)");
  if (stat.comp_size > fileBytes)
    return error(entry + " declares " + std::to_string(uint64_t(stat.comp_size)) +
                 " compressed bytes, more than the whole file (" + std::to_string(fileBytes) +
                 " bytes)");
  if (stat.comp_method == ZIP_CM_STORE && stat.size != stat.comp_size)
    return error(entry + " is stored in " + std::to_string(uint64_t(stat.comp_size)) +
                 " bytes but declares " + std::to_string(uint64_t(stat.size)));
  if (stat.comp_method == ZIP_CM_DEFLATE && stat.size / kMaxDeflateRatio > stat.comp_size)
    return error(entry + " declares " + std::to_string(uint64_t(stat.size)) + " bytes from " +
                 std::to_string(uint64_t(stat.comp_size)) +
                 " deflated bytes, more than deflate's largest ratio (" +
                 std::to_string(kMaxDeflateRatio) + ":1, kMaxDeflateRatio) can hold");
  if (stat.size > kMaxNpzEntryBytes)
    return error(entry + " declares " + std::to_string(uint64_t(stat.size)) +
                 " bytes, over the limit of " + std::to_string(kMaxNpzEntryBytes) +
                 " (kMaxNpzEntryBytes)");
  return ::pf::Status::success();
}

/// The bytes of one entry, `size` of them as checkDeclaredSizes admitted.
/// They grow as they are read, so a header that lies costs only what the
/// file really holds.
::pf::Expected<std::string> readEntry(zip_file_t *file, uint64_t size, const std::string &entry) {
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
    return error("truncated " + entry + ": it holds " + std::to_string(got) +
                 " bytes, it declares " + std::to_string(size));
  // libzip compares the entry's CRC-32 only once a read reaches its end:
  // without this one, damaged bytes inside an array would load silently.
  char past;
  zip_int64_t n = zip_fread(file, &past, 1);
  if (n < 0)
    return error(entry + " is damaged: " + zip_file_strerror(file));
  if (n > 0)
    return error(entry + " holds more than the " + std::to_string(size) + " bytes it declares");
  return bytes;
}
} // namespace

::pf::Expected<std::map<std::string, NpyArray>>
mlir::pf::driver::readNpz(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return error("cannot read '" + path + "' as .npz: " + std::strerror(errno));
  uint64_t fileBytes = uint64_t(info.st_size);
  int code = 0;
  zip_t *archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!archive) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string message = zip_error_strerror(&err);
    zip_error_fini(&err);
    return error("cannot read '" + path + "' as .npz: " + message);
  }
  auto fail = [&](const ::pf::Status &err) {
    zip_close(archive);
    return ::pf::Expected<std::map<std::string, NpyArray>>(err);
  };
  std::map<std::string, NpyArray> arrays;
  zip_int64_t entries = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t stat;
    if (zip_stat_index(archive, i, 0, &stat) != 0)
      continue;
    // A copy: stat.name lives only as long as the archive state it points into.
    std::string name = stat.name;
    std::string entry = "entry '" + name + "' of '" + path + "'";
    if (::pf::Status err = checkDeclaredSizes(stat, fileBytes, name, path); !err.ok())
      return fail(err);
    zip_file_t *file = zip_fopen_index(archive, i, 0);
    if (!file)
      return fail(error("cannot read " + entry + ": " + zip_strerror(archive)));
    auto bytes = readEntry(file, stat.size, entry);
    zip_fclose(file);
    if (!bytes)
      return fail(bytes.status());
    auto array = parseNpy(path + ": " + name, *bytes);
    if (!array)
      return fail(array.status());
    std::string key = name;
    if (key.size() >= 4 && key.compare(key.size() - 4, 4, ".npy") == 0)
      key.resize(key.size() - 4);
    arrays[key] = array.take();
  }
  zip_close(archive);
  return arrays;
}

::pf::Status mlir::pf::driver::writeNpz(const std::string &path,
                                        const std::map<std::string, NpyArray> &arrays) {
  if (arrays.empty()) {
    // libzip writes no file for an archive without entries (and removes one
    // that is there); np.savez() writes the zip end record alone.
    std::FILE *out = std::fopen(path.c_str(), "wb");
    if (!out)
      return error("cannot write '" + path + "': " + std::strerror(errno));
    std::string record = std::string("PK\x05\x06", 4) + std::string(18, '\0');
    bool written = std::fwrite(record.data(), 1, record.size(), out) == record.size();
    int writeErrno = errno;
    if (std::fclose(out) != 0 && written) {
      written = false;
      writeErrno = errno;
    }
    if (!written)
      return error("cannot write '" + path + "': " + std::strerror(writeErrno));
    return ::pf::Status::success();
  }
  int code = 0;
  zip_t *archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
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
  return ::pf::Status::success();
}
