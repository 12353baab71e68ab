//===- AotPlanFuzzer.cpp - pf-aot-run's check of a model description ------===//
//
// pf-aot-run gets a pf_aot_model (include/pf/Runtime/pf_aot.h) from the
// library it loads and checks it with pf::aot::checkAotModel
// (pf/Support/AotModelCheck.h) before anything is sized or bound from
// it. This target builds such a description from the input bytes and
// checks it: the check must never read outside the tables (each table is
// its own exact heap allocation, so AddressSanitizer sees an overread), and
// a description it accepts must pass this file's own re-check, in 128-bit
// arithmetic, of what pf-aot-run then relies on: every table entry and
// descriptor in range, each descriptor's bytes inside its input, output,
// the weights or the arena (a trap otherwise).
//
// The input, little-endian, zeros past its end:
//   i32 version, i32 abi_version,
//   i64 num_tensors, num_inputs, num_outputs, num_ops,
//   i64 arena_bytes, weights_bytes, i32 profile_hooks,
//   u8  null tables: bit 0 tensors, 1 inputs, 2 outputs, 3 op_names, 4 main;
//   per tensor: i32 kind, i64 where, i32 dtype, i32 rank, i64 shape[8];
//   per input, then per output: i64 tensor, the name up to a NUL (a name
//     whose first byte is 0xff: a null name);
//   per op: its name, as the io names.
// A count out of the check's range goes into the description as it is (the
// check must refuse it before reading the table: the table has one entry);
// one in range is clamped to kCap entries, so the tables are cheap to build.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Support/AotModelCheck.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace pf::fuzz {
namespace {
/// Entries built per table at most.
constexpr int64_t kCap = 4096;

struct Reader {
  const uint8_t *at, *end;
  template <typename T> T get() {
    T value{};
    size_t n = std::min(sizeof(T), size_t(end - at));
    std::memcpy(&value, at, n); // little-endian hosts only, as pf itself
    at += n;
    return value;
  }
  /// A name: its bytes up to a NUL or the end; null when it starts 0xff.
  std::unique_ptr<char[]> name(bool &null) {
    const uint8_t *start = at;
    while (at < end && *at)
      ++at;
    size_t length = size_t(at - start);
    if (at < end)
      ++at; // the NUL
    null = length > 0 && start[0] == 0xff;
    // Exactly the string and its NUL: an overread leaves the allocation.
    auto text = std::make_unique<char[]>(length + 1);
    std::memcpy(text.get(), start, length);
    text[length] = '\0';
    return text;
  }
};

/// The count a table gets in the description, and the entries it is built
/// with.
struct Table {
  int64_t count;
  size_t entries;
};
Table table(int64_t declared, int64_t max) {
  if (declared < 0 || declared > max)
    return {declared, 1};
  int64_t n = std::min(declared, kCap);
  return {n, size_t(n)};
}

int64_t noStep(pfrt_context *, pfrt_tensor *) { return 0; }

/// The bytes of `t` in 128-bit arithmetic; -1 for a dtype, rank or
/// dimension that is no tensor's.
__int128 bytesOf(const pf_model_tensor_info &t) {
  __int128 bytes = pfrt_dtype_size(t.dtype);
  if (bytes <= 0 || t.rank < 0 || t.rank > PFRT_MAX_RANK)
    return -1;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0)
      return -1;
    bytes *= t.shape[d];
    if (bytes > (__int128(1) << 62))
      return -1;
  }
  return bytes;
}

