//===- AotModelCheck.h - The check of an AOT model description --*- C++ -*-===//
//
// pf-aot-run trusts nothing in the pf_aot_model a library's
// pf_aot_model_describe() returns (pf_aot.h) before it sizes buffers and
// binds descriptors from it: checkAotModel refuses a description whose
// counts, table pointers, descriptors (dtype, rank, shape, byte size), input
// and output tables, byte ranges in the weights and the arena, or strings
// are inconsistent, so that running an accepted model reads and writes only
// inside the buffers pf-aot-run allocates. What `pf-run --aot` writes
// (lib/Driver/Runner.cpp, writeAot) always passes.
//
// Header-only, on the C++ standard library and the runtime's C API
// (pfrt_dtype_size): pf-aot-run links no LLVM, and the fuzz target aotplan
// (fuzz/AotPlanFuzzer.cpp) checks descriptions with the same code.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_AOTMODELCHECK_H
#define PF_SUPPORT_AOTMODELCHECK_H

#include "pf/Runtime/pf_aot.h"
#include "pf/Runtime/pfrt.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

namespace pf::aot {

/// Descriptors of one model (BERT-large's K-FAC training step has tens of
/// thousands); pf-aot-run allocates a table entry for each.
constexpr int64_t kMaxTensors = int64_t(1) << 22;
/// Ops of the step (one profile slot each).
constexpr int64_t kMaxOps = int64_t(1) << 22;
/// The arena, the weights and any one tensor, in bytes (256 TiB).
constexpr int64_t kMaxBytes = int64_t(1) << 48;
/// An input, output or op name, in bytes (without its NUL).
constexpr size_t kMaxNameBytes = 4096;

/// The file pf-aot-run reads an input from or writes an output to: the name
/// with each '/' as "__", and ".bin".
inline std::string aotFileName(const char *name) {
  std::string s;
  for (const char *p = name; *p; ++p)
    s += *p == '/' ? std::string("__") : std::string(1, *p);
  return s + ".bin";
}

/// The bytes of a descriptor's data, or -1 for an unknown dtype, a rank out
/// of [0, PFRT_MAX_RANK], a negative dimension or more than kMaxBytes.
inline int64_t aotTensorBytes(const pf_model_tensor_info &t) {
  int64_t bytes = pfrt_dtype_size(t.dtype);
  if (bytes <= 0 || t.rank < 0 || t.rank > PFRT_MAX_RANK)
    return -1;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0)
      return -1;
    if (t.shape[d] != 0 && bytes > kMaxBytes / t.shape[d])
      return -1;
    bytes *= t.shape[d];
  }
  return bytes;
}

namespace detail {
inline std::string describeTensor(int64_t i, const pf_model_tensor_info &t) {
  static const char *const kinds[] = {"input", "output", "weights", "arena"};
  std::string s = "tensor " + std::to_string(i) + " (";
  s += t.kind >= 0 && t.kind <= 3 ? kinds[t.kind] : "kind " + std::to_string(t.kind);
  return s + ")";
}

/// Empty, or what is wrong with the string `text` (an input's or output's
/// name): null, empty, longer than kMaxNameBytes or holding a control
/// character (names become file names and JSON strings). Reads at most
/// kMaxNameBytes + 1 bytes of it.
inline std::string checkName(const char *text, const std::string &what) {
  if (!text)
    return what + " has no name";
  size_t length = strnlen(text, kMaxNameBytes + 1);
  if (length == 0)
    return what + " has an empty name";
  if (length > kMaxNameBytes)
    return what + "'s name is longer than " + std::to_string(kMaxNameBytes) + " bytes";
  for (size_t i = 0; i < length; ++i)
    if (static_cast<unsigned char>(text[i]) < 0x20 || text[i] == 0x7f)
      return what + "'s name holds a control character (byte " + std::to_string(i) + ")";
  return "";
}

/// The input or output table: names, descriptors of `kind`, table entry i
/// naming a descriptor whose `where` is i, file names unique.
inline std::string checkIoTable(const pf_aot_model &m, const pf_model_io *table, int64_t count,
                                int32_t kind, const char *what) {
  std::unordered_map<std::string, int64_t> files;
  for (int64_t i = 0; i < count; ++i) {
    const pf_model_io &io = table[i];
    std::string which = std::string(what) + " " + std::to_string(i);
    if (std::string err = checkName(io.name, which); !err.empty())
      return err;
    which += " '" + std::string(io.name) + "'";
    if (io.tensor < 0 || io.tensor >= m.num_tensors)
      return which + " names tensor " + std::to_string(io.tensor) + " of " +
             std::to_string(m.num_tensors);
    const pf_model_tensor_info &t = m.tensors[io.tensor];
    if (t.kind != kind || t.where != i)
      return which + " names " + describeTensor(io.tensor, t) + ", which is not " + what + " " +
             std::to_string(i);
    auto [it, added] = files.emplace(aotFileName(io.name), i);
    if (!added)
      return which + " has the file name " + it->first + " of " + what + " " +
             std::to_string(it->second);
  }
  return "";
}

/// `[where, where + bytes)` inside `[0, size)`.
inline bool inside(int64_t where, int64_t bytes, int64_t size) {
  return where >= 0 && bytes >= 0 && bytes <= size && where <= size - bytes;
}
} // namespace detail

