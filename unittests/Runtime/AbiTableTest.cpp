//===- AbiTableTest.cpp - pfrt_abi.def agrees with pfrt.h ------------------===//
//
// The runtime lowering declares its callees from pfrt_abi.def. Each entry
// must have the signature pfrt.h gives the function (argument count and
// types), and every pfrt_* function of pfrt.h must be either in the table or
// in the list of host-only functions below.
//
//===----------------------------------------------------------------------===//
#include "pf/Runtime/pfrt.h"
#include "pf/Runtime/pfrt_rank.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {
// The C type of each argument kind of pfrt_abi.def.
using Tensor = const pfrt_tensor *;
using TensorArray = const pfrt_tensor *;
using I64Array = const int64_t *;
using F64Out = double *;
using I32Out = int32_t *;
using I64Out = int64_t *;
using Comm = pfrt_comm *;
using I32 = int32_t;
using I64 = int64_t;
using F64 = double;
using Str = const char *;

template <typename F>
struct Arity;
template <typename R, typename... Args>
struct Arity<R (*)(Args...)> {
  static constexpr size_t value = sizeof...(Args);
};

struct Entry {
  std::string name;
  size_t tableArity; ///< 1 (the context) + the table's kinds
  size_t headerArity;
  bool sameType;
};

template <typename Declared, typename... Kinds>
Entry check(const char *name) {
  using FromTable = pfrt_status (*)(pfrt_context *, Kinds...);
  return {name, Arity<FromTable>::value, Arity<Declared>::value,
          std::is_same_v<Declared, FromTable>};
}

std::vector<Entry> tableEntries() {
  std::vector<Entry> entries;
#define PFRT_KERNEL(name, ...) entries.push_back(check<decltype(&name), __VA_ARGS__>(#name));
#include "pf/Runtime/pfrt_abi.def"
  return entries;
}

template <typename Declared, typename... Kinds>
Entry checkRankCall(const char *name) {
  using FromTable = int32_t (*)(pfrt_rank_host *, Kinds...);
  return {name, Arity<FromTable>::value, Arity<Declared>::value,
          std::is_same_v<Declared, FromTable>};
}

std::vector<Entry> rankTableEntries() {
  std::vector<Entry> entries;
#define PFRT_RANK_CALL(name, ...)                                                        \
  entries.push_back(checkRankCall<decltype(&name), __VA_ARGS__>(#name));
#include "pf/Runtime/pfrt_rank_abi.def"
  return entries;
}

/// Functions of pfrt.h that generated code never calls: the host creates
/// contexts, arenas and communicators, queries versions, names and errors.
const std::set<std::string> kHostOnly = {
    "pfrt_version", "pfrt_status_string", "pfrt_dtype_size", "pfrt_dtype_name",
    "pfrt_context_options_init", "pfrt_context_create", "pfrt_context_destroy", "pfrt_backend_name",
    "pfrt_context_num_threads", "pfrt_last_error", "pfrt_alloc", "pfrt_free", "pfrt_arena_create",
    "pfrt_arena_alloc", "pfrt_arena_reset", "pfrt_arena_base", "pfrt_arena_get_stats",
    "pfrt_arena_destroy",
    // Backend selection and the driver's copies at step boundaries.
    "pfrt_backend_built", "pfrt_backend_device_count", "pfrt_copy_from_host", "pfrt_copy_to_host",
    "pfrt_synchronize", "pfrt_context_set_gemm_precision", "pfrt_context_gemm_precision",
    // Communicators are made, queried and ended by the host.
    "pfrt_comm_options_init", "pfrt_comm_create", "pfrt_comm_create_group", "pfrt_comm_destroy",
    "pfrt_comm_rank", "pfrt_comm_size", "pfrt_comm_max_tag", "pfrt_comm_align_clock",
    "pfrt_comm_local_rank",
    "pfrt_comm_finalize"};

/// The names of the functions pfrt.h declares (PFRT_API ... pfrt_x(), or
/// with `rank` those pfrt_rank.h declares (int32_t pfrt_rank_x().
std::set<std::string> headerFunctions(bool rank = false) {
  std::ifstream file(rank ? PFRT_RANK_HEADER_PATH : PFRT_HEADER_PATH);
  std::stringstream text;
  text << file.rdbuf();
  std::string source = text.str();
  std::set<std::string> names;
  std::regex declaration(rank ? R"(int32_t\s+(pfrt_rank_[a-z0-9_]+)\s*\()"
                              : R"(PFRT_API[^;(]*?\b(pfrt_[a-z0-9_]+)\s*\()");
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end; it != end; ++it)
    names.insert((*it)[1]);
  return names;
}

TEST(AbiTable, EntriesMatchTheHeader) {
  std::vector<Entry> entries = tableEntries();
  ASSERT_FALSE(entries.empty());
  for (const Entry &e : entries) {
    EXPECT_EQ(e.tableArity, e.headerArity)
        << e.name << ": pfrt_abi.def lists " << e.tableArity - 1
        << " arguments after the context, pfrt.h declares " << e.headerArity - 1;
    EXPECT_TRUE(e.sameType) << e.name
                            << ": the argument kinds in pfrt_abi.def do not give the "
                               "signature pfrt.h declares (or its result is not pfrt_status)";
  }
}

TEST(AbiTable, EveryHeaderFunctionIsDeclaredOrHostOnly) {
  std::set<std::string> declared = headerFunctions();
  ASSERT_GT(declared.size(), kHostOnly.size()) << "could not read " << PFRT_HEADER_PATH;
  std::set<std::string> inTable;
  for (const Entry &e : tableEntries()) {
    EXPECT_TRUE(inTable.insert(e.name).second) << e.name << " is twice in pfrt_abi.def";
    EXPECT_FALSE(kHostOnly.count(e.name)) << e.name << " is in the table and host-only";
  }
  for (const std::string &name : declared)
    EXPECT_TRUE(inTable.count(name) || kHostOnly.count(name))
        << name << " is declared in pfrt.h but neither in pfrt_abi.def nor host-only";
  for (const std::string &name : kHostOnly)
    EXPECT_TRUE(declared.count(name)) << name << " is listed host-only but not in pfrt.h";
}
TEST(AbiTable, RankCallsMatchTheirHeader) {
  std::vector<Entry> entries = rankTableEntries();
  std::set<std::string> declared = headerFunctions(/*rank=*/true);
  ASSERT_FALSE(declared.empty()) << "could not read " << PFRT_RANK_HEADER_PATH;
  std::set<std::string> names;
  for (const Entry &e : entries) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " is twice in pfrt_rank_abi.def";
    EXPECT_EQ(e.tableArity, e.headerArity) << e.name;
    EXPECT_TRUE(e.sameType) << e.name
                            << ": the kinds in pfrt_rank_abi.def do not give the signature "
                               "pfrt_rank.h declares (or its result is not int32_t)";
  }
  // Every function the header declares is one the lowering may call.
  EXPECT_EQ(names, declared) << "pfrt_rank_abi.def and pfrt_rank.h list different functions";
}
} // namespace