/// What pf-aot-run relies on of an accepted description; traps otherwise.
void recheck(const pf_aot_model &m) {
  auto need = [](bool ok) {
    if (!ok)
      __builtin_trap(); // checkAotModel accepted what pf-aot-run cannot run
  };
  need(m.num_tensors >= 0 && m.num_inputs >= 0 && m.num_outputs >= 0 && m.num_ops >= 0);
  need(m.arena_bytes >= 0 && m.weights_bytes >= 0 && m.main != nullptr);
  need(m.num_inputs <= m.num_tensors && m.num_outputs <= m.num_tensors);
  std::vector<__int128> inputBytes, outputBytes;
  for (int64_t i = 0; i < m.num_inputs; ++i) {
    need(m.inputs[i].name && m.inputs[i].name[0]);
    need(m.inputs[i].tensor >= 0 && m.inputs[i].tensor < m.num_tensors);
    inputBytes.push_back(bytesOf(m.tensors[m.inputs[i].tensor]));
    need(inputBytes.back() >= 0);
    (void)pf::aot::aotFileName(m.inputs[i].name);
  }
  for (int64_t i = 0; i < m.num_outputs; ++i) {
    need(m.outputs[i].name && m.outputs[i].name[0]);
    need(m.outputs[i].tensor >= 0 && m.outputs[i].tensor < m.num_tensors);
    outputBytes.push_back(bytesOf(m.tensors[m.outputs[i].tensor]));
    need(outputBytes.back() >= 0);
    (void)pf::aot::aotFileName(m.outputs[i].name);
  }
  for (int64_t i = 0; i < m.num_tensors; ++i) {
    const pf_model_tensor_info &t = m.tensors[i];
    __int128 bytes = bytesOf(t);
    need(bytes >= 0 && bytes == pf::aot::aotTensorBytes(t));
    switch (t.kind) {
    case PF_MODEL_INPUT:
      need(t.where >= 0 && t.where < m.num_inputs && bytes <= inputBytes[size_t(t.where)]);
      break;
    case PF_MODEL_OUTPUT:
      need(t.where >= 0 && t.where < m.num_outputs && bytes <= outputBytes[size_t(t.where)]);
      break;
    case PF_MODEL_WEIGHTS:
      need(t.where >= 0 && __int128(t.where) + bytes <= m.weights_bytes);
      break;
    case PF_MODEL_ARENA:
      need(t.where >= 0 && __int128(t.where) + bytes <= m.arena_bytes);
      break;
    default:
      need(false);
    }
  }
  for (int64_t i = 0; i < m.num_ops; ++i)
    need(m.op_names[i] != nullptr);
}
} // namespace

int fuzzAotPlan(const uint8_t *data, size_t size) {
  Reader in{data, data + size};
  pf_aot_model m{};
  m.version = in.get<int32_t>();
  m.abi_version = in.get<int32_t>();
  const int64_t declaredTensors = in.get<int64_t>(), declaredInputs = in.get<int64_t>(),
                declaredOutputs = in.get<int64_t>(), declaredOps = in.get<int64_t>();
  m.arena_bytes = in.get<int64_t>();
  m.weights_bytes = in.get<int64_t>();
  m.profile_hooks = in.get<int32_t>();
  const uint8_t nulls = in.get<uint8_t>();

  const Table tensorTable = table(declaredTensors, pf::aot::kMaxTensors);
  std::vector<pf_model_tensor_info> tensors(tensorTable.entries);
  for (pf_model_tensor_info &t : tensors) {
    t.kind = in.get<int32_t>();
    t.where = in.get<int64_t>();
    t.dtype = in.get<int32_t>();
    t.rank = in.get<int32_t>();
    for (int64_t &dim : t.shape)
      dim = in.get<int64_t>();
  }
  // The io tables' names live in `names`; each entry points at its own.
  std::vector<std::unique_ptr<char[]>> names;
  auto ioTable = [&](const Table &t) {
    std::vector<pf_model_io> entries(t.entries);
    for (pf_model_io &io : entries) {
      io.tensor = in.get<int64_t>();
      bool null;
      names.push_back(in.name(null));
      io.name = null ? nullptr : names.back().get();
    }
    return entries;
  };
  const Table inputTable = table(declaredInputs, pf::aot::kMaxTensors);
  const Table outputTable = table(declaredOutputs, pf::aot::kMaxTensors);
  std::vector<pf_model_io> inputs = ioTable(inputTable), outputs = ioTable(outputTable);
  const Table opTable = table(declaredOps, pf::aot::kMaxOps);
  std::vector<const char *> opNames(opTable.entries);
  for (const char *&name : opNames) {
    bool null;
    names.push_back(in.name(null));
    name = null ? nullptr : names.back().get();
  }

  m.num_tensors = tensorTable.count;
  m.num_inputs = inputTable.count;
  m.num_outputs = outputTable.count;
  m.num_ops = opTable.count;
  // An empty vector's data() may be null or not: either is a table of none.
  m.tensors = nulls & 1 ? nullptr : tensors.data();
  m.inputs = nulls & 2 ? nullptr : inputs.data();
  m.outputs = nulls & 4 ? nullptr : outputs.data();
  m.op_names = nulls & 8 ? nullptr : opNames.data();
  m.main = nulls & 16 ? nullptr : noStep;

  std::string error = pf::aot::checkAotModel(&m);
  if (verbose())
    llvm::errs() << (error.empty() ? "accepted" : "refused: " + error) << "\n";
  if (error.empty())
    recheck(m);
  return 0;
}

} // namespace pf::fuzz