/// Empty when pf-aot-run may run the model `model` describes (see the file
/// comment); otherwise why not, naming the count, table entry or descriptor.
/// Reads only the memory the description's counts say its tables have (each
/// count checked before its table is read), at most kMaxNameBytes + 1 bytes
/// of each input and output name, and no op name (only whether it is null).
inline std::string checkAotModel(const pf_aot_model *model) {
  using detail::describeTensor;
  if (!model)
    return "the library describes no model (pf_aot_model_describe() returned null)";
  const pf_aot_model &m = *model;
  if (m.version != PF_AOT_MODEL_VERSION)
    return "model format " + std::to_string(m.version) + ", expected " +
           std::to_string(PF_AOT_MODEL_VERSION);
  auto count = [](const char *what, int64_t value, int64_t max) {
    if (value >= 0 && value <= max)
      return std::string();
    return std::string(what) + " " + std::to_string(value) + " is out of range [0, " +
           std::to_string(max) + "]";
  };
  for (const std::string &err :
       {count("the tensor count", m.num_tensors, kMaxTensors),
        count("the input count", m.num_inputs, m.num_tensors),
        count("the output count", m.num_outputs, m.num_tensors),
        count("the op count", m.num_ops, kMaxOps),
        count("the arena's byte size", m.arena_bytes, kMaxBytes),
        count("the weights' byte size", m.weights_bytes, kMaxBytes)})
    if (!err.empty())
      return err;
  if ((m.num_tensors > 0 && !m.tensors) || (m.num_inputs > 0 && !m.inputs) ||
      (m.num_outputs > 0 && !m.outputs) || (m.num_ops > 0 && !m.op_names))
    return "a table the counts promise is missing (null)";
  if (!m.main)
    return "the model has no step function (main is null)";

  // Each descriptor on its own, before the tables point into them.
  for (int64_t i = 0; i < m.num_tensors; ++i) {
    const pf_model_tensor_info &t = m.tensors[i];
    if (t.kind < PF_MODEL_INPUT || t.kind > PF_MODEL_ARENA)
      return describeTensor(i, t) + ": unknown kind";
    if (aotTensorBytes(t) < 0)
      return describeTensor(i, t) + ": dtype " + std::to_string(t.dtype) + ", rank " +
             std::to_string(t.rank) + " (a known dtype, rank 0 to " +
             std::to_string(PFRT_MAX_RANK) + ", dimensions >= 0, at most " +
             std::to_string(kMaxBytes) + " bytes)";
  }
  if (std::string err = detail::checkIoTable(m, m.inputs, m.num_inputs, PF_MODEL_INPUT, "input");
      !err.empty())
    return err;
  if (std::string err =
          detail::checkIoTable(m, m.outputs, m.num_outputs, PF_MODEL_OUTPUT, "output");
      !err.empty())
    return err;

  // Each descriptor's bytes inside its buffer: an input's or output's is
  // sized by the descriptor its table entry names.
  for (int64_t i = 0; i < m.num_tensors; ++i) {
    const pf_model_tensor_info &t = m.tensors[i];
    const int64_t bytes = aotTensorBytes(t);
    int64_t size = 0;
    const char *buffer = "";
    switch (t.kind) {
    case PF_MODEL_INPUT:
    case PF_MODEL_OUTPUT: {
      const bool in = t.kind == PF_MODEL_INPUT;
      const int64_t n = in ? m.num_inputs : m.num_outputs;
      if (t.where < 0 || t.where >= n)
        return describeTensor(i, t) + ": " + (in ? "input " : "output ") +
               std::to_string(t.where) + " of " + std::to_string(n);
      const pf_model_io &io = (in ? m.inputs : m.outputs)[t.where];
      size = aotTensorBytes(m.tensors[io.tensor]);
      if (bytes > size)
        return describeTensor(i, t) + ": " + std::to_string(bytes) + " bytes in the " +
               std::to_string(size) + " of " + (in ? "input '" : "output '") + io.name + "'";
      continue;
    }
    case PF_MODEL_WEIGHTS:
      size = m.weights_bytes;
      buffer = "the weights' ";
      break;
    default:
      size = m.arena_bytes;
      buffer = "the arena's ";
      break;
    }
    if (!detail::inside(t.where, bytes, size))
      return describeTensor(i, t) + ": bytes [" + std::to_string(t.where) + ", +" +
             std::to_string(bytes) + ") outside " + buffer + std::to_string(size) + " bytes";
    if (t.where % pfrt_dtype_size(t.dtype) != 0)
      return describeTensor(i, t) + ": byte offset " + std::to_string(t.where) +
             " not aligned to its " + std::to_string(pfrt_dtype_size(t.dtype)) +
             "-byte elements";
  }
  // Op names are only printed (errors, --profile): present is enough.
  for (int64_t i = 0; i < m.num_ops; ++i)
    if (!m.op_names[i])
      return "op " + std::to_string(i) + " has no name";
  return "";
}

} // namespace pf::aot

#endif // PF_SUPPORT_AOTMODELCHECK_H
